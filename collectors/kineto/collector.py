"""PyTorch profiler (Kineto / CUPTI) Chrome traces -> Profile.

Inputs
------
A trace file ``*.pt.trace.json``, ``*.json.gz`` or ``*.json`` (a JSON object
with ``traceEvents`` and optionally ``distributedInfo`` {rank, world_size,
backend}, ``deviceProperties``, ``schemaVersion``), or a folder of them (one
per rank, as ``tensorboard_trace_handler`` writes
``{worker}.{ts}.pt.trace.json[.gz]``). ``discover`` peeks at the first 64 KB
of each candidate for ``traceEvents``/``schemaVersion`` plus a Kineto marker
and never claims Ascend output (``trace_view.json``, anything under
``ASCEND_PROFILER_OUTPUT``, ``*_ascend_pt``, ``*_ascend_ms``).

Both category vocabularies are read: current (``cpu_op``,
``user_annotation``, ``cuda_runtime``, ``cuda_driver``, ``kernel``,
``gpu_memcpy``, ``gpu_memset``) and 2021 (``Operator``, ``Runtime``,
``Kernel``, ``Memcpy``, ``Memset``), with ``gpu_user_annotation`` (the
device span of a ``record_function`` range: the ``annotations`` table) and
the program's ``python_function`` frames. Flow (``ac2g``) and instant
events are not needed and skipped (kernel -> launch links use the
``correlation`` arg instead of the ``ac2g`` flows).

Ranks
-----
``distributedInfo.rank``, else a number in the file name (``rank-1``,
``rank_1``, ``rank1``). Files declaring neither are grouped by the process
that wrote them (the ``{worker}`` of a ``tensorboard_trace_handler`` name,
``{host}_{pid}`` by default, and the ``pid`` of the host events): the
captures of one process (a schedule with ``repeat``, two profiling
sessions) are separate capture windows of one rank, each step keeping its
own number; each other process gets its own rank (after the largest
explicit one, in file-name order), so two files of two workers are never
silently merged into one rank. Several files that *declare* the same rank
are kept as separate capture windows of that rank, unless they number the
same steps: then they are two runs of it, and the engine keeps the first
(``collectors.parallel.rank_reader``). ``rank_notes`` says
which of these applied to the files read together; a trace read alone is
one rank and names no other file.

Steps (``steps`` table, one row per ``ProfilerStep#N``)
-------------------------------------------------------
Every step is kept, the last one included. Without step markers the whole
trace is one window with step NA and a note says so. All values are
microseconds, clipped to the step's host span ``[start_us, start_us +
duration_us]`` (device work that spills past the step end counts in the
next step, or nowhere for the last one).

Every trace (:mod:`kineto_window`): ``truncated`` (the annotation lies
mostly outside the span the profiler recorded work in; such a step is
clipped to that span), ``warmup_us`` (one-time start-up in the step:
start-up runtime calls, torch.compile compiling, slow first calls,
allocator growth later steps do not repeat) and, for GPU traces,
``device_ops`` / ``device_ops_launched`` (device events starting in the
step, and those whose launch is recorded). The ``warmup`` table lists the
one-time calls and ops themselves.

Is there a device (:mod:`kineto_presence`)? A trace without kernel, memcpy
or memset events that shows a GPU job all the same (``deviceProperties``
listing GPUs, CUDA runtime or sync events, CUPTI profiler ranges) keeps
``meta.device = "gpu"`` with host-side steps only (duration, DataLoader
wait, the window columns), no ``ops`` or ``comm`` table, and a note saying
what is missing and how to record it. Only a trace with none of that is a
CPU-only trace.

GPU traces (any kernel / memcpy / memset event; ``meta.device = "gpu"``):

* ``device_busy_us``: union of all kernel, memcpy and memset intervals
  (all streams and devices of the file).
* ``communication_us``: union of collective kernels. A kernel is a
  collective when its name contains ``nccl``/``rccl``/``msccl`` (any case:
  ``ncclKernel_*``, ``ncclDevKernel_*``), ``cross_device_reduce``, or one of
  the case-sensitive tokens ``AllReduce``, ``AllGather``, ``ReduceScatter``,
  ``Broadcast``, ``SendRecv``, ``AllToAll`` not embedded in a longer word
  (so Eigen's ``TensorBroadcastingOp`` is compute).
* ``computing_us``: union of all other kernels (memcpy/memset excluded, as
  in HolisticTraceAnalysis).
* ``overlapped_us``: |compute ∩ communication|; ``exposed_comm_us`` =
  communication - overlapped.
* ``free_us``: duration - |compute ∪ communication| (memcpy/memset-only
  time counts as free; device idle is ``duration - device_busy``).
* ``data_wait_us``: union of host ``enumerate(DataLoader)#...`` spans.
* Device idle (``duration - device_busy``) is split in two:
  ``kernel_gap_us``, idle gaps between two consecutive device-busy
  intervals no longer than ``KERNEL_GAP_US`` (50 us: the cost of issuing
  the next op, eager dispatch plus launch latency), and ``host_wait_us``,
  the rest (longer idle stretches, plus idle before the first and after the
  last device op: the device waited for the host to issue work). The split
  uses gap lengths, not launch timestamps, because CPU and GPU clocks in a
  trace are aligned only to a few microseconds. A gap that crosses a step
  boundary is classified by its full length and split between the steps.
* ``sync_wait_us``: union of blocking host synchronization calls
  (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
  ``cudaEventSynchronize``, synchronous ``cudaMemcpy*``, driver
  equivalents) on any host thread: time the host sat waiting for the GPU.

CPU-only traces (no device events and no GPU; ``meta.device = "cpu"``): the training
thread is the one carrying the step markers (else the one with most op
time). ``communication_us`` is the union of outermost collective host ops
on any thread (names starting ``c10d::``, ``gloo:``, ``nccl:``, ``c10d_``,
``ProcessGroup`` or equal to ``record_param_comms``); ``computing_us`` is the
union of the training thread's top-level ``cpu_op`` intervals minus its own
collective ops and the DataLoader spans; ``overlapped_us`` is compute ∩
communication (collectives running on other threads); ``data_wait_us`` as
above; ``free_us`` = duration - |compute ∪ communication| (so it includes
the data wait). ``device_busy_us`` and ``host_wait_us`` are absent.

``ops``: GPU traces: one row per (kernel/memcpy/memset name, type, input
dtypes) with ``core`` "GPU", ``type`` compute / communication / memset /
a copy type by direction from the memcpy name (``Memcpy HtoD ...`` ->
``memcpy_h2d``, ``DtoH`` -> ``memcpy_d2h``, ``DtoD`` -> ``memcpy_d2d``,
``PtoP``/``Peer`` -> ``memcpy_p2p``, ``HtoH`` -> ``memcpy_h2h``, else
``memcpy``), ``count``, ``total_us``, ``max_us``, ``min_us`` over the whole
trace, and ``short_count``: launches shorter than ``SHORT_KERNEL_US``
(10 us, about the host cost of one launch). When ops carry ``Input type`` args (record_shapes=True),
``input_dtypes`` of a kernel are those of the host op that launched it:
kernel ``correlation`` == runtime-call ``correlation``, the runtime call
lies inside the op on the same thread (innermost op, climbing to the
nearest ancestor that has tensor inputs). dtypes in the Profile's
spelling (``advisor.collectors.vocab.dtype``: float -> FLOAT, c10::Half ->
FLOAT16, long int -> INT64 ...; non-tensor inputs dropped). CPU-only traces: top-level host ops of every
thread, ``core`` "CPU", ``type`` cpu_op / communication.

``comm``: one row per collective kernel (GPU) or outermost collective host
op (CPU): ``name``, ``kind`` (``advisor.collectors.vocab``: from the
``Collective name`` arg, else the name, else the enclosing host collective
op, e.g. ``nccl:all_to_all`` for a ``SendRecv`` kernel; ``sendrecv`` when
none says more), ``group`` (``Process Group Name[:Description]``
args, when present), ``elapse_us``, ``start_us``, ``step``;
``size_mb``, the message: ``In msg nelems`` x ``dtype`` args (NCCL
kernels, ``record_param_comms`` of PyTorch 2.1+), else the tensor inputs
(``Input Dims`` x ``Input type``) of the ``nccl:*`` / ``gloo:*`` op, for a
kernel that of the nearest op around its launch that records one;
``exposed_us`` (its span's exposed time) and ``exposed_share_us`` (its
part of the step's exposed communication: shared time split evenly, so a
step's rows add up to its ``exposed_comm_us``); ``front_end`` (1 for a
``c10d::`` call on the training thread whose gloo op is a row too: the
gloo op stands for the collective).

On CPU-only traces a synchronous collective called inside another op
(``_AlltoAllSingle`` of ``torch.distributed.nn`` calls
``c10d::alltoall_base_`` and then waits for gloo's worker thread) keeps
the training thread blocked from the call until the backend op of that
kind ends (at most to the end of the op around the call): that wait is the
call's communication time, not the op's compute.

``flops`` (traces recorded with ``record_shapes=True``): per step, the
FLOPs of the matrix multiplies and 2-D convolutions from their recorded
shapes (:mod:`kineto.work`): the work a rank was given. On CPU-only traces
``steps.thin_matmul_us``: the time of the thin ones among them (a
rows or inner size of at most ``work.THIN``: bound by memory by their shape),
``steps.fp64_matmul_us`` / ``bf16_matmul_us`` / ``fp16_matmul_us``: of
those whose operands are float64 / bfloat16 / float16;
``steps.frozen_grads`` and ``frozen_grad_us``: gradients computed that no
optimizer step reads, and their time (:mod:`kineto.frozen_grads`).
``steps.dense_embed_*``: embedding tables whose gradient is built dense, the
rows their lookups ask for, and the time of the dense backward and of the
optimizer's share on them (:mod:`kineto.dense_embedding`).
``steps.param_tensors``, ``param_copies`` and ``param_copy_us``: clones of
the parameters made in the step, matched to its gradients' shapes, and their
time (:mod:`kineto.param_copies`).
``meta.cpu``: the host CPU's low-precision instructions where ``advisor
run`` recorded them (``cpuProperties``).

DDP jobs (``DistributedDataParallel.forward`` ranges; :mod:`kineto.grad_sync`):
``steps.ddp_forwards``, ``ddp_synced_forwards`` (those followed by a
gradient all-reduce) and ``optimizer_steps`` per step.

PyTorch DataLoader calls (:mod:`kineto.loader_passes`): ``steps.loader_calls``
and ``loader_us`` per step, and in a step where a pass over the loader ends,
``loader_end_us`` (the call that ended it) and ``loader_between_us`` (host
time before the next pass's first call).

Large traces are streamed (:mod:`kineto_decode`, :mod:`kineto_stream`),
with a progress bar on a terminal: only the events some table reads are
kept, so memory grows far slower than the JSON (``bench/memory_vs_size.py``
and ``bench/kineto_load.py`` measure it).

Not read (yet): memory events, python stacks, flow events, per-stream
idle analysis, kernels of other ranks in one file.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from advisor.collectors import vocab
from advisor.collectors.io.files import check_regular
from advisor.collectors.kineto import decode as dec
from advisor.collectors.kineto import annotations, critical_path, cupti_counters, host_calls, host_gaps, presence
from advisor.collectors.kineto import dense_embedding, frozen_grads, grad_sync, loader_passes, op_chains, op_trend
from advisor.collectors.kineto import param_copies, shaped_events, work
from advisor.collectors.kineto.tables import Tables, cpu_tables, gpu_tables, host_only_tables
from advisor.collectors.protocol import Capabilities
from advisor.errors import InputError
from advisor.profile import CpuInfo, Profile, RunMeta
from advisor.runtime.libc import release_free_memory

GIB = float(1 << 30)

#: Several trace files may be capture windows of one rank (``rank_notes``
#: says which); one large trace may be decoded on several processes
#: (``read_alone``).
CAPABILITIES = Capabilities(label="Kineto trace(s)", splits_unit=True, shared_ranks=True)

_ASCEND_DIR_RE = re.compile(r"(^ASCEND_PROFILER_OUTPUT$|_ascend_pt$|_ascend_ms$)")
_RANK_IN_NAME = re.compile(r"(?i)(?<![a-z])rank[-_]?(\d+)")
#: The name ``torch.profiler`` gives a trace file.
_TRACE_NAME = re.compile(r"\.pt\.trace\.json(?:\.gz)?$")
#: ``{worker}.{ms}.pt.trace.json[.gz]`` as ``tensorboard_trace_handler`` names
#: a trace, the worker being ``{host}_{pid}`` unless the user named it.
_HOST_IN_NAME = re.compile(r"^(?P<host>.+?)_\d+\.\d+\.pt\.trace\.json(?:\.gz)?$")
_WORKER_IN_NAME = re.compile(r"^(?P<worker>.+?)\.\d+\.pt\.trace\.json(?:\.gz)?$")
_KINETO_MARKERS = ('"schemaVersion"', '"deviceProperties"', '"distributedInfo"',
                   "PyTorch Profiler", '"cpu_op"', '"Operator"', "ProfilerStep#",
                   '"cuda_runtime"', '"kernel"', '"user_annotation"')


def _is_trace_name(path: Path) -> bool:
    """A JSON (optionally gzipped) file name that is not Ascend's."""
    name = path.name
    if not (name.endswith(".json") or name.endswith(".json.gz")):
        return False
    return not name.startswith("trace_view.json")


