"""Operator chains a fused kernel replaces, found in a trace's op sequence
-> ``host_calls`` rows.

A model that writes attention, RMSNorm, SwiGLU or rotary embedding out of
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

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.decode import HOST, KERNEL, Events
from advisor.collectors.kineto.host_calls import _step_of, launched_time

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
    "rotary embedding": r"(?:mul )?neg cat mul add ",
}
_WORD = re.compile(r"[a-z_]+ ")
#: The op names the patterns use, each coded as one character (``_coded``).
_CODES = {w[:-1]: chr(0x100 + i) for i, w in enumerate(sorted({w for p in PATTERNS.values() for w in _WORD.findall(p)}))}
#: The patterns over coded names: one character per op, so a match's span is its ops' positions.
_COMPILED = {name: re.compile(_WORD.sub(lambda m: re.escape(_CODES[m.group()[:-1]]), p)) for name, p in PATTERNS.items()}
#: The code of an op no pattern names.
_OTHER = "."
#: Ops a pattern matches only as context, not as one of its passes.
_NOT_COUNTED = MATMUL | {"linear"}
#: An op of every pattern: a trace that calls none of them has no chain to look for.
_KEY_OPS = frozenset({"softmax", "_softmax", "_safe_softmax", "rsqrt", "silu", "neg"})
_PREFIX = "aten::"


def short_name(name: str) -> str:
    """``aten::masked_fill_`` -> ``masked_fill``; other names unchanged."""
    if not name.startswith(_PREFIX):
        return name
    return name[len(_PREFIX):].rstrip("_") or name


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


def table(ev: Events, steps: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    """The ``op_chain`` and ``op_chain_floor`` rows of one trace (module
    doc), None without a chain. ``steps``: the trace's steps table; a chain
    outside every step gets step NA."""
    short = np.array([short_name(str(n)) for n in ev.names], dtype=object)
    if _KEY_OPS.isdisjoint(short):
        return None
    op = np.flatnonzero((ev.kind == HOST) & (ev.cat_is("cpu_op") | ev.cat_is("Operator")))
    if op.size == 0:
        return None
    op = op[iv.depth(ev.thread[op], ev.ts[op], ev.end_at(op)) == 0]
    op = op[np.lexsort((ev.ts[op], ev.thread[op]))]
    tokens = short[ev.name[op]]
    chains = []
    for thread in np.unique(ev.thread[op]):
        at = np.flatnonzero(ev.thread[op] == thread)
        for name, positions in find(list(tokens[at])):
            counted = [p for p in positions if tokens[at[p]] not in _NOT_COUNTED]
            chains.append((name, op[at[counted]]))
    if not chains:
        return None
    members = np.concatenate([idx for _, idx in chains])
    device = _launched(ev, members)
    own = dict(zip(members.tolist(), ev.dur[members].tolist()))
    launched = dict(zip(members.tolist(), device.tolist()))
    out = []
    for name, idx in chains:
        times = [own[i] for i in idx.tolist()]
        dev = [launched[i] for i in idx.tolist()]
        longest = int(np.argmax(dev)) if np.isfinite(dev).all() else int(np.argmax(times))
        start = float(ev.ts[idx].min())
        out.append((start, "op_chain", name, sum(times), sum(dev)))
        out.append((start, "op_chain_floor", name, times[longest], dev[longest]))
    df = pd.DataFrame(out, columns=["ts", "cls", "name", "dur", "device"])
    df["step"] = _step_of(df["ts"].to_numpy(float), steps)
    grouped = df.groupby(["step", "cls", "name"], dropna=False, sort=True)
    out = grouped["dur"].agg(count="size", total_us="sum", max_us="max").reset_index()
    out["device_us"] = grouped["device"].sum(min_count=1).to_numpy()
    out["step"] = out["step"].astype("Int64")
    out["count"] = out["count"].astype(np.int64)
    out.insert(0, "rank", rank)
    return out


def _launched(ev: Events, idx: np.ndarray) -> np.ndarray:
    """Device time each op of ``idx`` launched; NaN on a CPU-only trace."""
    if not (ev.kind >= KERNEL).any():
        return np.full(idx.size, np.nan)
    return launched_time(ev, idx)
