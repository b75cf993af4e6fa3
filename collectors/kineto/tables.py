"""Kineto events -> the normalized ``steps``, ``ops`` and ``comm`` tables.

The definitions are documented in :mod:`advisor.collectors.kineto.collector`; this
module implements them with numpy interval math (:mod:`kineto_intervals`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from advisor.collectors import kernel_sequences, vocab
from advisor.collectors.kineto import free_gaps, idle
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto import window as kw
from advisor.collectors.kineto.calls import DATALOADER_RE, SYNC_CALLS
from advisor.collectors.kineto.decode import HOST, KERNEL, MEMCPY, MEMSET, RUNTIME, Events
from advisor.collectors.kineto.host_calls import frames_holding, ranges_holding
from advisor.collectors.kineto.shaped_events import optimizer_steps

# At most 18 digits: every such id fits the int64 step column; a longer one
# is no profiler's step counter, and the span is not taken for a step.
STEP_RE = re.compile(r"^ProfilerStep#(\d{1,18})$")
# Device kernels that are collectives (NCCL/RCCL/MSCCL and the CamelCase
# collective names kernels carry); case-sensitive for the CamelCase tokens so
# compute kernels such as Eigen's ``TensorBroadcastingOp`` do not match.
COMM_KERNEL_RE = re.compile(
    r"(?i:nccl|rccl|msccl)|cross_device_reduce|"
    r"(?<![A-Za-z])(?:AllReduce|AllGather|ReduceScatter|Broadcast|SendRecv|AllToAll)(?![a-z])"
)
# Host ops that are collectives (gloo on CPU-only traces, c10d front ends).
HOST_COMM_RE = re.compile(r"^(?:c10d::|c10d_|gloo:|nccl:|record_param_comms$|ProcessGroup)")
#: PyTorch's dispatcher front end of a collective (``c10d::allreduce_``):
#: it enqueues the work on the process group's backend, whose own span
#: (``gloo:all_reduce`` on a worker thread) is where the collective runs.
FRONT_END_RE = re.compile(r"^c10d(?:::|_)")
# Host annotations that are not ops (2021 traces put them in "Operator").
ANNOTATION_RE = re.compile(r"^(?:ProfilerStep#|enumerate\(DataLoader\)#|## .* ##$)")
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
    warmup: pd.DataFrame | None = None  # the one-time work (kineto_window)
    idle_causes: pd.DataFrame | None = None
    host_calls: pd.DataFrame | None = None  # host events of known classes per step (kineto_host_calls)
    kernel_sequences: pd.DataFrame | None = None  # repeated kernel n-grams (collectors/kernel_sequences.py)
    annotations: pd.DataFrame | None = None  # time per record_function range and step (kineto_annotations)
    cp_edges: pd.DataFrame | None = None  # each step's dependency graph (kineto_critical_path)
    free_gaps: pd.DataFrame | None = None  # CPU-only: each step's free stretches by place (kineto/free_gaps.py)
    flops: pd.DataFrame | None = None  # matrix operators' FLOPs per step, from recorded shapes (kineto/work.py)
    op_trend: pd.DataFrame | None = None  # per-step time of the host ops that rise or stand out (kineto/op_trend.py)


def _steps(ev: Events) -> dict[str, np.ndarray] | None:
    """ProfilerStep#N spans (deduplicated by N, longest kept), by start;
    None without step markers. Rows are ordered as pandas' ``sort_values``
    would (by duration, longest first, then by start), ties included."""
    idx = np.flatnonzero(ev.named(STEP_RE) & (ev.kind == HOST))
    if idx.size == 0:
        return None
    step = np.array([int(STEP_RE.match(ev.names[c]).group(1)) for c in ev.name[idx]], dtype=np.int64)
    by_dur = _sort_order(ev.dur[idx], descending=True)
    _, first = np.unique(step[by_dur], return_index=True)
    kept = by_dur[np.sort(first)]
    rows = idx[kept[_sort_order(ev.ts[idx[kept]])]]
    return {"step": step[np.searchsorted(idx, rows)], "start": ev.ts[rows],
            "end": ev.end_at(rows), "thread": ev.thread[rows]}


def _sort_order(values: np.ndarray, descending: bool = False) -> np.ndarray:
    """The row order ``DataFrame.sort_values`` gives a NaN-free column
    (pandas' ``nargsort`` with quicksort: descending sorts the reversed
    column and reverses the result)."""
    if not descending:
        return values.argsort(kind="quicksort")
    rev = np.arange(values.size)[::-1]
    return rev[values[::-1].argsort(kind="quicksort")][::-1]


def _windows(ev: Events, notes: list[str]) -> pd.DataFrame:
    """Step windows (truncated ones clipped to the recorded span:
    :func:`kineto_window.clip`), or one whole-trace window (step NA) with a
    note."""
    steps = _steps(ev)
    if steps is not None:
        # Keep windows disjoint (a step never runs past the next one's start).
        nxt = np.r_[steps["start"][1:], np.inf]
        return kw.clip(pd.DataFrame({"step": pd.array(steps["step"], dtype="Int64"), "start": steps["start"],
                                     "end": np.minimum(steps["end"], nxt), "thread": steps["thread"]}), ev)
    cuts = _optimizer_step_ends(ev)
    if cuts is not None:
        ends, thread = cuts
        notes.append(f"no ProfilerStep#N step markers found: {ends.size} steps cut where the optimizer's step() "
                     "ends, the first from the start of the trace (prof.step() each iteration marks them)")
        return kw.clip(pd.DataFrame({"step": pd.array(np.arange(1, ends.size + 1), dtype="Int64"),
                                     "start": np.r_[float(ev.span[0]), ends[:-1]], "end": ends,
                                     "thread": thread}), ev)
    notes.append("no ProfilerStep#N step markers found: the whole trace is reported "
                 "as one window with step NA (use torch.profiler.profile with "
                 "schedule and call prof.step() each iteration)")
    return kw.clip(pd.DataFrame({
        "step": pd.array([pd.NA], dtype="Int64"),
        "start": [float(ev.span[0])],
        "end": [float(ev.span[1])],
        "thread": [-1],
    }), ev)


#: Fewest optimizer steps that make steps of a trace without step markers.
MIN_OPTIMIZER_STEPS = 2
#: Share of optimizer steps whose inner event count equals the one k steps
#: later for k to be the optimizers per iteration: the first iteration's
#: differ (each optimizer creates its state then), the others repeat.
PERIOD_MATCH = 0.75


def _optimizer_step_ends(ev: Events) -> tuple[np.ndarray, int] | None:
    """Where each iteration ends in a trace without step markers: the ends
    of the ``Optimizer.step#<class>.step`` annotations on the thread of the
    trace's last one, outermost ones only; with the thread. A loop with
    several optimizers (a GAN's) steps each once per iteration: where the
    number of events inside each step() repeats with a period of k > 1
    steps (``PERIOD_MATCH``), every k-th end closes an iteration. None
    with fewer than ``MIN_OPTIMIZER_STEPS`` iterations."""
    idx = optimizer_steps(ev)
    if idx.size < MIN_OPTIMIZER_STEPS:
        return None
    thread = ev.thread[idx[np.argmax(ev.end_at(idx))]]
    idx = idx[ev.thread[idx] == thread]
    idx = idx[np.argsort(ev.ts[idx], kind="stable")]
    starts, ends = ev.ts[idx], ev.end_at(idx)
    outer = np.r_[True, starts[1:] >= np.maximum.accumulate(ends)[:-1]]  # a wrapper's step() holds the same step
    starts, ends = starts[outer], ends[outer]
    host = np.sort(ev.ts[(ev.kind == HOST) & (ev.thread == thread)])
    inside = np.searchsorted(host, ends, side="left") - np.searchsorted(host, starts, side="right")
    k = next((k for k in range(1, inside.size // 2 + 1) if np.mean(inside[k:] == inside[:-k]) >= PERIOD_MATCH), 1)
    ends = ends[k - 1::k]
    if ends.size < MIN_OPTIMIZER_STEPS:
        return None
    return ends, int(thread)


def _select(ev: Events, mask: np.ndarray) -> iv.Intervals:
    """Merged intervals of the events selected by ``mask``."""
    return iv.merge(ev.ts[mask], ev.end_at(mask))


def _fetch_ops(ev: Events, fetches: np.ndarray, fetched: iv.Intervals, ops: np.ndarray) -> iv.Intervals:
    """Where host operators (mask ``ops``) run inside the DataLoader fetches
    (mask ``fetches``, merged into ``fetched``) on the fetching threads: a
    batch built in the training process (``num_workers=0``) records its
    transforms' and collate's operators there, while a fetch from worker
    processes only waits."""
    threads = np.unique(ev.thread[fetches])
    return iv.intersect(fetched, _select(ev, ops & np.isin(ev.thread, threads)))


def _breakdown(win: pd.DataFrame, parts: dict[str, iv.Intervals]) -> dict[str, np.ndarray]:
    """Per-window covered length of each interval set (steps columns)."""
    lo, hi = win["start"].to_numpy(), win["end"].to_numpy()
    out = {"step": win["step"].to_numpy(), "start_us": lo, "duration_us": hi - lo}
    for col, ivs in parts.items():
        out[col] = iv.covered_between(ivs, lo, hi)
    return out


def _nonneg(x: np.ndarray) -> np.ndarray:
    """``x`` with negative values set to 0 (as ``Series.clip(lower=0)``)."""
    return np.where(x < 0, 0.0, x)


def _finish(out: dict[str, np.ndarray], **more: np.ndarray) -> pd.DataFrame:
    """The steps frame: ``out`` plus exposed communication, free time and
    the ``more`` columns."""
    out["exposed_comm_us"] = _nonneg(out["communication_us"] - out["overlapped_us"])
    out["free_us"] = _nonneg(out["duration_us"] - out.pop("_busy_cc_us"))
    out.update(more)
    return pd.DataFrame(out)


def _nesting(ev: Events, mask: np.ndarray) -> tuple[np.ndarray, iv.Nesting]:
    """Indices of the selected host events and their call-stack nesting."""
    idx = np.flatnonzero(mask)
    return idx, iv.Nesting(ev.thread[idx], ev.ts[idx], ev.end_at(idx))


def _dtype_codes(ev: Events) -> tuple[np.ndarray, list[str]]:
    """For each ``input_type`` code (and -1, last): a code into the distinct
    normalized dtype strings (-1 when the op has no tensor inputs), and those
    strings; each input-type tuple is normalized once."""
    table: dict[str, int] = {}
    norm = (vocab.dtype_list(t) for t in ev.input_types)
    codes = [-1 if d is None else table.setdefault(d, len(table)) for d in norm]
    return np.array(codes + [-1], dtype=np.int64), list(table)


class _Codes:
    """Per-event values kept as codes into a small table (-1: None);
    indexing gives the values (an object array for an index array)."""

    def __init__(self, codes: np.ndarray, values):
        self.codes = codes
        self.values = np.array([*values, None], dtype=object)

    def __getitem__(self, i):
        return self.values[self.codes[i]]


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
    dev = ev.kind >= KERNEL
    kern = ev.kind == KERNEL
    is_comm = kern & ev.named(COMM_KERNEL_RE)
    compute = _select(ev, kern & ~is_comm)
    del kern
    comm = _select(ev, is_comm)
    steps, causes = _gpu_steps(ev, win, dev, compute, comm)
    launch = _launching_ops(ev)
    ops = _gpu_ops(ev, dev, is_comm, launch)
    comm_df = _gpu_comm(ev, is_comm, win, launch, iv.subtract(comm, compute))
    steps, warmup = _window_columns(ev, win, steps, rank, device=True)
    return Tables("gpu", steps, _with_rank(ops, rank), _with_rank(comm_df, rank), notes, warmup=warmup,
                  idle_causes=_with_rank(causes, rank), kernel_sequences=_sequences(ev, win, dev, is_comm, rank))


def _sequences(ev: Events, win: pd.DataFrame, dev: np.ndarray, is_comm: np.ndarray, rank: int) -> pd.DataFrame | None:
    """The ``kernel_sequences`` rows of the device events that start inside
    the step windows: compute kernels are the sequence's members;
    collective kernels, copies and memsets end a sequence."""
    lo, hi = float(win["start"].min()), float(win["end"].max())
    idx = np.flatnonzero(dev & (ev.ts >= lo) & (ev.ts < hi))
    fusable = (ev.kind[idx] == KERNEL) & ~is_comm[idx]
    return kernel_sequences.frequent_sequences(ev.name[idx], ev.names, ev.ts[idx], ev.dur[idx], fusable,
                                               len(win), rank)


def _window_columns(ev: Events, win: pd.DataFrame, steps: pd.DataFrame, rank: int,
                    device: bool) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``steps`` with the rank first and the measured-window columns of
    :mod:`kineto_window` last, and the ``warmup`` table (None when empty)."""
    cols, warmup = kw.columns(ev, win, device)
    steps = steps.assign(**cols)
    steps.insert(0, "rank", rank)
    return steps, _with_rank(warmup, rank) if len(warmup) else None


def host_only_tables(ev: Events, rank: int, device: str) -> Tables:
    """A trace whose device work was not recorded (``device`` is what the
    trace shows it ran on): the host-side step windows only -- duration,
    DataLoader wait, truncation, start-up --; no breakdown, operators or
    collectives, which would describe the host's calls, not the device."""
    notes: list[str] = []
    win = _windows(ev, notes)
    data = _select(ev, (ev.kind == HOST) & ev.named(DATALOADER_RE))
    steps = pd.DataFrame(_breakdown(win, {"data_wait_us": data}))
    steps, warmup = _window_columns(ev, win, steps, rank, device=False)
    return Tables(device, steps, None, None, notes, warmup)


def _gpu_steps(ev: Events, win: pd.DataFrame, dev: np.ndarray, compute: iv.Intervals,
               comm: iv.Intervals) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The steps table of a GPU trace (its interval sets are freed on
    return), and the ``idle_causes`` rows (:mod:`kineto_idle`)."""
    busy = _select(ev, dev)
    sync = (ev.kind == RUNTIME) & np.isin(ev.names, list(SYNC_CALLS))[ev.name]
    fetches = (ev.kind == HOST) & ev.named(DATALOADER_RE)
    fetched = _select(ev, fetches)
    parts = {
        "device_busy_us": busy,
        "computing_us": compute,
        "communication_us": comm,
        "overlapped_us": iv.intersect(compute, comm),
        "_busy_cc_us": iv.union(compute, comm),
        "data_wait_us": fetched,
        "data_ops_us": _fetch_ops(ev, fetches, fetched, ev.host_ops()),
        "kernel_gap_us": kernel_gaps(busy),
        "sync_wait_us": _select(ev, sync),
    }
    causes, names = idle.attribute(ev, win, busy, parts["_busy_cc_us"])
    out = _breakdown(win, parts)
    idle_us = _nonneg(out["duration_us"] - out["device_busy_us"])
    return _finish(out, host_wait_us=_nonneg(idle_us - out["kernel_gap_us"]), **causes), names


@dataclass
class _Launch:
    """For device events: the host op that launched them (via correlation)."""

    dtypes: _Codes  # per event, normalized input dtypes or None when unknown
    comm_op: _Codes  # per event, name of the enclosing collective host op or None
    comm_msg: _Codes  # per event, message bytes of the nearest enclosing host op that records them


#: Runtime calls matched to their host ops per block (bounds temporaries).
LAUNCH_BLOCK = 1 << 18


def _launching_ops(ev: Events) -> _Launch:
    """Map each device event to its launching runtime call (same correlation
    id, first such call) and that call to the innermost enclosing host op on
    its thread; read the op's input dtypes (climbing to the nearest ancestor
    that has them), the nearest enclosing collective op name and the
    message size of the nearest enclosing op that records one
    (``nccl:all_reduce`` with its ``Input Dims``, ``record_param_comms``)."""
    dt_of, dt_values = _dtype_codes(ev)
    dtypes = np.full(len(ev), -1, dtype=np.int32)
    comm_op = np.full(len(ev), -1, dtype=np.int32)
    comm_msg = np.full(len(ev), -1, dtype=np.int32)
    rt = np.flatnonzero((ev.kind == RUNTIME) & np.isfinite(ev.corr))
    dev = np.flatnonzero((ev.kind >= KERNEL) & np.isfinite(ev.corr))
    if rt.size == 0 or dev.size == 0:
        return _Launch(_Codes(dtypes, dt_values), _Codes(comm_op, ev.names), _Codes(comm_msg, ev.msgs))
    rt_dt, rt_cm, rt_msg = _runtime_ops(ev, rt, dt_of)
    ids, first = np.unique(ev.corr[rt], return_index=True)
    del rt
    pos = np.clip(np.searchsorted(ids, ev.corr[dev]), 0, ids.size - 1)
    hit = ids[pos] == ev.corr[dev]
    dtypes[dev[hit]] = rt_dt[first[pos[hit]]]
    comm_op[dev[hit]] = rt_cm[first[pos[hit]]]
    comm_msg[dev[hit]] = rt_msg[first[pos[hit]]]
    return _Launch(_Codes(dtypes, dt_values), _Codes(comm_op, ev.names), _Codes(comm_msg, ev.msgs))


def _runtime_ops(ev: Events, rt: np.ndarray, dt_of: np.ndarray) -> tuple[np.ndarray, ...]:
    """For the runtime calls ``rt``: the dtype code of the nearest enclosing
    host op that has tensor inputs, the name code of the nearest enclosing
    collective host op and the message-size code of the nearest enclosing
    host op that records one (-1: none), in blocks of LAUNCH_BLOCK."""
    host_idx, nest = _nesting(ev, ev.kind == HOST)
    op_dt = dt_of[ev.input_type[host_idx]]
    has_dt = op_dt >= 0
    is_comm_op = ev.named(HOST_COMM_RE)[host_idx]
    op_name = ev.name[host_idx]
    op_msg = ev.msg[host_idx]
    has_msg = op_msg >= 0
    rt_dt = np.full(rt.size, -1, dtype=np.int32)
    rt_cm = np.full(rt.size, -1, dtype=np.int32)
    rt_msg = np.full(rt.size, -1, dtype=np.int32)
    for lo in range(0, rt.size if host_idx.size else 0, LAUNCH_BLOCK):
        r = rt[lo:lo + LAUNCH_BLOCK]
        encl = nest.enclosing(ev.thread[r], ev.ts[r], ev.end_at(r))
        dt_at = nest.climb(encl, has_dt)
        cm_at = nest.climb(encl, is_comm_op)
        rt_dt[lo:lo + r.size] = np.where(dt_at >= 0, op_dt[np.clip(dt_at, 0, None)], -1)
        rt_cm[lo:lo + r.size] = np.where(cm_at >= 0, op_name[np.clip(cm_at, 0, None)], -1)
        if has_msg.any():
            msg_at = nest.climb(encl, has_msg)
            rt_msg[lo:lo + r.size] = np.where(msg_at >= 0, op_msg[np.clip(msg_at, 0, None)], -1)
    return rt_dt, rt_cm, rt_msg


def _gpu_ops(ev: Events, dev: np.ndarray, is_comm: np.ndarray, launch: _Launch) -> pd.DataFrame | None:
    """Device events aggregated per (name, type, input dtypes)."""
    idx = np.flatnonzero(dev)
    if idx.size == 0:
        return None
    kind = ev.kind[idx]
    types = ["memset", "communication", "compute"]
    typ = np.where(kind == MEMSET, 0, np.where(is_comm[idx], 1, 2)).astype(np.int8)
    copies = np.flatnonzero(kind == MEMCPY)
    if copies.size:
        codes, inverse = np.unique(ev.name[idx[copies]], return_inverse=True)
        copy_types = [memcpy_type(ev.names[c]) for c in codes]
        types += sorted(set(copy_types))
        typ[copies] = np.array([types.index(t) for t in copy_types])[inverse]
    keys = {"name": (ev.name[idx], ev.names), "type": (typ, types),
            "input_dtypes": (launch.dtypes.codes[idx], launch.dtypes.values[:-1])}
    return _aggregate(keys, "GPU", ev.dur[idx], ev.dur[idx] < SHORT_KERNEL_US)


def _aggregate(keys: dict, core: str, dur: np.ndarray, short: np.ndarray | None = None) -> pd.DataFrame:
    """count/total/max/min of ``dur`` per op key, by total time; drop an
    all-null dtype column. ``keys`` maps the key columns (name, type,
    input_dtypes) to (per-event codes, values; code -1 is None). Groups are
    formed on one combined integer key, in order of first appearance;
    strings are only built for the result rows."""
    key, radix = _combined_key([codes for codes, _ in keys.values()])
    groups = pd.Series(dur).groupby(key, sort=False)
    total = groups.sum()
    order = _sort_order(total.to_numpy(), descending=True)
    codes = _split_key(total.index.to_numpy()[order], radix)
    cols = {k: np.array([*values, None], dtype=object)[c] for (k, (_, values)), c in zip(keys.items(), codes)}
    out = {"name": cols["name"], "type": cols["type"], "core": core}
    if any(d is not None for d in cols["input_dtypes"]):
        out["input_dtypes"] = pd.Series(cols["input_dtypes"], dtype=object)
    out.update(count=groups.size().to_numpy(np.int64)[order], total_us=total.to_numpy()[order],
               max_us=groups.max().to_numpy()[order], min_us=groups.min().to_numpy()[order])
    if short is not None:
        out["short_count"] = pd.Series(short).groupby(key, sort=False).sum().to_numpy(np.int64)[order]
    return pd.DataFrame(out)


def _combined_key(codes: list[np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """One int64 key per row for several integer code columns (codes >= -1),
    and the radix of each column."""
    key = np.zeros(codes[0].size, dtype=np.int64)
    radix = []
    for c in codes:
        radix.append(int(c.max(initial=-1)) + 2)
        key *= radix[-1]
        key += c
        key += 1
    return key, radix


def _split_key(key: np.ndarray, radix: list[int]) -> list[np.ndarray]:
    """The code columns of :func:`_combined_key` back from the keys."""
    out = []
    for r in reversed(radix):
        key, c = np.divmod(key, r)
        out.append(c - 1)
    return out[::-1]


def _gpu_comm(ev: Events, is_comm: np.ndarray, win: pd.DataFrame, launch: _Launch,
              exposed: iv.Intervals) -> pd.DataFrame | None:
    """One row per collective kernel; ``exposed`` is the communication time
    not overlapped by compute (see :func:`_comm_frame`). The message size is
    the kernel's own (``In msg nelems`` x ``dtype`` args), else that of the
    nearest host op around its launch that records one."""
    idx = np.flatnonzero(is_comm)
    if idx.size == 0:
        return None
    names = ev.names[ev.name[idx]]
    kinds = [_kernel_kind(n, ev.collective_of(i), launch.comm_op[i]) for n, i in zip(names, idx)]
    size = ev.msg_bytes(idx)
    unknown = np.isnan(size)
    if unknown.any():
        size[unknown] = np.array([*ev.msgs, np.nan], dtype=np.float64)[launch.comm_msg.codes[idx[unknown]]]
    return _comm_frame(ev, idx, names, kinds, win, exposed, size)


def _kernel_kind(name: str, collective: str | None, host_op: str | None) -> str:
    """Kind from the ``Collective name`` arg, else the kernel name, else the
    launching host collective op (e.g. SendRecv kernels under all_to_all:
    ``vocab.more_specific``)."""
    return vocab.more_specific(collective, name, host_op)


#: Bytes per MB in ``comm.size_mb`` (10^6, as the other collectors' sizes).
BYTES_PER_MB = 1e6


def _comm_frame(ev: Events, idx: np.ndarray, names, kinds, win: pd.DataFrame,
                exposed: iv.Intervals, size: np.ndarray,
                blocked_end: np.ndarray | None = None) -> pd.DataFrame:
    """The comm table rows for the selected events.

    * ``exposed_us``: the time within each collective's span that is in
      ``exposed`` (the rank's communication time not overlapped by
      compute); collectives in flight at once each count the time they
      share.
    * ``exposed_share_us``: the collective's part of the exposed time, so
      that the rows of a step add up to its ``exposed_comm_us`` (a row
      counts in the step where it starts): exposed time that several
      collectives share is split evenly among them. On CPU-only traces
      ``blocked_end`` (per row, NaN for none) extends a collective call on
      the training thread to the end of the time that thread stays blocked
      in it (:func:`_blocked_until`); exposed time in such a window is that
      call's alone.
    * ``size_mb``: the message size (``size``, bytes; NaN when unknown).
    * ``front_end``: 1 for a c10d front end (``FRONT_END_RE``) of a rank
      whose trace has the backend ops too (other rows): those stand for
      the collectives; else 0.
    * ``kind``: ``kinds``, a backend row's the one its front end asked for
      where the backend ran it as another (:func:`_asked_kinds`).
    """
    start, end = ev.ts[idx], np.maximum(ev.end_at(idx), ev.ts[idx])
    front = np.fromiter((bool(FRONT_END_RE.search(n)) for n in names), dtype=bool, count=len(idx))
    kinds = _asked_kinds(kinds, front, start)
    pos = iv.window_index(win["start"].to_numpy(), win["end"].to_numpy(), start)
    steps = win["step"].to_numpy(dtype=object)
    return pd.DataFrame({
        "name": names,
        "kind": kinds,
        "group": [ev.group_of(i) for i in idx],
        "elapse_us": ev.dur[idx],
        "start_us": start,
        "step": pd.array([steps[p] if p >= 0 else pd.NA for p in pos], dtype="Int64"),
        "exposed_us": iv.covered_between(exposed, start, end),
        "exposed_share_us": _exposed_shares(start, end, exposed, blocked_end),
        "size_mb": size / BYTES_PER_MB,
        "front_end": (front & (~front).any()).astype(np.int64),
    })


#: (front end's kind, backend's kind) of a collective a backend runs as
#: another: gloo has no reduce-scatter and runs ``c10d::_reduce_scatter_base_``
#: (FSDP's gradient scatter) as an all-reduce (``gloo:all_reduce``).
_EMULATED = frozenset({(vocab.REDUCESCATTER, vocab.ALLREDUCE)})


def _asked_kinds(kinds: list, front: np.ndarray, start: np.ndarray) -> list:
    """``kinds`` with each backend row given the kind its c10d front end
    asked for where the backend ran it as another (``_EMULATED``). Front
    ends and backend rows are paired in order of their start, and only when
    they are as many and every pair is of one kind or an ``_EMULATED`` pair:
    otherwise (several process groups interleaving, rows missing) nothing
    is changed."""
    fronts, backs = np.flatnonzero(front), np.flatnonzero(~front)
    if fronts.size != backs.size:
        return kinds
    fronts, backs = fronts[np.argsort(start[fronts], kind="stable")], backs[np.argsort(start[backs], kind="stable")]
    pairs = [(kinds[f], kinds[b]) for f, b in zip(fronts, backs)]
    if not any(pair in _EMULATED for pair in pairs) or any(a != b and (a, b) not in _EMULATED for a, b in pairs):
        return kinds
    out = list(kinds)
    for (asked, _), b in zip(pairs, backs):
        out[b] = asked
    return out


def _exposed_shares(start: np.ndarray, end: np.ndarray, exposed: iv.Intervals,
                    blocked_end: np.ndarray | None) -> np.ndarray:
    """``exposed_share_us`` of :func:`_comm_frame`: exposed time inside the
    blocked windows ``[start, blocked_end]`` split among those windows, the
    rest among the collectives' spans."""
    if blocked_end is None or not np.isfinite(blocked_end).any():
        return iv.split_evenly(start, end, exposed)
    held = np.isfinite(blocked_end)
    window_end = np.where(held, np.fmax(blocked_end, end), end)
    windows = iv.merge(start[held], window_end[held])
    share = np.zeros(start.size)
    share[held] = iv.split_evenly(start[held], window_end[held], iv.intersect(exposed, windows))
    share[~held] = iv.split_evenly(start[~held], end[~held], iv.subtract(exposed, windows))
    return share


