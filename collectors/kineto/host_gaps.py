"""Silent gaps in the training loop: the ``host_calls`` rows of class
``silent_gap``.

Within each step window, a *silent gap* is a stretch of at least
:data:`MIN_GAP_US` during which the trace records no host op (``cpu_op``, a
``record_function`` range other than the ``ProfilerStep#N`` markers) and no
runtime call on any thread: the training thread ran Python the profiler
does not see, and no other thread (autograd's backward threads, which the
training thread waits for during ``backward()``) ran an op meanwhile. Eager
PyTorch runs an op every few tens of microseconds, so a millisecond or more
without one is a garbage collection (which stops every Python thread),
pure-Python work or a sleep. msprof-analyze draws the same conclusion from a
long device-free stretch with (almost) no ``AscendCL`` host calls in it
("conjectured GC", its ``advisor/analyzer/schedule/conjectured_gc``); here
the evidence is the host's own record, so it also reads CPU-only traces.

One row per step that has silent gaps: ``name`` :data:`GAP_NAME`, how many,
their summed and longest duration. A gap that runs across the end of a
step window is cut there. torch_npu's ``trace_view.json`` gets the same rows
from its Python and CANN processes (``collectors/ascend/host_calls.py``).
The stretch from the last recorded op to the end
of the trace's last step is left out: the profiler stops there (in the
corpus's ResNet50 traces the last step ends 85 ms after its last op,
every other step within 3 ms). A trace without step markers yields none.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.decode import HOST, RUNTIME, Events
from advisor.collectors.kineto.tables import STEP_RE

#: Shortest silent gap recorded (us). Eager PyTorch spends 5-50 us of
#: interpreter time between two ops it dispatches (``idle.HOST_GAP_US``
#: allows 100 us); msprof-analyze counts a recorded collection as abnormal
#: from 1000 us (its ``rules/en/gc.yaml``, ``gc_threshold``). Rules set
#: their own, higher bar on the longest gap.
MIN_GAP_US = 1000.0
#: The ``name`` of the rows.
GAP_NAME = "(no host op or runtime call on any thread)"
CLS = "silent_gap"


def table(ev: Events, steps: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    """The ``silent_gap`` rows of one trace (None when it has none).
    ``steps``: the trace's steps table (``step``, ``start_us``, ``duration_us``)."""
    if steps is None or "start_us" not in steps.columns or steps["step"].isna().all():
        return None
    work = np.flatnonzero(((ev.kind == HOST) | (ev.kind == RUNTIME)) & ~ev.named(STEP_RE))
    return silent_rows(iv.merge(ev.ts[work], ev.end_at(work)), steps, rank)


def silent_rows(busy: iv.Intervals, steps: pd.DataFrame, rank: int) -> pd.DataFrame | None:
    """The ``silent_gap`` rows of the step windows of ``steps`` (``step``,
    ``start_us``, ``duration_us``) given the host's recorded activity
    ``busy`` (None when no gap is long enough)."""
    win = steps.dropna(subset=["step", "start_us", "duration_us"]).sort_values("start_us")
    found: list[tuple[int, float]] = []
    last = len(win) - 1
    for k, (step, lo, dur) in enumerate(zip(win["step"].to_numpy(np.int64), win["start_us"].to_numpy(float),
                                            win["duration_us"].to_numpy(float))):
        length = _gaps(busy, lo, lo + dur)
        if k == last:
            length = length[:-1]  # the recording's end: the profiler stopping, not the program
        found.extend((int(step), float(g)) for g in length[length >= MIN_GAP_US])
    if not found:
        return None
    rows = pd.DataFrame(found, columns=["step", "dur"])
    out = rows.groupby("step", sort=True)["dur"].agg(count="size", total_us="sum", max_us="max").reset_index()
    out["step"] = out["step"].astype("Int64")
    out["count"] = out["count"].astype(np.int64)
    out.insert(1, "cls", CLS)
    out.insert(2, "name", GAP_NAME)
    out.insert(0, "rank", rank)
    return out


def _gaps(busy: iv.Intervals, lo: float, hi: float) -> np.ndarray:
    """Lengths of the stretches of ``[lo, hi]`` that ``busy`` (a disjoint,
    sorted interval set) does not cover."""
    starts, ends = busy
    first, last = np.searchsorted(ends, lo, side="right"), np.searchsorted(starts, hi, side="left")
    s, e = np.clip(starts[first:last], lo, hi), np.clip(ends[first:last], lo, hi)
    return np.diff(np.r_[lo, np.ravel(np.column_stack([s, e])), hi])[::2]
