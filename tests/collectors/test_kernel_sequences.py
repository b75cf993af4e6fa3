"""collectors/kernel_sequences.py: repeated kernel n-grams, their device
time and the gaps between their kernels, on kernel timelines laid out by
hand (times in us)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.collectors.kernel_sequences import (LAUNCH_GAP_US, MAX_LENGTH, TOP_PER_LENGTH, _factorize,
                                                 frequent_sequences)

LABELS = ["pow", "mean", "rsqrt", "gemm", "allreduce"]


def _timeline(blocks: list[list[tuple[int, float, float]]]) -> tuple[np.ndarray, ...]:
    """``blocks`` of (key, duration, idle gap after it), laid out one after
    the other -> keys, starts, durations."""
    keys, start, dur, t = [], [], [], 0.0
    for block in blocks:
        for key, d, gap in block:
            keys.append(key)
            start.append(t)
            dur.append(d)
            t += d + gap
    return np.array(keys), np.array(start), np.array(dur)


def _layers(layers: int, steps: int, gap: float = 20.0) -> list[list[tuple[int, float, float]]]:
    layer = [(3, 100.0, 5.0), (0, 4.0, gap), (1, 4.0, gap), (2, 4.0, 5.0)]
    return [layer] * (layers * steps)


def _row(df, kernels: str):
    rows = df[df["kernels"] == kernels]
    assert len(rows) == 1, df
    return rows.iloc[0]


def test_a_chain_repeated_every_layer_is_counted_with_its_gaps():
    keys, start, dur = _timeline(_layers(layers=12, steps=3))
    df = frequent_sequences(keys, LABELS, start, dur, np.ones(keys.size, bool), steps=3, rank=5)
    row = _row(df, "pow -> mean -> rsqrt")
    assert row["count"] == 36 and row["length"] == 3 and row["rank"] == 5 and row["steps"] == 3
    assert row["device_us"] == pytest.approx(36 * 12.0)
    assert row["gap_us"] == pytest.approx(36 * 40.0)
    # the longest sequence through the layer boundary has the most gap time of its length
    longest = df[df["length"] == 4].sort_values("gap_us", ascending=False).iloc[0]
    assert longest["gap_us"] == pytest.approx(longest["count"] * 45.0)
    assert df.groupby("length").size().max() <= TOP_PER_LENGTH
    assert df["length"].between(2, MAX_LENGTH).all()


def test_kernels_given_in_any_order_are_taken_in_start_order():
    keys, start, dur = _timeline(_layers(layers=8, steps=1))
    perm = np.random.default_rng(0).permutation(keys.size)
    a = frequent_sequences(keys, LABELS, start, dur, np.ones(keys.size, bool), 1, 0)
    b = frequent_sequences(keys[perm], LABELS, start[perm], dur[perm], np.ones(keys.size, bool), 1, 0)
    assert a.equals(b)


def test_a_sequence_that_only_recurs_with_the_steps_is_not_kept():
    keys, start, dur = _timeline(_layers(layers=1, steps=4))
    assert frequent_sequences(keys, LABELS, start, dur, np.ones(keys.size, bool), steps=4, rank=0) is None


def test_long_gaps_and_communication_end_a_sequence():
    long_gap = [[(0, 4.0, 20.0), (1, 4.0, LAUNCH_GAP_US + 1), (2, 4.0, 5.0)]] * 10
    keys, start, dur = _timeline(long_gap)
    df = frequent_sequences(keys, LABELS, start, dur, np.ones(keys.size, bool), 1, 0)
    assert "pow -> mean" in set(df["kernels"]) and not df["kernels"].str.contains("mean -> rsqrt").any()
    comm = [[(0, 4.0, 5.0), (4, 50.0, 5.0), (1, 4.0, 5.0)]] * 10
    keys, start, dur = _timeline(comm)
    df = frequent_sequences(keys, LABELS, start, dur, keys != 4, 1, 0)
    assert df is None or not df["kernels"].str.contains("allreduce|pow -> mean").any()


def test_overlapping_occurrences_count_each_kernel_and_gap_once():
    keys, start, dur = _timeline([[(0, 4.0, 10.0)] * 20, [(3, 100.0, 100.0)]])
    df = frequent_sequences(keys, LABELS, start, dur, np.ones(keys.size, bool), 1, 0)
    row = _row(df, "pow -> pow")
    assert row["count"] == 19
    assert row["device_us"] == pytest.approx(20 * 4.0)
    assert row["gap_us"] == pytest.approx(19 * 10.0)
    assert (df["gap_us"] <= 19 * 10.0 + 1e-9).all()


def test_kernels_on_two_streams_leave_no_gap_where_they_overlap():
    keys = np.array([0, 1] * 10)
    start = np.repeat(np.arange(10) * 100.0, 2) + np.tile([0.0, 1.0], 10)
    dur = np.full(20, 10.0)
    df = frequent_sequences(keys, LABELS, start, dur, np.ones(20, bool), 1, 0)
    assert _row(df, "pow -> mean")["gap_us"] == 0.0


def test_window_codes_are_pandas_factorize_codes():
    """The windows' codes come from pandas' hash table directly
    (``_factorize``): the same codes, in order of first appearance, as
    ``pd.factorize`` gives; ties between sequences are broken by that order."""
    rng = np.random.default_rng(7)
    values = rng.integers(0, 2**64 - 1, size=12, dtype=np.uint64, endpoint=True)[rng.integers(0, 12, size=3000)]
    codes, distinct = _factorize(values)
    expected, uniques = pd.factorize(values)
    assert distinct == uniques.size == np.unique(values).size
    np.testing.assert_array_equal(codes, expected)
    assert codes[0] == 0 and set(codes[:1 + np.flatnonzero(codes == codes.max())[0]]) == set(range(distinct))
