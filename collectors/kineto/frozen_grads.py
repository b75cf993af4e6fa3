"""Gradients computed for parameters the optimizer does not update, per
step -> ``steps`` columns (CPU-only traces recorded with
``record_shapes=True``).

A parameter left with ``requires_grad=True`` gets its gradient computed in
every backward and accumulated into ``.grad`` (a
``torch::autograd::AccumulateGrad`` call with the gradient's shape); an
optimizer built over other parameters (a frozen backbone under a trained
head) never reads it. The optimizer's ``step()`` is an ``Optimizer.step#...``
range, and the operators inside it (``calls.OPTIMIZER_INNER``: per-parameter
arithmetic, ``_foreach_*`` over tensor lists, fused kernels) take every
parameter it updates, its gradient and its state as inputs. Per step window
with at least one optimizer step:

* ``frozen_grads``: gradient accumulations whose shape is none of the
  shapes the step's optimizer operators take -- gradients no optimizer
  reads. A frozen parameter shaped like a trained one is not counted, so
  the count is a lower bound. A step whose optimizer operators are
  recorded without any shape (a fused kernel over many tensors: the
  profiler writes its tensor-list inputs as empty) is not judged.
* ``frozen_grad_us``: the time of those accumulations and of the backward
  matrix products (``aten::mm`` between the step's first and last backward
  node) whose result has a frozen gradient's 2-D shape -- the weight
  gradients of frozen layers. The products that carry the gradient through
  the frozen layers to their weights are not counted (the trace cannot
  tell them from those a trained layer below needs), so this too is a
  lower bound of the time a fix saves.

With ``requires_grad_(False)`` on the frozen parameters autograd computes
none of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.decode import Events
from advisor.collectors.kineto.host_calls import by_step, step_rows, step_windows
from advisor.collectors.kineto.shaped_events import (ACCUMULATE, BACKWARD, MATMUL, OPTIMIZER, first_shapes,
                                                    optimizer_steps)

def columns(ev: Events, steps: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """``frozen_grads`` and ``frozen_grad_us`` aligned to ``steps``' rows
    (NaN for a row without a step window or an optimizer step); None when
    the trace records no gradient accumulation with a shape or no optimizer
    step."""
    if steps is None or steps.empty or ev.shaped_ts.size == 0:
        return None
    acc = (ev.shaped_role == ACCUMULATE) & np.array([len(s) > 0 for s in ev.shaped_shapes], dtype=bool)
    opt_idx = optimizer_steps(ev)
    if not acc.any() or opt_idx.size == 0:
        return None
    windows = step_windows(steps)
    row = step_rows(ev.shaped_ts, steps)
    by_start = np.argsort(ev.ts[opt_idx])
    opt_start, opt_end = ev.ts[opt_idx][by_start], (ev.ts + ev.dur)[opt_idx][by_start]
    # an optimizer operator counts when it starts inside an optimizer step range
    in_step = iv.window_index(opt_start, opt_end, ev.shaped_ts) >= 0
    first_shape = first_shapes(ev)
    count = np.full(len(steps), np.nan)
    time = np.full(len(steps), np.nan)
    has_opt = np.zeros(len(steps), dtype=bool)
    opt_rows = step_rows(opt_start, steps)
    has_opt[opt_rows[opt_rows >= 0]] = True
    per_step = by_step(row, len(steps))
    for r in windows:
        if not has_opt[r]:
            continue
        mine = per_step[r]
        role = ev.shaped_role[mine]
        read = set().union(*ev.shaped_shapes[mine[(role == OPTIMIZER) & in_step[mine]]])
        if not read:
            continue  # no shape of what the optimizer reads is recorded (a fused kernel's tensor lists): unknown
        accumulated = mine[acc[mine]]
        frozen = accumulated[np.array([first_shape[i] not in read for i in accumulated], dtype=bool)]
        frozen_shapes = set(first_shape[frozen])
        count[r] = frozen.size
        spent = ev.shaped_dur[frozen].sum()
        backward = mine[role == BACKWARD]
        if frozen_shapes and backward.size:
            first, last = ev.shaped_ts[backward].min(), (ev.shaped_ts + ev.shaped_dur)[backward].max()
            for i in mine[role == MATMUL]:
                s = ev.shaped_shapes[i]
                if (first <= ev.shaped_ts[i] <= last and len(s) == 2 and len(s[0]) == 2 and len(s[1]) == 2
                        and (s[0][0], s[1][1]) in frozen_shapes):
                    spent += ev.shaped_dur[i]
        time[r] = spent
    return {"frozen_grads": count, "frozen_grad_us": time}
