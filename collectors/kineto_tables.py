"""Kineto events -> the normalized ``steps``, ``ops`` and ``comm`` tables.

The definitions are documented in :mod:`advisor.collectors.kineto`; this
module implements them with numpy interval math (:mod:`kineto_intervals`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from advisor.collectors import kineto_intervals as iv
from advisor.collectors.kineto_decode import HOST, KERNEL, MEMCPY, MEMSET, RUNTIME, Events

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
DATALOADER_RE = re.compile(r"^enumerate\(DataLoader\)#")
# Device kernels that are collectives (NCCL/RCCL/MSCCL and the CamelCase
# collective names kernels carry); case-sensitive for the CamelCase tokens so
# compute kernels such as Eigen's ``TensorBroadcastingOp`` do not match.
COMM_KERNEL_RE = re.compile(
    r"(?i:nccl|rccl|msccl)|cross_device_reduce|"
    r"(?<![A-Za-z])(?:AllReduce|AllGather|ReduceScatter|Broadcast|SendRecv|AllToAll)(?![a-z])"
)
# Host ops that are collectives (gloo on CPU-only traces, c10d front ends).
HOST_COMM_RE = re.compile(r"^(?:c10d::|c10d_|gloo:|nccl:|record_param_comms$|ProcessGroup)")
# Host annotations that are not ops (2021 traces put them in "Operator").
ANNOTATION_RE = re.compile(r"^(?:ProfilerStep#|enumerate\(DataLoader\)#|## .* ##$)")
SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyPeer",
    "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2", "cuMemcpy",
})
_KIND_TOKENS = (
    ("reducescatter", "reducescatter"), ("allgather", "allgather"),
    ("allreduce", "allreduce"), ("alltoall", "alltoall"),
    ("broadcast", "broadcast"), ("sendrecv", "other"), ("send", "send"),
    ("recv", "receive"), ("receive", "receive"),
)
_DTYPES = {
    "float": "FLOAT", "double": "DOUBLE", "c10::Half": "FLOAT16", "c10::BFloat16": "BF16",
    "half": "FLOAT16", "bfloat16": "BF16", "long int": "INT64", "long": "INT64",
    "int": "INT32", "short int": "INT16", "short": "INT16", "signed char": "INT8",
    "unsigned char": "UINT8", "bool": "BOOL", "c10::complex<float>": "COMPLEX64",
    "c10::complex<double>": "COMPLEX128", "c10::complex<c10::Half>": "COMPLEX32",
    "c10::Float8_e4m3fn": "FLOAT8_E4M3FN", "c10::Float8_e5m2": "FLOAT8_E5M2",
    "c10::Float8_e4m3fnuz": "FLOAT8_E4M3FNUZ", "c10::Float8_e5m2fnuz": "FLOAT8_E5M2FNUZ",
}
_NON_TENSOR = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None", "String"})
#: A kernel launch shorter than this (us) is "short": its launch costs about
#: as much host time (5-10 us per launch in eager PyTorch) as it runs on the
#: device. ``ops.short_count`` counts them.
SHORT_KERNEL_US = 10.0
#: A device-idle gap between two device ops no longer than this (us) is a
#: kernel-to-kernel launch gap (``kernel_gap_us``): the cost of issuing the
#: next op (eager dispatch of 10-30 us plus launch latency). Longer idle
#: stretches are the device waiting for host work (``host_wait_us``).
KERNEL_GAP_US = 50.0
#: Memcpy event names -> ops ``type`` (direction), first match wins.
MEMCPY_TYPES = (("HtoD", "memcpy_h2d"), ("DtoH", "memcpy_d2h"), ("DtoD", "memcpy_d2d"),
                ("PtoP", "memcpy_p2p"), ("Peer", "memcpy_p2p"), ("HtoH", "memcpy_h2h"))


@dataclass
class Tables:
    """What one trace yields."""

    device: str
    steps: pd.DataFrame
    ops: pd.DataFrame | None
    comm: pd.DataFrame | None
    notes: list[str] = field(default_factory=list)


def comm_kind(text: str | None) -> str:
    """Collective kind from a kernel/op name or a ``Collective name`` arg."""
    if not text:
        return "other"
    flat = re.sub(r"[^a-z0-9]", "", text.lower())
    for token, kind in _KIND_TOKENS:
        if token in flat:
            return kind
    return "other"


def normalize_dtypes(types) -> str | None:
    """Kineto ``Input type`` list -> ';'-joined upper-case tensor dtypes."""
    if not types:
        return None
    out = []
    for t in types:
        if not isinstance(t, str) or t in _NON_TENSOR:
            continue
        out.append(_DTYPES.get(t) or re.sub(r"[^A-Z0-9]+", "_", t.upper()).strip("_"))
    return ";".join(out) or None


def _name_mask(ev: Events, pattern: re.Pattern) -> np.ndarray:
    """Per-event boolean: the event's name matches ``pattern`` (tested once
    per distinct name)."""
    hit = np.fromiter((bool(pattern.search(n)) for n in ev.names), dtype=bool, count=len(ev.names))
    return hit[ev.name]


def _steps(ev: Events) -> pd.DataFrame:
    """ProfilerStep#N spans (deduplicated by N, longest kept), by start."""
    is_step = _name_mask(ev, STEP_RE) & (ev.kind == HOST)
    idx = np.flatnonzero(is_step)
    if idx.size == 0:
        return pd.DataFrame(columns=["step", "start", "end", "thread"])
    df = pd.DataFrame({
        "step": [int(STEP_RE.match(ev.names[c]).group(1)) for c in ev.name[idx]],
        "start": ev.ts[idx], "end": ev.end[idx], "thread": ev.thread[idx],
        "dur": ev.dur[idx],
    })
    df = df.sort_values("dur", ascending=False).drop_duplicates("step")
    return df.sort_values("start", ignore_index=True).drop(columns="dur")


