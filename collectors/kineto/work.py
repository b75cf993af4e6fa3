"""Floating-point work of the matrix operators, from the shapes the
profiler recorded -> ``flops`` (one row per rank and step).

A trace recorded with ``record_shapes=True`` (``advisor run`` records
them) gives each operator's ``Input Dims``. Counted here are the operators
that carry a model's arithmetic on any device, with the formulas PyTorch's
own ``with_flops=True`` estimate uses (``torch/csrc/profiler/util.cpp``,
``computeFlops``):

* matrix multiplies: ``aten::mm`` ([M, K] x [K, N]), ``aten::addmm``
  (bias, [M, K], [K, N]): 2 * M * K * N; ``aten::bmm`` / ``aten::baddbmm``
  ([B, M, K] x [B, K, N]): 2 * B * M * K * N. A linear layer runs through
  them forward (``addmm``) and backward (two ``mm``), on CPU and GPU alike;
  wrappers (``aten::linear``, ``aten::matmul``) are not counted, so nothing
  is counted twice.
* 2-D convolutions, ``aten::conv2d`` (input [N, C, H, W], weight
  [Cout, C / groups, kh, kw]): 2 * N * Cout * Hout * Wout * C / groups *
  kh * kw, the output size from the stride, padding and dilation in
  ``Concrete Inputs``; not counted where the trace has no concrete inputs.

Elementwise operators are left out: the sum is the work a batch size, a
sequence length or a layer count scales, so compared across ranks it says
which rank was given more (``cluster.slow_rank_flops_ratio``); it is not
the model's total FLOPs.

A product is *thin* when its rows or its inner size (M or K of the
[M, K] x [K, N] product; for a convolution, of its matrix form: N * Hout *
Wout rows, C / groups * kh * kw inner) are at most ``THIN``: each weight
it reads then takes part in at most ``THIN`` multiply-adds, so it is bound
by memory, not arithmetic. A batch run row by row or a per-sample loop
makes every product of forward and backward thin (M = 1 forward and for
the input's gradient, K = 1 for the weight's); few columns (a layer with
one output, a convolution with few filters) do not count, since they are
a model's shape, not a way of running it. ``thin_matmul_us`` is the time
of those calls per step (CPU-only traces, where an operator's span is its
computation).

A product's operand type is its matrix operand's ``Input type`` (the
first of the product, after an ``addmm`` / ``baddbmm`` bias; a
convolution's input). On CPU-only traces the time per step of the
products of each floating-point type is a steps column:
``fp64_matmul_us`` (``double``: a model or its inputs left in double
precision by ``model.double()`` or ``torch.set_default_dtype``; a CPU's
vector units hold half as many float64 numbers as float32 ones and the
operands take twice the bytes), ``bf16_matmul_us`` and ``fp16_matmul_us``
(which run at tens of times their float32 time on a CPU without
instructions for the type).
"""

from __future__ import annotations

import msgspec
import numpy as np
import pandas as pd

from advisor.collectors.kineto.host_calls import step_rows, step_windows
from advisor.collectors.vocab import FLOATING_TYPES, dtype

#: Operators whose work is counted, by name.
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"})
CONV_OPS = frozenset({"aten::conv2d"})
COUNTED_OPS = MATMUL_OPS | CONV_OPS
#: Rows or inner size up to which a product is thin (module doc): 2*M*K*N
#: FLOPs over the 4*(M*K + K*N + M*N) bytes of its float32 operands is at
#: most min(M, K) / 2 FLOPs per byte, 4 at 8 -- below the ridge point
#: of a CPU core with vector FMA units (about 10-30 FLOPs per byte of its
#: cache bandwidth) and far below a GPU's or NPU's.
THIN = 8
#: Operand types told apart (``Events.work_type`` holds the index; 0: not
#: recorded or another type), in the Profile's dtype spelling.
OPERAND_TYPES = (None, *FLOATING_TYPES)
#: Sizes at or above this are not taken as a dimension (a trace's text may
#: hold any number; products of real sizes stay far below float range).
MAX_DIM = 1 << 40


def op_work(name: str, dims: bytes, concrete: bytes, types: bytes = b"") -> tuple[float, int, int] | None:
    """FLOPs, the smaller of rows and inner size and the operand type (a
    code of ``OPERAND_TYPES``) of one operator call from its raw ``Input
    Dims``, ``Concrete Inputs`` and ``Input type`` JSON texts (module doc);
    None when the shapes do not fit the operator's signature."""
    try:
        shapes = msgspec.json.decode(dims) if dims else None
    except msgspec.DecodeError:
        return None
    if not isinstance(shapes, list):
        return None
    if name in MATMUL_OPS:
        work = _matmul(name, shapes)
    elif name in CONV_OPS:
        work = _conv2d(shapes, concrete)
    else:
        return None
    return None if work is None else (*work, _operand_type(name, types))


