"""What a host event in a PyTorch trace is doing, by its name.

One home for the name classes the Kineto collector attributes time with:
a device-idle gap is explained by what the launching host thread was doing
in it, and one-time start-up is told from the steady state by the calls it
makes. Names are CUDA runtime / driver API calls (``cuda_runtime`` /
``cuda_driver`` events, ``Runtime`` in older traces; HIP's ``hip*`` for
ROCm) and PyTorch host ops (``cpu_op``, ``user_annotation``).

``SYNC_CALLS``
    Calls that block the host until the device (a stream, an event, the
    whole device) has finished queued work, synchronous copies included:
    the host cannot launch anything while it waits.
``SYNC_OPS``
    PyTorch ops that synchronize to read a device value on the host
    (``tensor.item()``, ``bool(tensor)``, ``.tolist()``); their time
    includes the wait for every kernel queued before them.
``ALLOC_CALLS``
    Device and pinned-host allocation and release by the driver: the caching
    allocator growing (first iterations), or churning when it cannot reuse
    blocks (``empty_cache()``, fragmentation).
``GROW_CALLS``
    The allocation calls among ``ALLOC_CALLS`` (not the releases): each one
    grows what the process holds from the driver. The caching allocator makes
    them on the first iterations and, in a steady state, only when it cannot
    reuse a block.
``INIT_CALLS``
    One-time start-up: context creation and device queries made when CUDA
    is first used, module and library loading. Microseconds when the context
    exists; seconds on the first use.
``COMPILE_OPS``
    Host ops that ``torch.compile`` (Dynamo, AOTAutograd, Inductor, Triton)
    records while it compiles a graph: one-time work on the first calls,
    not part of a steady step -- unless a guard fails and the frame is
    compiled again (``COMPILE_ID_RE`` tells a recompilation).
``DATALOADER_RE``
    The DataLoader's ``__next__`` as the profiler records it: the training
    loop waiting for its next batch.
``QUERY_CALLS``
    Calls that only ask whether device work has finished and return at
    once; CUPTI writes a synchronization record (``Event Sync``) for
    ``cudaEventQuery`` too, yet the host never waits in it.
``STREAM_WAIT_RECORD``
    The cuda_sync record of ``cudaStreamWaitEvent``: a stream (the record's
    row) waits on an event recorded on another stream; the host goes on.
:func:`host_call_class`
    The class of a host event the ``host_calls`` table counts per step
    (``HOST_CALL_CLASSES``): Python garbage collection, host syncs,
    allocator calls, ``empty_cache()``, optimizer steps and the fused,
    multi-tensor or per-parameter ops inside them, SyncBatchNorm, autograd's
    backward nodes and the NaN checks and recomputed forward ops inside
    them, recurrent cells run in forward, DDP's reducer finishing a
    backward; None for the rest.
:func:`program_frame`
    A Python frame of the profiled program (``with_stack=True`` writes one
    ``python_function`` event per frame, ``train.py(57): train_step``), not
    one of the framework (``torch/...``, ``nn.Module: ...``), of the standard
    library or a built-in: the frames a user can change.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyPeer",
    "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2", "cuMemcpy",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
})
#: Asynchronous copies that may block the host all the same: from or to
#: pageable host memory the runtime stages the copy and returns only once it
#: is done (CUDA Runtime API, "API synchronization behavior", memcpy), as
#: HolisticTraceAnalysis' critical path also assumes (``CPGraph.BLOCKING_SYNC_CALLS``).
#: Whether one did block is read from the trace: device work ending inside it.
MAY_BLOCK_CALLS = frozenset({"cudaMemcpyAsync", "cudaMemcpy2DAsync", "cuMemcpyAsync", "cuMemcpyDtoHAsync_v2",
                             "cuMemcpyHtoDAsync_v2", "hipMemcpyAsync"})
SYNC_OPS = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::tolist"})
ALLOC_CALLS = frozenset({
    "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaHostAlloc",
    "cudaMallocAsync", "cudaFreeAsync", "cudaHostRegister", "cudaHostUnregister",
    "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocHost_v2", "cuMemFreeHost",
    "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve",
    "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree",
})
GROW_CALLS = frozenset({
    "cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaHostRegister",
    "cuMemAlloc_v2", "cuMemAllocHost_v2", "cuMemCreate", "hipMalloc", "hipHostMalloc",
})
INIT_CALLS = frozenset({
    "cuInit", "cudaSetDevice", "cudaGetDeviceCount", "cudaDeviceGetStreamPriorityRange",
    "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain", "cuCtxCreate_v2", "cuCtxCreate_v3",
    "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
    "cuModuleLoad", "cuModuleLoadData", "cuModuleLoadDataEx", "cuModuleLoadFatBinary",
    "cuLibraryLoadData", "cuLibraryLoadFromFile", "cudaFuncGetAttributes",
    "hipInit", "hipSetDevice", "hipGetDeviceCount", "hipStreamCreateWithFlags",
})
COMPILE_OPS = re.compile(
    r"^(?:dynamo|entire_frame_compile|backend_compile|compile_file|bytecode_tracing|build_guards"
    r"|async_compile\.wait|inductor_\w+)$"
    r"|\(dynamo_timed\)$|^(?:_compile\.|compile_fx|triton\.compile|AOTAutogradCache\.|PyCodeCache\.)"
)
#: The records torch.compile writes inside its compile ops naming the
#: compilation (``dynamo_data: compile_id=0/4``,
#: ``entire_backward_compile_data: fn_name=..., compile_id=0/4``; torch >=
#: 2.4): frame ``F`` (a function Dynamo compiles) and ``C``, how many times
#: that frame was compiled before (0: its first compilation; 1 and up: a
#: recompilation, after a guard failed -- a new input shape, dtype or Python
#: value). An attempt suffix (``0/4_1``, a restarted analysis) is the same
#: compilation.
COMPILE_ID_RE = re.compile(r"compile_id=(?P<frame>\d+)/(?P<count>\d+)")
DATALOADER_RE = re.compile(r"^enumerate\(DataLoader\)#")
QUERY_CALLS = frozenset({"cudaEventQuery", "cudaStreamQuery", "cuEventQuery", "cuStreamQuery",
                         "hipEventQuery", "hipStreamQuery"})
STREAM_WAIT_RECORD = "Stream Wait Event"

#: PyTorch's Python tracer (``with_stack=True`` with
#: ``_ExperimentalConfig(record_python_gc_info=True)``, torch >= 2.6) writes
#: each collection as a ``python_function`` event of this name.
GC_EVENTS = frozenset({"Python GC"})
#: The program's own ``gc.collect()`` call, as the Python tracer records it
#: (``with_stack=True``): the collections under it are explicit, which no
#: collection threshold changes.
GC_CALLS = frozenset({"<built-in function collect>"})
#: ``empty_cache()`` of the CUDA or NPU caching allocator, as a Python frame
#: (``torch/cuda/memory.py(224): empty_cache``): only traces with stacks show it.
EMPTY_CACHE_RE = re.compile(r"(?:^|/)(?:cuda|npu)/memory\.py\(\d+\): empty_cache$")
#: ``Optimizer.step#AdamW.step``: the annotation PyTorch's optimizers record
#: around each ``step()`` (torch/optim/optimizer.py, ``profile_hook_step``);
#: torch_npu records its own optimizers alike (``NpuFusedAdamW.step``).
OPTIMIZER_STEP_RE = re.compile(r"^Optimizer\.step#(?P<cls>\w+)\.step$")
#: Kernels of a fused optimizer (``fused=True``: one kernel for all
#: parameters; torch_npu's ``npu_apply_adam_w``) and of the multi-tensor
#: ``foreach`` path, counted only inside an optimizer step (``clip_grad_norm_``
#: also uses ``_foreach_norm``).
FUSED_OPTIMIZER_RE = re.compile(r"^(?:aten::_fused_(?:adamw?|sgd|adagrad)_?|npu::npu_apply_adam(?:_w)?)$")
FOREACH_RE = re.compile(r"^aten::_foreach_\w+$")
#: The elementwise ops an optimizer's single-tensor loop issues for each
#: parameter (torch/optim/sgd.py, adam.py, adamw.py ``_single_tensor_*``:
#: add_, mul_, lerp_, addcmul_, addcdiv_, sqrt, div ...), counted only
#: inside an optimizer step.
OPTIMIZER_OP_RE = re.compile(r"^aten::(?:add|mul|sub|div|lerp|addcmul|addcdiv|sqrt|pow|neg|maximum|clamp|copy)_?$")
#: SyncBatchNorm: torch_npu records the layer as a framework op
#: ``SyncBatchNorm`` (what msprof-analyze's syncbn checker counts);
#: PyTorch's ``torch.nn.SyncBatchNorm`` gathers statistics across ranks with
#: ``batch_norm_gather_stats_with_counts`` once per layer and step.
SYNCBN_RE = re.compile(r"^(?:SyncBatchNorm|aten::batch_norm_gather_stats_with_counts)$")
#: torch_npu / CANN host calls, as ``trace_view.json`` names them
#: (``AscendCL@`` + the ACL function): stream and device synchronizations,
#: and device memory allocation and release (msprof-analyze's
#: ``Constant.SYNC_STREAM`` and ``MemCollector.MEMORY_OP_NAME``).
ACL_SYNC_CALLS = frozenset({"AscendCL@aclrtSynchronizeStream", "AscendCL@aclrtSynchronizeDevice",
                            "AscendCL@aclrtSynchronizeEvent", "AscendCL@aclrtSynchronizeStreamWithTimeout"})
ACL_ALLOC_CALLS = frozenset({"AscendCL@aclrtMalloc", "AscendCL@aclrtFree", "AscendCL@aclMallocMemInner",
                             "AscendCL@aclrtFreePhysical", "AscendCL@aclrtMallocPhysical"})
#: A node of the autograd engine running in backward: PyTorch records each
#: as ``autograd::engine::evaluate_function: <Node>`` (torch/csrc/autograd/engine.cpp,
#: ``evaluate_function``), the node's own work and what the engine does after
#: it (hooks, anomaly checks) inside.
BACKWARD_NODE_PREFIX = "autograd::engine::evaluate_function: "
#: The NaN check autograd's anomaly mode runs on every output of every
#: backward node (engine.cpp ``evaluate_function``: ``at::isnan(output)._is_any_true().item()``):
#: counted only inside a backward node, where only anomaly mode or a gradient
#: hook written to check each gradient runs them.
NAN_CHECK_OPS = frozenset({"aten::isnan", "aten::_is_any_true"})
#: Forward ops that no backward formula of autograd calls (each has its own
#: backward op: ``aten::linear`` -> ``mm``, ``aten::layer_norm`` ->
#: ``native_layer_norm_backward``, ``aten::gelu`` -> ``gelu_backward`` ...):
#: inside a backward node they are the forward run again, as activation
#: checkpointing (``torch.utils.checkpoint``, reentrant or not) does for the
#: blocks it wraps. Counted only inside a backward node, the outermost one
#: of them only (``host_calls.nested_classes``).
RECOMPUTE_OPS = frozenset({
    "aten::linear", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d",
    "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::layer_norm", "aten::group_norm",
    "aten::batch_norm", "aten::instance_norm", "aten::rms_norm", "aten::embedding",
    "aten::scaled_dot_product_attention", "aten::gelu", "aten::relu", "aten::relu_", "aten::silu",
    "aten::silu_", "aten::softmax", "aten::log_softmax", "aten::dropout",
})
#: The op of one time step of a recurrent cell module: ``nn.LSTMCell``,
#: ``nn.GRUCell`` and ``nn.RNNCell`` (tanh or relu) call these once per
#: forward (torch/nn/modules/rnn.py, ``_VF.lstm_cell`` ...), where the
#: sequence modules (``nn.LSTM`` ...) run a whole sequence in one op
#: (``aten::lstm``). Counted only outside a backward node (forward).
RNN_CELL_OPS = frozenset({"aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell"})
#: DistributedDataParallel's reducer finishing a backward: copying each
#: reduced bucket back into the gradients once its all-reduce is done
#: (``torch.distributed.ddp.reducer::copy_bucket_to_grad``), the last work of
#: a backward pass under DDP.
DDP_REDUCER_PREFIX = "torch.distributed.ddp.reducer::"
#: The classes of ``host_call_class``, in order of precedence.
HOST_CALL_CLASSES = ("gc", "gc_call", "sync", "alloc", "empty_cache", "optimizer", "optimizer_fused",
                     "optimizer_foreach", "optimizer_op", "syncbn", "backward", "nan_check", "recompute",
                     "data_loader", "rnn_cell", "ddp_reducer")
#: The classes of a backward pass's own work (an optimizer closure's, ``shaped_events.update_starts``).
BACKWARD_WORK = frozenset({"backward", "ddp_reducer"})
#: The classes that count only inside an optimizer step.
OPTIMIZER_INNER = frozenset({"optimizer_fused", "optimizer_foreach", "optimizer_op"})


def host_call_class(name: str) -> str | None:
    """The ``host_calls`` class of an event name (``HOST_CALL_CLASSES``), or
    None. The ``OPTIMIZER_INNER`` classes are candidates: they count only
    inside an optimizer step; ``nan_check`` and ``recompute`` likewise only
    inside a backward node (``host_calls.nested_classes``)."""
    if name in GC_EVENTS:
        return "gc"
    if name in GC_CALLS:
        return "gc_call"
    if name in SYNC_CALLS or name in SYNC_OPS or name in ACL_SYNC_CALLS:
        return "sync"
    if name in ALLOC_CALLS or name in ACL_ALLOC_CALLS:
        return "alloc"
    if EMPTY_CACHE_RE.search(name):
        return "empty_cache"
    if OPTIMIZER_STEP_RE.match(name):
        return "optimizer"
    if FUSED_OPTIMIZER_RE.match(name):
        return "optimizer_fused"
    if FOREACH_RE.match(name):
        return "optimizer_foreach"
    if OPTIMIZER_OP_RE.match(name):
        return "optimizer_op"
    if SYNCBN_RE.match(name):
        return "syncbn"
    if name.startswith(BACKWARD_NODE_PREFIX):
        return "backward"
    if name in NAN_CHECK_OPS:
        return "nan_check"
    if name in RECOMPUTE_OPS:
        return "recompute"
    if DATALOADER_RE.match(name):
        return "data_loader"
    if name in RNN_CELL_OPS:
        return "rnn_cell"
    if name.startswith(DDP_REDUCER_PREFIX):
        return "ddp_reducer"
    return None


#: ``file.py(line): function`` as the profiler names a Python frame; the
#: profiler writes files under an import path relative to it (``torch/nn/...``,
#: ``logging/__init__.py``) and others as given.
FRAME_RE = re.compile(r"^(?P<file>[^<(][^()]*\.py)\(\d+\): ")
#: Files of ``advisor run``'s own bootstrap (it wraps the optimizer's step
#: to count steps): the profiler's frames, never the program's.
PROFILER_FILES = frozenset({"_advisor_live.py"})
#: Top-level packages of the framework's own frames.
FRAMEWORK_PACKAGES = frozenset({"torch", "torch_npu", "torchvision", "torchaudio", "torchtext", "triton",
                                "mindspore"})


#: This interpreter's standard library folder: which standard modules are
#: packages (``logging/``) and which single files (``enum.py``).
_STDLIB = Path(sysconfig.get_paths()["stdlib"])


def program_frame(name: str) -> bool:
    """True for a Python frame of the profiled program (see the module doc):
    not built-in, not under ``site-packages`` / ``dist-packages`` or a
    ``lib/python3*`` folder, not in a framework package or the standard
    library (``sys.stdlib_module_names``). A script named like a standard
    package (``test.py``, ``json.py``) is the program's: a package's frames
    are written under its folder (``test/support/__init__.py``). Packages
    installed elsewhere are written relative to their import path like the
    program's own (``transformers/trainer.py``) and count as the program's."""
    m = FRAME_RE.match(name)
    if m is None:
        return False
    path = m.group("file").replace("\\", "/")
    if path.rpartition("/")[2] in PROFILER_FILES:
        return False
    if path.startswith("/"):
        return "-packages/" not in path and re.search(r"/lib/python3[.\d]*/", path) is None
    top, sep, _ = path.partition("/")
    if sep:
        return top not in FRAMEWORK_PACKAGES and top not in sys.stdlib_module_names
    module = top.removesuffix(".py")
    return module not in FRAMEWORK_PACKAGES and (module not in sys.stdlib_module_names
                                                  or (_STDLIB / module).is_dir())