def _windows(ev: Events, notes: list[str]) -> pd.DataFrame:
    """Step windows, or one whole-trace window (step NA) with a note."""
    steps = _steps(ev)
    if len(steps):
        # Keep windows disjoint (a step never runs past the next one's start).
        nxt = steps["start"].shift(-1).fillna(np.inf).to_numpy()
        steps["end"] = np.minimum(steps["end"].to_numpy(), nxt)
        steps["step"] = steps["step"].astype("Int64")
        return steps
    notes.append("no ProfilerStep#N step markers found: the whole trace is reported "
                 "as one window with step NA (use torch.profiler.profile with "
                 "schedule and call prof.step() each iteration)")
    return pd.DataFrame({
        "step": pd.array([pd.NA], dtype="Int64"),
        "start": [float(np.min(ev.ts))] if len(ev) else [np.nan],
        "end": [float(np.max(ev.end))] if len(ev) else [np.nan],
        "thread": [-1],
    })


def _select(ev: Events, mask: np.ndarray) -> iv.Intervals:
    """Merged intervals of the events selected by ``mask``."""
    return iv.merge(ev.ts[mask], ev.end[mask])


def _breakdown(win: pd.DataFrame, parts: dict[str, iv.Intervals]) -> pd.DataFrame:
    """Per-window covered length of each interval set."""
    lo, hi = win["start"].to_numpy(), win["end"].to_numpy()
    out = pd.DataFrame({
        "step": win["step"].to_numpy(),
        "start_us": lo,
        "duration_us": hi - lo,
    })
    for col, ivs in parts.items():
        out[col] = iv.covered_between(ivs, lo, hi)
    return out


def _finish(out: pd.DataFrame) -> pd.DataFrame:
    """Derived columns: exposed communication and free time."""
    out["exposed_comm_us"] = (out["communication_us"] - out["overlapped_us"]).clip(lower=0)
    out["free_us"] = (out["duration_us"] - out.pop("_busy_cc_us")).clip(lower=0)
    return out