def _in_ascend_dir(path: Path) -> bool:
    return any(_ASCEND_DIR_RE.search(part) for part in path.parts)


def looks_like_kineto(path: Path) -> bool:
    """Cheap content check of the first bytes of a candidate file."""
    try:
        if not _is_trace_name(path) or _in_ascend_dir(path.resolve()):
            return False
    except (OSError, RuntimeError):  # e.g. a symlink loop
        return False
    head = dec.peek(path)
    if not head.lstrip().startswith("{"):
        return False
    if '"traceEvents"' not in head and '"schemaVersion"' not in head:
        return False
    return ".pt.trace." in path.name or any(m in head for m in _KINETO_MARKERS)


def _candidates(root: Path) -> list[Path]:
    """Trace-named files under ``root`` (hidden folders skipped), sorted."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [Path(folder) / f for f in files if _is_trace_name(Path(f))]
    return sorted(out)


def _has_ascend_output(root: Path) -> bool:
    """True when ``root`` is, or contains, Ascend profiler output."""
    if _ASCEND_DIR_RE.search(root.name):
        return True
    for _folder, dirs, _files in os.walk(root):
        if any(_ASCEND_DIR_RE.search(d) for d in dirs):
            return True
        dirs[:] = [d for d in dirs if not d.startswith(".")]
    return False


def _empty_trace(path: Path) -> bool:
    """An empty file named like a profiler trace (``*.pt.trace.json[.gz]``),
    or a FIFO, socket or device so named: kept as a unit so that reading it
    fails with a reason the report lists, instead of the file vanishing
    silently."""
    try:
        st = path.stat()
    except OSError:
        return False
    return ".pt.trace." in path.name and (not stat.S_ISREG(st.st_mode) or st.st_size == 0)


def discover(root: Path) -> list[Path]:
    """Kineto trace files at or under ``root``; [] when the layout is not ours."""
    root = Path(root)
    try:
        if root.is_file():  # a file named as a trace is one: its own problem, if any, is the error
            return [root] if looks_like_kineto(root) or _TRACE_NAME.search(root.name) else []
        if not root.is_dir() or _has_ascend_output(root):
            return []
        return [p for p in _candidates(root) if looks_like_kineto(p) or _empty_trace(p)]
    except OSError:
        return []


def _explicit_rank(path: Path, head: str) -> int | None:
    """Rank from ``distributedInfo`` in the head, else from the file name."""
    rank = dec.head_rank(head)
    if rank is not None:
        return rank
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def _process(path: Path, head: str) -> tuple[str | None, int | None] | None:
    """What names the process that wrote a trace declaring no rank: (worker
    name, process id). The worker is the ``{worker}`` of a
    ``tensorboard_trace_handler`` file name (``{host}_{pid}`` unless the
    user named it), the process id the ``pid`` of the host events in the
    file's first bytes. None when neither the id nor a default
    ``{host}_{pid}`` name is there: such a file is a process of its own."""
    m = _WORKER_IN_NAME.match(path.name)
    worker = m.group("worker") if m else None
    pid = dec.head_pid(head)
    if pid is None and _HOST_IN_NAME.match(path.name) is None:
        return None
    return worker, pid


@dataclass(frozen=True)
class _Plan:
    """Ranks of the trace files of one folder: ``ranks`` {name: rank};
    ``processes`` the files declaring no rank, one tuple per process that
    wrote them (its captures, in name order, which is time order for
    handler-named files)."""

    ranks: dict[str, int]
    processes: tuple[tuple[str, ...], ...]
    declared_twice: tuple[tuple[int, tuple[str, ...]], ...]


@lru_cache(maxsize=64)
def _rank_plan(folder: str, names: tuple[str, ...]) -> _Plan:
    """Ranks for the trace files of one folder. A file declaring none gets
    the rank of the process that wrote it (``_process``): the captures of
    one process (a profiler schedule with ``repeat``, or two profiling
    sessions) are windows of one rank; each other process gets a rank of
    its own, after the largest declared one."""
    heads = {n: dec.peek(Path(folder, n)) for n in names}
    explicit = {n: _explicit_rank(Path(folder, n), heads[n]) for n in names}
    ranks = {n: r for n, r in explicit.items() if r is not None}
    processes: dict[object, list[str]] = {}
    for n in names:
        if explicit[n] is None:
            key = _process(Path(folder, n), heads[n]) or ("file", n)
            processes.setdefault(key, []).append(n)
    first = max(ranks.values(), default=-1) + 1
    for k, files in enumerate(processes.values()):
        ranks.update((n, first + k) for n in files)
    seen: dict[int, list[str]] = {}
    for n, r in explicit.items():
        if r is not None:
            seen.setdefault(r, []).append(n)
    twice = tuple((r, tuple(files)) for r, files in sorted(seen.items()) if len(files) > 1)
    return _Plan(ranks, tuple(tuple(f) for f in processes.values()), twice)


def rank_notes(units: list[Path]) -> list[str]:
    """What the report says about the ranks of ``units`` read together
    (``shared_ranks``): files of one process read as capture windows of
    one rank, ranks given to processes that declare none, files declaring
    the same rank. Only the units read are named: a trace read alone is
    one rank, whatever lies beside it."""
    notes: list[str] = []
    by_folder: dict[Path, set[str]] = {}
    for unit in units:
        by_folder.setdefault(Path(unit).parent, set()).add(Path(unit).name)
    for folder, read in sorted(by_folder.items()):
        plan = _rank_plan(str(folder), _folder_names(folder, read))
        procs = [[n for n in files if n in read] for files in plan.processes]
        procs = [files for files in procs if files]
        for files in procs:
            if len(files) > 1:
                notes.append(f"{len(files)} trace files in {folder} were written by one process and declare "
                             f"no rank ({', '.join(files)}): read as separate capture windows of rank "
                             f"{plan.ranks[files[0]]}, each step under its own number")
        if len(procs) > 1:
            given = ", ".join(f"{files[0]} -> rank {plan.ranks[files[0]]}" for files in procs)
            notes.append(f"no rank in distributedInfo or file name for the traces of {len(procs)} processes "
                         f"in {folder}; each process got its own rank ({given}), so ranks are not compared")
        for r, files in plan.declared_twice:
            files = [n for n in files if n in read]
            if len(files) > 1:
                notes.append(f"{len(files)} trace files declare rank {r} ({', '.join(files)}): "
                             "read as separate capture windows of that rank")
    return notes


def runs(units: list[Path]) -> list[list[Path]]:
    """``units`` split into the runs they belong to: the traces of a folder
    whose files declare no rank are a run of their own (the processes of
    one folder are one job's workers, those of two folders two jobs);
    folders whose traces all declare their rank are one run together (one
    rank per folder is a common way to lay out a job)."""
    folders: dict[Path, list[Path]] = {}
    for unit in units:
        folders.setdefault(Path(unit).parent, []).append(Path(unit))
    ranked = [u for found in folders.values()
              if all(_explicit_rank(u, dec.peek(u)) is not None for u in found) for u in found]
    alone = [found for found in folders.values() if found[0] not in ranked]
    return ([ranked] if ranked else []) + alone


@lru_cache(maxsize=64)
def _trace_names(folder: str, mtime_ns: int) -> tuple[str, ...]:
    """Names of the Kineto traces directly in ``folder`` (cached while the
    folder is unchanged: every trace of a 1024-rank folder asks)."""
    return tuple(sorted(p.name for p in Path(folder).iterdir() if p.is_file() and looks_like_kineto(p)))


def _folder_names(folder: Path, also: set[str] | tuple[str, ...] = ()) -> tuple[str, ...]:
    """The Kineto traces of ``folder`` (with ``also``, the files asked about)."""
    try:
        names = _trace_names(str(folder), folder.stat().st_mtime_ns)
    except OSError:
        names = ()
    missing = set(also) - set(names)
    return tuple(sorted(names + tuple(missing))) if missing else names


def _resolve_rank(path: Path, declared: int | None) -> int:
    """This file's rank: the declared one, else the folder plan's."""
    if declared is not None:
        return declared
    return _rank_plan(str(path.parent), _folder_names(path.parent, (path.name,))).ranks.get(path.name, 0)


def _host(path: Path, rank: int) -> dict[int, str]:
    """{rank: host} from the file's default name (``_HOST_IN_NAME``), else {}."""
    m = _HOST_IN_NAME.match(path.name)
    return {rank: m.group("host")} if m and not _RANK_IN_NAME.search(m.group("host")) else {}


def read(unit: Path, helpers: int = 0) -> Profile:
    """One trace file (or a folder of them) -> Profile. ``helpers``: see
    ``read_alone``."""
    path = Path(unit)
    if path.is_dir():
        return _read_folder(path)
    check_regular(path, missing="no such trace file")
    trace = dec.load_trace(path, helpers=helpers)
    rank = _resolve_rank(path, trace.rank)
    inferred = trace.rank is None and _RANK_IN_NAME.search(path.name) is None
    if trace.analysed == 0:
        raise InputError(path, "trace has no complete events of known categories "
                               "(cpu_op/Operator/kernel/... ) to analyse")
    tables = _tables(trace, rank)
    notes = list(tables.notes)
    memory, from_zero = _memory_table(trace, rank)
    if from_zero:
        notes.append(MEMORY_FROM_ZERO)
    meta = RunMeta(
        framework="pytorch",
        device=tables.device,
        device_model=trace.gpu.name if trace.gpu else None,
        compute_capability=trace.gpu.capability if trace.gpu else None,
        cpu=trace.cpu and CpuInfo(**msgspec.structs.asdict(trace.cpu)),
        source_format="kineto",
        source_version=_version(trace),
        source_path=str(path),
        ranks=[rank],
        ranks_inferred=inferred,
        world_size=trace.world_size,
        hosts=_host(path, rank) if not inferred else {},
        notes=notes,
    )
    profile = Profile(meta=meta, steps=tables.steps, ops=tables.ops, comm=tables.comm, warmup=tables.warmup,
                      idle_causes=tables.idle_causes, host_calls=tables.host_calls,
                      kernel_sequences=tables.kernel_sequences, annotations=tables.annotations,
                      cp_edges=tables.cp_edges, memory_summary=_memory_summary(trace, rank),
                      memory=memory,
                      free_gaps=tables.free_gaps, flops=tables.flops, op_trend=tables.op_trend)
    if cupti_counters.CATEGORY in trace.categories:
        profile.cupti_counters, why = cupti_counters.table(path, rank)
        if why:
            profile.skip(f"{path.name}: cupti_counters", why)
    if trace.memory_timeline is not None and profile.memory is None:
        profile.skip(f"{path.name}: memory", "the [memory] events record no Total Allocated: the memory live "
                     "when recording began is unknown, so no memory timeline is built")
    if trace.dropped:
        profile.skip(str(path), f"{trace.dropped} events with unusable ts/dur or fields ignored")
    unrecorded = tables.ops is None and tables.device == "gpu"
    if unrecorded:
        profile.skip(f"{path.name}: ops", "no kernel, memcpy or memset events in this trace")
    if tables.comm is None:
        profile.skip(f"{path.name}: comm", "no kernel events: the device's collectives were not recorded"
                     if unrecorded else "no collective kernels or ops in this trace")
    return profile


def _memory_summary(trace: dec.Trace, rank: int) -> pd.DataFrame | None:
    """The ``memory_summary`` row of a trace recorded with
    ``profile_memory=True``: the highest ``Total Reserved`` and ``Total
    Allocated`` of its device's ``[memory]`` events, against the device's
    ``deviceProperties`` ``totalGlobalMem`` where the trace lists it (NaN
    otherwise). None without device memory events."""
    if trace.device_memory_peak is None:
        return None
    reserved, allocated = trace.device_memory_peak
    total = trace.gpu.totalGlobalMem if trace.gpu is not None else None
    capacity = float(total) / GIB if isinstance(total, (int, float)) and total > 0 else float("nan")
    return pd.DataFrame({"rank": [rank], "capacity_gib": [capacity],
                         "peak_gib": [reserved / GIB if reserved >= 0 else float("nan")],
                         "peak_allocated_gib": [allocated / GIB if allocated >= 0 else float("nan")]})


#: The run's note when the ``memory`` table's levels count from zero.
MEMORY_FROM_ZERO = ("memory levels count from the start of recording: the [memory] events do not say what was "
                    "allocated before (the CPU allocator's totals start at zero), so a peak or a level leaves it out")


def _memory_table(trace: dec.Trace, rank: int) -> tuple[pd.DataFrame | None, bool]:
    """(the ``memory`` table, whether its levels count from zero) of a trace
    recorded with ``profile_memory=True``:
    each ``[memory]`` event of its device (``decode.memory_timeline``) an
    allocation (``create``) or a free (``destroy``) of its signed ``Bytes``,
    category ``unknown`` (the events do not say what a tensor holds), and
    the memory live before the first event (its ``Total Allocated`` less its
    own bytes) one ``preexisting`` row -- on a device: the CPU allocator's
    totals count from the start of recording, so a CPU timeline's levels
    count from zero (``MEMORY_FROM_ZERO``). No table without memory events,
    nor where they do not record ``Total Allocated`` (a device's levels
    would then count from zero unannounced)."""
    ev = trace.memory_timeline
    if ev is None or not np.isfinite(ev[2][0]):
        return None, False
    ts, nbytes, total = ev[0], ev[1].astype(np.int64), ev[2]
    keep = nbytes != 0
    from_zero = bool(ev[3][0] == 0)  # the CPU's
    before = 0.0 if from_zero else total[0] - nbytes[0]
    pre = [int(before)] if before > 0 else []
    return pd.DataFrame({
        "rank": rank,
        "time_us": np.concatenate([[np.nan] * len(pre), ts[keep]]),
        "action": pd.array(["preexisting"] * len(pre) + np.where(nbytes[keep] > 0, "create", "destroy").tolist(),
                           dtype="string"),
        "bytes": np.concatenate([np.array(pre, dtype=np.int64), nbytes[keep]]),
        "category": pd.array(["unknown"] * (len(pre) + int(keep.sum())), dtype="string"),
    }), from_zero


def read_alone(unit: Path, jobs: int) -> Profile:
    """``read`` of the only unit of a run, with up to ``jobs`` processes: a
    large trace is decoded in parts on several of them (``kineto_split``)."""
    from advisor.collectors.kineto.split import usable_helpers

    return read(unit, helpers=usable_helpers(jobs))


def _tables(trace: dec.Trace, rank: int) -> Tables:
    """The GPU or CPU-only tables of a decoded trace. Takes the event
    columns off ``trace`` and frees them once the tables are built."""
    ev, trace.events = trace.events, None
    closures = shaped_events.cut_closures(ev)
    if (ev.kind >= dec.KERNEL).any():
        tables = gpu_tables(ev, rank)
    elif evidence := presence.gpu_evidence(trace):
        tables = host_only_tables(ev, rank, "gpu")
        tables.notes.append(presence.missing_device_note(evidence))
    else:
        tables = cpu_tables(ev, rank)
    calls = [t for t in (host_calls.table(ev, tables.steps, rank), host_gaps.table(ev, tables.steps, rank),
                         op_chains.table(ev, tables.steps, rank)) if t is not None]
    tables.host_calls = pd.concat(calls, ignore_index=True) if len(calls) > 1 else (calls[0] if calls else None)
    if closures:
        tables.notes.append(shaped_events.CLOSURE_NOTE)
    tables.annotations = annotations.table(ev, tables.steps, rank)
    tables.op_trend = op_trend.table(ev, tables.steps, rank)
    tables.flops = work.table(ev.work_ts, ev.work_flops, tables.steps, rank)
    if (syncs := grad_sync.columns(ev, tables.steps, tables.comm)) is not None:
        for column, values in syncs.items():
            tables.steps[column] = values
    for column, values in (loader_passes.columns(ev, tables.steps) or {}).items():
        tables.steps[column] = values
    if tables.device == "cpu" and ev.work_ts.size:  # a CPU operator's span is its computation
        for column, chosen in (("thin_matmul_us", ev.work_smallest <= work.THIN),
                               ("fp64_matmul_us", ev.work_type == work.OPERAND_TYPES.index(vocab.DOUBLE)),
                               ("bf16_matmul_us", ev.work_type == work.OPERAND_TYPES.index(vocab.BF16)),
                               ("fp16_matmul_us", ev.work_type == work.OPERAND_TYPES.index(vocab.FLOAT16))):
            tables.steps[column] = work.time_of(ev.work_ts, ev.work_dur, chosen, tables.steps)
        for column, values in (frozen_grads.columns(ev, tables.steps) or {}).items():
            tables.steps[column] = values
        for column, values in (dense_embedding.columns(ev, tables.steps) or {}).items():
            tables.steps[column] = values
        for column, values in (param_copies.columns(ev, tables.steps) or {}).items():
            tables.steps[column] = values
    if tables.device == "cpu" or tables.ops is not None:  # not a GPU job whose device work went unrecorded
        tables.cp_edges = critical_path.table(ev, tables.steps, rank)
        if tables.cp_edges is None and tables.device == "gpu":
            tables.notes.append(f"critical path not computed: {critical_path.NO_LAUNCH_LINKS}")
    del ev
    if trace.analysed >= dec.BIG_TRACE_EVENTS:
        release_free_memory()
    return tables


def _version(trace: dec.Trace) -> str:
    """'schema N' plus the category vocabulary."""
    vocab = "2021 categories" if trace.old_vocabulary else "current categories"
    schema = f"schema {trace.schema_version}" if trace.schema_version else "no schemaVersion"
    return f"{schema}, {vocab}"


def _read_folder(folder: Path) -> Profile:
    """Every trace under ``folder``, read and merged by the cluster engine
    (:func:`advisor.collectors.parallel.rank_reader.read_units`, in this process) as
    ``load_profile`` would."""
    from advisor.collectors.parallel.rank_reader import read_units

    units = discover(folder)
    if not units:
        raise InputError(folder, "no Kineto trace files (*.pt.trace.json[.gz]) found")
    return read_units(__name__, folder, units, jobs=1)
