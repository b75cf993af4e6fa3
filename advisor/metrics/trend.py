"""Trend metrics: whether the steps get slower step after step, and which
part of the step does.

The series is the steady steps (``steps_view.steady_steps``) in step order,
each step's figures the mean over the ranks that have it. Whether the step
time rises is the one-sided Mann-Kendall test (Kendall's S of the
durations against their order; its exact null distribution without ties for
up to :data:`EXACT_MAX_STEPS` steps, else the normal approximation with
the tie-corrected variance and a continuity correction); how fast, the
Theil-Sen slope (the median of the pairwise slopes). Both use ranks or
medians: one slow step (a periodic stall: the ``step-outlier`` rule's
case) changes the signs of its own n - 1 pairs in Kendall's S at most,
whatever its size, and the slope hardly at all. With too few steps for the test
to reach :data:`LEVEL` at all (the steepest order of n steps has
probability 1/n!), nothing here is evaluated.

The *first steps* are the first third of the window (at least one); their
median is what the window's growth and excess are measured against.

The rising part is the part of the step whose own per-step time has the
largest Theil-Sen slope among the operators of the ``op_trend`` table (the
top-level host ops whose per-step time rises most) and the step components
that lie outside them: free time (on a CPU run, the host's own time outside
operators), data wait and exposed communication. numpy only: no scipy on
the report path.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from advisor.collectors.kineto.op_trend import RISE, slopes
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, steady_steps
from advisor.profile import Profile

#: Significance level the test must be able to reach for the trend to be
#: evaluated: the ``growing-step`` rule's ``max_p``, the usual 5%. Reaching
#: it takes 4 steady steps in strictly rising order (1/4! = 4.2%).
LEVEL = 0.05
#: Up to this many steps the p-value is exact (the permutation distribution of
#: Kendall's S, in floating point: n! overflows float64 past 170); beyond it the
#: normal approximation is within 1e-3 of it.
EXACT_MAX_STEPS = 100
#: Share of the window that makes its first steps (the growth's baseline).
FIRST_SHARE = 1 / 3
#: Step components that are parts of the step apart from its operators' time
#: (``steps`` columns), and how a message names them.
COMPONENTS = {
    "free_us": "time outside operators",
    "data_wait_us": "data loading wait",
    "exposed_comm_us": "exposed communication",
}
#: Components reported in the evidence with their slopes (computing holds the operators).
REPORTED = ("computing_us", *COMPONENTS)

_NEEDS = ["steps.duration_us", "steps.step"]


def min_steps(level: float = LEVEL) -> int:
    """Fewest steps whose most extreme order has a probability (1/n!) at most ``level``."""
    n, prob = 1, 1.0
    while prob > level:
        n += 1
        prob /= n
    return n


def mann_kendall(x: np.ndarray) -> tuple[float, float, str]:
    """(Kendall's S, one-sided p-value of a rise, method) of ``x`` against its order."""
    x = np.asarray(x, dtype=float)
    n = x.size
    i, j = np.triu_indices(n, k=1)
    s = float(np.sign(x[j] - x[i]).sum())
    _, ties = np.unique(x, return_counts=True)
    if n <= EXACT_MAX_STEPS and (ties == 1).all():
        return s, _exact_p(n, s), "exact"
    var = (n * (n - 1) * (2 * n + 5) - float((ties * (ties - 1) * (2 * ties + 5)).sum())) / 18.0
    if var <= 0:
        return s, 1.0, "normal"
    z = (s - 1.0) / math.sqrt(var) if s > 0 else 0.0 if s == 0 else (s + 1.0) / math.sqrt(var)
    return s, 0.5 * math.erfc(z / math.sqrt(2.0)), "normal"


def _exact_p(n: int, s: float) -> float:
    """P(S >= s) over the n! orders of n distinct values: S = N - 2 Q with Q
    the inversions (N = n(n-1)/2 pairs), whose counts are the Mahonian numbers."""
    pairs = n * (n - 1) // 2
    counts = np.ones(1)
    for m in range(2, n + 1):  # inversions of m items: those of m-1 plus 0..m-1 for the new one
        counts = np.convolve(counts, np.ones(m))
    most_q = int(math.floor((pairs - s) / 2 + 1e-9))
    if most_q < 0:
        return 0.0
    return float(counts[:most_q + 1].sum() / counts.sum())


def theil_sen(x: np.ndarray, at: np.ndarray) -> float:
    """Median of the slopes between every two points ``(at, x)``."""
    return float(slopes(np.asarray(x, dtype=float)[None, :], np.asarray(at, dtype=float))[0])


def first_steps(x: np.ndarray) -> float:
    """Median of the window's first steps (module doc)."""
    return float(np.median(x[:max(1, int(x.size * FIRST_SHARE))]))


def _series(p: Profile) -> pd.DataFrame:
    return p.memo("trend_series", lambda: _build_series(p))


def _build_series(p: Profile) -> pd.DataFrame:
    """Per steady step (index: step id, in order): the mean over ranks of its
    duration and components, and of each ``op_trend`` operator kept for its rise
    (columns ``op:<name>``). Rows without a positive duration are left out,
    and components some step lacks."""
    steps = steady_steps(p)
    if steps.empty or steps["step"].isna().any():
        raise NotEvaluated("steps without step ids: no order to follow")
    steps = steps[np.isfinite(steps["duration_us"].to_numpy(float)) & (steps["duration_us"] > 0)]
    cols = ["duration_us", *(c for c in REPORTED if c in steps.columns and steps[c].notna().all())]
    series = steps.groupby("step")[cols].mean().sort_index()
    need = min_steps()
    if len(series) < need:
        raise NotEvaluated(f"{len(series)} steady step(s): a trend test needs {need} to be able to reach the "
                           f"{LEVEL:.0%} level (n steps in rising order have probability 1/n!)")
    ops = p.table("op_trend")
    if ops is not None and "kept_for" in ops.columns:
        ops = ops[ops["kept_for"] == RISE]
    if ops is not None:
        kept = ops.merge(steps[["rank", "step"]], on=["rank", "step"])
        per_step = kept.groupby(["step", "name"])["time_us"].mean().unstack("name")
        per_step = per_step.reindex(series.index)
        for name in per_step.columns:
            if per_step[name].notna().all():
                series[f"op:{name}"] = per_step[name]
    return series


def _slope(series: pd.DataFrame, column: str) -> float:
    return theil_sen(series[column].to_numpy(float), series.index.to_numpy(float))


def _growth(series: pd.DataFrame, values: np.ndarray) -> float:
    """The Theil-Sen line's rise over the window as a share of the first steps."""
    base = first_steps(values)
    at = series.index.to_numpy(float)
    if base <= 0:
        raise NotEvaluated("the first steps take no time in this part")
    return theil_sen(values, at) * (at[-1] - at[0]) / base


def _part(p: Profile) -> dict:
    return p.memo("trend_part", lambda: _rising_part(p))


def _rising_part(p: Profile) -> dict:
    series = _series(p)
    candidates = [c for c in series.columns if (c.startswith("op:") or c in COMPONENTS) and series[c].max() > 0]
    if not candidates:
        raise NotEvaluated("no per-step operator times (op_trend) or step components to compare")
    rates = {c: _slope(series, c) for c in candidates}
    best = max(candidates, key=lambda c: rates[c])
    if not rates[best] > 0:
        raise NotEvaluated("no part of the step rises (every Theil-Sen slope is 0 or below)")
    label = best[3:] if best.startswith("op:") else COMPONENTS[best]
    if best == "free_us" and p.meta.device not in (None, "cpu"):
        label = "device idle time"
    return {"column": best, "label": label, "slope": rates[best], "candidates": candidates,
            "slopes": {**{c[3:] if c.startswith("op:") else c: s for c, s in rates.items()},
                       **{c: _slope(series, c) for c in REPORTED if c in series.columns}}}


@metric("trend.step_rise_p", unit="p", needs=_NEEDS)
def step_rise_p(p: Profile) -> Value:
    """One-sided p-value that the steady steps' durations rise with the step
    (Mann-Kendall: Kendall's S of the durations against their order, exact
    permutation distribution without ties, normal approximation otherwise).
    Small means later steps are slower than earlier ones more often than
    chance orders them so; it says nothing about by how much."""
    series = _series(p)
    d = series["duration_us"].to_numpy(float)
    s, pval, method = mann_kendall(d)
    pairs = d.size * (d.size - 1) / 2
    return Value(pval, {"kendall_s": s, "kendall_tau": round(s / pairs, 4), "steps": int(d.size),
                        "method": method})


@metric("trend.step_slope_ms", unit="ms", needs=_NEEDS)
def step_slope_ms(p: Profile) -> Value:
    """How much longer each steady step takes than the one before, in ms per
    step: the Theil-Sen slope (median of the pairwise slopes) of the step
    durations against the step ids."""
    series = _series(p)
    d = series["duration_us"]
    return Value(_slope(series, "duration_us") / US_PER_MS,
                 {"steps_ms": [round(float(v) / US_PER_MS, 3) for v in d.head(64)],
                  "step_ids": [int(i) for i in d.index[:64]]})


@metric("trend.step_growth_ratio", unit="ratio", needs=_NEEDS)
def step_growth_ratio(p: Profile) -> Value:
    """The steady steps' rise over the window as a share of its first steps:
    the Theil-Sen slope times the steps from the first to the last, over the
    median duration of the first third of the steps."""
    series = _series(p)
    return Value(_growth(series, series["duration_us"].to_numpy(float)))


@metric("trend.step_excess_ms", unit="ms", needs=_NEEDS)
def step_excess_ms(p: Profile) -> Value:
    """The window's excess over its first steps: the mean steady step minus
    the median of the first third of the steps (ms per step, at least 0)."""
    d = _series(p)["duration_us"].to_numpy(float)
    return Value(max(0.0, float(d.mean()) - first_steps(d)) / US_PER_MS)


@metric("trend.rising_part", unit="text", needs=_NEEDS)
def rising_part(p: Profile) -> Value:
    """The part of the step whose per-step time rises fastest (largest
    Theil-Sen slope): one of the operators whose per-step time rises most
    (``op_trend``), or the step's time outside operators, data wait or
    exposed communication. The evidence lists every part's slope and the step
    components' (computing included), in ms per step."""
    part = _part(p)
    return Value(part["label"], {"slopes_ms_per_step": {k: round(v / US_PER_MS, 4) for k, v in part["slopes"].items()
                                                       if np.isfinite(v)}})


@metric("trend.rising_part_slope_ms", unit="ms", needs=_NEEDS)
def rising_part_slope_ms(p: Profile) -> Value:
    """How much longer the rising part (``trend.rising_part``) takes each
    step than the step before, in ms per step (its Theil-Sen slope)."""
    return Value(_part(p)["slope"] / US_PER_MS)


@metric("trend.rising_part_ms", unit="ms", needs=_NEEDS)
def rising_part_ms(p: Profile) -> Value:
    """The rising part's mean time per steady step (``trend.rising_part``)."""
    return Value(float(_series(p)[_part(p)["column"]].mean()) / US_PER_MS)


@metric("trend.rising_part_rise_p", unit="p", needs=_NEEDS)
def rising_part_rise_p(p: Profile) -> Value:
    """One-sided p-value that the rising part's (``trend.rising_part``) own
    per-step time rises with the step (the Mann-Kendall test of
    ``trend.step_rise_p`` on its series), times the number of parts it was
    picked from (Bonferroni; at most 1): the part is the one whose time
    rises fastest of several, and the fastest of several noisy series is
    in rising order by chance more often than one series named in advance
    (with 4 steps, one in 24 for each). Evidence: the test's own p-value and
    the parts compared."""
    part = _part(p)
    s, pval, method = mann_kendall(_series(p)[part["column"]].to_numpy(float))
    compared = len(part["candidates"])
    return Value(min(1.0, pval * compared), {"kendall_s": s, "method": method, "p_one_part": pval,
                                             "parts_compared": compared})


@metric("trend.rising_part_rise_share", unit="ratio", needs=_NEEDS)
def rising_part_rise_share(p: Profile) -> Value:
    """Share of the step's rise that the rising part accounts for: its
    Theil-Sen slope over the step duration's. Not evaluated when the steps do
    not rise (slope 0 or below)."""
    series = _series(p)
    step = _slope(series, "duration_us")
    if not step > 0:
        raise NotEvaluated("the steady steps do not rise (Theil-Sen slope 0 or below)")
    return Value(_part(p)["slope"] / step)


@metric("trend.rising_part_growth_ratio", unit="ratio", needs=_NEEDS)
def rising_part_growth_ratio(p: Profile) -> Value:
    """The rising part's rise over the window as a share of its own time in
    the first steps (as ``trend.step_growth_ratio`` for the step)."""
    series = _series(p)
    return Value(_growth(series, series[_part(p)["column"]].to_numpy(float)))


@metric("trend.rest_growth_ratio", unit="ratio", needs=_NEEDS)
def rest_growth_ratio(p: Profile) -> Value:
    """The rest of the step's (duration minus the rising part) rise over the
    window as a share of its own time in the first steps. A machine getting
    busier slows every part alike: the rest grows about as fast as the
    rising part; something accumulating in one part leaves the rest flat."""
    series = _series(p)
    rest = (series["duration_us"] - series[_part(p)["column"]]).to_numpy(float)
    return Value(_growth(series, rest))