def _nesting(ev: Events, mask: np.ndarray) -> tuple[np.ndarray, iv.Nesting]:
    """Indices of the selected host events and their call-stack nesting."""
    idx = np.flatnonzero(mask)
    return idx, iv.Nesting(ev.thread[idx], ev.ts[idx], ev.end[idx])


def _op_dtypes(ev: Events, idx: np.ndarray) -> np.ndarray:
    """Normalized input dtypes of the given events (object array, None when
    the op has no tensor inputs or shapes were not recorded); normalized
    once per distinct input-type tuple."""
    table = np.array([normalize_dtypes(t) for t in ev.input_types] + [None], dtype=object)
    codes = ev.input_type[idx]
    return table[np.where(codes >= 0, codes, len(ev.input_types))]


def memcpy_type(name: str) -> str:
    """ops ``type`` of a memcpy event from its Kineto name, e.g.
    ``Memcpy HtoD (Pageable -> Device)`` -> ``memcpy_h2d``."""
    for token, typ in MEMCPY_TYPES:
        if token in name:
            return typ
    return "memcpy"


def kernel_gaps(busy: iv.Intervals) -> iv.Intervals:
    """Idle gaps between consecutive device-busy intervals that are no
    longer than ``KERNEL_GAP_US``."""
    s, e = busy
    gs, ge = e[:-1], s[1:]
    keep = (ge > gs) & (ge - gs <= KERNEL_GAP_US)
    return gs[keep], ge[keep]


def gpu_tables(ev: Events, rank: int) -> Tables:
    """GPU trace: device-side breakdown per step, kernel ops, collectives."""
    notes: list[str] = []
    win = _windows(ev, notes)
    dev = np.isin(ev.kind, (KERNEL, MEMCPY, MEMSET))
    kern = ev.kind == KERNEL
    is_comm = kern & _name_mask(ev, COMM_KERNEL_RE)
    compute = _select(ev, kern & ~is_comm)
    comm = _select(ev, is_comm)
    host = ev.kind == HOST
    busy = _select(ev, dev)
    sync = (ev.kind == RUNTIME) & np.isin(ev.names, list(SYNC_CALLS))[ev.name]
    parts = {
        "device_busy_us": busy,
        "computing_us": compute,
        "communication_us": comm,
        "overlapped_us": iv.intersect(compute, comm),
        "_busy_cc_us": iv.union(compute, comm),
        "data_wait_us": _select(ev, host & _name_mask(ev, DATALOADER_RE)),
        "kernel_gap_us": kernel_gaps(busy),
        "sync_wait_us": _select(ev, sync),
    }
    steps = _finish(_breakdown(win, parts))
    idle = (steps["duration_us"] - steps["device_busy_us"]).clip(lower=0)
    steps["host_wait_us"] = (idle - steps["kernel_gap_us"]).clip(lower=0)
    launch = _launching_ops(ev)
    ops = _gpu_ops(ev, dev, is_comm, launch)
    comm_df = _gpu_comm(ev, is_comm, win, launch)
    steps.insert(0, "rank", rank)
    return Tables("gpu", steps, _with_rank(ops, rank), _with_rank(comm_df, rank), notes)


@dataclass
class _Launch:
    """For device events: the host op that launched them (via correlation)."""

    dtypes: np.ndarray  # per event, None when unknown
    comm_op: np.ndarray  # per event, name of the enclosing collective host op or None


