"""Passes over a PyTorch DataLoader that end inside a step -> ``steps`` columns.

The DataLoader records each ``__next__`` as an ``enumerate(DataLoader)#...``
range (``calls.DATALOADER_RE``). When a pass (an epoch) runs out, the loop's
``for`` calls ``__next__`` once more and gets StopIteration, then builds a
new iterator and calls ``__next__`` on it: in a loop that fetches one batch
a step, the step where a pass ends holds two calls. A validation pass run
inside a step adds its calls to that step, its last ending the pass. With worker processes
and ``persistent_workers=False``, the call that ends the pass shuts the
workers down (it joins them), the new iterator starts new ones (between the
two calls), and the new pass's first call waits for their first batch; with
persistent workers the ending call returns at once.

Per step window:

* ``loader_calls``: DataLoader calls that start in the step;
* ``loader_end_us``: in a step with two calls or more, the calls that ended
  a pass: those after which the loop's thread runs operators for less than
  ``USED_SHARE`` of the time to its next DataLoader call, or, for the step's
  last call, none until the step's end (a call that returns a batch is
  followed by the work on it); NaN in other steps and where no call did;
* ``loader_between_us``: from such a call's end to the next DataLoader call
  in the step, the time outside operators (the new iterator's start, new
  worker processes where they do not stay, the loop's Python between
  passes); 0 where the pass ended with the step's last call (a validation
  pass at the end of a step), NaN where ``loader_end_us`` is;
* ``loader_us``: the DataLoader calls' summed time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import DATALOADER_RE
from advisor.collectors.kineto.decode import HOST, Events
from advisor.collectors.kineto.host_calls import step_rows, step_windows

COLUMNS = ("loader_calls", "loader_end_us", "loader_between_us", "loader_us")
#: A call after which the loop's operators fill less than this share of the
#: time to its next DataLoader call returned no batch: a batch is worked on,
#: by operators (the forward), while what follows the end of a pass is Python
#: starting the next iterator (a few operators drawing its seed). The step's
#: last call ended a pass only when no operator at all follows it in the step
#: (the work on a batch may wait on a collective for most of the step).
USED_SHARE = 0.5


def columns(ev: Events, steps: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """The four columns, aligned to ``steps``' rows (NaN for a row without a
    step window); None when the trace has no DataLoader call or no steps."""
    if steps is None or steps.empty or "start_us" not in steps.columns:
        return None
    calls = np.flatnonzero((ev.kind == HOST) & ev.named(DATALOADER_RE))
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
    ops = np.flatnonzero(ev.host_ops())
    step_end = steps["start_us"].to_numpy(float) + steps["duration_us"].to_numpy(float)
    busy_of: dict[int, iv.Intervals] = {}  # per thread: its operators' time
    for row in multi:
        mine = np.flatnonzero(at == row)
        thread = int(ev.thread[calls[mine[0]]])  # the loop's
        if thread not in busy_of:
            own = ops[ev.thread[ops] == thread]
            busy_of[thread] = iv.merge(ev.ts[own], ev.end_at(own))
        busy = busy_of[thread]
        lo = end[mine]
        hi = np.maximum(np.r_[start[mine[1:]], step_end[row]], lo)  # the next call's start, or the step's end
        idle = (hi - lo) - iv.covered_between(busy, lo, hi)
        ended = idle > USED_SHARE * (hi - lo)  # hardly any work before the next call: it returned no batch
        ended[-1] = idle[-1] >= hi[-1] - lo[-1]  # the step's last call: no work at all until the step ends
        if not ended.any():
            continue
        followed = ended.copy()
        followed[-1] = False  # the step's last call has no next call in the step
        out["loader_end_us"][row] = float(np.sum(end[mine][ended] - start[mine][ended]))
        out["loader_between_us"][row] = float(np.sum(idle[followed]))
    return out
