"""Host events read with the shapes of their inputs (``record_shapes=True``),
and the role each plays for the analyses that read them: gradient
accumulations, backward nodes, matrix products and optimizer operators
(:mod:`kineto.frozen_grads`), embedding lookups, their dense backwards and
``aten::linear`` (:mod:`kineto.dense_embedding`), and ``aten::clone``
(:mod:`kineto.param_copies`). The decoder keeps every event whose name has a
role (``Events.shaped_*``), with its shapes parsed once per distinct text.
"""

from __future__ import annotations

import msgspec
import numpy as np

from advisor.collectors.kineto.calls import BACKWARD_WORK, OPTIMIZER_INNER, OPTIMIZER_STEP_RE, host_call_class
from advisor.collectors.kineto.decode import HOST, Events

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
#: roles of the events read (``role_of``)
ACCUMULATE, BACKWARD, MATMUL, OPTIMIZER, LOOKUP, DENSE_LOOKUP_BACKWARD, LINEAR_OP, CLONE = 0, 1, 2, 3, 4, 5, 6, 7


def role_of(name: str) -> int | None:
    """The role of an event name (module doc), or None."""
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
    """Positions of the trace's optimizer steps: the host ranges named
    ``Optimizer.step#<class>.step`` (``calls.OPTIMIZER_STEP_RE``) that
    PyTorch's optimizers record, whatever their category (user_annotation
    in current traces, Operator in PyTorch 1.8's, cpu_op in torch_npu's
    trace_view.json)."""
    return np.flatnonzero((ev.kind == HOST) & ev.named(OPTIMIZER_STEP_RE))


#: The run note of a trace whose optimizer steps were cut (``cut_closures``).
CLOSURE_NOTE = ("the optimizer's step() runs a closure (forward and backward inside Optimizer.step, as "
                "optimizer.step(closure) and PyTorch Lightning do): the optimizer's time is counted from the end of "
                "the closure's backward")


def cut_closures(ev: Events) -> bool:
    """Cut every optimizer step that ran a closure to the optimizer's own
    update (``update_starts``), in place; True when one was cut. Every
    reader of the optimizer's range (its time, the operators inside it)
    then sees the update alone."""
    opt = optimizer_steps(ev)
    if opt.size == 0:
        return False
    back = np.flatnonzero(ev.named(lambda n: host_call_class(n) in BACKWARD_WORK))
    starts = update_starts(ev.ts[opt], ev.end_at(opt), ev.ts[back], ev.end_at(back))
    cut = starts > ev.ts[opt]
    ev.dur[opt] = ev.end_at(opt) - starts
    ev.ts[opt] = starts
    return bool(cut.any())


def update_starts(begin: np.ndarray, end: np.ndarray, back_begin: np.ndarray, back_end: np.ndarray) -> np.ndarray:
    """Where each optimizer step's own update starts: an ``Optimizer.step``
    range [``begin``, ``end``) that ran a closure (``optimizer.step(closure)``:
    PyTorch Lightning's automatic optimization, LBFGS) holds the closure's
    forward and backward first, so its update starts where the last event
    of backward work (``back_begin``, ``back_end``: backward nodes, and
    under DDP the reducer copying the reduced buckets into the gradients,
    ``calls.BACKWARD_WORK``) that starts inside it ends; a range without
    one starts at ``begin``."""
    out = np.asarray(begin, dtype=np.float64).copy()
    if back_begin.size == 0:
        return out
    order = np.argsort(back_begin, kind="stable")
    starts, ends = back_begin[order], back_end[order]
    lo = np.searchsorted(starts, begin, "left")
    hi = np.searchsorted(starts, end, "left")
    for i in np.flatnonzero(hi > lo):
        out[i] = min(float(ends[lo[i]:hi[i]].max()), float(end[i]))
    return out


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


def first_shapes(ev: Events) -> np.ndarray:
    """Per ``Events.shaped_*`` event, the shape of its first tensor input
    (an accumulated gradient's, a cloned tensor's), None where it has none."""
    return np.array([s[0] if s else None for s in ev.shaped_shapes], dtype=object)
