"""Embedding tables whose gradient is built dense, per step -> ``steps``
columns (CPU-only traces recorded with ``record_shapes=True``).

``nn.Embedding`` / ``nn.EmbeddingBag`` without ``sparse=True`` make their
weight's gradient a dense table: the backward
(``aten::embedding_dense_backward``, ``aten::_embedding_bag_dense_backward``)
zero-fills all ``rows x width`` of it to write the rows the batch looked
up, and the optimizer then reads and updates every row. A lookup's shapes
say the table (its weight ``[rows, width]``) and how many rows the batch
looked up (the indices' elements: at most that many distinct rows).

A dense backward is paired with the lookup it undoes: same indices shape
and width, in the same step, the last lookup with the first backward
(backward runs in reverse). A table whose weight is also an
``aten::linear`` weight in the step (tied to an output layer) is left
out: that layer's gradient is dense whatever the lookup does. Per step
window:

* ``dense_embed_tables``: tables with a dense backward in the step;
* ``dense_embed_rows`` and ``dense_embed_lookups``: their rows and the
  rows their lookups asked for (indices' elements), summed over them;
* ``dense_embed_backward_us``: the time of their dense backward ops;
* ``dense_embed_optimizer_us``: the time of the step's optimizer ranges
  (``Optimizer.step#...``) times the tables' share of the elements of the
  gradients accumulated in the step (``AccumulateGrad`` shapes): an
  optimizer's update is a pass over every element it updates;
* ``dense_embed_us``: the two summed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from advisor.collectors.kineto.decode import Events
from advisor.collectors.kineto.host_calls import by_step, step_rows, step_windows
from advisor.collectors.kineto.shaped_events import (ACCUMULATE, DENSE_LOOKUP_BACKWARD, LINEAR_OP, LOOKUP,
                                                    optimizer_steps)

COLUMNS = ("dense_embed_tables", "dense_embed_rows", "dense_embed_lookups", "dense_embed_backward_us",
           "dense_embed_optimizer_us", "dense_embed_us")


def _table(shapes: tuple) -> tuple | None:
    """(rows, width) of a lookup's weight and its indices' shape, or None."""
    if len(shapes) < 2 or len(shapes[0]) != 2:
        return None
    return shapes[0], shapes[1]


def _pairs(lookups: list[int], backwards: list[int], shapes) -> list[tuple[tuple, int, int]]:
    """(weight shape, lookups, backward event) of each dense backward paired
    with its lookup (module doc)."""
    pending: dict[tuple, list[tuple[tuple, int]]] = {}
    for i in lookups:
        found = _table(shapes[i])
        if found is not None:
            weight, indices = found
            pending.setdefault((weight[1], indices), []).append((weight, math.prod(indices)))
    out = []
    for i in backwards:
        s = shapes[i]
        if len(s) < 2 or not s[0]:
            continue
        queue = pending.get((s[0][-1], s[1]))
        if queue:
            weight, asked = queue.pop()
            out.append((weight, asked, i))
    return out


def columns(ev: Events, steps: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """The ``COLUMNS`` aligned to ``steps``' rows (NaN for a row without a
    step window); None when the trace records no dense embedding backward."""
    if steps is None or steps.empty or not (ev.shaped_role == DENSE_LOOKUP_BACKWARD).any():
        return None
    opt_idx = optimizer_steps(ev)
    opt_rows = step_rows(ev.ts[opt_idx], steps)
    row = step_rows(ev.shaped_ts, steps)
    out = {c: np.full(len(steps), np.nan) for c in COLUMNS}
    per_step = by_step(row, len(steps))
    for r in step_windows(steps):
        mine = per_step[r]
        role = ev.shaped_role[mine]
        tied = {s[1] for s in ev.shaped_shapes[mine[role == LINEAR_OP]] if len(s) >= 2 and len(s[1]) == 2}
        pairs = [(w, asked, i) for w, asked, i in _pairs(list(mine[role == LOOKUP]),
                                                         list(mine[role == DENSE_LOOKUP_BACKWARD]), ev.shaped_shapes)
                 if w not in tied]
        tables = {w for w, _, _ in pairs}
        out["dense_embed_tables"][r] = len(tables)
        out["dense_embed_rows"][r] = sum(w[0] for w in tables)
        out["dense_embed_lookups"][r] = sum(asked for _, asked, _ in pairs)
        out["dense_embed_backward_us"][r] = float(sum(ev.shaped_dur[i] for _, _, i in pairs))
        accumulated = [s[0] for s in ev.shaped_shapes[mine[role == ACCUMULATE]] if s]
        total = sum(math.prod(s) for s in accumulated)
        share = sum(math.prod(s) for s in accumulated if s in tables) / total if total else 0.0
        out["dense_embed_optimizer_us"][r] = float(ev.dur[opt_idx[opt_rows == r]].sum()) * share
    out["dense_embed_us"] = out["dense_embed_backward_us"] + out["dense_embed_optimizer_us"]
    return out