def _launching_ops(ev: Events) -> _Launch:
    """Map each device event to its launching runtime call (same correlation
    id) and that call to the innermost enclosing host op on its thread; read
    the op's input dtypes (climbing to the nearest ancestor that has them)
    and the nearest enclosing collective op name."""
    n = len(ev)
    dtypes = np.full(n, None, dtype=object)
    comm_op = np.full(n, None, dtype=object)
    rt = np.flatnonzero((ev.kind == RUNTIME) & np.isfinite(ev.corr))
    dev = np.flatnonzero(np.isin(ev.kind, (KERNEL, MEMCPY, MEMSET)) & np.isfinite(ev.corr))
    if rt.size == 0 or dev.size == 0:
        return _Launch(dtypes, comm_op)
    host_idx, nest = _nesting(ev, ev.kind == HOST)
    encl = nest.enclosing(ev.thread[rt], ev.ts[rt], ev.end[rt])
    op_dt = _op_dtypes(ev, host_idx)
    has_dt = pd.notna(op_dt)
    host_names = ev.names[ev.name[host_idx]]
    is_comm_op = _name_mask(ev, HOST_COMM_RE)[host_idx]
    dt_at = nest.climb(encl, has_dt)
    cm_at = nest.climb(encl, is_comm_op)
    rt_dt = np.where(dt_at >= 0, op_dt[np.clip(dt_at, 0, None)], None)
    rt_cm = np.where(cm_at >= 0, host_names[np.clip(cm_at, 0, None)], None)
    by_corr = pd.DataFrame({"dt": rt_dt, "cm": rt_cm}, index=ev.corr[rt])
    by_corr = by_corr[~by_corr.index.duplicated(keep="first")]
    hit = by_corr.reindex(ev.corr[dev])
    dtypes[dev] = hit["dt"].to_numpy(dtype=object)
    comm_op[dev] = hit["cm"].to_numpy(dtype=object)
    dtypes[pd.isna(dtypes)] = None
    comm_op[pd.isna(comm_op)] = None
    return _Launch(dtypes, comm_op)


def _gpu_ops(ev: Events, dev: np.ndarray, is_comm: np.ndarray, launch: _Launch) -> pd.DataFrame | None:
    """Device events aggregated per (name, type, input dtypes)."""
    idx = np.flatnonzero(dev)
    if idx.size == 0:
        return None
    kind = ev.kind[idx]
    typ = np.where(kind == MEMSET, "memset",
                   np.where(is_comm[idx], "communication", "compute")).astype(object)
    copies = np.flatnonzero(kind == MEMCPY)
    if copies.size:
        codes, inverse = np.unique(ev.name[idx[copies]], return_inverse=True)
        typ[copies] = np.array([memcpy_type(ev.names[c]) for c in codes], dtype=object)[inverse]
    df = pd.DataFrame({
        "name": ev.names[ev.name[idx]], "type": typ, "core": "GPU",
        "input_dtypes": launch.dtypes[idx], "dur": ev.dur[idx],
        "short": ev.dur[idx] < SHORT_KERNEL_US,
    })
    return _aggregate(df)


def _aggregate(df: pd.DataFrame) -> pd.DataFrame:
    """count/total/max/min of ``dur`` per op key; drop an all-null dtype column."""
    keys = ["name", "type", "core", "input_dtypes"]
    groups = df.groupby(keys, dropna=False, sort=False)
    out = groups["dur"].agg(count="size", total_us="sum", max_us="max", min_us="min")
    if "short" in df.columns:
        out["short_count"] = groups["short"].sum().astype("int64")
    out = out.reset_index().sort_values("total_us", ascending=False, ignore_index=True)
    out["count"] = out["count"].astype("int64")
    if out["input_dtypes"].isna().all():
        out = out.drop(columns="input_dtypes")
    else:
        out["input_dtypes"] = out["input_dtypes"].astype(object).where(out["input_dtypes"].notna(), None)
    return out


def _gpu_comm(ev: Events, is_comm: np.ndarray, win: pd.DataFrame, launch: _Launch) -> pd.DataFrame | None:
    """One row per collective kernel."""
    idx = np.flatnonzero(is_comm)
    if idx.size == 0:
        return None
    names = ev.names[ev.name[idx]]
    kinds = [_kernel_kind(n, ev.collective_of(i), launch.comm_op[i]) for n, i in zip(names, idx)]
    return _comm_frame(ev, idx, names, kinds, win)


