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

from advisor.collectors.ascend.trace_view import _STEP_NAME, Trace, _num, step_spans
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import BACKWARD_WORK, host_call_class
from advisor.collectors.kineto.host_calls import nested_classes, step_of
from advisor.collectors.kineto.host_gaps import silent_rows
from advisor.collectors.kineto.shaped_events import CLOSURE_NOTE, update_starts


#: Prefix of the CANN layer's host calls (``AscendCL@aclrtSynchronizeStream``).
ACL_PREFIX = "AscendCL@"


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
    rows, spans = [], []
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
        if cls is not None:
            rows.append((cls, ev.name, _num(ev.ts), _num(ev.dur), f"{ev.pid}/{ev.tid}"))
    gaps = _silent_gaps(spans, host_pids, trace.markers, rank)
    if not rows:
        return gaps
    df = pd.DataFrame(rows, columns=["cls", "name", "ts", "dur", "thread"]).dropna()
    if _cut_closures(df) and notes is not None:
        notes.append(CLOSURE_NOTE)
    ts, dur = df["ts"].to_numpy(float), df["dur"].to_numpy(float)
    df["cls"] = nested_classes(df["cls"].to_numpy(object), df["name"].to_numpy(object), ts, ts + dur,
                               df["thread"].to_numpy(object))
    df = df[df["cls"] != ""]
    if df.empty:
        return gaps
    df["step"] = _steps_of(df["ts"].to_numpy(), trace.markers)
    out = (df.groupby(["step", "cls", "name"], dropna=False, sort=True)["dur"]
           .agg(count="size", total_us="sum", max_us="max").reset_index())
    out["step"] = out["step"].astype("Int64")
    out["count"] = out["count"].astype(np.int64)
    out.insert(0, "rank", rank)
    return out if gaps is None else pd.concat([out, gaps], ignore_index=True)


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
