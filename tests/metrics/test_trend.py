"""The trend statistics of ``advisor.metrics.trend`` against SciPy's
(``scipy.stats.kendalltau`` with ``alternative="greater"``: the same one-sided
Mann-Kendall test of a series against its order; ``scipy.stats.theilslopes``),
which the report path does not import."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from advisor.metrics import trend


@pytest.mark.parametrize("n", [4, 5, 7, 12, 40])
def test_exact_p_value_matches_scipys_exact_kendall_test(n):
    rng = np.random.default_rng(n)
    order = np.arange(n)
    for x in (rng.normal(size=n), order + rng.normal(scale=n / 4, size=n), -order.astype(float),
              order.astype(float)):
        s, p, method = trend.mann_kendall(x)
        assert method == "exact"
        expected = stats.kendalltau(order, x, alternative="greater", method="exact").pvalue
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-15)
        assert s / (n * (n - 1) / 2) == pytest.approx(stats.kendalltau(order, x).statistic)


def test_ties_and_long_series_use_the_normal_approximation():
    rng = np.random.default_rng(0)
    order = np.arange(150)
    x = np.round(order / 10 + rng.normal(scale=3, size=150))  # many ties
    s, p, method = trend.mann_kendall(x)
    assert method == "normal"
    # scipy's asymptotic p-value has the same tie-corrected variance, without the continuity correction
    assert p == pytest.approx(stats.kendalltau(order, x, alternative="greater", method="asymptotic").pvalue,
                              rel=0.05)
    flat = trend.mann_kendall(np.ones(10))
    assert flat[0] == 0 and flat[1] == 1.0


def test_a_rising_order_of_four_steps_is_the_fewest_that_reach_five_percent():
    assert trend.min_steps(0.05) == 4 and trend.min_steps(0.01) == 5
    assert trend.mann_kendall(np.array([1.0, 2.0, 3.0, 4.0]))[1] == pytest.approx(1 / 24)
    assert trend.mann_kendall(np.array([1.0, 2.0, 3.0]))[1] == pytest.approx(1 / 6)


def test_theil_sen_slope_matches_scipy_and_ignores_one_slow_step():
    rng = np.random.default_rng(3)
    at = np.arange(5, 17, dtype=float)
    x = 20 + 1.5 * at + rng.normal(scale=0.5, size=at.size)
    assert trend.theil_sen(x, at) == pytest.approx(stats.theilslopes(x, at).slope)
    spiked = np.full(12, 20.0) + rng.normal(scale=0.2, size=12)
    before = trend.mann_kendall(spiked)[0]
    spiked[-1] += 30.0  # one slow last step: no slope, and the order moves by its own pairs only
    assert abs(trend.theil_sen(spiked, at)) < 0.1
    assert trend.mann_kendall(spiked)[0] - before <= 2 * (spiked.size - 1)  # each of its pairs: -1 -> +1