def _kernel_kind(name: str, collective: str | None, host_op: str | None) -> str:
    """Kind from the ``Collective name`` arg, else the kernel name, else the
    launching host collective op (e.g. SendRecv kernels under all_to_all)."""
    for text in (collective, name, host_op):
        kind = comm_kind(text)
        if kind != "other":
            return kind
    return "other"


def _comm_frame(ev: Events, idx: np.ndarray, names, kinds, win: pd.DataFrame) -> pd.DataFrame:
    """The comm table rows for the selected events."""
    pos = iv.window_index(win["start"].to_numpy(), win["end"].to_numpy(), ev.ts[idx])
    steps = win["step"].to_numpy(dtype=object)
    return pd.DataFrame({
        "name": names,
        "kind": kinds,
        "group": [ev.group_of(i) for i in idx],
        "elapse_us": ev.dur[idx],
        "start_us": ev.ts[idx],
        "step": pd.array([steps[p] if p >= 0 else pd.NA for p in pos], dtype="Int64"),
    })


def _with_rank(df: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    if df is None:
        return None
    df.insert(0, "rank", rank)
    return df


def _main_thread(ev: Events, win: pd.DataFrame, oplike: np.ndarray) -> int:
    """The training thread: the one with the step markers, else the one with
    the most op time."""
    if (win["thread"] >= 0).any():
        return int(win["thread"].mode().iloc[0])
    if not oplike.any():
        return -1
    per = pd.Series(ev.dur[oplike]).groupby(ev.thread[oplike]).sum()
    return int(per.idxmax())


def cpu_tables(ev: Events, rank: int) -> Tables:
    """CPU-only trace: host-side breakdown from the training thread's ops."""
    notes: list[str] = []
    win = _windows(ev, notes)
    host = ev.kind == HOST
    annotation = _name_mask(ev, ANNOTATION_RE)
    named_comm = host & _name_mask(ev, HOST_COMM_RE)
    oplike = host & (ev.cat_is("cpu_op") | (ev.cat_is("Operator") & ~annotation))
    main = _main_thread(ev, win, oplike)
    op_idx, nest = _nesting(ev, oplike)
    top = op_idx[nest.top_level()]
    cm_idx, cm_nest = _nesting(ev, named_comm)
    comm_top = cm_idx[cm_nest.top_level()]
    on_main = ev.thread[top] == main
    comm_all = iv.merge(ev.ts[comm_top], ev.end[comm_top])
    comm_main = _select(ev, named_comm & (ev.thread == main))
    data = _select(ev, host & _name_mask(ev, DATALOADER_RE))
    raw = iv.merge(ev.ts[top[on_main]], ev.end[top[on_main]])
    compute = iv.subtract(raw, iv.union(comm_main, data))
    parts = {
        "computing_us": compute,
        "communication_us": comm_all,
        "overlapped_us": iv.intersect(compute, comm_all),
        "_busy_cc_us": iv.union(compute, comm_all),
        "data_wait_us": data,
    }
    steps = _finish(_breakdown(win, parts))
    steps.insert(0, "rank", rank)
    ops = _cpu_ops(ev, top, named_comm)
    comm_df = None
    if comm_top.size:
        names = ev.names[ev.name[comm_top]]
        kinds = [_kernel_kind(n, ev.collective_of(i), None) for n, i in zip(names, comm_top)]
        comm_df = _comm_frame(ev, comm_top, names, kinds, win)
    return Tables("cpu", steps, _with_rank(ops, rank), _with_rank(comm_df, rank), notes)


def _cpu_ops(ev: Events, top: np.ndarray, named_comm: np.ndarray) -> pd.DataFrame | None:
    """Top-level host ops (every thread) aggregated per name and dtypes."""
    if top.size == 0:
        return None
    df = pd.DataFrame({
        "name": ev.names[ev.name[top]],
        "type": np.where(named_comm[top], "communication", "cpu_op"),
        "core": "CPU",
        "input_dtypes": _op_dtypes(ev, top),
        "dur": ev.dur[top],
    })
    return _aggregate(df)
