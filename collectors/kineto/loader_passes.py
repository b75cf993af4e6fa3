"""Passes over a PyTorch DataLoader that end inside a step -> ``steps`` columns.

The DataLoader records each ``__next__`` as an ``enumerate(DataLoader)#...``
range (``calls.DATALOADER_RE``). When a pass (an epoch) runs out, the loop's
``for`` calls ``__next__`` once more and gets StopIteration, then builds a
new iterator and calls ``__next__`` on it: in a loop that fetches one batch
a step, the step where a pass ends holds two calls. With worker processes
and ``persistent_workers=False``, the call that ends the pass shuts the
workers down (it joins them), the new iterator starts new ones (between the
two calls), and the new pass's first call waits for their first batch; with
persistent workers the ending call returns at once.

Per step window:

* ``loader_calls``: DataLoader calls that start in the step;
* ``loader_end_us``: in a step with two calls or more, the longest call but
  the last (the call that ended a pass, where the loop fetches one batch a
  step); NaN in other steps;
* ``loader_between_us``: from that call's end to the next DataLoader call's
  start, less the host operators that run in it: host time spent between
  the passes (starting the new iterator, and whatever the loop does between
  epochs); NaN in other steps;
* ``loader_us``: the DataLoader calls' summed time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import DATALOADER_RE
from advisor.collectors.kineto.decode import HOST, Events
from advisor.collectors.kineto.host_calls import step_rows, step_windows
from advisor.collectors.kineto.tables import ANNOTATION_RE

COLUMNS = ("loader_calls", "loader_end_us", "loader_between_us", "loader_us")


def columns(ev: Events, steps: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """The four columns, aligned to ``steps``' rows (NaN for a row without a
    step window); None when the trace has no DataLoader call or no steps."""
    if steps is None or steps.empty or "start_us" not in steps.columns:
        return None
    loader_name = np.array([bool(DATALOADER_RE.match(str(n))) for n in ev.names], dtype=bool)
    calls = np.flatnonzero((ev.kind == HOST) & loader_name[ev.name]) if loader_name.any() else np.empty(0, int)
    if calls.size == 0:
        return None
    calls = calls[np.argsort(ev.ts[calls], kind="stable")]
    start, end = ev.ts[calls].astype(float), ev.end_at(calls).astype(float)
    at = step_rows(start, steps)
    windows = step_windows(steps)
    n = len(steps)
    out = {name: np.full(n, np.nan) for name in COLUMNS}
    inside = at >= 0
    counts = np.bincount(at[inside], minlength=n)
    out["loader_calls"][windows] = counts[windows]
    out["loader_us"][windows] = np.bincount(at[inside], weights=end[inside] - start[inside], minlength=n)[windows]
    multi = np.intersect1d(np.flatnonzero(counts >= 2), windows)
    if multi.size == 0:
        return out
    annotation = np.array([bool(ANNOTATION_RE.match(str(n))) for n in ev.names], dtype=bool)
    ops = np.flatnonzero((ev.kind == HOST) & (ev.cat_is("cpu_op") | ev.cat_is("Operator")) & ~annotation[ev.name])
    ops = ops[np.argsort(ev.ts[ops], kind="stable")]
    op_start, op_end = ev.ts[ops].astype(float), ev.end_at(ops).astype(float)
    for row in multi:
        mine = np.flatnonzero(at == row)
        ended = mine[:-1][np.argmax(end[mine[:-1]] - start[mine[:-1]])]
        following = mine[mine > ended][0]
        lo, hi = end[ended], max(start[following], end[ended])
        a, b = np.searchsorted(op_start, [lo, hi], side="left")  # the operators that start between the calls
        busy = iv.merge(op_start[a:b], np.minimum(op_end[a:b], hi))
        out["loader_end_us"][row] = end[ended] - start[ended]
        out["loader_between_us"][row] = max(hi - lo - iv.total(busy), 0.0)
    return out
