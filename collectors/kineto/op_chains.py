"""Operator chains a fused kernel replaces, found in a trace's op sequence
-> ``host_calls`` rows.

A model that writes attention, RMSNorm, SwiGLU, GeGLU or rotary embedding out of
elementwise operators runs each as a chain of ops, every one a pass over
memory (and a kernel launch on a device); a fused kernel
(``scaled_dot_product_attention``, ``torch_npu.npu_rms_norm`` ...) does the
chain in one. The chains are the ordered op sequences of msprof-analyze's
affinity-API check (``timeline_fusion_ops.yaml``), matched here on each
thread's top-level operators (an op inside another op is its
implementation): what the forward pass calls, in order, with the ops that
only reshape or cast in between skipped (``TRANSPARENT``). Backward nodes
are top-level ops of their own and break a chain, so a checkpoint's
recomputation (inside a backward node) is not counted.

Per chain, the *counted* ops are its memory passes: every op but the matrix
products at the ends of attention, which a fused attention kernel still
computes. Rows, per (step, pattern):

* ``op_chain``: ``count`` chains, ``total_us`` their counted ops' own
  time, ``device_us`` the device time those ops launched (NaN on a
  CPU-only trace);
* ``op_chain_floor``: the same over each chain's longest counted op only.
  A fused kernel still reads the chain's inputs and writes its output, at
  least what the longest pass moves: the chain's time less this is what
  fusing can save.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.decode import HOST, Events
from advisor.collectors.kineto.host_calls import _device_time, _step_of
from advisor.collectors.vocab import ATEN

#: Ops that only view, reshape or cast a tensor, or build a mask: skipped when matching.
TRANSPARENT = frozenset({
    "view", "reshape", "_reshape_alias", "_unsafe_view", "transpose", "permute", "contiguous", "expand",
    "expand_as", "unsqueeze", "squeeze", "split", "split_with_sizes", "chunk", "slice", "select", "narrow", "t",
    "detach", "alias", "as_strided", "flatten", "unflatten", "view_as", "to", "_to_copy", "type_as", "lift_fresh",
    "clone", "empty", "empty_like", "zeros_like", "ones_like", "full", "arange", "tril", "triu", "__getitem__",
    # building an attention mask (``~mask``, ``mask == 0``) between the scores and their masking
    "bitwise_not", "logical_not", "eq", "ne", "lt", "gt", "le", "ge",
})
#: Matrix products: the ends of an attention chain, not counted as its memory passes.
MATMUL = frozenset({"matmul", "bmm", "baddbmm", "einsum", "mm"})
#: Each pattern: a regular expression over the short op names (``aten::``
#: and a trailing in-place ``_`` dropped), each followed by one space. The
#: names are those of ``advisor.metrics.sequences.AFFINITY_API``.
PATTERNS: dict[str, str] = {
    "softmax attention":
        r"(?:matmul |bmm |baddbmm |einsum )(?:mul |div )?(?:add |masked_fill |where )?(?:mul |div )?"
        r"(?:softmax |_softmax |_safe_softmax )(?:dropout |native_dropout |feature_dropout )?(?:matmul |bmm |einsum )",
    "RMSNorm": r"pow mean add rsqrt mul (?:mul )?",
    "SwiGLU": r"silu (?:linear )?mul ",
    # the gate half's GELU times the other half, with nothing between (diffusers' GEGLU): a GELU MLP
    # calls linear, gelu, linear and then a layer scale's mul (ConvNeXt), so no linear may stand between
    "GeGLU": r"gelu mul ",
    "rotary embedding": r"(?:mul )?neg cat mul add ",
}
_WORD = re.compile(r"[a-z_]+ ")
#: The op names the patterns use, each coded as one character.
_CODES = {w[:-1]: chr(0x100 + i) for i, w in enumerate(sorted({w for p in PATTERNS.values() for w in _WORD.findall(p)}))}
#: The patterns over coded names: one character per op, so a match's span is its ops' positions.
_COMPILED = {name: re.compile(_WORD.sub(lambda m: re.escape(_CODES[m.group()[:-1]]), p)) for name, p in PATTERNS.items()}
#: The code of an op no pattern names.
_OTHER = "."
#: Ops a pattern matches only as context, not as one of its passes.
_NOT_COUNTED = MATMUL | {"linear"}
#: An op of every pattern: a trace that calls none of them has no chain to look for.
_KEY_OPS = frozenset({"softmax", "_softmax", "_safe_softmax", "rsqrt", "silu", "gelu", "neg"})
#: What a framework op's name holds (``aten::softmax``, ``autograd::engine::...``):
#: the step markers, ``Optimizer.step#...`` and ``record_function`` ranges,
#: which some profilers file under the ops' category (PyTorch 1.8's
#: ``Operator``, torch_npu's ``cpu_op``), have none and would hide the ops
#: they enclose.
FRAMEWORK_OP = "::"


def short_name(name: str) -> str:
    """``aten::masked_fill_`` -> ``masked_fill``; other names unchanged."""
    if not name.startswith(ATEN):
        return name
    return name[len(ATEN):].rstrip("_") or name


def find(tokens: list[str]) -> list[tuple[str, list[int]]]:
    """(pattern, positions of its ops in ``tokens``) of every chain in one
    thread's op sequence, transparent ops skipped; chains do not overlap
    (the earliest match wins)."""
    kept = [i for i, t in enumerate(tokens) if t not in TRANSPARENT]
    text = "".join(_CODES.get(tokens[i], _OTHER) for i in kept)
    found = sorted((m.start(), name, [kept[j] for j in range(m.start(), m.end())])
                   for name, pattern in _COMPILED.items() for m in pattern.finditer(text))
    chains, taken = [], set()
    for _, name, positions in found:
        if taken.isdisjoint(positions):
            taken.update(positions)
            chains.append((name, positions))
    return chains


def match(names: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The chains among host ops given as short names (``short_name``),
    integer thread codes, starts and ends: per chain its pattern and the
    positions (into these arrays) of its counted ops, every op but the
    matrix products at the ends of attention. Only each thread's top-level
    ops are read, in time order."""
    top = np.flatnonzero(iv.depth(thread, start, end) == 0)
    top = top[np.lexsort((start[top], thread[top]))]
    chains = []
    for th in np.unique(thread[top]):
        at = top[thread[top] == th]
        tokens = names[at]
        for name, positions in find(list(tokens)):
            chains.append((name, at[[p for p in positions if tokens[p] not in _NOT_COUNTED]]))
    return chains


