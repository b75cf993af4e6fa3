"""Ascend ``trace_view.json`` (Chrome trace) -> step breakdown and lane facts.

torch_npu and MindSpore write an "Overlap Analysis" process whose threads
Computing / Communication / Communication(Not Overlapped) / Free hold X
events: the device timeline already split into those four kinds of time.
Summing them per step gives the same breakdown as ``step_trace_time.csv``,
which is used only when that file is absent. Steps come from
``ProfilerStep#N`` events; without them the whole capture is one row with
step NA. The file may be a bare JSON array or ``{"traceEvents": [...]}``,
and ``ts``/``dur`` may be strings; decoding is typed (msgspec), reading only
the fields its readers use (here, ``dispatch``, ``host_calls``, ``hccl_tasks``):
a rank's trace is decoded once (``decode_trace``), its step markers found
once, and the ``Trace`` handed to each.

At profiler Level0, when neither ``communication.json`` nor HCCL rows of
``kernel_details.csv`` are there, the trace still holds the collectives:
an "HCCL" process (newer versions: "Communication") whose threads named
``... Communication`` (``Group <name> Communication``) carry one X event per
operator (``hcom_allReduce__606_5_1``), the others ("Plane 0", ...) its
tasks -- as msprof-analyze's compare tools read it
(``compare_backend/profiling_parser/npu_profiling_parser.py``:
``is_hccl_process_name`` / ``is_communication_op_thread``). ``hccl_operators``
returns those operators as kernel rows for ``hccl_rows.comm_from_kernels``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from advisor.collectors.ascend import fields
from advisor.collectors.io.files import read_bytes
from advisor.errors import InputError

OVERLAP_PROCESS = "Overlap Analysis"
#: Thread name of an overlap lane -> steps column.
LANES = fields.text("trace_view.json").by_raw()
_STEP_NAME = re.compile(r"^ProfilerStep#(\d{1,18})$")  # as collectors.kineto.tables.STEP_RE
#: The AI Core clock's counter events (msprof's AicoreFreqAssembler: ``{"name": "AI Core Freq",
#: "ph": "C", "args": {"MHz": 1800}}``, one event each time the clock changes).
FREQ_COUNTER = "AI Core Freq"
#: Process names of the HCCL lanes (older "HCCL", newer "Communication") and the text naming
#: their operator threads ("Group hccl_world_group Communication"); other threads hold tasks.
HCCL_PROCESSES = ("HCCL", "Communication")
HCCL_OP_THREAD = "Communication"
#: Process of the device's tasks (the kernels and copies each launch starts).
DEVICE_PROCESS = "Ascend Hardware"
_NPU_PROCESSES = (DEVICE_PROCESS, OVERLAP_PROCESS, "HCCL", "Communication", FREQ_COUNTER)


class _Event(msgspec.Struct):
    """The fields of a trace event this module reads (others are skipped)."""

    ph: str = ""
    name: str = ""
    cat: str | None = None
    pid: int | str | float = 0
    tid: int | str | float = 0
    ts: float | str | None = None
    dur: float | str | None = None
    id: int | str | float | None = None
    args: msgspec.Raw = msgspec.Raw()


class _Wrapped(msgspec.Struct):
    """A trace written as ``{"traceEvents": [...]}``."""

    traceEvents: list[_Event] = []


@dataclass
class TraceFacts:
    """What a trace says about the run: lanes, steps and device kind."""

    processes: dict = field(default_factory=dict)  # pid -> process name
    labels: dict = field(default_factory=dict)  # pid -> process label (CPU/NPU)
    steps: pd.DataFrame | None = None
    has_overlap_lanes: bool = False
    has_step_markers: bool = False
    event_count: int = 0
    freq: list = field(default_factory=list)  # (ts, MHz) of the "AI Core Freq" counter events

    @property
    def device(self) -> str:
        """"ascend" when any NPU lane is present, "cpu" when only CPU lanes."""
        names = set(self.processes.values())
        if any(n in names for n in _NPU_PROCESSES) or "NPU" in set(self.labels.values()):
            return "ascend"
        if names or self.labels:
            return "cpu"
        return "unknown"


@dataclass(frozen=True)
class Trace:
    """A decoded ``trace_view.json``: its events, and its ``ProfilerStep#N``
    markers (:func:`step_markers`), found once for every reader."""

    events: list[_Event]
    markers: list[tuple[int, float, float]]


def decode_trace(path: Path) -> Trace:
    """The events of a Chrome trace file and their step markers (``decode_events``)."""
    events = decode_events(path)
    return Trace(events, step_markers(events))


def decode_events(path: Path) -> list[_Event]:
    """All events of a Chrome trace file (array or traceEvents object)."""
    data = read_bytes(path)
    head = data.lstrip()[:1]
    if not head:
        raise InputError(path, "empty file")
    try:
        if head == b"[":
            return msgspec.json.decode(data, type=list[_Event])
        if head == b"{":
            return msgspec.json.decode(data, type=_Wrapped).traceEvents
    except msgspec.ValidationError as exc:
        raise InputError(path, f"unexpected trace event layout: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InputError(path, f"not valid JSON (truncated?): {exc}") from None
    raise InputError(path, "not a Chrome trace (expected a JSON array or object)")


def _num(value) -> float:
    """``ts``/``dur`` as float (strings allowed); NaN when unusable."""
    if value is None:
        return np.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return np.nan


def _args(ev: _Event) -> dict:
    """An event's ``args`` (kept undecoded until asked for); {} when absent or not an object."""
    if not ev.args:
        return {}
    try:
        args = msgspec.json.decode(ev.args)
    except msgspec.DecodeError:
        return {}
    return args if isinstance(args, dict) else {}


