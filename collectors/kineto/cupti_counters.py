"""CUPTI range-profiler counters per operator: the ``cupti_counters`` table.

A trace recorded in the PyTorch profiler's CUPTI profiler mode
(``torch.profiler._ExperimentalConfig(profiler_metrics=[...])``) holds, in
place of kernel events, one ``cuda_profiler_range`` event per kernel, named
after the kernel, whose ``args`` are the requested counters (``{counter
name: number}``, e.g. ``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``).
These ranges carry no correlation id; as HolisticTraceAnalysis does
(``hta/analyzers/cupti_counter_analysis.py``), the i-th range (by start) is
the kernel of the i-th ``cudaLaunchKernel`` call, and only when the two
counts agree. The launch call's operators name the kernel: the outermost
``cpu_op`` around it on its thread (``op``) and the innermost (``bottom_op``).

Rows: per (operator, innermost operator, kernel, counter) the counter
summed over those kernels (``value``) and how many kernels there were
(``kernels``). The file is read a second time, for these events only, and
only when its categories include ``cuda_profiler_range``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from advisor.collectors.kineto import decode as dec
from advisor.collectors.kineto import intervals as iv

CATEGORY = "cuda_profiler_range"
LAUNCH = "cudaLaunchKernel"
#: Why a trace with counter ranges has no table.
UNMATCHED = ("its {ranges} CUPTI counter ranges (cuda_profiler_range) do not pair with its {launches} "
             "cudaLaunchKernel calls, so the counters cannot be given to operators")


class _Event(msgspec.Struct, gc=False):
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: dict[str, Any] | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Event] = []


def table(path: Path, rank: int) -> tuple[pd.DataFrame | None, str | None]:
    """(the ``cupti_counters`` rows of the trace at ``path``, or None; why
    not, when it has ranges that cannot be paired with launches)."""
    try:
        events = msgspec.json.decode(dec.read_bytes(path), type=_Doc).traceEvents
    except msgspec.DecodeError:
        return None, None  # fields of unexpected types: the main read says what it skipped
    ranges = sorted((e for e in events if e.cat == CATEGORY and e.ts is not None), key=lambda e: e.ts)
    if not ranges:
        return None, None
    launches = sorted((e for e in events if e.cat == "cuda_runtime" and e.name == LAUNCH and e.ts is not None),
                      key=lambda e: e.ts)
    if len(launches) != len(ranges):
        return None, UNMATCHED.format(ranges=len(ranges), launches=len(launches))
    ops = [e for e in events if e.cat == "cpu_op" and e.ts is not None and e.dur is not None]
    top, bottom = _operators(ops, launches)
    rows = []
    for r, t, b in zip(ranges, top, bottom):
        for counter, value in (r.args or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append((t, b, r.name or "", counter, float(value)))
    if not rows:
        return None, None
    df = pd.DataFrame(rows, columns=["op", "bottom_op", "kernel", "counter", "value"])
    out = df.groupby(["op", "bottom_op", "kernel", "counter"], sort=True).agg(
        value=("value", "sum"), kernels=("value", "size")).reset_index()
    out.insert(0, "rank", rank)
    return out, None


def _operators(ops: list[_Event], launches: list[_Event]) -> tuple[list[str], list[str]]:
    """Outermost and innermost ``cpu_op`` around each launch call on its
    thread ("" where none)."""
    threads: dict[tuple, int] = {}
    code = lambda e: threads.setdefault((str(e.pid), str(e.tid)), len(threads))  # noqa: E731
    o_thread = np.array([code(e) for e in ops], dtype=np.int64)
    nest = iv.Nesting(o_thread, np.array([e.ts for e in ops]), np.array([e.ts + e.dur for e in ops]))
    l_thread = np.array([code(e) for e in launches], dtype=np.int64)
    l_ts = np.array([e.ts for e in launches], dtype=np.float64)
    l_end = l_ts + np.array([e.dur or 0.0 for e in launches], dtype=np.float64)
    inner = nest.enclosing(l_thread, l_ts, l_end)
    outer = nest.climb(inner, nest.top_level()) if len(ops) else inner
    name = lambda i: ops[i].name or "" if i >= 0 else ""  # noqa: E731
    return [name(int(i)) for i in outer], [name(int(i)) for i in inner]
