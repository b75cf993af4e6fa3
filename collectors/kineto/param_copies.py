"""Copies of the model's parameters made every step -> ``steps`` columns
(CPU-only traces recorded with ``record_shapes=True``).

``copy.deepcopy(model)`` (a new EMA model each step), ``[p.clone() for p in
model.parameters()]`` (the weights before the update, to log how far it
moved them) and ``copy.deepcopy(model.state_dict())`` each run one
``aten::clone`` per parameter tensor, shaped like it. The parameters'
shapes are those of their gradients, which the backward accumulates
(``torch::autograd::AccumulateGrad``, one per parameter that gets a
gradient). Per step window with gradient accumulations:

* ``param_tensors``: the step's gradient accumulations;
* ``param_copies``: its clones shaped like a parameter, each matched to one
  accumulation of that shape (no more clones of a shape are counted than
  the step accumulates gradients of it), clones made by autograd (inside a
  backward node) or by an optimizer (inside its ``step()``) left out;
* ``param_copy_us``: the time of those clones. The Python around them
  (``deepcopy`` walking the module) is not counted.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.decode import Events
from advisor.collectors.kineto.shaped_events import ACCUMULATE, BACKWARD, CLONE, first_shapes, optimizer_steps
from advisor.collectors.kineto.host_calls import by_step, step_rows, step_windows

COLUMNS = ("param_tensors", "param_copies", "param_copy_us")


def columns(ev: Events, steps: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """The three columns aligned to ``steps``' rows (NaN for a row without a
    step window or a gradient accumulation); None when the trace records no
    shaped accumulation."""
    if steps is None or steps.empty or ev.shaped_ts.size == 0:
        return None
    first_shape = first_shapes(ev)
    shaped = np.array([s is not None for s in first_shape], dtype=bool)
    acc = (ev.shaped_role == ACCUMULATE) & shaped
    clone = (ev.shaped_role == CLONE) & shaped
    if not acc.any():
        return None
    backward = np.flatnonzero(ev.shaped_role == BACKWARD)
    opt = optimizer_steps(ev)
    outside = iv.merge(np.r_[ev.shaped_ts[backward], ev.ts[opt]],
                       np.r_[ev.shaped_ts[backward] + ev.shaped_dur[backward], ev.end_at(opt)])
    clone &= iv.window_index(outside[0], outside[1], ev.shaped_ts) < 0
    row = step_rows(ev.shaped_ts, steps)
    out = {name: np.full(len(steps), np.nan) for name in COLUMNS}
    per_step = by_step(row, len(steps))
    for r in step_windows(steps):
        mine = per_step[r]
        grads = Counter(first_shape[mine[acc[mine]]])
        if not grads:
            continue
        copies, spent = 0, 0.0
        for i in mine[clone[mine]]:
            if grads[first_shape[i]] > 0:
                grads[first_shape[i]] -= 1
                copies += 1
                spent += float(ev.shaped_dur[i])
        out["param_tensors"][r] = int(acc[mine].sum())
        out["param_copies"][r] = copies
        out["param_copy_us"][r] = spent
    return out
