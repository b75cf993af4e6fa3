"""Rows of an Arrow table grouped by key columns, and per-group sums,
minima, maxima and distinct counts, in NumPy.

What ``pyarrow.Table.group_by(...).aggregate(...)`` computes for the
readers' roll-ups (operators per kernel key, communication per rank, step
and kind), without Arrow's query engine: ``pyarrow.acero`` takes ~25 ms to
import in every reader process, and each call has a fixed cost that a
reader's many small batches pay again and again.

Semantics, as Arrow's hash aggregation with ``use_threads=False``:

* a null key equals another null key (and differs from every value);
  groups are numbered in the order of their first row (Arrow leaves its
  order unspecified);
* a sum adds a group's valid values in row order (the same float result,
  NaN where one of them is NaN); with ``min_count`` 1 a group without a
  valid value has no sum (null once back in Arrow), with 0 its sum is 0;
* minima and maxima skip nulls, and NaN unless a group has nothing else;
* each result comes with whether the group has it (``nullable``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list]:
    """(per row, the index of its value in the list; the distinct values, a
    null among them when the column has one), in order of first row."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_null(column.type):
        return np.zeros(len(column), dtype=np.int64), [None] * bool(len(column))
    encoded = column.dictionary_encode(null_encoding="encode")
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary.to_pylist()


def numbers(key_codes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(group number of each row, the first row of each group) of rows
    keyed by one code array per key column (``codes``, or any
    non-negative integers), groups numbered in order of their first row."""
    ids = np.zeros(key_codes[0].size if key_codes else 0, dtype=np.int64)
    for code in key_codes:
        ids = pd.factorize(ids * (int(code.max(initial=0)) + 1) + code)[0]  # renumbered: never overflows
    n = int(ids.max(initial=-1)) + 1
    first = np.empty(n, dtype=np.int64)
    first[ids[::-1]] = np.arange(ids.size - 1, -1, -1)  # the earliest row wins
    return ids, first


def floats(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values as float64, NaN where null; the valid mask) of a numeric column."""
    valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
    return column.to_numpy(zero_copy_only=False).astype(np.float64), valid


def sums(group: np.ndarray, values: np.ndarray, valid: np.ndarray, n: int,
         min_count: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Per group below ``n``: (the sum of its valid values, whether it has
    one -- at least ``min_count`` valid values; module doc)."""
    out = np.bincount(group[valid], weights=values[valid], minlength=n).astype(np.float64)  # int when empty
    return out, np.bincount(group[valid], minlength=n) >= min_count


def extreme(ufunc: np.ufunc, group: np.ndarray, values: np.ndarray, valid: np.ndarray,
            n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group below ``n``: (its largest (``np.fmax``) or smallest
    (``np.fmin``) valid value, NaN skipped unless it has no other; whether
    it has a valid value)."""
    g, v = group[valid], values[valid]
    out = np.full(n, -np.inf if ufunc is np.fmax else np.inf)
    ufunc.at(out, g, v)
    out[np.isinf(out) & (np.bincount(g, weights=~np.isnan(v), minlength=n) == 0)] = np.nan
    return out, np.bincount(g, minlength=n) > 0


def distinct_counts(group: np.ndarray, column: pa.ChunkedArray | pa.Array, n: int) -> np.ndarray:
    """Per group below ``n``, the number of distinct valid values of ``column``."""
    valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
    code, values = codes(pc.drop_null(column))
    width = max(len(values), 1)
    pairs = pd.unique(group[valid] * width + code)  # a hash table: no sort
    return np.bincount(pairs // width, minlength=n)


def most_common(group: np.ndarray, values: np.ndarray, valid: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(per group below ``n``, the most common of its valid values -- ties:
    the smaller, NaN counted as a value after every number, as Arrow sorts
    it; whether the group has a valid value at all)."""
    out = np.full(n, np.nan)
    group, values = group[valid], values[valid]
    found = np.bincount(group, minlength=n) > 0
    if not group.size:
        return out, found
    distinct, rank = np.unique(values, return_inverse=True)  # ascending, NaNs last and equal
    order = np.lexsort((rank, group))
    group, rank = group[order], rank[order]
    starts = np.flatnonzero(np.concatenate(([True], (group[1:] != group[:-1]) | (rank[1:] != rank[:-1]))))
    counts = np.diff(np.append(starts, group.size))
    run_group, run_rank = group[starts], rank[starts]
    best = np.lexsort((run_rank, -counts, run_group))  # per group: most rows first, then the smaller value
    first = best[np.concatenate(([True], run_group[best][1:] != run_group[best][:-1]))]
    out[run_group[first]] = distinct[run_rank[first]]
    return out, found


def nullable(values: np.ndarray, present: np.ndarray | None = None) -> pa.Array:
    """A NumPy result as Arrow: integers as int64; floats null where not
    ``present`` (default: where NaN)."""
    if values.dtype.kind == "f":
        return pa.array(values, pa.float64(), mask=np.isnan(values) if present is None else ~present)
    return pa.array(values.astype(np.int64))
