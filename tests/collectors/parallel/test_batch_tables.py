"""Pending tables built as a batch are, unit by unit, what each gives alone
-- checked against a plain column-by-column reference on random tables."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.collectors.parallel.batch_tables import PendingTable, build, build_one

ORDER = ("rank", "step", "name", "value")
TYPES = {"rank": pa.int64(), "step": pa.int64(), "name": pa.string()}
KEEP = frozenset({"rank", "step"})


def _reference(p: PendingTable) -> pa.Table:
    """One unit's table, the obvious way: known columns in order, then the
    others; a column with no value left out unless kept."""
    names = [c for c in ORDER if c in p.columns] + [c for c in p.columns if c not in ORDER]
    arrays, kept = [], []
    for name in names:
        values = p.columns[name]
        kind = TYPES.get(name, pa.float64())
        if isinstance(values, np.ndarray) and values.dtype.kind == "f":
            cells = [None if math.isnan(v) else (round(v) if pa.types.is_integer(kind) else v)
                     for v in values.tolist()]
        else:
            cells = list(values.tolist() if isinstance(values, np.ndarray) else values)
        if name in KEEP or any(c is not None for c in cells):
            arrays.append(pa.array(cells, type=kind))
            kept.append(name)
    return pa.table(arrays, names=kept)


_floats = st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False))


@st.composite
def _pending(draw) -> PendingTable:
    n = draw(st.integers(0, 6))
    cols: dict = {"rank": np.full(n, draw(st.integers(0, 9)), dtype=np.int64)}
    if draw(st.booleans()):  # steps as floats with NaN, or as ints
        cells = draw(st.lists(st.one_of(st.none(), st.integers(0, 50)), min_size=n, max_size=n))
        cols["step"] = np.array([np.nan if c is None else float(c) for c in cells])
    if draw(st.booleans()):
        cols["name"] = draw(st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", ""])), min_size=n, max_size=n))
    for extra in draw(st.lists(st.sampled_from(["value", "x_us", "y_us"]), unique=True)):
        cells = draw(st.lists(_floats, min_size=n, max_size=n))
        as_array = draw(st.booleans())
        cols[extra] = np.array([np.nan if c is None else c for c in cells]) if as_array else cells
    return PendingTable(cols, n, order=ORDER, types=TYPES, keep=KEEP)


@settings(max_examples=150, deadline=None)
@given(st.lists(_pending(), min_size=1, max_size=5))
def test_batch_gives_each_unit_its_own_table(pending):
    # a column may be a list in one unit and an array in another: both kinds mix
    built = build(pending)
    assert len(built) == len(pending)
    for got, p in zip(built, pending):
        want = _reference(p)
        assert got.column_names == want.column_names
        assert got.equals(want), (got.to_pydict(), want.to_pydict())
        assert build_one(p).equals(want)


def test_a_column_present_for_one_unit_is_absent_for_the_other():
    a = PendingTable({"rank": np.array([0, 0]), "x_us": np.array([1.0, np.nan])}, 2, order=ORDER, types=TYPES)
    b = PendingTable({"rank": np.array([1]), "x_us": np.array([np.nan]), "name": ["n"]}, 1, order=ORDER,
                     types=TYPES)
    first, second = build([a, b])
    assert first.column_names == ["rank", "x_us"] and first.column("x_us").to_pylist() == [1.0, None]
    assert second.column_names == ["rank", "name"] and second.column("name").to_pylist() == ["n"]
