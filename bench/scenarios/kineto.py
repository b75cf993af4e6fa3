"""Write a generated scenario as PyTorch profiler (Kineto) traces, one per rank.

``{host}_{pid}.{ms}.pt.trace.json`` as ``tensorboard_trace_handler`` names
them, each a JSON object with ``schemaVersion``, ``distributedInfo``
(backend nccl, rank, world_size, pg_config), ``deviceProperties`` and
``traceEvents``:

* host thread: ``ProfilerStep#N`` (user_annotation) per step, the
  DataLoader span ``enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__``
  over the step's host/data time, one ``cpu_op`` + ``cudaLaunchKernel``
  (``cuda_runtime``, ``correlation``) per kernel, ``c10d::allreduce_`` and
  ``nccl:all_reduce`` for the collective;
* device (pid = local device id): compute kernels on stream 7, the
  ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` kernel on stream 20 with the
  ``Collective name`` / ``Process Group`` args PyTorch 2.x writes; with
  pipeline stages a ``ncclDevKernel_SendRecv`` kernel for the bubble.

Kernel placement is ``bench.scenarios.layout``'s, so the per-step compute,
communication, overlap and idle time match the Ascend variant.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from bench.scenarios.layout import OpTemplate, layout
from bench.scenarios.model import Scenario


def _dumps(obj) -> bytes:
    """The trace as the PyTorch profiler writes it: the header keys with
    ``": "`` spacing (HolisticTraceAnalysis finds a file's rank with the regex
    ``"rank":\\s+(\\d+)``), the events compact."""
    header = {k: v for k, v in obj.items() if k != "traceEvents"}
    head = json.dumps(header)[:-1]
    events = orjson.dumps(obj.get("traceEvents", []), option=orjson.OPT_SERIALIZE_NUMPY)
    return head.encode() + b', "traceEvents": ' + events + b"}"

TEMPLATES = [
    OpTemplate("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
               "aten::mm", "GPU", "c10::BFloat16;c10::BFloat16", "", 0.42),
    OpTemplate("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true>",
               "aten::_flash_attention_forward", "GPU", "c10::BFloat16", "", 0.24),
    OpTemplate("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
               "aten::add", "GPU", "c10::BFloat16", "", 0.08),
    OpTemplate("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
               "aten::native_layer_norm", "GPU", "c10::BFloat16", "", 0.08),
    OpTemplate("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >",
               "aten::gelu", "GPU", "c10::BFloat16", "", 0.10),
    OpTemplate("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >",
               "aten::copy_", "GPU", "float", "", 0.05),
    OpTemplate("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >",
               "aten::sum", "GPU", "float", "", 0.03),
]
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
SENDRECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
DATALOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def _x(cat, name, ts, dur, pid, tid, args=None) -> dict:
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(float(ts), 3),
          "dur": round(float(dur), 3)}
    if args:
        ev["args"] = args
    return ev


def rank_trace(sc: Scenario, r: int) -> dict:
    """The trace object of rank ``r``."""
    R = sc.spec.ranks
    k = layout(sc, r, TEMPLATES, sc.spec.kernels_per_step)
    host_pid = 30000 + r
    dev = r % sc.ranks_per_host
    group = sc.group_ranks(r)
    pg = {"Process Group Name": str(sc.stage_of(r)), "Process Group Description": "default_pg",
          "Process Group Ranks": str(group), "Group size": len(group)}
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": host_pid, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": dev, "tid": 0, "args": {"name": f"GPU {dev}"}},
        {"ph": "M", "name": "thread_name", "pid": host_pid, "tid": host_pid, "args": {"name": "thread 1 (python3)"}},
    ]
    corr = 1
    ext = 1
    per = len(k.start) // len(sc.step_ids)
    for j, s in enumerate(sc.step_ids):
        t0 = sc.start_us[j]
        dw = sc.data_wait[j, r]
        ev.append(_x("user_annotation", f"ProfilerStep#{s}", t0, sc.duration[j, r], host_pid, host_pid,
                     {"External id": ext, "Record function id": 0}))
        ext += 1
        ev.append(_x("user_annotation", DATALOADER, t0 + 1.0, max(dw - 30.0, 1.0), host_pid, host_pid,
                     {"External id": ext, "Record function id": 0}))
        ext += 1
        launch = t0 + dw - 20.0
        if sc.bubble[j, r] > 0:
            ev.append(_x("cpu_op", "c10d::recv_", launch - 12, 8.0, host_pid, host_pid, {"External id": ext}))
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", launch - 10, 4.0, host_pid, host_pid,
                         {"External id": ext, "cbid": 211, "correlation": corr}))
            ev.append(_x("kernel", SENDRECV, k.recv_start[j], k.recv_dur[j], dev, 24,
                         {"External id": ext, "device": dev, "stream": 24, "correlation": corr,
                          "Collective name": "recv", **pg}))
            corr += 1
            ext += 1
        for i in range(j * per, (j + 1) * per):
            t = TEMPLATES[k.template[i]]
            ts = min(launch + (i - j * per) * 9.0, k.start[i] - 1.0)
            ev.append(_x("cpu_op", t.type, ts, 7.0, host_pid, host_pid,
                         {"External id": ext, "Input type": t.dtypes.split(";"), "Input Dims": [[8192, 4096]]}))
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", ts + 2.0, 4.0, host_pid, host_pid,
                         {"External id": ext, "cbid": 211, "correlation": corr}))
            ev.append(_x("kernel", t.name, k.start[i], k.dur[i], dev, 7,
                         {"External id": ext, "queued": 0, "device": dev, "context": 1, "stream": 7,
                          "correlation": corr, "registers per thread": 128, "shared memory": 49152,
                          "grid": [132, 1, 1], "block": [256, 1, 1]}))
            corr += 1
            ext += 1
        ts = min(launch + per * 9.0, k.ar_start[j] - 1.0)
        ev.append(_x("cpu_op", "c10d::allreduce_", ts, 9.0, host_pid, host_pid, {"External id": ext}))
        ev.append(_x("user_annotation", "nccl:all_reduce", ts + 1.0, 7.0, host_pid, host_pid, {"External id": ext}))
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", ts + 3.0, 4.0, host_pid, host_pid,
                     {"External id": ext, "cbid": 211, "correlation": corr}))
        ev.append(_x("kernel", NCCL, k.ar_start[j], k.ar_dur[j], dev, 20,
                     {"External id": ext, "queued": 0, "device": dev, "context": 1, "stream": 20,
                      "correlation": corr, "Collective name": "allreduce", "In msg nelems": 209715200,
                      "Out msg nelems": 209715200, "dtype": "BFloat16", **pg}))
        corr += 1
        ext += 1
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": dev, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045379072,
                              "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": r, "world_size": R, "pg_count": 1,
                            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                                           "pg_size": R, "ranks": list(range(R)) if R <= 64 else []}],
                            "nccl_version": "2.21.5"},
        "traceEvents": ev,
        "traceName": f"node{r // sc.ranks_per_host}_{30000 + r}.pt.trace.json",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1736413900000000000,
    }


def write(sc: Scenario, parent: Path) -> list[Path]:
    """One trace file per rank under ``parent``."""
    paths = []
    for r in range(sc.spec.ranks):
        path = parent / f"node{r // sc.ranks_per_host}_{30000 + r}.1736413971558.pt.trace.json"
        path.write_bytes(_dumps(rank_trace(sc, r)))
        paths.append(path)
    return paths
