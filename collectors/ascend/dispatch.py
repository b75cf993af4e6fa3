"""Ascend ``trace_view.json`` -> how fast the host dispatches operators
against how fast the device runs them, per ``ProfilerStep#N``: steps columns
``kernel_gap_us``, ``launch_queue_us``, ``launch_interval_us`` and
``kernel_median_us``.

torch_npu writes the device's tasks as X events of the "Ascend Hardware"
process and links each to the host call that launched it by a flow: a
``HostToDevice`` start (``"ph": "s"``) inside the CANN runtime call on the
launching thread (the task queue's dequeue thread when
``TASK_QUEUE_ENABLE`` is 1 or 2, the Python thread when it is 0) and its
finish (``"ph": "f"``) at the task's start, with the same ``id``; an
``async_npu`` flow links the framework op (``aclnn*`` on the Python
process) to the task the same way. The columns, per step (tasks that
start in it):

``kernel_gap_us``
    device idle in gaps of at most ``KERNEL_GAP_US`` between consecutive
    tasks (as for Kineto traces: launch gaps), the collectives of the HCCL
    lanes counting as busy;
``launch_queue_us``
    median over the tasks of task start minus the start of the framework
    op that launched it (``async_npu`` flow; ``HostToDevice`` where the
    trace has no other): how far ahead of the device the host runs;
``launch_interval_us``
    median time between consecutive launches (``HostToDevice`` flow
    starts, by time; ``async_npu`` where the trace has no other): the host
    time per launched task, what one operator's dispatch costs;
``kernel_median_us``
    median task duration.

Without either flow only ``kernel_gap_us`` and ``kernel_median_us`` are
filled. As msprof-analyze's timeline reader, the
file may be a bare JSON array or ``{"traceEvents": [...]}`` with string
``ts``/``dur``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.ascend.trace_view import (_STEP_NAME, DEVICE_PROCESS, HCCL_PROCESSES, Trace, process_pids,
                                                  step_spans)
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.tables import kernel_gaps

#: Flow categories linking a host launch to its device task: for the launch
#: rate, the runtime's launches first (the rate tasks reach the device); for
#: the queue, the framework op first (how far the Python thread runs ahead;
#: the runtime's flow starts can read later than their task's start, the
#: host and device clocks being aligned only to a few microseconds).
INTERVAL_FLOWS = ("HostToDevice", "async_npu")
QUEUE_FLOWS = ("async_npu", "HostToDevice")
COLUMNS = ("kernel_gap_us", "launch_queue_us", "launch_interval_us", "kernel_median_us")


def _num(values: list) -> np.ndarray:
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)


def read(trace: Trace, rank: int) -> pd.DataFrame | None:
    """Per step of one decoded ``trace_view.json`` (``trace_view.decode_trace``):
    ``rank``, ``step`` and :data:`COLUMNS` (None without step markers or device tasks)."""
    events = trace.events
    device = {str(pid) for pid in process_pids(events, (DEVICE_PROCESS,))}
    collective = {str(pid) for pid in process_pids(events, HCCL_PROCESSES)}
    tasks, other = [], []
    flows: dict[str, dict[str, dict]] = {c: {"s": {}, "f": {}} for c in INTERVAL_FLOWS}
    for e in events:
        if e.ph == "X":
            if _STEP_NAME.match(e.name):
                continue  # a step marker (``trace.markers``)
            if str(e.pid) in device:
                tasks.append((e.ts, e.dur))
            elif str(e.pid) in collective:
                other.append((e.ts, e.dur))
        elif e.ph in ("s", "f") and e.cat in flows and e.id is not None:
            flows[e.cat][e.ph][str(e.id)] = e.ts
    if not trace.markers or not tasks:
        return None
    win = step_spans(trace.markers)
    t_start, t_dur = _num([t[0] for t in tasks]), _num([t[1] for t in tasks])
    ok = np.isfinite(t_start) & np.isfinite(t_dur)
    t_start, t_dur = t_start[ok], np.maximum(t_dur[ok], 0.0)
    o_start, o_dur = _num([t[0] for t in other]), _num([t[1] for t in other])
    o_ok = np.isfinite(o_start) & np.isfinite(o_dur)
    o_start, o_dur = o_start[o_ok], np.maximum(o_dur[o_ok], 0.0)
    busy = iv.merge(np.r_[t_start, o_start], np.r_[t_start + t_dur, o_start + o_dur])
    gaps = kernel_gaps(busy)
    launch, _ = _launches(flows, INTERVAL_FLOWS)
    _, queue = _launches(flows, QUEUE_FLOWS)
    rows = []
    for step, lo, dur in win.itertuples(index=False):
        hi = lo + dur
        mine = (t_start >= lo) & (t_start < hi)
        row = {"step": step, "kernel_gap_us": float(iv.covered_between(gaps, np.array([lo]), np.array([hi]))[0]),
               "kernel_median_us": float(np.median(t_dur[mine])) if mine.any() else np.nan,
               "launch_queue_us": np.nan, "launch_interval_us": np.nan}
        in_step = (queue[1] >= lo) & (queue[1] < hi)
        if in_step.any():
            row["launch_queue_us"] = float(np.median(queue[1][in_step] - queue[0][in_step]))
        if launch is not None:
            starts = launch[(launch >= lo) & (launch < hi)]
            if starts.size >= 2:
                row["launch_interval_us"] = float(np.median(np.diff(starts)))
        rows.append(row)
    out = pd.DataFrame(rows)
    out["step"] = out["step"].astype("Int64")
    out.insert(0, "rank", rank)
    return out


def _launches(flows: dict, order: tuple[str, ...]) -> tuple[np.ndarray | None, tuple[np.ndarray, np.ndarray]]:
    """(sorted launch times, (flow start, task start) of linked pairs) of the
    first flow category in ``order`` that links any; (None, empty) when none
    does."""
    for cat in order:
        s, f = flows[cat]["s"], flows[cat]["f"]
        ids = [i for i in s if i in f]
        if ids:
            starts = _num([s[i] for i in ids])
            ends = _num([f[i] for i in ids])
            ok = np.isfinite(starts) & np.isfinite(ends)
            return np.sort(starts[ok]), (starts[ok], ends[ok])
    return None, (np.empty(0), np.empty(0))