def _with_rank(df: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    if df is None:
        return None
    df.insert(0, "rank", rank)
    return df


def _main_thread(ev: Events, win: pd.DataFrame, oplike: np.ndarray) -> int:
    """The training thread: the one with the step markers, else the one with
    the most op time (``ev.op_time`` sums every host op of the trace)."""
    if (win["thread"] >= 0).any():
        return int(win["thread"].mode().iloc[0])
    if not oplike.any() or not np.isfinite(ev.op_time).any():
        return -1
    return int(np.argmax(ev.op_time))


def cpu_tables(ev: Events, rank: int) -> Tables:
    """CPU-only trace: host-side breakdown from the training thread's ops."""
    notes: list[str] = []
    win = _windows(ev, notes)
    host = ev.kind == HOST
    named_comm = host & ev.named(HOST_COMM_RE)
    oplike = ev.host_ops()
    main = _main_thread(ev, win, oplike)
    op_idx, nest = _nesting(ev, oplike)
    top = op_idx[nest.top_level()]
    comm_top = _outermost_comm(ev, named_comm)
    on_main = ev.thread[top] == main
    kinds = [_kernel_kind(n, ev.collective_of(i), None) for n, i in zip(ev.names[ev.name[comm_top]], comm_top)]
    blocked_end = _blocked_until(ev, comm_top, kinds, top[on_main], main)
    held = np.isfinite(blocked_end)
    blocked = iv.merge(ev.ts[comm_top[held]], blocked_end[held])
    comm_all = iv.union(iv.merge(ev.ts[comm_top], ev.end_at(comm_top)), blocked)
    comm_main = iv.union(_select(ev, named_comm & (ev.thread == main)), blocked)
    fetches = host & ev.named(DATALOADER_RE)
    data_idx = np.flatnonzero(fetches)
    data = iv.merge(ev.ts[data_idx], ev.end_at(data_idx))
    raw = iv.merge(ev.ts[top[on_main]], ev.end_at(top[on_main]))
    compute = iv.subtract(raw, iv.union(comm_main, data))
    parts = {
        "computing_us": compute,
        "communication_us": comm_all,
        "overlapped_us": iv.intersect(compute, comm_all),
        "_busy_cc_us": iv.union(compute, comm_all),
        "data_wait_us": data,
        "data_ops_us": _fetch_ops(ev, fetches, data, oplike),
    }
    steps, warmup = _window_columns(ev, win, _finish(_breakdown(win, parts)), rank, device=False)
    ops = _cpu_ops(ev, top, named_comm)
    comm_df = None
    if comm_top.size:
        comm_df = _comm_frame(ev, comm_top, ev.names[ev.name[comm_top]], kinds, win,
                              iv.subtract(comm_all, compute), ev.msg_bytes(comm_top), blocked_end)
    spans = np.r_[top[on_main], comm_top, comm_top[held], data_idx]
    waited = np.r_[np.zeros(on_main.sum(), bool), ev.thread[comm_top] != main, np.ones(held.sum(), bool),
                   np.zeros(data_idx.size, bool)]
    gaps = free_gaps.table(ev.ts[spans], np.r_[ev.end_at(np.r_[top[on_main], comm_top]), blocked_end[held],
                                               ev.end_at(data_idx)], ev.names[ev.name[spans]], waited, steps, rank,
                           lambda lo, hi: frames_holding(ev, main, lo, hi),
                           lambda lo, hi: ranges_holding(ev, main, lo, hi))
    return Tables("cpu", steps, _with_rank(ops, rank), _with_rank(comm_df, rank), notes, warmup, free_gaps=gaps)


def _outermost_comm(ev: Events, named_comm: np.ndarray) -> np.ndarray:
    """The collective host events no other one of their thread contains:
    the top-level ones, and those that start inside another but end after
    it. gloo runs a point-to-point receive as ``c10d::recv_``, which
    returns in microseconds, and ``gloo:recv``, which starts inside it and
    lasts until the message arrives: nested, the wait would be lost."""
    idx, nest = _nesting(ev, named_comm)
    end = ev.end_at(idx)
    parent = nest.parent
    escapes = (parent >= 0) & (end > end[np.clip(parent, 0, None)])
    return idx[nest.top_level() | escapes]


def _blocked_until(ev: Events, comm_top: np.ndarray, kinds: list[str], main_top: np.ndarray,
                   main: int) -> np.ndarray:
    """For each outermost collective host op (``comm_top``), when the
    training thread stays blocked in it after it returns, the end of that
    wait; NaN otherwise.

    A synchronous collective issued inside another op (``_AllGather``,
    ``_AlltoAllSingle`` and their backward of ``torch.distributed.nn``)
    enqueues the work in its front-end call (``c10d::alltoall_base_``) and
    then waits, still inside that op, for the backend to finish it on a
    worker thread (``gloo:all_to_all``). That wait is communication, not
    the op's compute: it runs from the front end's end while a backend op
    of the same kind is queued or in flight, to the end of the last such
    backend op that starts before the enclosing top-level op ends (at most
    that op's end). A front end that is itself top-level, or issued
    asynchronously (DDP's bucket all-reduce from an autograd hook, whose op
    returns at once), gets no or only a short window."""
    out = np.full(comm_top.size, np.nan)
    front = np.flatnonzero(ev.thread[comm_top] == main)
    if front.size == 0 or main_top.size == 0:
        return out
    order = np.argsort(ev.ts[main_top], kind="stable")
    ops = main_top[order]
    f = comm_top[front]
    at = np.searchsorted(ev.ts[ops], ev.ts[f], side="right") - 1
    op = ops[np.clip(at, 0, None)]
    inside = (at >= 0) & (op != f) & (ev.end_at(op) >= ev.end_at(f))
    kind = np.asarray(kinds, dtype=object)
    backend = ev.thread[comm_top] != main
    for k in set(kind[front[inside]]):
        runs = iv.merge(ev.ts[comm_top[backend & (kind == k)]], ev.end_at(comm_top[backend & (kind == k)]))
        if runs[0].size == 0:
            continue
        sel = np.flatnonzero(inside & (kind[front] == k))
        stop = ev.end_at(op[sel])
        last = np.searchsorted(runs[0], stop, side="left") - 1
        reach = np.where(last >= 0, np.minimum(runs[1][np.clip(last, 0, None)], stop), -np.inf)
        done = ev.end_at(f[sel])
        out[front[sel]] = np.where(reach > done, reach, np.nan)
    return out


def _cpu_ops(ev: Events, top: np.ndarray, named_comm: np.ndarray) -> pd.DataFrame | None:
    """Top-level host ops (every thread) aggregated per name and dtypes."""
    if top.size == 0:
        return None
    dt_of, dt_values = _dtype_codes(ev)
    keys = {"name": (ev.name[top], ev.names),
            "type": (np.where(named_comm[top], 0, 1), ["communication", "cpu_op"]),
            "input_dtypes": (dt_of[ev.input_type[top]], dt_values)}
    return _aggregate(keys, "CPU", ev.dur[top])
