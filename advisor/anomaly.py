"""The anomaly model: steps that do not look like the others.

Features: one vector per step id (mean over ranks) of the step components
the profile has (duration, computing, exposed communication, free, data
wait, iteration interval, fp/bp, tail), in ms. Model: scikit-learn's
``MinCovDet`` (minimum covariance determinant), a robust estimate of the
typical step's mean and covariance that the outliers themselves cannot pull
towards them. A step is anomalous when both

* its squared robust Mahalanobis distance over the step *components*
  exceeds the chi-square quantile ``1 - ALPHA`` for their number (it is
  unlike the others; the duration is left out of the distance because it is
  often the sum of the components, which would make the covariance
  singular), and
* its duration exceeds the median step by at least ``MIN_EXCESS`` of the
  median (it is slower by a margin worth reporting; fast oddities are not
  findings).

The drivers of a call are the features whose robust z-score
(0.6745 * (x - median) / MAD) in that step exceeds ``DRIVER_Z``. With
fewer than ``MIN_STEPS`` steady steps nothing is evaluated. The model only
produces metrics (``anomaly.*``); rules decide what is a finding.
"""

from __future__ import annotations

import warnings
from functools import reduce
from math import gcd

import numpy as np
import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, steady_steps
from advisor.profile import Profile

FEATURES = (
    "duration_us", "computing_us", "exposed_comm_us", "free_us", "data_wait_us",
    "iteration_interval_us", "fp_bp_us", "tail_us",
)
MIN_STEPS = 8
ALPHA = 0.001
MIN_EXCESS = 0.10
DRIVER_Z = 3.5
SEED = 0


def _step_features(p: Profile) -> pd.DataFrame:
    steps = steady_steps(p)
    if steps.empty or "step" not in steps or steps["step"].isna().all():
        raise NotEvaluated("no per-step rows (step ids) to compare")
    cols = [c for c in FEATURES if c in steps.columns and steps[c].notna().all()]
    frame = steps.groupby("step")[cols].mean() / US_PER_MS
    if len(frame) < MIN_STEPS:
        raise NotEvaluated(f"{len(frame)} steady steps; the model needs {MIN_STEPS}")
    return frame


def _robust_z(frame: pd.DataFrame) -> pd.DataFrame:
    med = frame.median()
    mad = (frame - med).abs().median()
    scale = mad.where(mad > 0, frame.std(ddof=0)).replace(0, np.nan)
    return (0.6745 * (frame - med) / scale).fillna(0.0)


def _mcd_may_reject(x: np.ndarray) -> bool:
    """True when ``MinCovDet.fit(x)`` might raise rather than fit: non-finite
    values, or (its "covariance of the support data is equal to 0") as many
    rows as its support that are nearly equal in every feature. Such inputs
    still go through the model, so that they fail as before."""
    if not np.isfinite(x).all():
        return True
    n, p = x.shape
    h = min(int(np.ceil(0.5 * (n + p + 1))), n)  # the support size fast_mcd uses
    ordered = np.sort(x, axis=0)
    narrowest = (ordered[h - 1:] - ordered[: n - h + 1]).min(axis=0)
    # a support whose covariance is all within 1e-8 of 0 spans at most
    # 2 * sqrt((h - 1) * 1e-8) in every feature; the bound is 5x that
    return bool((narrowest <= 1e-3 * np.sqrt(h)).all())


def _model(p: Profile) -> dict:
    return p.memo("anomaly_model", lambda: _fit(p))


def _fit(p: Profile) -> dict:
    frame = _step_features(p)
    varying = [c for c in frame.columns if frame[c].std(ddof=0) > 1e-9 * max(1.0, frame[c].abs().max())]
    if "duration_us" not in varying:
        return {"outliers": [], "frame": frame, "drivers": {}}
    components = [c for c in varying if c != "duration_us"] or ["duration_us"]
    x = frame[components].to_numpy(dtype=float)
    duration = frame["duration_us"]
    slow = duration > duration.median() * (1 + MIN_EXCESS)
    if not slow.any() and not _mcd_may_reject(x):
        # Only slow steps can be flagged: without one the distance decides
        # nothing, so the model (and importing scikit-learn and SciPy, about
        # a second) is skipped. Healthy runs end here.
        return {"outliers": [], "frame": frame, "drivers": {}}
    # imported here: together they take longer to import than the rest of advisor
    from scipy.stats import chi2
    from sklearn.covariance import MinCovDet

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # singular covariance warnings on near-constant features
        mcd = MinCovDet(random_state=SEED).fit(x)
    distance = mcd.mahalanobis(x)
    limit = chi2.ppf(1 - ALPHA, df=len(components))
    flagged = frame.index[(distance > limit) & slow.to_numpy()]
    z = _robust_z(frame[varying])
    drivers = {
        int(s): [c.removesuffix("_us") for c in z.columns if abs(z.loc[s, c]) >= DRIVER_Z and c != "duration_us"]
        for s in flagged
    }
    return {"outliers": [int(s) for s in flagged], "frame": frame, "drivers": drivers, "distance": distance}


@metric("anomaly.step_outliers", unit="list", scope="step", needs=["steps.duration_us", "steps.step"])
def step_outliers(p: Profile) -> Value:
    """Step ids the anomaly model flags (see module doc): unlike the other
    steps (robust Mahalanobis distance) and slower than the median by 10% or
    more. Evidence: the components that drove each call."""
    m = _model(p)
    return Value(m["outliers"], {"drivers": {str(k): v for k, v in m["drivers"].items()}})


@metric("anomaly.step_outlier_ratio", unit="ratio", needs=["steps.duration_us", "steps.step"])
def step_outlier_ratio(p: Profile) -> Value:
    """Share of steady steps flagged by the anomaly model."""
    m = _model(p)
    return Value(len(m["outliers"]) / len(m["frame"]), {"steps": len(m["frame"])})


@metric("anomaly.step_outlier_excess_ms", unit="ms", needs=["steps.duration_us", "steps.step"])
def step_outlier_excess_ms(p: Profile) -> Value:
    """Time the flagged steps add per step on average: sum over flagged steps
    of (duration - median duration), divided by the number of steady steps."""
    m = _model(p)
    duration = m["frame"]["duration_us"]
    excess = float((duration.loc[m["outliers"]] - duration.median()).clip(lower=0).sum())
    return Value(excess / len(duration), {"median_step_ms": round(float(duration.median()), 3)})


@metric("anomaly.step_outlier_drivers", unit="list", needs=["steps.duration_us", "steps.step"])
def step_outlier_drivers(p: Profile) -> Value:
    """Step components that most often drove an outlier call, most frequent first."""
    m = _model(p)
    counts = pd.Series([d for ds in m["drivers"].values() for d in ds], dtype=object).value_counts()
    return Value([str(k) for k in counts.index])


@metric("anomaly.step_outlier_period", unit="steps", needs=["steps.duration_us", "steps.step"])
def step_outlier_period(p: Profile) -> Value:
    """When three or more outliers recur at a fixed step interval (e.g. a
    checkpoint every N steps), that interval N; otherwise not evaluated."""
    outliers = sorted(_model(p)["outliers"])
    if len(outliers) < 3:
        raise NotEvaluated("fewer than three outlier steps")
    gaps = np.diff(outliers)
    period = reduce(gcd, (int(g) for g in gaps))
    if period < 2 or any(g % period for g in gaps) or gaps.max() > 2 * period:
        raise NotEvaluated("outliers do not recur at a fixed interval")
    return Value(int(period))
