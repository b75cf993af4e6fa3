"""advisor.collectors.grouping against Arrow's own hash aggregation
(``Table.group_by(..., use_threads=False)``), which it stands in for in the
readers: the same groups (nulls grouped as a value), the same float sums
bit for bit, minima, maxima and distinct counts. Ours are in order of each
group's first row; Arrow leaves its order unspecified, so both are
compared sorted by their keys."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from advisor.collectors import grouping
from advisor.collectors.ascend.tables import kernel_table

CORPUS_KERNELS = "mstt/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv"


def _ours(table: pa.Table, keys: list[str], value: str, other: str) -> pa.Table:
    group, first = grouping.numbers([grouping.codes(table.column(k))[0] for k in keys])
    n = first.size
    values = grouping.floats(table.column(value))
    out = table.select(keys).take(first)
    for name, column in [
        (f"{value}_count", pa.array(np.bincount(group, minlength=n))),
        (f"{value}_sum", grouping.nullable(*grouping.sums(group, *values, n))),
        (f"{value}_min", grouping.nullable(*grouping.extreme(np.fmin, group, *values, n))),
        (f"{value}_max", grouping.nullable(*grouping.extreme(np.fmax, group, *values, n))),
        (f"{other}_count_distinct", pa.array(grouping.distinct_counts(group, table.column(other), n))),
    ]:
        out = out.append_column(name, column)
    return out


def _arrows(table: pa.Table, keys: list[str], value: str, other: str) -> pa.Table:
    return table.group_by(keys, use_threads=False).aggregate([
        (value, "count", pa.compute.CountOptions(mode="all")), (value, "sum"), (value, "min"), (value, "max"),
        (other, "count_distinct", pa.compute.CountOptions(mode="only_valid"))])


def _same(ours: pa.Table, arrows: pa.Table, keys: list[str]) -> None:
    assert ours.num_rows == arrows.num_rows
    ours, arrows = (t.sort_by([(k, "ascending") for k in keys]) for t in (ours, arrows))
    for name in ours.column_names:
        a, b = ours.column(name).to_pylist(), arrows.column(name).to_pylist()
        assert a == b, (name, [(x, y) for x, y in zip(a, b) if x != y][:5])


def _random_table(seed: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(seed)

    def with_nulls(values, share=0.1):
        return pa.array(values, mask=rng.random(rows) < share)

    return pa.table({
        "name": with_nulls(rng.choice(["MatMul", "Add", "Cast", "hcom_allReduce_"], rows)),
        "shape": with_nulls(rng.choice(["1,2", "4096,1024", ""], rows)),
        "step": with_nulls(rng.integers(1, 6, rows)),
        "duration": with_nulls(rng.exponential(50.0, rows) * 1.37, share=0.2),
    })


@pytest.mark.parametrize("seed", range(5))
def test_grouping_matches_arrow_on_tables_with_nulls(seed):
    table = _random_table(seed, 3000)
    keys = ["name", "shape"]
    _same(_ours(table, keys, "duration", "step"), _arrows(table, keys, "duration", "step"), keys)


def test_grouping_matches_arrow_on_a_real_kernel_file(corpus):
    path = corpus / CORPUS_KERNELS
    if not path.exists():
        pytest.skip(f"{CORPUS_KERNELS} is not in the corpus")
    kernels = kernel_table(path)
    keys = [k for k in ("name", "type", "input_shapes") if k in kernels.column_names]
    assert kernels.num_rows > 100 and keys
    _same(_ours(kernels, keys, "duration_us", "step"), _arrows(kernels, keys, "duration_us", "step"), keys)


def test_a_group_without_values_has_no_sum_and_a_nan_is_a_value():
    """A group with no valid value has no sum (0 with ``min_count`` 0), a
    NaN among its values makes its sum NaN, not missing, as Arrow's does;
    minima skip NaN; a NaN mode is a value."""
    group = np.array([0, 0, 1, 2, 2, 2])
    values = np.array([3.0, 3.0, 7.0, math.nan, math.nan, 4.0])
    valid = np.array([True, True, False, True, True, True])
    total = grouping.nullable(*grouping.sums(group, values, valid, 3)).to_pylist()
    assert total[:2] == [6.0, None] and math.isnan(total[2])
    assert grouping.sums(group, values, valid, 3, min_count=0)[0][1] == 0.0
    assert grouping.nullable(*grouping.extreme(np.fmin, group, values, valid, 3)).to_pylist() == [3.0, None, 4.0]
    mode, present = grouping.most_common(group, values, valid, 3)
    assert mode[0] == 3.0 and not present[1] and math.isnan(mode[2]) and present[2]


def test_groups_are_numbered_in_order_of_their_first_row():
    code, values = grouping.codes(pa.array(["b", "a", None, "b", None]))
    group, first = grouping.numbers([code])
    assert [values[c] for c in code[first]] == ["b", "a", None]
    assert group.tolist() == [0, 1, 2, 0, 2] and first.tolist() == [0, 1, 2]
