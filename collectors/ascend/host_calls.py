"""Ascend ``trace_view.json`` -> the ``host_calls`` table (torch_npu).

torch_npu writes the host side of a run into the same Chrome trace as the
device lanes: framework ops (``aten::*``, ``Optimizer.step#AdamW.step``,
``SyncBatchNorm``) on the Python process, the ACL calls of the CANN layer
named ``AscendCL@<function>`` (``AscendCL@aclrtSynchronizeStream``), and,
when GC detection is on (``_ExperimentalConfig(gc_detect_threshold=...)``),
each collection as an ``X`` event of category ``GC`` (name ``GC``) on a
``Python GC`` process -- what msprof-analyze's ``GcCollector`` reads
(``cat.lower() == "gc"``). Events are classed by
``calls.host_call_class`` (GC events by their category) and counted per
``ProfilerStep#N`` span, as the Kineto collector does. Stretches of a step
with no event on the Python and CANN processes are ``silent_gap`` rows, as
for Kineto traces (msprof-analyze conjectures garbage collections from such
stretches of device-free time, its ``conjectured_gc`` checker).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.ascend.trace_view import _STEP_NAME, DEVICE_PROCESS, Trace, _num, process_pids, step_spans
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import BACKWARD_WORK, host_call_class
from advisor.collectors.kineto.host_calls import nested_classes, step_of
from advisor.collectors.kineto.host_gaps import silent_rows
from advisor.collectors.kineto.op_chains import FRAMEWORK_OP, has_key_ops, match, short_name
from advisor.collectors.kineto.op_chains import rows as chain_table
from advisor.collectors.kineto.shaped_events import CLOSURE_NOTE, update_starts


#: Prefix of the CANN layer's host calls (``AscendCL@aclrtSynchronizeStream``).
ACL_PREFIX = "AscendCL@"
#: The flow that links a framework op's ``aclnn*`` launch on the Python
#: process to the task it launched.
LAUNCH_FLOW = "async_npu"


def _cut_closures(df: pd.DataFrame) -> bool:
    """The optimizer steps of ``df`` cut to their own update where they ran
    a closure (``shaped_events.update_starts``), in place; True when one was."""
    opt, back = (df["cls"] == "optimizer").to_numpy(), df["cls"].isin(BACKWARD_WORK).to_numpy()
    if not opt.any() or not back.any():
        return False
    ts, end = df["ts"].to_numpy(float), (df["ts"] + df["dur"]).to_numpy(float)
    starts = update_starts(ts[opt], end[opt], ts[back], end[back])
    cut = bool((starts > ts[opt]).any())
    df.loc[opt, "ts"], df.loc[opt, "dur"] = starts, end[opt] - starts
    return cut


def read(trace: Trace, rank: int, notes: list[str] | None = None) -> pd.DataFrame | None:
    """The ``host_calls`` rows of one decoded ``trace_view.json``
    (``trace_view.decode_trace``); None when it has none. ``notes``: where
    the run note of optimizer steps cut to their update goes."""
    classes: dict[str, str | None] = {}
    rows, spans, ops = [], [], []
    host_pids: set = set()
    for ev in trace.events:
        if ev.ph != "X":
            continue
        if _STEP_NAME.match(ev.name):  # a step marker (``trace.markers``): its process is the host's
            host_pids.add(ev.pid)
            continue
        if isinstance(ev.cat, str) and ev.cat.lower() == "gc":
            cls = "gc"
        else:
            if ev.name not in classes:
                classes[ev.name] = host_call_class(ev.name)
            cls = classes[ev.name]
            spans.append((ev.pid, _num(ev.ts), _num(ev.dur)))
            if ev.name.startswith(ACL_PREFIX):
                host_pids.add(ev.pid)
            elif ev.cat == "cpu_op" and FRAMEWORK_OP in ev.name:
                ops.append(ev)
        if cls is not None:
            rows.append((cls, ev.name, _num(ev.ts), _num(ev.dur), f"{ev.pid}/{ev.tid}"))
    others = [t for t in (_silent_gaps(spans, host_pids, trace.markers, rank), op_chain_rows(trace, ops, rank))
              if t is not None]
    others = pd.concat(others, ignore_index=True) if others else None
    if not rows:
        return others
    df = pd.DataFrame(rows, columns=["cls", "name", "ts", "dur", "thread"]).dropna()
    if _cut_closures(df) and notes is not None:
        notes.append(CLOSURE_NOTE)
    ts, dur = df["ts"].to_numpy(float), df["dur"].to_numpy(float)
    df["cls"] = nested_classes(df["cls"].to_numpy(object), df["name"].to_numpy(object), ts, ts + dur,
                               df["thread"].to_numpy(object))
    df = df[df["cls"] != ""]
    if df.empty:
        return others
    df["step"] = _steps_of(df["ts"].to_numpy(), trace.markers)
    out = (df.groupby(["step", "cls", "name"], dropna=False, sort=True)["dur"]
           .agg(count="size", total_us="sum", max_us="max").reset_index())
    out["step"] = out["step"].astype("Int64")
    out["count"] = out["count"].astype(np.int64)
    out.insert(0, "rank", rank)
    return out if others is None else pd.concat([out, others], ignore_index=True)


def _silent_gaps(spans: list[tuple], host_pids: set, markers: list[tuple], rank: int) -> pd.DataFrame | None:
    """The ``silent_gap`` rows (``collectors/kineto/host_gaps.py``): the host's
    activity is every X event but the step markers and GC records on the
    Python process (the one holding the ``ProfilerStep#N`` markers) and the
    CANN process (the one holding ``AscendCL@`` calls)."""
    if not markers:
        return None
    host = [(ts, dur) for pid, ts, dur in spans if pid in host_pids]
    starts = np.array([t for t, _ in host], dtype=float)
    durs = np.array([d for _, d in host], dtype=float)
    return silent_rows(iv.merge(starts, starts + np.nan_to_num(durs)), step_spans(markers), rank)


def _steps_of(ts: np.ndarray, markers: list[tuple]) -> pd.array:
    """The ``ProfilerStep#N`` span each start falls in (NA outside all)."""
    marks = pd.DataFrame(markers, columns=["step", "ts", "dur"], dtype=float).dropna()
    start = marks["ts"].to_numpy(float)
    return step_of(ts, start, start + marks["dur"].to_numpy(float), marks["step"].to_numpy())


def op_chain_rows(trace: Trace, ops: list, rank: int) -> pd.DataFrame | None:
    """The ``op_chain`` and ``op_chain_floor`` rows (``kineto.op_chains``)
    of one ``trace_view.json``: the chains among its framework ops ``ops``
    (the ``cpu_op`` events with a namespace, ``op_chains.FRAMEWORK_OP``) in
    each thread's order, each op's device time the tasks its launches
    started (``op_device_time``); None without a chain."""
    names = np.array([short_name(e.name) for e in ops], dtype=object)
    if not ops or not has_key_ops(set(names)):
        return None
    thread = pd.factorize(np.array([f"{e.pid}/{e.tid}" for e in ops], dtype=object))[0]
    start, dur = (np.array([_num(getattr(e, k)) for e in ops]) for k in ("ts", "dur"))
    ok = np.isfinite(start) & np.isfinite(dur)
    chains = match(names[ok], thread[ok], start[ok], start[ok] + dur[ok])
    if not chains:
        return None
    start, dur, thread = start[ok], dur[ok], thread[ok]
    device = op_device_time(trace, [e for e, good in zip(ops, ok) if good], thread, start, start + dur)
    return chain_table(chains, start, dur, device, lambda ts: _steps_of(ts, trace.markers), rank)


def op_device_time(trace: Trace, ops: list, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per op of ``ops`` (``cpu_op`` events, with their thread codes, starts
    and ends): the summed duration of the device tasks launched inside it
    -- an ``async_npu`` flow starting within it on its thread, finishing
    where a task of the "Ascend Hardware" process starts -- counted for the
    outermost op around the launch; NaN for every op when the trace links
    no task."""
    device = {str(pid) for pid in process_pids(trace.events, (DEVICE_PROCESS,))}
    codes = {f"{e.pid}/{e.tid}": c for e, c in zip(ops, thread)}
    tasks, begins, ends = {}, {}, {}
    for e in trace.events:
        if e.ph == "X" and str(e.pid) in device:
            tasks[_num(e.ts)] = _num(e.dur)
        elif e.cat == LAUNCH_FLOW and e.id is not None and e.ph in ("s", "f"):
            (begins if e.ph == "s" else ends)[str(e.id)] = e
    linked = [(codes.get(f"{b.pid}/{b.tid}", -1), _num(b.ts), tasks.get(_num(ends[i].ts), np.nan))
              for i, b in begins.items() if i in ends]
    out = np.full(start.size, np.nan)
    linked = [x for x in linked if x[0] >= 0 and np.isfinite(x[2])]
    if not linked:
        return out
    out[:] = 0.0
    top = iv.depth(thread, start, end) == 0
    pos = np.flatnonzero(top)
    at, when, took = (np.array(c) for c in zip(*linked))
    owner = iv.Nesting(thread[pos], start[pos], end[pos]).enclosing(at, when, when, tol=0.0)
    got = owner >= 0
    np.add.at(out, pos[owner[got]], took[got])
    return out
