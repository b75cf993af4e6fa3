"""Shared views of the ``steps`` table used by step and cluster metrics.

Steady state: when a rank has at least ``WARMUP_MIN_STEPS`` steps, its first
step is dropped (graph compilation, allocator and cache warm-up make it
unrepresentative). Where the source says more, a rank's steps that are
truncated (``truncated``: cut by the profiler's recorded span) or warm-up
steps (``warmup_us`` at least ``WARMUP_STEP_SHARE`` of the step: mostly
one-time start-up) are dropped too, as long as the rank has another step;
a rank whose every step is such keeps them (the window metrics and the
``warmup-window`` rule say so). Per-rank values are means over that rank's
steady steps; run values are the mean of the per-rank values, so every
rank weighs the same.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value
from advisor.profile import Profile

WARMUP_MIN_STEPS = 4
#: A step at least this share of which is one-time start-up (``warmup_us``)
#: is a warm-up step: most of its time says nothing about the steps after it.
WARMUP_STEP_SHARE = 0.5
US_PER_MS = 1000.0


def steady_steps(profile: Profile) -> pd.DataFrame:
    """The steps table without each rank's warm-up step (see module doc)."""
    return profile.memo("steady_steps", lambda: _steady_steps(profile))


def _steady_steps(profile: Profile) -> pd.DataFrame:
    steps = profile.table("steps")
    if steps is None:
        return pd.DataFrame()
    if "step" not in steps.columns or steps["step"].isna().all():
        return steps
    ordered = steps.sort_values(["rank", "step"], kind="stable")
    counts = ordered.groupby("rank")["step"].transform("size")
    first = ordered.groupby("rank").cumcount() == 0
    keep = ~(first & (counts >= WARMUP_MIN_STEPS))
    unsteady = unsteady_steps(ordered)
    whole = (keep & ~unsteady).groupby(ordered["rank"]).transform("any")
    return ordered[keep & ~(unsteady & whole)]


def unsteady_steps(steps: pd.DataFrame) -> pd.Series:
    """Per step row: truncated, or a warm-up step (module doc); False where
    the source does not say."""
    out = pd.Series(False, index=steps.index)
    if "truncated" in steps.columns:
        out |= steps["truncated"].fillna(False).astype(bool)
    if "warmup_us" in steps.columns:
        out |= steps["warmup_us"].fillna(0) >= WARMUP_STEP_SHARE * steps["duration_us"]
    return out


def per_rank_mean(profile: Profile, column: str) -> pd.Series:
    """Mean of ``column`` per rank over steady steps (index: rank), NaNs dropped."""
    return profile.memo(f"per_rank_mean:{column}", lambda: _per_rank(profile, column, "mean"))


def _per_rank(profile: Profile, column: str, how: str) -> pd.Series:
    steps = steady_steps(profile)
    if column not in steps.columns:
        return pd.Series(dtype=float)
    return steps.groupby("rank")[column].agg(how).dropna()