def _meta_name(ev: _Event, key: str) -> str | None:
    """``args[key]`` of a metadata event, or None."""
    value = _args(ev).get(key)
    return str(value) if value is not None else None


def process_pids(events: list[_Event], names) -> set:
    """The pids of the processes whose ``process_name`` metadata is one of ``names``."""
    return {ev.pid for ev in events if ev.ph == "M" and ev.name == "process_name" and _meta_name(ev, "name") in names}


def _counter(ev: _Event, key: str) -> float | None:
    """A counter event's ``args[key]`` as a number, or None."""
    value = _num(_args(ev).get(key))
    return None if np.isnan(value) else float(value)


def step_markers(events: list[_Event]) -> list[tuple[int, float, float]]:
    """(step, ts, dur) of the ``ProfilerStep#N`` span events (``X``), in
    file order; ``ts``/``dur`` NaN where unusable."""
    markers = []
    for ev in events:
        if ev.ph == "X":
            m = _STEP_NAME.match(ev.name)
            if m:
                markers.append((int(m.group(1)), _num(ev.ts), _num(ev.dur)))
    return markers


def step_spans(markers: list[tuple]) -> pd.DataFrame:
    """One ``step``, ``start_us``, ``duration_us`` row per step id of
    :func:`step_markers` rows, in start order: the longest span of the id (a
    step id can be marked more than once, on the Python thread and again by
    a framework wrapper inside it), without the spans whose start or length
    is unusable."""
    marks = pd.DataFrame(markers, columns=["step", "start_us", "duration_us"], dtype=float).dropna()
    marks = marks.sort_values("duration_us", ascending=False, kind="stable").drop_duplicates("step")
    return marks.sort_values("start_us", kind="stable").reset_index(drop=True)


def hccl_operators(trace: Trace) -> pa.Table | None:
    """The HCCL operator events of a trace (module doc) as kernel rows:
    ``name``, ``core`` (HCCL), ``start_us``, ``duration_us`` and ``step``
    (the last ``ProfilerStep#N`` marker starting at or before the event;
    null without markers). None when the trace has no such event."""
    events = trace.events
    hccl_pids = process_pids(events, HCCL_PROCESSES)
    if not hccl_pids:
        return None
    op_lanes = {(ev.pid, ev.tid) for ev in events
                if ev.ph == "M" and ev.name == "thread_name" and ev.pid in hccl_pids
                and HCCL_OP_THREAD in (_meta_name(ev, "name") or "")}
    rows = []
    for ev in events:
        if ev.ph == "X" and (ev.pid, ev.tid) in op_lanes:
            ts, dur = _num(ev.ts), _num(ev.dur)
            if not (np.isnan(ts) or np.isnan(dur)):
                rows.append((ev.name, ts, dur))
    if not rows:
        return None
    names, starts, durs = (list(c) for c in zip(*rows))
    return pa.table({"name": names, "core": ["HCCL"] * len(names), "start_us": starts, "duration_us": durs,
                     "step": pa.array(_step_of(np.asarray(starts), trace.markers), pa.int64())})


