"""Small per-unit tables, built into Arrow once per batch of units.

Wrapping values in an Arrow table costs ~5-10 us per column before the
first value, so a rank's step trace (~20 rows), communication operators,
bandwidths and links (~100 rows each) cost more to wrap than to read. A
reader keeps such a table as a ``PendingTable`` (its columns as Python
lists or NumPy arrays) and ``build`` turns the pending tables of a whole
batch into one Arrow table, giving each unit back its own slice.

A unit's slice is exactly the table it would get alone:

* a column with no value for the unit is left out of its slice (unless it
  is in ``keep``), as is a column nobody in the batch has;
* known columns (``order``) come first in that order, then any others in
  order of first appearance;
* missing values: ``None`` in lists, NaN in float arrays; both become null.
  A float array for an integer column is rounded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import compress

import numpy as np
import pyarrow as pa

FLOAT = pa.float64()


@dataclass
class PendingTable:
    """One unit's columns of equal length ``n``, not yet Arrow. ``types``
    gives each column's Arrow type (``default`` for the rest)."""

    columns: dict[str, list | np.ndarray]
    n: int
    order: tuple[str, ...] = ()
    types: dict[str, pa.DataType] = field(default_factory=dict)
    default: pa.DataType = FLOAT
    keep: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return self.n

    def names(self) -> list[str]:
        """Its columns in table order: known ones first, then the others."""
        known = set(self.order)
        return [c for c in self.order if c in self.columns] + [c for c in self.columns if c not in known]


def only(table: PendingTable, columns: frozenset[str]) -> PendingTable:
    """``table`` with only those of its columns in ``columns``."""
    if table.columns.keys() <= columns:
        return table
    return replace(table, columns={c: v for c, v in table.columns.items() if c in columns})


def select_rows(columns: dict[str, list | np.ndarray], keep: np.ndarray) -> dict[str, list | np.ndarray]:
    """The rows of ``columns`` (lists or NumPy arrays of equal length) where
    ``keep`` (bool array) is true; the same dict when all are kept."""
    if keep.all():
        return columns
    flags = keep.tolist()  # Python bools: iterating the array would make a NumPy scalar per row
    return {c: v[keep] if isinstance(v, np.ndarray) else list(compress(v, flags))
            for c, v in columns.items()}


def build(pending: Sequence[PendingTable]) -> list[pa.Table]:
    """Each pending table as Arrow (see the module doc); all of one kind
    (the first one's ``order``, ``types`` and ``keep`` apply), built together."""
    if not pending:
        return []
    first = pending[0]
    names = first.names() if len(pending) == 1 else _union([p.names() for p in pending], first.order)
    sizes = [p.n for p in pending]
    arrays = {c: _array([p.columns.get(c) for p in pending], sizes, first.types.get(c, first.default))
              for c in names}
    arrays = {c: a for c, a in arrays.items() if c in first.keep or a.null_count < len(a)}
    table = pa.table(list(arrays.values()), names=list(arrays))
    absent = _absent(arrays, pending, first.keep)
    out, offset = [], 0
    for i, (p, n) in enumerate(zip(pending, sizes)):
        part = table.slice(offset, n) if len(sizes) > 1 else table
        cols = [c for c in p.names() if c in arrays and not (c in absent and absent[c][i])
                and (n or c in first.keep)]  # an empty unit has a value nowhere
        out.append(part if cols == table.column_names else part.select(cols))
        offset += n
    return out


def _union(names: list[list[str]], order: tuple[str, ...]) -> list[str]:
    """All units' columns: known ones in ``order``, then others as first seen."""
    seen = {c for cols in names for c in cols}
    out = [c for c in order if c in seen]
    known = set(order)
    for cols in names:
        out.extend(c for c in cols if c not in known and c not in out)
    return out


def _absent(arrays: dict[str, pa.Array], pending: Sequence[PendingTable],
            keep: frozenset[str]) -> dict[str, np.ndarray]:
    """For each column with a null, which units leave it out (bool per
    unit): those without it, and unless it is kept, those with no value in it."""
    out = {}
    sizes = np.array([p.n for p in pending])
    starts = np.cumsum(sizes) - sizes
    for c, array in arrays.items():
        if array.null_count:
            if c in keep:
                out[c] = np.array([c not in p.columns for p in pending])
            else:
                running = np.concatenate([[0], np.cumsum(array.is_null().to_numpy(zero_copy_only=False))])
                out[c] = running[starts + sizes] - running[starts] == sizes
    return out


def build_one(pending: PendingTable | None) -> pa.Table | None:
    """``build`` of one table; None stays None."""
    return None if pending is None else build([pending])[0]


def _array(parts: list, sizes: list[int], kind: pa.DataType) -> pa.Array:
    """One column over the batch: its parts (None where a unit lacks it) as
    one Arrow array of ``kind``."""
    if all(isinstance(p, np.ndarray) or p is None for p in parts):
        if all(p is not None and p.dtype.kind != "f" for p in parts):
            return pa.array(np.concatenate(parts) if len(parts) > 1 else parts[0], type=kind)
        values = np.concatenate([np.full(n, np.nan) if p is None else p.astype(np.float64, copy=False)
                                 for p, n in zip(parts, sizes)]) if len(parts) > 1 else \
            parts[0].astype(np.float64, copy=False)
        missing = np.isnan(values)
        if pa.types.is_integer(kind):
            values = np.where(missing, 0, np.round(values)).astype(np.int64)
        return pa.array(values, type=kind, mask=missing if missing.any() else None)
    cells: list = []
    for p, n in zip(parts, sizes):
        if p is None:
            cells.extend([None] * n)
        elif isinstance(p, np.ndarray):
            cells.extend(None if p.dtype.kind == "f" and math.isnan(v) else v for v in p.tolist())
        else:
            cells.extend(p)
    return pa.array(cells, type=kind)
