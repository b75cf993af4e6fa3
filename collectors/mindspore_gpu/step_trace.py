"""Step trace of a MindSpore GPU profile -> the raw step frame that
``advisor.collectors.mindinsight.step_trace.steps_table`` turns into ``steps``.

``step_trace_raw_{dev}_detail_time.csv`` (preferred)
    What ``Profiler.analyse`` derives on GPU (``GpuStepTraceParser`` in
    ``mindspore/python/mindspore/profiler/parser/step_trace_parser.py``):
    the Ascend column layout and unit (10 ns ticks: the GPU nanosecond
    timestamps divided by 10 "to keep the same with ascend"), steps numbered
    from 1, then a summary row of column means whose ``step_num`` is ``-``.
    Read by the MindInsight reader; a row numbered ``0`` (older writers'
    summary) is dropped too, since the GPU parser never numbers a step 0.

``step_trace_profiling_{dev}.txt`` (when the CSV is absent)
    What the GPU profiler itself writes (``GpuDataSaver`` in
    ``gpu_data_saver.cc``), in one of two forms:

    * per point (``WriteStepTrace``, graph run by the old runtime): one
      line per marked op, ``op_name s,e s,e ...`` with one ``start,end``
      pair in 10 ns ticks per step; lines 1-3 are the forward start, the
      backward end and the iteration end, further lines the communication
      ops.
    * per step (``WriteStepTraceAsyncLaunchKernel``, MindRT): one line per
      step, ``iter_start_op,t fp_op,t bp_op,t iter_end_op,t`` then
      ``comm_op,start,end`` per communication op, in nanoseconds.

    Both become the CSV's rows exactly as ``GpuStepTraceParser`` computes
    them (start, fp, bp, end points; total, iteration interval, fp_and_bp,
    tail), with the communication ops as ``stream_ops_{i}_{op}`` columns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from advisor.collectors.mindinsight import step_trace as ascend_layout
from advisor.collectors.mindinsight.frames import read_space_table
from advisor.errors import InputError

#: Nanoseconds per step-trace tick (the GPU profiler writes 10 ns ticks).
NS_PER_TICK = 10
#: The first step number ``GpuStepTraceParser`` gives; a row numbered below it is a summary.
FIRST_STEP = 1
#: Lines of the per-point form before the communication ops: forward start, backward end, iteration end.
_POINT_LINES = 3
#: Fields of a per-step line before the communication ops.
_STEP_FIELDS = 4


def load_csv(path: Path) -> pd.DataFrame:
    """``step_trace_raw_{dev}_detail_time.csv`` rows (summary rows dropped)."""
    frame = ascend_layout.load(path)
    summary = frame["step_num"] < FIRST_STEP
    if summary.all():
        raise InputError(path, "no step rows (only a header and summary rows)")
    if summary.any():
        attrs = dict(frame.attrs)
        frame = frame[~summary].copy()
        frame.attrs.update(attrs)
    return frame


def load_txt(path: Path) -> pd.DataFrame:
    """``step_trace_profiling_{dev}.txt`` in either form -> the CSV's rows."""
    lines = read_space_table(path, 2)
    first = lines.iloc[0, 0] or ""
    if "," in first:
        points, comm = _per_step(path, lines)
    else:
        points, comm = _per_point(path, lines)
    return _frame(path, points, comm)


def _ints(path: Path, cells, what: str) -> np.ndarray:
    """Integer cells; InputError naming the first that is not one."""
    out = np.empty(len(cells), dtype="int64")
    for i, cell in enumerate(cells):
        try:
            out[i] = int(cell)
        except (TypeError, ValueError):
            raise InputError(path, f"{what} {cell!r} is not an integer time") from None
    return out


