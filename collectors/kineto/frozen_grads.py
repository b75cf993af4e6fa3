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
  the count is a lower bound.
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

import msgspec
import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import OPTIMIZER_INNER, OPTIMIZER_STEP_RE, host_call_class
from advisor.collectors.kineto.decode import HOST, Events
from advisor.collectors.kineto.host_calls import step_rows, step_windows

ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
BACKWARD_NODE = "autograd::engine::evaluate_function"
PRODUCT = "aten::mm"
#: Embedding lookups (weight, indices, ...) and the backward ops that build
#: their gradient as a dense table (:mod:`kineto.dense_embedding`); the
#: outer ops only, not the ``aten::_embedding_bag`` they call.
LOOKUPS = frozenset({"aten::embedding", "aten::embedding_bag"})
DENSE_LOOKUP_BACKWARDS = frozenset({"aten::embedding_dense_backward", "aten::_embedding_bag_dense_backward"})
#: ``F.linear(x, weight)``: a table used as an output layer's weight too (tied).
LINEAR = "aten::linear"
#: A tensor copied into a new one (``Tensor.clone``, ``copy.deepcopy`` of a parameter: :mod:`kineto.param_copies`).
CLONE_OP = "aten::clone"
#: roles of the events read (``grad_role``)
ACCUMULATE, BACKWARD, MATMUL, OPTIMIZER, LOOKUP, DENSE_LOOKUP_BACKWARD, LINEAR_OP, CLONE = 0, 1, 2, 3, 4, 5, 6, 7


def grad_role(name: str) -> int | None:
    """The role of an event name here (module doc, :mod:`kineto.dense_embedding`,
    :mod:`kineto.param_copies`), or None."""
    if name == ACCUMULATE_GRAD:
        return ACCUMULATE
    if name.startswith(BACKWARD_NODE):
        return BACKWARD
    if name == PRODUCT:
        return MATMUL
    if name in LOOKUPS:
        return LOOKUP
    if name in DENSE_LOOKUP_BACKWARDS:
        return DENSE_LOOKUP_BACKWARD
    if name == LINEAR:
        return LINEAR_OP
    if name == CLONE_OP:
        return CLONE
    if host_call_class(name) in OPTIMIZER_INNER:
        return OPTIMIZER
    return None


def optimizer_steps(ev: Events) -> np.ndarray:
    """Positions of the trace's optimizer steps: the ``Optimizer.step#...``
    ranges (``calls.OPTIMIZER_STEP_RE``) the profiler records as host user
    annotations."""
    ranges = (ev.kind == HOST) & ev.cat_is("user_annotation")
    is_step = np.array([bool(OPTIMIZER_STEP_RE.match(str(n))) for n in ev.names], dtype=bool)
    return np.flatnonzero(ranges & is_step[ev.name])


def shapes(raw: bytes) -> tuple:
    """The tensor shapes of a raw ``Input Dims`` JSON text, in order, a
    tensor list's shapes in its place (``[[512, 512], [512]]`` for a
    ``_foreach_*`` argument); () when there are none or the text is not a list."""
    try:
        dims = msgspec.json.decode(raw) if raw else None
    except msgspec.DecodeError:
        return ()
    if not isinstance(dims, list):
        return ()
    out: list[tuple] = []
    for arg in dims:  # a shape, or a tensor list's shapes; deeper nesting is no tensor argument
        for shape in ([arg] if _is_shape(arg) else arg if isinstance(arg, list) else []):
            if _is_shape(shape):
                out.append(tuple(shape))
    return tuple(out)


def _is_shape(value) -> bool:
    """True for a non-empty list of ints (a tensor's sizes)."""
    return isinstance(value, list) and bool(value) and all(type(d) is int for d in value)


def columns(ev: Events, steps: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """``frozen_grads`` and ``frozen_grad_us`` aligned to ``steps``' rows
    (NaN for a row without a step window or an optimizer step); None when
    the trace records no gradient accumulation with a shape or no optimizer
    step."""
    if steps is None or steps.empty or ev.grad_ts.size == 0:
        return None
    acc = (ev.grad_role == ACCUMULATE) & np.array([len(s) > 0 for s in ev.grad_shapes], dtype=bool)
    opt_idx = optimizer_steps(ev)
    if not acc.any() or opt_idx.size == 0:
        return None
    windows = step_windows(steps)
    row = step_rows(ev.grad_ts, steps)
    by_start = np.argsort(ev.ts[opt_idx])
    opt_start, opt_end = ev.ts[opt_idx][by_start], (ev.ts + ev.dur)[opt_idx][by_start]
    # an optimizer operator counts when it starts inside an optimizer step range
    in_step = iv.window_index(opt_start, opt_end, ev.grad_ts) >= 0
    first_shape = np.array([s[0] if s else None for s in ev.grad_shapes], dtype=object)
    count = np.full(len(steps), np.nan)
    time = np.full(len(steps), np.nan)
    has_opt = np.zeros(len(steps), dtype=bool)
    opt_rows = step_rows(opt_start, steps)
    has_opt[opt_rows[opt_rows >= 0]] = True
    # events are in time order: group them by step once, not once per step
    order = np.argsort(row, kind="stable")
    bounds = np.searchsorted(row[order], np.arange(len(steps) + 1), side="left")
    for r in windows:
        if not has_opt[r]:
            continue
        mine = order[bounds[r]:bounds[r + 1]]
        role = ev.grad_role[mine]
        read = set().union(*ev.grad_shapes[mine[(role == OPTIMIZER) & in_step[mine]]])
        accumulated = mine[acc[mine]]
        frozen = accumulated[np.array([first_shape[i] not in read for i in accumulated], dtype=bool)]
        frozen_shapes = set(first_shape[frozen])
        count[r] = frozen.size
        spent = ev.grad_dur[frozen].sum()
        backward = mine[role == BACKWARD]
        if frozen_shapes and backward.size:
            first, last = ev.grad_ts[backward].min(), (ev.grad_ts + ev.grad_dur)[backward].max()
            for i in mine[role == MATMUL]:
                s = ev.grad_shapes[i]
                if (first <= ev.grad_ts[i] <= last and len(s) == 2 and len(s[0]) == 2 and len(s[1]) == 2
                        and (s[0][0], s[1][1]) in frozen_shapes):
                    spent += ev.grad_dur[i]
        time[r] = spent
    return {"frozen_grads": count, "frozen_grad_us": time}