def lower_median(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """The lower median of ``values`` along ``axis`` (not empty): the value
    more than half of them reach. With an even count it is the lower of the
    middle two, where the median would be their mean: a cost that recurs in
    every step keeps it, one that comes in only half of the steps does not."""
    ordered = np.sort(values, axis=axis)
    return np.take(ordered, (ordered.shape[axis] - 1) // 2, axis=axis)


def per_rank_median(profile: Profile, column: str) -> pd.Series:
    """Median of ``column`` per rank over steady steps (index: rank), NaNs
    dropped. Cross-rank comparisons use it: a rank that is slow in every
    step is a straggler, one stalled step (preemption, GC, a checkpoint) is
    not, and a mean over a few steps cannot tell the two apart."""
    return profile.memo(f"per_rank_median:{column}", lambda: _per_rank(profile, column, "median"))


def run_mean_ms(profile: Profile, column: str) -> float | None:
    """Run value of a ``*_us`` column in ms: mean over ranks of per-rank means."""
    ranks = per_rank_mean(profile, column)
    if ranks.empty:
        return None
    return float(ranks.mean()) / US_PER_MS


def run_mean_stderr_ms(profile: Profile, column: str) -> tuple[float, int] | None:
    """(standard error in ms, steps) of ``run_mean_ms``'s value from its
    variation between steady steps: the standard error of the mean over
    steps of the per-step mean over ranks (of one rank's series when the
    steps have no ids); None with fewer than two steps, or several ranks
    whose steps cannot be matched."""
    steps = steady_steps(profile)
    if column not in steps.columns:
        return None
    rows = steps.dropna(subset=[column])
    if "step" in rows.columns and rows["step"].notna().all():
        series = rows.groupby("step")[column].mean()
    elif rows["rank"].nunique() == 1:
        series = rows[column]
    else:
        return None
    if len(series) < 2:
        return None
    return float(series.sem()) / US_PER_MS, len(series)


def ratio_of_means(num: pd.Series, den: pd.Series) -> float | None:
    """A run's share from per-rank means (index: rank): the mean over ranks
    of ``num`` over that of ``den``, on the ranks with both and a positive
    ``den``, so that a share printed beside its time is that time over the
    step time (``run_mean_ms``) on a cluster whose ranks' steps differ in
    length too; None without such ranks."""
    both = pd.concat([num, den], axis=1, keys=["n", "d"]).dropna()
    both = both[both["d"] > 0]
    if both.empty:
        return None
    return float(both["n"].mean() / both["d"].mean())


def run_ratio(profile: Profile, column: str, base: str = "duration_us") -> float | None:
    """``column``'s share of ``base`` over steady steps (``ratio_of_means``
    of their per-rank means)."""
    return ratio_of_means(per_rank_mean(profile, column), per_rank_mean(profile, base))


def common_steady_steps(profile: Profile) -> pd.DataFrame:
    """The ``steady_steps`` rows (step ids as int64) of the step ids every
    rank recorded as steady; empty without step ids."""
    return profile.memo("common_steady_steps", lambda: _common_steady_steps(profile))


def _common_steady_steps(profile: Profile) -> pd.DataFrame:
    steps = steady_steps(profile)
    if steps.empty or "step" not in steps.columns:
        return steps.iloc[0:0]
    steps = steps.dropna(subset=["step"]).astype({"step": "int64"})
    return steps[steps.groupby("step")["rank"].transform("nunique") == steps["rank"].nunique()]


def steps_per_rank(profile: Profile) -> pd.Series:
    """Number of step rows of each rank, at least 1 (index: rank; empty
    when the profile has no steps)."""
    steps = profile.table("steps")
    if steps is None:
        return pd.Series(dtype=float)
    return steps.groupby("rank").size().clip(lower=1)


def per_step_ms(profile: Profile, per_rank_us: pd.Series) -> float:
    """Per-rank totals over the profiled window (us) -> ms per step, mean
    over ranks (a rank without steps counts its total as one step)."""
    counts = steps_per_rank(profile).reindex(per_rank_us.index).fillna(1)
    return float((per_rank_us / counts).mean()) / US_PER_MS


def rank_evidence(series: pd.Series, scale: float = 1 / US_PER_MS, limit: int = 64) -> dict:
    """Per-rank values for a metric's evidence (at most ``limit`` ranks)."""
    if len(series) <= 1:
        return {}
    return {"per_rank": {int(k): round(float(v) * scale, 4) for k, v in series.head(limit).items()}}


def step_ms_value(profile: Profile, column: str) -> Value:
    """A ``steps`` time column's run value in ms (``run_mean_ms``) with its
    standard error over steps; not evaluated without values."""
    value = run_mean_ms(profile, column)
    if value is None:
        raise NotEvaluated(f"no {column} values in steady-state steps")
    stderr, steps = run_mean_stderr_ms(profile, column) or (None, None)
    return Value(value, rank_evidence(per_rank_mean(profile, column)), stderr=stderr, samples=steps)


def step_ratio_value(profile: Profile, column: str) -> Value:
    """A ``steps`` time column's share of the step (``run_ratio``); not
    evaluated without values."""
    value = run_ratio(profile, column)
    if value is None:
        raise NotEvaluated(f"no {column} values with a positive step duration")
    return Value(value)
