"""Kineto events -> the ``op_trend`` table: the per-step time of the few host
operators whose per-step time rises over the profiled steps, and of the few
whose time stands out in some steps.

A loop that concatenates into a growing tensor, re-reduces a growing
history or walks a growing cache spends more time in the same operator
every step. The steps table shows that the step rises, not what rises; the
``ops`` table sums over the window and hides the trend. This table keeps the
per-step figures of the operators that could be the cause, and only those:
per (rank, step, operator name) the summed duration and the number of calls
of the top-level host ops (``cpu_op`` events and 2021 ``Operator`` events
that are not annotations, not nested in another host op of their thread; an
op is in the step its start falls in), for at most :data:`KEPT_NAMES` names
per rank -- those whose per-step time rises fastest (:func:`rise`), when
it rises at all. Whether the rise is significant is the metrics' question
(``advisor/metrics/trend.py``). GPU traces get the same rows from their
host ops (the launching side; a device kernel's growth shows in the step's
device time).

Steps slower than the rest every few steps (an evaluation pass, a metric
over the data) run operators the other steps do not, or run them more: so
for at most :data:`KEPT_NAMES` more names the table keeps those whose time
stands out most in at least two steps (:func:`stand_out`); ``kept_for``
says why a name is there ("rise" or "stand out"), and the anomaly model's
metrics read which of them the slow steps add
(``anomaly.step_outlier_ops``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.decode import Events
from advisor.collectors.kineto.host_calls import step_rows

#: Operator names kept per rank. The rule looks for the one part that rises;
#: a few more let the metrics choose over the steady steps (this slope counts
#: every step, a start-up first step and a truncated last one too), and keep
#: the table to a few rows per step.
KEPT_NAMES = 3
#: Fewest steps with a window for a trend to be looked for.
MIN_STEPS = 3
#: Most points a name's slope is computed over (the pairs grow with the
#: square): longer windows are averaged over runs of consecutive steps.
MAX_POINTS = 64
#: Names whose pairwise slopes are held at once (256 x 2016 pairs: 4 MB).
_ROWS_AT_ONCE = 256


def table(ev: Events, steps: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    """The ``op_trend`` rows of one trace (None when no operator's per-step
    time rises, or the trace has fewer than :data:`MIN_STEPS` steps)."""
    if steps is None or len(steps) < MIN_STEPS or "step" not in steps.columns or steps["step"].isna().any():
        return None
    top = _top_level_ops(ev)
    if top.size == 0:
        return None
    at = step_rows(ev.ts[top], steps)
    inside = at >= 0
    top, at = top[inside], at[inside]
    if top.size == 0:
        return None
    order = np.argsort(steps["start_us"].to_numpy(float), kind="stable")
    slot = np.empty(len(steps), dtype=np.int64)
    slot[order] = np.arange(len(steps))
    codes, name_at = np.unique(ev.name[top], return_inverse=True)
    cells = name_at * len(steps) + slot[at]
    size = codes.size * len(steps)
    time = np.bincount(cells, weights=ev.dur[top], minlength=size).reshape(codes.size, len(steps))
    calls = np.bincount(cells, minlength=size).reshape(codes.size, len(steps))
    grow = rise(time)
    rising = np.argsort(-grow, kind="stable")[:KEPT_NAMES]
    rising = rising[grow[rising] > 0]
    above = stand_out(time)
    above[rising] = 0.0
    standing = np.argsort(-above, kind="stable")[:KEPT_NAMES]
    standing = standing[above[standing] > 0]
    chosen = np.r_[rising, standing]
    if chosen.size == 0:
        return None
    step_ids = steps["step"].to_numpy(dtype=np.int64)[order]
    kept_for = np.repeat(np.r_[np.full(rising.size, RISE, dtype=object), np.full(standing.size, STAND_OUT,
                                                                                   dtype=object)], len(steps))
    return pd.DataFrame({
        "rank": rank,
        "step": pd.array(np.tile(step_ids, chosen.size), dtype="Int64"),
        "name": np.repeat(ev.names[codes[chosen]].astype(str), len(steps)),
        "time_us": time[chosen].ravel(),
        "calls": calls[chosen].ravel().astype(np.int64),
        "kept_for": kept_for,
    })


#: ``kept_for`` of a name kept because its per-step time rises (:func:`rise`) ...
RISE = "rise"
#: ... or because it stands out in some steps (:func:`stand_out`).
STAND_OUT = "stand out"


def stand_out(per_step: np.ndarray) -> np.ndarray:
    """Per row of ``per_step`` (one name's time in each step): how far its
    second-largest step stands above its median step. The second largest:
    work that recurs in some steps is in two or more of them, while a
    start-up step's one-time work (the first step's allocations) is in one."""
    if per_step.shape[1] < 2:
        return np.zeros(per_step.shape[0])
    second = np.partition(per_step, -2, axis=1)[:, -2]
    return second - np.median(per_step, axis=1)


def rise(per_step: np.ndarray) -> np.ndarray:
    """Per row of ``per_step`` (one name's time in each step, in step order):
    its Theil-Sen slope over the steps (:func:`slopes`), on the means of
    :data:`MAX_POINTS` runs of consecutive steps when there are more steps.
    A median of pairwise slopes: one slow step (a periodic stall) at either
    end does not make a name look like it grows."""
    n = per_step.shape[1]
    if n > MAX_POINTS:
        edges = np.linspace(0, n, MAX_POINTS + 1).astype(np.int64)
        per_step = np.add.reduceat(per_step, edges[:-1], axis=1) / np.diff(edges)
        return slopes(per_step, (edges[:-1] + edges[1:] - 1) / 2.0)
    return slopes(per_step, np.arange(n, dtype=float))


def slopes(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Theil-Sen slope of each row of ``values`` against ``at``: the median
    of the slopes between every two points (NaN with fewer than two
    distinct ``at``)."""
    i, j = np.triu_indices(values.shape[1], k=1)
    dx = at[j] - at[i]
    ok = dx != 0
    out = np.full(values.shape[0], np.nan)
    if ok.any():
        i, j, dx = i[ok], j[ok], dx[ok]
        for lo in range(0, values.shape[0], _ROWS_AT_ONCE):  # bounded memory: rows x pairs
            rows = values[lo:lo + _ROWS_AT_ONCE]
            out[lo:lo + _ROWS_AT_ONCE] = np.median((rows[:, j] - rows[:, i]) / dx, axis=1)
    return out


def _top_level_ops(ev: Events) -> np.ndarray:
    """Indices of the host ops proper (module doc) not nested in another one
    of their thread."""
    idx = np.flatnonzero(ev.host_ops())
    if idx.size == 0:
        return idx
    return idx[iv.Nesting(ev.thread[idx], ev.ts[idx], ev.end_at(idx)).top_level()]