def _step_of(starts: np.ndarray, markers: list[tuple]) -> list[int | None]:
    """The step of each start: the last marker starting at or before it (None before the first / without)."""
    marks = sorted((ts, step) for step, ts, _ in markers if not np.isnan(ts))
    if not marks:
        return [None] * len(starts)
    idx = np.searchsorted(np.array([m[0] for m in marks]), starts, side="right") - 1
    return [marks[i][1] if i >= 0 else None for i in idx]


def read_trace(trace: Trace) -> TraceFacts:
    """A decoded trace (``decode_trace``) -> TraceFacts (steps from the overlap lanes)."""
    events = trace.events
    facts = TraceFacts(event_count=len(events))
    threads: dict[tuple, str] = {}
    for ev in events:
        if ev.ph != "M":
            continue
        if ev.name == "process_name":
            facts.processes[ev.pid] = _meta_name(ev, "name") or ""
        elif ev.name == "process_labels":
            facts.labels[ev.pid] = _meta_name(ev, "labels") or ""
        elif ev.name == "thread_name":
            threads[(ev.pid, ev.tid)] = _meta_name(ev, "name") or ""
    overlap_pids = {pid for pid, name in facts.processes.items() if name == OVERLAP_PROCESS}
    lane_of = {key: LANES[name] for key, name in threads.items()
               if key[0] in overlap_pids and name in LANES}
    intervals = []
    for ev in events:
        if ev.ph == "C" and ev.name == FREQ_COUNTER:
            mhz = _counter(ev, "MHz")
            if mhz is not None:
                facts.freq.append((_num(ev.ts), mhz))
        elif ev.ph == "X":
            lane = lane_of.get((ev.pid, ev.tid))
            if lane is not None:
                intervals.append((lane, _num(ev.ts), _num(ev.dur)))
    facts.has_overlap_lanes = bool(intervals)
    facts.has_step_markers = bool(trace.markers)
    if intervals:
        facts.steps = steps_from_lanes(intervals, trace.markers, set(lane_of.values()))
    return facts


def steps_from_lanes(
    intervals: list[tuple], markers: list[tuple], declared: set[str] = frozenset()
) -> pd.DataFrame | None:
    """Per-step sums of the overlap lanes.

    An interval belongs to the last step marker starting at or before it
    (device work runs behind the host's step marker); intervals before the
    first marker are dropped. Without markers there is one row, step NA.
    duration_us = computing + exposed communication + free (the lanes tile
    the device timeline); overlapped_us = communication - exposed. A lane
    the trace declares (thread_name) but never uses counts as 0 time; a lane
    it does not declare stays absent.
    """
    lanes = pd.DataFrame(intervals, columns=["lane", "ts", "dur"]).dropna()
    if lanes.empty:
        return None
    if markers:
        marks = (pd.DataFrame(markers, columns=["step", "ts", "dur"]).dropna(subset=["ts"])
                 .sort_values("ts").drop_duplicates("step"))
        idx = np.searchsorted(marks["ts"].to_numpy(), lanes["ts"].to_numpy(), side="right") - 1
        lanes = lanes[idx >= 0].assign(step=marks["step"].to_numpy()[idx[idx >= 0]])
        if lanes.empty:
            return None
    else:
        lanes = lanes.assign(step=pd.NA)
    lanes["step"] = lanes["step"].astype("Int64")
    sums = lanes.groupby(["step", "lane"], dropna=False)["dur"].sum().unstack("lane")
    starts = lanes.groupby("step", dropna=False)["ts"].min()
    out = pd.DataFrame({"step": pd.array(sums.index, dtype="Int64"),
                        "start_us": starts.reindex(sums.index).to_numpy()})
    for lane in LANES.values():
        if lane in sums or lane in declared:
            values = sums[lane] if lane in sums else pd.Series(0.0, index=sums.index)
            out[lane] = values.fillna(0.0).to_numpy(dtype="float64")
    parts = [c for c in ("computing_us", "exposed_comm_us", "free_us") if c in out]
    out["duration_us"] = out[parts].sum(axis=1)
    if "communication_us" in out and "exposed_comm_us" in out:
        out["overlapped_us"] = (out["communication_us"] - out["exposed_comm_us"]).clip(lower=0.0)
    return out