def _operand_type(name: str, types: bytes) -> int:
    """The code in ``OPERAND_TYPES`` of the first matrix operand's ``Input
    type`` (the input for a convolution); 0 where not recorded or another type."""
    try:
        listed = msgspec.json.decode(types) if types else None
    except msgspec.DecodeError:
        return 0
    at = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
    if not isinstance(listed, list) or len(listed) <= at or not isinstance(listed[at], str):
        return 0
    spelled = dtype(listed[at])
    return OPERAND_TYPES.index(spelled) if spelled in OPERAND_TYPES else 0


def _size(value) -> bool:
    """True for an int (not a bool) in [0, ``MAX_DIM``)."""
    return type(value) is int and 0 <= value < MAX_DIM


def _dims(shape) -> list[int] | None:
    """A shape as sizes (:func:`_size`), or None when it is not one."""
    if not isinstance(shape, list) or not all(_size(d) for d in shape):
        return None
    return shape


def _matmul(name: str, shapes: list) -> tuple[float, int] | None:
    # addmm / baddbmm take (bias or input, a, b, ...); mm / bmm take (a, b)
    first = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
    if len(shapes) < first + 2:
        return None
    a, b = _dims(shapes[first]), _dims(shapes[first + 1])
    rank = 3 if name in ("aten::bmm", "aten::baddbmm") else 2
    if a is None or b is None or len(a) != rank or len(b) != rank or a[-1] != b[-2]:
        return None
    batch = a[0] if rank == 3 else 1
    return 2.0 * batch * a[-2] * a[-1] * b[-1], min(a[-2], a[-1])


def _conv2d(shapes: list, concrete: bytes) -> tuple[float, int] | None:
    """conv2d(input, weight, bias, stride, padding, dilation, groups)."""
    try:
        args = msgspec.json.decode(concrete) if concrete else None
    except msgspec.DecodeError:
        return None
    if len(shapes) < 2 or not isinstance(args, list) or len(args) < 7:
        return None
    x, w = _dims(shapes[0]), _dims(shapes[1])
    try:
        stride, padding, dilation, groups = (msgspec.json.decode(str(args[i])) for i in (3, 4, 5, 6))
    except msgspec.DecodeError:
        return None
    pairs = [v if isinstance(v, list) else [v, v] for v in (stride, padding, dilation)]
    if (x is None or w is None or len(x) != 4 or len(w) != 4 or not _size(groups) or groups == 0
            or not all(len(v) == 2 and all(_size(d) for d in v) for v in pairs)):
        return None
    (sh, sw), (ph, pw), (dh, dw) = pairs
    if sh <= 0 or sw <= 0:
        return None
    out_h = (x[2] + 2 * ph - dh * (w[2] - 1) - 1) // sh + 1
    out_w = (x[3] + 2 * pw - dw * (w[3] - 1) - 1) // sw + 1
    if out_h <= 0 or out_w <= 0:
        return None
    inner = (x[1] // groups) * w[2] * w[3]
    return 2.0 * x[0] * w[0] * out_h * out_w * inner, min(x[0] * out_h * out_w, inner)


def table(ts: np.ndarray, flops: np.ndarray, steps: pd.DataFrame, rank: int) -> pd.DataFrame | None:
    """``flops`` rows (rank, step, mflops) of the counted operators that
    start inside a step window; None without counted operators or steps."""
    windows = _named_windows(steps)
    rows = step_rows(ts, steps)
    inside = np.isin(rows, windows)
    if not inside.any():
        return None
    per_row = np.bincount(rows[inside], weights=flops[inside], minlength=len(steps))
    return pd.DataFrame({"rank": rank, "step": steps["step"].to_numpy()[windows], "mflops": per_row[windows] / 1e6})


def time_of(ts: np.ndarray, dur: np.ndarray, chosen: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Per row of ``steps``, the summed duration of the ``chosen`` calls
    that start in that step (0 where none; NaN for a row without a step
    window): with ``smallest <= THIN`` the thin products (module doc), with
    ``work_type == OPERAND_TYPES.index(vocab.BF16)`` the bfloat16 ones."""
    out = np.full(len(steps), np.nan)
    windows = _named_windows(steps)
    rows = step_rows(ts, steps)
    inside = (rows >= 0) & chosen
    out[windows] = np.bincount(rows[inside], weights=dur[inside], minlength=len(steps))[windows]
    return out


def _named_windows(steps: pd.DataFrame | None) -> np.ndarray:
    """The step windows (:func:`host_calls.step_windows`) of rows with a step id."""
    windows = step_windows(steps)
    if windows.size == 0 or "step" not in steps.columns:
        return windows[:0]
    return windows[steps["step"].notna().to_numpy()[windows]]
