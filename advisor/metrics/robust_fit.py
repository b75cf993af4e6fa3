"""Where typical rows lie and how their features co-vary, robustly.

The anomaly model (:mod:`advisor.metrics.anomaly`: steps, ranks) and the run
history's anomaly check (:mod:`advisor.regression.history`) score each row
by its squared robust Mahalanobis distance from a fit the outlying rows
cannot pull towards them, and compare it with a chi-square quantile.

The fit is the minimum covariance determinant estimate (MCD; Rousseeuw and
Van Driessen 1999, as scikit-learn's ``MinCovDet``): the mean and covariance
of the ``h = ceil((n + p + 1) / 2)`` of ``n`` rows (``p`` features) whose
covariance has the smallest determinant, found by concentration steps (each
keeps the ``h`` rows nearest the current fit; the determinant never grows),
then scaled to be consistent at the normal model (the median distance made
the chi-square median) and re-estimated on the rows within the
``REWEIGHT_QUANTILE`` chi-square quantile. Two departures:

* One deterministic start, as in DetMCD (Hubert, Rousseeuw and Verdonck
  2012): the ``h`` rows nearest the coordinate-wise median in robust
  z-scores, not scikit-learn's random subsets. numpy alone, milliseconds at
  a thousand rows, where scikit-learn's random starts and the SciPy it loads
  took over a second.
* A floor on each feature's variance, ``(RESOLUTION * the feature's largest
  absolute value)^2`` (a regularized MCD, after Boudt et al. 2020): when
  the typical rows are exactly equal in a feature (seven ranks that compute
  the same, one that computes more) the fit still exists, and a row off
  them is far from it, instead of the fit being refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.metrics.quantiles import chi2_quantile

#: Relative resolution of a feature: differences below this share of its
#: largest absolute value are not told apart (the variance floor above).
RESOLUTION = 1e-4
#: Chi-square quantile within which rows are kept for the reweighted fit
#: (scikit-learn's ``MinCovDet`` value).
REWEIGHT_QUANTILE = 0.975
#: Concentration steps at most; they stop earlier when the rows repeat.
MAX_STEPS = 100
#: Scale factor making the median absolute deviation estimate a normal
#: distribution's standard deviation.
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class RobustFit:
    """A robust location and the inverse of its (floored) covariance."""

    location: np.ndarray
    precision: np.ndarray

    def distances(self, x: np.ndarray) -> np.ndarray:
        """Squared Mahalanobis distances of the rows of ``x`` from the fit."""
        d = np.asarray(x, dtype=float) - self.location
        return np.einsum("ij,jk,ik->i", d, self.precision, d)


def fit(x: np.ndarray) -> RobustFit:
    """The reweighted MCD fit of the rows of ``x`` (module doc). Raises
    ValueError on non-finite values or fewer than ``p + 2`` rows."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"expected rows of features, got an array of shape {x.shape}")
    n, p = x.shape
    if n < p + 2:
        raise ValueError(f"{n} rows for {p} feature(s); the fit needs at least {p + 2}")
    if not np.isfinite(x).all():
        raise ValueError("non-finite values")
    magnitude = np.abs(x).max(axis=0)
    floor = (RESOLUTION * np.where(magnitude > 0, magnitude, 1.0)) ** 2
    h = min(n, int(np.ceil((n + p + 1) / 2)))

    median = np.median(x, axis=0)
    spread = np.maximum((MAD_TO_SD * np.median(np.abs(x - median), axis=0)) ** 2, floor)
    support = np.sort(np.argsort((((x - median) ** 2) / spread).sum(axis=1), kind="stable")[:h])
    for _ in range(MAX_STEPS):
        location, cov = _moments(x[support])
        dist = _distances(x, location, cov + np.diag(floor))
        nearest = np.sort(np.argsort(dist, kind="stable")[:h])
        if np.array_equal(nearest, support):
            break
        support = nearest
    else:  # out of steps: the fit of the last support chosen
        location, cov = _moments(x[support])
        dist = _distances(x, location, cov + np.diag(floor))

    consistency = float(np.median(dist)) / chi2_quantile(0.5, p)
    if consistency > 0:  # 0 when most rows are exactly alike: nothing to scale
        cov = cov * consistency
        dist = _distances(x, location, cov + np.diag(floor))
    kept = dist <= chi2_quantile(REWEIGHT_QUANTILE, p)
    location, cov = _moments(x[kept])
    return RobustFit(location, np.linalg.inv(cov + np.diag(floor)))


def _moments(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (maximum-likelihood) covariance of ``rows``."""
    location = rows.mean(axis=0)
    centred = rows - location
    return location, centred.T @ centred / len(rows)


def _distances(x: np.ndarray, location: np.ndarray, cov: np.ndarray) -> np.ndarray:
    d = x - location
    return np.einsum("ij,ij->i", d, np.linalg.solve(cov, d.T).T)
