"""Free gaps of a CPU-only trace, keyed by their place in the step: the
``free_gaps`` table.

A CPU run's step is *free* where the training thread runs no top-level
operator and no thread runs a collective or a DataLoader fetch (the
``steps.free_us`` of :func:`collectors.kineto.tables.cpu_tables`, less the
data wait). Each stretch of it within a step window is one row, keyed by
where it falls in the step: the operator (or collective, or fetch) that
ends where it starts, the one that starts where it ends, and its
occurrence among the step's gaps between those two names
(``'aten::linear > aten::relu #3'``); a stretch cut by the step's start or
end names ``(step start)`` / ``(step end)`` there. ``busy_after_us`` is
the busy stretch that follows it up to the next one or the step's end (a
step that starts busy opens with a row of no gap, ``(step start) >
(busy) #0``), so the rows of a step add up to it. ``after_collective``
marks a stretch that begins where a collective on another thread ends
(or the training thread's wait for one) that began in the same step: the
training thread resuming after it waited for that collective (a
collective begun in an earlier step, whose worker thread closes its span
after the loop has already stepped the optimizer and fetched the next
batch, was not waited for: the stretch after it is the loop's own, keyed
by the training thread's own span before it),
which takes as long as the scheduler needs to give it a CPU, not the
loop's Python. The same loop puts the
same Python at the same place in every step, so its gaps keep their keys
from step to step; the time the process waits for a CPU on a busy host
lands at random places (``step.recurring_free_ms`` reads it so).
Where the trace records Python frames (``with_stack=True``), ``frame`` is
the frame of the profiled program that runs in the stretch on the training
thread (``host_calls.frames_holding``); ``range`` is the
``record_function`` range it runs in there, stacks or not
(``host_calls.ranges_holding``: ``Optimizer.zero_grad#SGD.zero_grad``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

STEP_START = "(step start)"
STEP_END = "(step end)"
#: The ``next`` name of the row a step that starts busy opens with (its gap is 0).
BUSY = "(busy)"

#: What a stretch runs in, given the stretches' starts and ends (``frame_of``, ``range_of``).
Place = Callable[[np.ndarray, np.ndarray], np.ndarray | None]


def table(starts: np.ndarray, ends: np.ndarray, names: np.ndarray, waited: np.ndarray, steps: pd.DataFrame,
          rank: int, frame_of: Place | None = None, range_of: Place | None = None) -> pd.DataFrame | None:
    """One row per free gap of each step window of ``steps`` (``step``,
    ``start_us``, ``duration_us``) given the busy spans ``starts``/``ends``
    named ``names``, ``waited`` marking the collectives the training thread
    waits for on another thread; None without step markers or gaps.
    ``frame_of(start, end)``: the program's Python frame each stretch runs
    in (the ``frame`` column), None where the trace has none; ``range_of``
    the same for the ``record_function`` range around it (``range``)."""
    if steps is None or "start_us" not in steps.columns or steps["step"].isna().all():
        return None
    win = steps.dropna(subset=["step", "start_us", "duration_us"])
    if win.empty:
        return None
    lo_all, hi_all = float(win["start_us"].min()), float((win["start_us"] + win["duration_us"]).max())
    # sentinels before and after every window: each free point lies in a gap between two spans
    s = np.r_[lo_all - 1.0, starts.astype(float), hi_all + 1.0]
    e = np.r_[lo_all - 1.0, ends.astype(float), hi_all + 1.0]
    nm = np.r_[np.array([STEP_START], dtype=object), names.astype(object), np.array([STEP_END], dtype=object)]
    wt = np.r_[False, waited.astype(bool), False]
    order = np.argsort(s, kind="stable")
    s, e, nm, wt = s[order], e[order], nm[order], wt[order]
    reach = np.maximum.accumulate(e)
    # the span that reaches furthest so far (the one a gap after it starts at)
    last = np.maximum.accumulate(np.where(e >= reach, np.arange(len(e)), 0))
    nxt = np.flatnonzero(s[1:] > reach[:-1]) + 1
    g_lo, g_hi = reach[nxt - 1], s[nxt]
    g_prev, g_next, g_wait = nm[last[nxt - 1]], nm[nxt], wt[last[nxt - 1]]
    g_wait_start = s[last[nxt - 1]]
    # the training thread's own span reaching furthest (no collective of
    # another thread): a stretch after a collective that was not waited for
    # is keyed by it, so that the loop's code keeps its place from step to
    # step whichever thread happened to finish last
    reach_own = np.maximum.accumulate(np.where(wt, -np.inf, e))
    last_own = np.maximum.accumulate(np.where(~wt & (e >= reach_own), np.arange(len(e)), 0))
    g_prev_own, g_own_end = nm[last_own[nxt - 1]], reach_own[nxt - 1]
    parts = []
    for step, lo, dur in zip(win["step"].to_numpy(np.int64), win["start_us"].to_numpy(float),
                             win["duration_us"].to_numpy(float)):
        hi = lo + dur
        a, b = np.searchsorted(g_hi, lo, side="right"), np.searchsorted(g_lo, hi, side="left")
        glo, ghi = np.maximum(g_lo[a:b], lo), np.minimum(g_hi[a:b], hi)
        keep = ghi > glo
        glo, ghi = glo[keep], ghi[keep]
        prev = np.where(g_lo[a:b][keep] < lo, STEP_START, g_prev[a:b][keep])
        after = np.where(g_hi[a:b][keep] > hi, STEP_END, g_next[a:b][keep])
        # a wake-up only after a collective of this step: the loop does not
        # finish a step (its optimizer step) while waiting for one begun before
        wait = (g_lo[a:b][keep] >= lo) & g_wait[a:b][keep] & (g_wait_start[a:b][keep] >= lo)
        unwaited = g_wait[a:b][keep] & ~wait
        own = np.where(g_own_end[a:b][keep] < lo, STEP_START, g_prev_own[a:b][keep])
        prev = np.where(unwaited & (g_lo[a:b][keep] >= lo), own, prev)
        busy = np.r_[glo[1:], hi] - ghi
        if not glo.size or glo[0] > lo:  # the step starts busy: that stretch has a row of its own
            lead = glo[0] if glo.size else hi
            glo, ghi, busy = np.r_[lo, glo], np.r_[lo, ghi], np.r_[lead - lo, busy]
            prev, after, wait = np.r_[[STEP_START], prev], np.r_[[BUSY], after], np.r_[False, wait]
        parts.append(pd.DataFrame({"step": int(step), "prev": prev, "next": after, "gap_us": ghi - glo,
                                   "busy_after_us": busy, "after_collective": wait, "lo": glo, "hi": ghi}))
    if not parts:
        return None
    df = pd.concat(parts, ignore_index=True)
    nth = df.groupby(["step", "prev", "next"], sort=False).cumcount()
    key = df["prev"].astype(str) + " > " + df["next"].astype(str) + " #" + nth.astype(str)
    out = pd.DataFrame({"rank": rank, "step": pd.array(df["step"], dtype="Int64"), "key": key,
                        "gap_us": df["gap_us"].astype(float), "busy_after_us": df["busy_after_us"].astype(float),
                        "after_collective": df["after_collective"].astype(bool)})
    for column, place_of in (("frame", frame_of), ("range", range_of)):
        places = place_of(df["lo"].to_numpy(float), df["hi"].to_numpy(float)) if place_of is not None else None
        if places is not None:
            out[column] = places
    return out
