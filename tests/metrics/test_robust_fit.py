"""The robust covariance fit (advisor.metrics.robust_fit) against
scikit-learn's MinCovDet, the estimator it re-implements, on contaminated
Gaussian data; its exact-fit case; and what it refuses."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from advisor.metrics import robust_fit
from advisor.metrics.quantiles import chi2_quantile

sklearn_covariance = pytest.importorskip("sklearn.covariance", reason="scikit-learn is the reference (test extra)")
scipy_stats = pytest.importorskip("scipy.stats")


def _contaminated(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows from a correlated Gaussian, up to a fifth of them shifted; the
    shifted rows' indices."""
    n, p = int(rng.integers(12, 400)), int(rng.integers(1, 7))
    a = rng.normal(size=(p, p))
    x = rng.multivariate_normal(rng.normal(0, 50, p), a @ a.T + 0.1 * np.eye(p), size=n)
    shifted = rng.choice(n, int(rng.integers(0, max(1, n // 5))), replace=False)
    x[shifted] += rng.normal(0, 20, (len(shifted), p)) + 10 * np.sign(rng.normal(size=(len(shifted), p)))
    return x, shifted


def test_its_calls_are_as_good_as_mincovdets():
    """Over 200 contaminated samples the rows beyond the 99.9% chi-square
    quantile: the shifted rows it misses and the clean rows it flags are, in
    total, within 15% of MinCovDet's (two MCD searches land on slightly
    different supports; neither is the truth)."""
    rng = np.random.default_rng(11)
    errors = {"ours": 0, "mincovdet": 0}
    for _ in range(200):
        x, shifted = _contaminated(rng)
        limit = scipy_stats.chi2.ppf(0.999, x.shape[1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = sklearn_covariance.MinCovDet(random_state=0).fit(x).mahalanobis(x)
        for name, distance in (("ours", robust_fit.fit(x).distances(x)), ("mincovdet", reference)):
            flagged = set(np.flatnonzero(distance > limit))
            errors[name] += len(flagged ^ set(shifted.tolist()))
    assert errors["mincovdet"] > 100  # the samples are hard enough to tell the two apart
    assert errors["ours"] <= 1.15 * errors["mincovdet"], errors


def test_far_rows_are_always_flagged_and_the_location_is_the_clean_rows():
    rng = np.random.default_rng(3)
    for _ in range(50):
        p = int(rng.integers(1, 6))
        x = rng.normal(100, 1, (200, p))
        x[:30] += 50  # 15% of the rows, 50 standard deviations away
        fit = robust_fit.fit(x)
        distance = fit.distances(x)
        assert (distance[:30] > chi2_quantile(0.999, p)).all()
        assert np.abs(fit.location - x[30:].mean(axis=0)).max() < 0.5


def test_typical_rows_that_are_exactly_equal_give_a_fit_a_row_off_them_is_far_from():
    """Seven ranks computing exactly alike and one computing 40% more: the
    support's covariance is 0 (MinCovDet refuses it); the variance floor
    gives a fit, in which the seven are at distance 0 and the eighth far."""
    x = np.array([[50.0]] * 7 + [[70.0]])
    distance = robust_fit.fit(x).distances(x)
    assert (distance[:7] == 0).all()
    assert distance[7] > 1e6



@pytest.mark.parametrize("x, problem", [
    (np.array([[1.0, 2.0], [1.5, np.nan], [2.0, 1.0], [3.0, 3.0]]), "non-finite"),
    (np.array([[1.0, 2.0], [1.5, 2.5], [2.0, 1.0]]), "3 rows for 2 feature(s)"),
])
def test_inputs_it_cannot_fit_are_refused_with_the_reason(x, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        robust_fit.fit(x)
