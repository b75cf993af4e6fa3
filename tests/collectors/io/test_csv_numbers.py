"""Small all-numeric CSVs (``csvio.read_numbers``): whatever the cells hold,
each value is the cell trimmed of spaces and quotes, parsed as a float, NaN
for a null token or junk -- the fast path for plain numbers included."""

from __future__ import annotations

import csv
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.collectors.io import csv_files as csvio

NUMBER = st.floats(allow_nan=False, allow_infinity=True, width=64).map(repr)
CELL = st.one_of(
    NUMBER,
    NUMBER.map(lambda s: f" {s}\t"),
    NUMBER.map(lambda s: f"'{s}'"),
    st.integers(-10**6, 10**6).map(str),
    st.sampled_from(csvio.NULL_TOKENS),
    st.sampled_from(["1_000", "1e3", "abc", "--1", "0x10", "nan", "-inf", "N/A "]),
)


def _expected(cell: str) -> float:
    text = cell.strip(" \t\r\n\"'")
    if text in csvio.NULL_TOKENS:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(columns=st.lists(st.lists(CELL, min_size=3, max_size=3), min_size=0, max_size=12))
def test_read_numbers_matches_the_cell_rule(tmp_path, columns):
    path = tmp_path / "numbers.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["A", "B", "C"])
        writer.writerows(columns)
    got = csvio.read_numbers(path, {"a": ["A"], "b": ["B"], "c": ["C"]})
    for i, name in enumerate("abc"):
        want = [_expected(row[i]) for row in columns]
        assert len(got[name]) == len(want)
        for g, w in zip(got[name].tolist(), want):
            assert (math.isnan(g) and math.isnan(w)) or g == w, (name, columns)