def has_key_ops(names) -> bool:
    """Whether any of ``names`` (short names) is an op every chain of some
    pattern holds: without one there is no chain to look for."""
    return not _KEY_OPS.isdisjoint(names)


def rows(chains: list[tuple[str, np.ndarray]], start: np.ndarray, own: np.ndarray, device: np.ndarray,
         step_of: Callable[[np.ndarray], pd.array], rank: int) -> pd.DataFrame:
    """The ``op_chain`` and ``op_chain_floor`` rows (module doc) of
    ``chains`` (``match``) over ops with these starts, own times and device
    times (NaN where not measured); a chain's step is ``step_of`` its
    first op's start (NA outside every step)."""
    steps = step_of(np.array([start[idx].min() for _, idx in chains], dtype=np.float64))
    out = []
    for (name, idx), step in zip(chains, steps):
        times, dev = own[idx], device[idx]
        longest = int(np.argmax(dev)) if np.isfinite(dev).all() else int(np.argmax(times))
        out.append((step, "op_chain", name, float(times.sum()), float(dev.sum())))
        out.append((step, "op_chain_floor", name, float(times[longest]), float(dev[longest])))
    df = pd.DataFrame(out, columns=["step", "cls", "name", "dur", "device"])
    df["step"] = df["step"].astype("Int64")
    grouped = df.groupby(["step", "cls", "name"], dropna=False, sort=True)
    table = grouped["dur"].agg(count="size", total_us="sum", max_us="max").reset_index()
    table["device_us"] = grouped["device"].sum(min_count=1).to_numpy()
    table["step"] = table["step"].astype("Int64")
    table["count"] = table["count"].astype(np.int64)
    table.insert(0, "rank", rank)
    return table


def table(ev: Events, steps: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    """The ``op_chain`` and ``op_chain_floor`` rows of one Kineto trace
    (module doc), None without a chain. ``steps``: the trace's steps table;
    a chain outside every step gets step NA. The ops are the host ops with
    a namespace (``FRAMEWORK_OP``); device time: the kernels each op
    launched (``host_calls._device_time``)."""
    short = np.array([short_name(str(n)) for n in ev.names], dtype=object)
    if not has_key_ops(short):
        return None
    framework = np.fromiter((FRAMEWORK_OP in str(n) for n in ev.names), dtype=bool, count=len(ev.names))
    op = np.flatnonzero((ev.kind == HOST) & (ev.cat_is("cpu_op") | ev.cat_is("Operator")) & framework[ev.name])
    chains = match(short[ev.name[op]], ev.thread[op], ev.ts[op], ev.end_at(op)) if op.size else []
    if not chains:
        return None
    members = np.zeros(op.size, dtype=bool)
    members[np.concatenate([idx for _, idx in chains])] = True
    device = _device_time(ev, op, members)
    return rows(chains, ev.ts[op], ev.dur[op], device, lambda ts: _step_of(ts, steps), rank)