def _per_step(path: Path, lines: pd.DataFrame) -> tuple[dict, list]:
    """Per-step form (ns) -> point times in ticks and communication spans."""
    rows = [[c for c in row if c is not None and not pd.isna(c)] for row in lines.itertuples(index=False)]
    short = next((i for i, r in enumerate(rows) if len(r) < _STEP_FIELDS), None)
    if short is not None:
        raise InputError(path, f"line {short + 1} has {len(rows[short])} fields, expected at least "
                               f"{_STEP_FIELDS} (iteration start, forward, backward, iteration end)")
    point = {}
    for key, col in (("start", 0), ("fp", 1), ("bp", 2), ("end", 3)):
        point[key] = _ints(path, [r[col].rsplit(",", 1)[-1] for r in rows], f"{key} time") // NS_PER_TICK
    widths = {len(r) for r in rows}
    comm = []
    if len(widths) == 1:  # the same communication ops in every step
        for j in range(_STEP_FIELDS, widths.pop()):
            parts = [r[j].split(",") for r in rows]
            if any(len(p) < 3 for p in parts):
                raise InputError(path, f"communication field {j + 1} is not 'op,start,end'")
            name = parts[0][0].rsplit("/", 1)[-1]
            start = _ints(path, [p[-2] for p in parts], "communication start") // NS_PER_TICK
            end = _ints(path, [p[-1] for p in parts], "communication end") // NS_PER_TICK
            comm.append((name, start, end))
    return point, comm


def _per_point(path: Path, lines: pd.DataFrame) -> tuple[dict, list]:
    """Per-point form (ticks) -> point times and communication spans."""
    if len(lines) < _POINT_LINES:
        raise InputError(path, f"{len(lines)} line(s), expected at least {_POINT_LINES} (forward start, "
                               "backward end, iteration end)")
    spans = []
    for _, row in lines.iterrows():
        cells = [c for c in row.iloc[1:] if c is not None and not pd.isna(c)]
        pairs = [c.split(",") for c in cells]
        if any(len(p) != 2 for p in pairs):
            raise InputError(path, f"op {row.iloc[0]}: a time is not a 'start,end' pair")
        spans.append((str(row.iloc[0]), _ints(path, [p[0] for p in pairs], "start"),
                      _ints(path, [p[1] for p in pairs], "end")))
    counts = {len(s[1]) for s in spans}
    if len(counts) != 1:
        raise InputError(path, "the marked ops have different numbers of steps "
                               f"({', '.join(str(len(s[1])) for s in spans)})")
    fp, bp, end = spans[0], spans[1], spans[2]
    # GpuStepTraceParser: a step starts where the previous iteration-end op starts (the first at its fp)
    start = np.concatenate([fp[1][:1], end[1][:-1]])
    point = {"start": start, "fp": fp[1], "bp": bp[2], "end": end[2]}
    comm = [(name.rsplit("/", 1)[-1], s, e) for name, s, e in spans[_POINT_LINES:]]
    return point, comm


def _frame(path: Path, point: dict, comm: list) -> pd.DataFrame:
    """The CSV's columns from point times (ticks) and communication spans."""
    start, fp, bp, end = point["start"], point["fp"], point["bp"], point["end"]
    frame = pd.DataFrame({
        "step_num": np.arange(FIRST_STEP, FIRST_STEP + len(start), dtype="int64"),
        "start_point": start, "end_point": end, "total": end - start,
        "fp_point": fp, "bp_point": bp,
        "iteration_interval": fp - start, "fp_and_bp": bp - fp, "tail": end - bp,
    }).astype({c: "float64" for c in ("start_point", "end_point", "total", "fp_point", "bp_point",
                                      "iteration_interval", "fp_and_bp", "tail")})
    if frame.empty:
        raise InputError(path, "no steps")
    bad = frame[(frame["total"] < 0) | (frame["iteration_interval"] < 0) | (frame["fp_and_bp"] < 0)]
    if len(bad):
        raise InputError(path, f"step {int(bad['step_num'].iloc[0])}: points out of order "
                               "(a step ends before it starts)")
    reduce_cols = []
    for i, (name, s, e) in enumerate(comm):
        col = f"stream_ops_{i}_{name}"
        frame[col] = (e - s).astype("float64")
        frame[col + "_start_point"] = s.astype("float64")
        frame[col + "_end_point"] = e.astype("float64")
        reduce_cols.append(col)
    frame.attrs["reduce_cols"] = reduce_cols
    frame.attrs["path"] = str(path)
    return frame
