"""The anomaly model: steps that do not look like the others.

Features: one vector per step id (mean over ranks) of the step components
the profile has (duration, computing, exposed communication, free, data
wait, iteration interval, fp/bp, tail), in ms. Model: the minimum covariance determinant fit of
:mod:`advisor.metrics.robust_fit`, a robust estimate of the typical step's
mean and covariance that the outliers themselves cannot pull towards them. A step is anomalous when both

* its squared robust Mahalanobis distance over the step *components*
  exceeds the chi-square quantile ``1 - ALPHA`` for their number (it is
  unlike the others; the duration is left out of the distance because it is
  often the sum of the components, which would make the covariance
  singular), and
* its duration exceeds the median step by at least ``MIN_EXCESS`` of the
  median (it is slower by a margin worth reporting; fast oddities are not
  findings).

Steps that recur at a fixed interval (``anomaly.step_outlier_period``: an
evaluation pass every other step, a checkpoint every N) can be half of the
window or more, beyond what a robust fit leaves out (it fits on about half
of the rows): the fit flags only some of them, or, when they are the
majority, none. So the steps are also split by phase, for each period P
from 2 up to a third of the steps: a phase of three or more steps is slow
when every one of its steps is slower than every other step, and by
``MIN_EXCESS`` of the others' median (by chance alone, 9 steps put one
phase above the rest about 1 time in 20 over all periods, and a healthy
step rarely varies by 10%), and when their excesses over that median are
alike (``RECURRING_LIKE``: one recurring job costs about the same each
time). And once three or more flagged steps recur at a period with like
excesses, every step of their phase ``MIN_EXCESS`` slower than the other
phases' median is flagged too. A run alternating 22-58 ms training steps
with 90-200 ms steps that also evaluate had 4 of its 7 such steps flagged
by the fit alone, and 0 of 5 when they were 5 of 9. A flagged step's
excess is measured over the typical step, the median of the steps not
flagged.

The drivers of a call are the features whose robust z-score
(0.6745 * (x - median) / MAD) in that step exceeds ``DRIVER_Z``. With
fewer than ``MIN_STEPS`` steady steps nothing is evaluated. The model only
produces metrics (``anomaly.*``); rules decide what is a finding.

**Ranks** get the same model, one vector per rank: the medians over its
steady steps of the step components that differ between ranks (computing,
free, data wait, iteration interval, fp/bp, tail; not exposed
communication, which in synchronous training mirrors the others' lateness
and would make the covariance singular) and of its collectives' time per
step. A rank is anomalous when its squared robust distance exceeds the same
quantile and one of its components is above the median rank by at least
``RANK_MIN_EXCESS`` of the median step (slower by a margin worth a finding:
the ``slow-rank`` rule's default). Drivers: components with robust z >=
``DRIVER_Z``, and ``collectives`` when the rank spends markedly *less* time
in them (z <= -``DRIVER_Z``): the rank the others wait for waits least. A
rank no feature explains is not flagged (half the cluster slow, one host of
two, leaves no typical rank to compare with: ``slow-rank`` finds it). The
model needs ``RANK_SAMPLES_PER_FEATURE`` ranks per feature, so that the
robust fit has outliers to leave out (MCD fits on about half of them).

Cost: the model works on per-rank summaries (one row per rank, whatever the
layout) and fits only when some step or rank is slower by a material margin
(no margin, no call); a fit takes milliseconds at a thousand rows.
"""

from __future__ import annotations

from functools import reduce
from math import gcd

import numpy as np
import pandas as pd

from advisor.metrics import robust_fit
from advisor.metrics.quantiles import beta_quantile, chi2_quantile
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
#: Steps taken for one recurring job (a phase, or outliers at a fixed
#: interval) are slower than the others by like amounts: the smallest
#: excess at least this share of the largest. A checkpoint or an evaluation
#: every N steps costs about the same each time (evaluation passes of
#: 90-170 ms among 22-58 ms steps: 0.4); one large hiccup joined by two
#: steps that noise made 11-17% slower (excesses 3.1, 4.7 and 40 ms) is
#: not one job.
RECURRING_LIKE = 0.25
#: Outlier steps at a fixed interval make a period when they are at least
#: this share of the outliers: a checkpoint every 4 steps flagged steps 8,
#: 12, 16 and 20 of a 2-rank run on a loaded host, and load step 15 too.
PERIOD_MEMBERS = 0.6
DRIVER_Z = 3.5
RANK_FEATURES = ("computing_us", "free_us", "data_wait_us", "iteration_interval_us", "fp_bp_us", "tail_us")
RANK_MIN_EXCESS = 0.05
RANK_SAMPLES_PER_FEATURE = 3


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


def _distances(x: np.ndarray) -> tuple[np.ndarray, float]:
    """Squared robust Mahalanobis distances of the rows of ``x``
    (:mod:`advisor.metrics.robust_fit`) and the chi-square quantile
    ``1 - ALPHA`` they are compared with; NotEvaluated when the rows cannot
    be fitted."""
    try:
        model = robust_fit.fit(x)
    except ValueError as exc:
        raise NotEvaluated(f"the robust covariance fit rejects these {x.shape[0]} rows of "
                           f"{x.shape[1]} feature(s): {exc}") from None
    return model.distances(x), chi2_quantile(1 - ALPHA, x.shape[1])


def _varying(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if frame[c].std(ddof=0) > 1e-9 * max(1.0, frame[c].abs().max())]


def _model(p: Profile) -> dict:
    return p.memo("anomaly_model", lambda: _fit(p))


def _fit(p: Profile) -> dict:
    frame = _step_features(p)
    varying = _varying(frame)
    if "duration_us" not in varying:
        return {"outliers": [], "frame": frame, "drivers": {}}
    components = [c for c in varying if c != "duration_us"] or ["duration_us"]
    x = frame[components].to_numpy(dtype=float)
    duration = frame["duration_us"]
    slow = duration > duration.median() * (1 + MIN_EXCESS)
    phase = _slow_phase(duration)
    if not slow.any() and not phase:
        # Only slow steps can be flagged: without one the distance decides
        # nothing, so the fit is skipped. Healthy runs end here.
        return {"outliers": [], "frame": frame, "drivers": {}}
    distance, limit = _distances(x)
    fitted = [int(s) for s in frame.index[(distance > limit) & slow.to_numpy()]]
    flagged = _with_their_phase(duration, sorted(set(fitted) | set(phase)))
    z = _robust_z(frame[varying])
    drivers = {
        int(s): [c.removesuffix("_us") for c in z.columns if abs(z.loc[s, c]) >= DRIVER_Z and c != "duration_us"]
        for s in flagged
    }
    return {"outliers": flagged, "frame": frame, "drivers": drivers, "distance": distance}


def _period(outliers: list[int], duration: pd.Series) -> int:
    """The interval of ``_periodic``; NotEvaluated without one."""
    return _periodic(outliers, duration)[0]


def _periodic(outliers: list[int], duration: pd.Series) -> tuple[int, list[int]]:
    """(the fixed interval, the outlier steps on it) at which three or more
    outlier steps recur -- at most one occurrence missed between two (a
    gap of at most twice the interval), each slower than the other steps
    by a like amount (``_alike``) -- and which hold at least
    ``PERIOD_MEMBERS`` of the outliers: the others are one-offs (a step that
    load slowed). The most outliers win, then the shortest interval.
    NotEvaluated otherwise."""
    outliers = sorted(outliers)
    if len(outliers) < 3:
        raise NotEvaluated("fewer than three outlier steps")
    typical = _typical(duration, outliers)
    found, unlike = None, False
    for period in range(2, (outliers[-1] - outliers[0]) // 2 + 1):
        for phase in sorted({o % period for o in outliers}):
            members = [o for o in outliers if o % period == phase]
            if len(members) < max(3, PERIOD_MEMBERS * len(outliers)):
                continue
            gaps = np.diff(members)
            if reduce(gcd, (int(g) for g in gaps)) != period or gaps.max() > 2 * period:
                continue
            if not _alike(duration.loc[members].to_numpy(dtype=float) - typical):
                unlike = True
                continue
            if found is None or len(members) > len(found[1]):
                found = (period, members)
    if found is None:
        raise NotEvaluated("the outliers fall at a fixed interval but differ too much in size to be one "
                           "recurring job" if unlike else "outliers do not recur at a fixed interval")
    return found


def _alike(excess: np.ndarray) -> bool:
    """True when steps slower than the others by ``excess`` may be one
    recurring job: the smallest excess is at least ``RECURRING_LIKE`` of
    the largest."""
    return bool(excess.size) and float(excess.min()) >= RECURRING_LIKE * float(excess.max())


def _slow_phase(duration: pd.Series) -> list[int]:
    """The steps of the first phase (by period, then phase) whose three or
    more steps are each slower than every other step and by ``MIN_EXCESS``
    of the others' median (module doc); [] when none is."""
    steps = duration.index.to_numpy(dtype=np.int64)
    values = duration.to_numpy(dtype=float)
    for period in range(2, len(steps) // 3 + 1):
        for phase in range(period):
            inside = steps % period == phase
            if inside.sum() < 3 or inside.all():
                continue
            rest = values[~inside]
            low = values[inside].min()
            if (low > rest.max() and low >= np.median(rest) * (1 + MIN_EXCESS)
                    and _alike(values[inside] - np.median(rest))):
                return sorted(int(s) for s in steps[inside])
    return []


def _with_their_phase(duration: pd.Series, flagged: list[int]) -> list[int]:
    """``flagged`` and, when they recur at a period, every other step of
    their phase ``MIN_EXCESS`` slower than the median of the other phases'
    steps (module doc), in step order."""
    try:
        period = _period(flagged, duration)
    except NotEvaluated:
        return flagged
    steps = duration.index.to_numpy(dtype=np.int64)
    phase = steps % period == flagged[0] % period
    if phase.all():
        return flagged
    typical = float(duration[~phase].median())
    more = steps[phase & (duration.to_numpy(dtype=float) > typical * (1 + MIN_EXCESS))]
    return sorted(set(flagged) | {int(s) for s in more})


def _typical_ms(m: dict) -> float:
    """The typical step's duration of the model ``m`` (``_typical``)."""
    return _typical(m["frame"]["duration_us"], m["outliers"])


def _typical(duration: pd.Series, outliers: list[int]) -> float:
    """The typical step's duration: the median of the steps not among
    ``outliers`` (of all steps when every one is)."""
    rest = duration.drop(index=outliers)
    return float((rest if len(rest) else duration).median())


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
    of (duration - the typical step's: the median of the steps not
    flagged), divided by the number of steady steps."""
    m = _model(p)
    duration = m["frame"]["duration_us"]
    typical = _typical_ms(m)
    excess = float((duration.loc[m["outliers"]] - typical).clip(lower=0).sum())
    return Value(excess / len(duration), {"median_step_ms": round(typical, 3)})


#: One-sided confidence with which the outlier rate the gain counts on
#: recurs: with k flagged steps of n, the rate is at least the
#: Clopper-Pearson lower bound at this level (unless a period is found).
RECURRENCE_CONFIDENCE = 0.9


@metric("anomaly.step_outlier_recurring_ms", unit="ms", needs=["steps.duration_us", "steps.step"])
def step_outlier_recurring_ms(p: Profile) -> Value:
    """The part of ``anomaly.step_outlier_excess_ms`` the window supports as
    a recurring cost: the mean excess of a flagged step times the rate at
    which such steps recur -- 1 / ``anomaly.step_outlier_period`` when the
    outliers recur at a fixed interval (the excess of the steps on it, the
    one-offs left out), else the lowest rate consistent
    with k flagged of n steady steps at ``RECURRENCE_CONFIDENCE`` one-sided
    confidence (Clopper-Pearson: the 10% quantile of Beta(k, n - k + 1)).
    One slow step in a short window is an event, not a rate: 1 of 9 steps
    supports a rate of 1.2%, 4 of 20 one of 9.0%."""
    m = _model(p)
    k, n = len(m["outliers"]), len(m["frame"])
    if k == 0:
        return Value(0.0, {"flagged": 0, "steps": n})
    mean_excess = step_outlier_excess_ms(p).value * n / k
    try:
        duration = m["frame"]["duration_us"]
        period, members = _periodic(m["outliers"], duration)
        mean_excess = float((duration.loc[members] - _typical_ms(m)).clip(lower=0).mean())
        rate, basis = 1.0 / period, "period"
    except NotEvaluated:
        rate, basis = beta_quantile(1.0 - RECURRENCE_CONFIDENCE, k, n - k + 1), "lower bound"
    return Value(mean_excess * rate, {"flagged": k, "steps": n, "rate": round(rate, 4), "rate_from": basis})


@metric("anomaly.step_outlier_drivers", unit="list", needs=["steps.duration_us", "steps.step"])
def step_outlier_drivers(p: Profile) -> Value:
    """Step components that most often drove an outlier call, most frequent
    first, and of those as frequent, the one that grew the more first (its
    summed growth over the flagged steps, in ms, over its median step)."""
    m = _model(p)
    frame = m["frame"]
    weight: dict[str, tuple[int, float]] = {}
    for step, names in m["drivers"].items():
        for name in names:
            column = frame[f"{name}_us"]
            count, grown = weight.get(name, (0, 0.0))
            weight[name] = (count + 1, grown + float(column.loc[step] - column.median()))
    return Value(sorted(weight, key=lambda name: (-weight[name][0], -weight[name][1])))


#: An operator is among what the outlier steps add (``anomaly.step_outlier_ops``)
#: when its time grows in them by at least this share of their mean excess
#: over the typical step: a part of the slowdown worth naming ...
OUTLIER_OP_SHARE = 0.1
#: ... and at most this many, most time first.
OUTLIER_OPS = 3


@metric("anomaly.step_outlier_ops", unit="list", needs=["steps.duration_us", "steps.step", "op_trend.time_us"])
def step_outlier_ops(p: Profile) -> Value:
    """The host operators the outlier steps add (Kineto traces: the
    ``op_trend`` operators, those whose time stands out in some steps among
    them): per operator and rank, its mean time and calls over the flagged
    steps less their medians over the rank's other steady steps; mean over
    ranks. Those whose time grows by at least ``OUTLIER_OP_SHARE`` of the
    flagged steps' mean excess, at most ``OUTLIER_OPS``, each as
    ``{name, ms, calls}`` (ms and calls more per flagged step). A host
    operator's time is its host time: on a GPU the launches, not the
    kernels."""
    m = _model(p)
    flagged = m["outliers"]
    if not flagged:
        raise NotEvaluated("no outlier steps")
    ops = p.table("op_trend")
    steps = steady_steps(p)[["rank", "step"]].dropna().astype({"step": "int64"})
    rows = ops.dropna(subset=["step"]).astype({"step": "int64"}).merge(steps, on=["rank", "step"])
    inside = rows["step"].isin(flagged)
    if not inside.any() or inside.all():
        raise NotEvaluated("the operators' per-step times do not cover both the outlier and the other steps")
    cols = ["time_us", "calls"] if "calls" in rows.columns else ["time_us"]
    grown = (rows[inside].groupby(["rank", "name"])[cols].mean()
             - rows[~inside].groupby(["rank", "name"])[cols].median()).dropna().groupby("name").mean()
    excess_ms = float((m["frame"]["duration_us"].loc[flagged] - _typical_ms(m)).clip(lower=0).mean())
    named = grown[grown["time_us"] >= OUTLIER_OP_SHARE * excess_ms * US_PER_MS].sort_values("time_us",
                                                                                           ascending=False)
    if named.empty or not excess_ms > 0:
        raise NotEvaluated("no recorded operator accounts for a tenth of the outlier steps' excess")
    out = [{"name": str(name), "ms": round(float(row["time_us"]) / US_PER_MS, 3),
            **({"calls": round(float(row["calls"]), 1)} if "calls" in row else {})}
           for name, row in named.head(OUTLIER_OPS).iterrows()]
    return Value(out, {"step_excess_ms": round(excess_ms, 3)})


@metric("anomaly.step_outlier_period", unit="steps", needs=["steps.duration_us", "steps.step"])
def step_outlier_period(p: Profile) -> Value:
    """When three or more outliers recur at a fixed step interval (e.g. a
    checkpoint every N steps; ``_periodic``), that interval N; otherwise
    not evaluated. Evidence: the outlier steps on it."""
    m = _model(p)
    period, members = _periodic(m["outliers"], m["frame"]["duration_us"])
    return Value(period, {"steps": members})


@metric("anomaly.step_outlier_periodic_steps", unit="list", scope="step", needs=["steps.duration_us", "steps.step"])
def step_outlier_periodic_steps(p: Profile) -> Value:
    """The outlier steps on ``anomaly.step_outlier_period`` (the others are
    one-offs); not evaluated without a period."""
    return Value(step_outlier_period(p).evidence["steps"])


#: A rank carries the outlier steps alone (``anomaly.step_outlier_rank``)
#: when its own work grows in them by at least this share of their mean
#: excess ...
LONE_RANK_SHARE = 0.5
#: ... and no other rank's own work grows by more than this share of that
#: rank's growth (the others wait for it at the next collective). Two ranks
#: run beside another two-rank job on two cores: a rank-0 checkpoint grew
#: rank 0's own work by 31 ms a step, and the load rank 1's by 11 ms.
LONE_RANK_OTHERS = 0.5
#: A rank's own work in a step: the components that are not communication.
OWN_WORK = ("computing_us", "free_us", "data_wait_us")


def _lone_rank(p: Profile) -> dict:
    """The rank whose own work makes the outlier steps slow while the other
    ranks' does not (``anomaly.step_outlier_rank``). A rank's growth in a
    component: the mean over the flagged steps of its time less the median
    of its other steady steps, in ms; its own work's is the sum over
    ``OWN_WORK``. Evidence: the others' largest own-work growth and their
    smallest growth in exposed communication (``others_wait_ms``: what
    they spend waiting for it)."""
    m = _model(p)
    flagged = m["outliers"]
    if not flagged:
        raise NotEvaluated("no outlier steps")
    steps = steady_steps(p)
    if steps["rank"].nunique() < 2:
        raise NotEvaluated("one rank: no other rank waits for it")
    work = [c for c in OWN_WORK if c in steps.columns and steps[c].notna().all()]
    if not work:
        raise NotEvaluated("no per-step computing, free or data-wait time")
    cols = work + (["exposed_comm_us"] if "exposed_comm_us" in steps.columns
                   and steps["exposed_comm_us"].notna().all() else [])
    inside = steps["step"].isin(flagged)
    growth = ((steps[inside].groupby("rank")[cols].mean() - steps[~inside].groupby("rank")[cols].median())
              .dropna() / US_PER_MS)
    if len(growth) < 2:
        raise NotEvaluated("no two ranks have both outlier steps and other steady steps")
    own = growth[work].sum(axis=1)
    rank = int(own.idxmax())
    others_own = own.drop(index=rank)
    duration = m["frame"]["duration_us"]
    step_excess = float((duration.loc[flagged] - _typical_ms(m)).clip(lower=0).mean())
    if own[rank] < LONE_RANK_SHARE * step_excess or (others_own > LONE_RANK_OTHERS * own[rank]).any():
        raise NotEvaluated("the outlier steps are not one rank's own work: "
                           f"rank {rank}'s grows by {own[rank]:.2f} ms of a {step_excess:.2f} ms excess, "
                           f"the others' by up to {float(others_own.max()):.2f} ms")
    lone = {"rank": rank, "ms": float(own[rank]), "driver": str(growth.loc[rank, work].idxmax()).removesuffix("_us"),
            "others_ms": round(float(others_own.max()), 3), "step_excess_ms": round(step_excess, 3)}
    if "exposed_comm_us" in cols:
        lone["others_wait_ms"] = round(float(growth.drop(index=rank)["exposed_comm_us"].min()), 3)
    return lone


@metric("anomaly.step_outlier_rank", unit="rank", scope="rank", needs=["steps.duration_us", "steps.step"])
def step_outlier_rank(p: Profile) -> Value:
    """The one rank whose own work (computing, free and data wait) makes the
    outlier steps slow: it grows in them by at least ``LONE_RANK_SHARE`` of
    their mean excess, every other rank's by at most ``LONE_RANK_OTHERS``
    of its growth (they wait for it in communication). Work one rank does
    alone every few steps: an evaluation, a checkpoint, logging on rank 0.
    Not evaluated on one rank, or when the steps are slow on every rank."""
    lone = p.memo("anomaly_lone_rank", lambda: _lone_rank(p))
    return Value(lone["rank"], {k: v for k, v in lone.items() if k != "rank"})


@metric("anomaly.step_outlier_rank_ms", unit="ms", needs=["steps.duration_us", "steps.step"])
def step_outlier_rank_ms(p: Profile) -> Value:
    """How much ``anomaly.step_outlier_rank``'s own work grows in an outlier
    step: the mean over the flagged steps of its computing, free and data
    wait, less the median of its other steady steps."""
    lone = p.memo("anomaly_lone_rank", lambda: _lone_rank(p))
    return Value(lone["ms"], {"driver": lone["driver"]})


@metric("anomaly.step_outlier_rank_driver", unit="text", needs=["steps.duration_us", "steps.step"])
def step_outlier_rank_driver(p: Profile) -> Value:
    """The component of ``anomaly.step_outlier_rank``'s own work that grows
    the most in the outlier steps: computing, free or data_wait."""
    lone = p.memo("anomaly_lone_rank", lambda: _lone_rank(p))
    return Value(lone["driver"])


# ------------------------------------------------------------------ ranks

def _rank_features(p: Profile) -> tuple[pd.DataFrame, float]:
    """Per-rank feature medians in ms (module doc) and the median step in ms."""
    if p.meta.ranks_inferred:
        raise NotEvaluated("ranks were assigned to files without rank information")
    steps = steady_steps(p)
    if steps.empty or "duration_us" not in steps:
        raise NotEvaluated("no step durations")
    cols = [c for c in RANK_FEATURES if c in steps.columns and steps[c].notna().any()]
    frame = steps.groupby("rank")[cols].median() / US_PER_MS
    comm = p.table("comm")
    if comm is not None and "step" in comm.columns and comm["step"].notna().any():
        per_step = comm.dropna(subset=["step"]).groupby(["rank", "step"])["elapse_us"].sum()
        frame["collectives_us"] = per_step.groupby("rank").median() / US_PER_MS
    frame = frame.dropna(axis=1, how="any")
    return frame, float(steps.groupby("rank")["duration_us"].median().median()) / US_PER_MS


def _rank_model(p: Profile) -> dict:
    return p.memo("anomaly_rank_model", lambda: _fit_ranks(p))


def _fit_ranks(p: Profile) -> dict:
    frame, step_ms = _rank_features(p)
    varying = _varying(frame)
    if not varying or len(frame) < RANK_SAMPLES_PER_FEATURE * len(varying):
        raise NotEvaluated(f"{len(frame)} ranks for {len(varying)} varying features; the model needs "
                           f"{RANK_SAMPLES_PER_FEATURE} ranks per feature")
    components = [c for c in varying if c != "collectives_us"]
    excess = frame[components] - frame[components].median()
    material = (excess >= RANK_MIN_EXCESS * step_ms).any(axis=1) if components else pd.Series(False, frame.index)
    if not material.any():
        # Only a rank slower by a material margin can be flagged: without one
        # the distance decides nothing, so the robust fit is skipped. Healthy
        # clusters end here.
        return {"outliers": [], "drivers": {}, "ranks": len(frame)}
    x = frame[varying].to_numpy(dtype=float)
    distance, limit = _distances(x)
    flagged = frame.index[(distance > limit) & material.to_numpy()]
    z = _robust_z(frame[varying])
    drivers = {
        int(r): [c.removesuffix("_us") for c in components if z.loc[r, c] >= DRIVER_Z]
        + (["collectives (waits least)"] if "collectives_us" in varying and z.loc[r, "collectives_us"] <= -DRIVER_Z
           else [])
        for r in flagged
    }
    drivers = {r: d for r, d in drivers.items() if d}  # a call no feature explains is not made
    return {"outliers": sorted(drivers), "drivers": drivers, "ranks": len(frame)}


@metric("anomaly.rank_outliers", unit="list", scope="rank", needs=["steps.duration_us"])
def rank_outliers(p: Profile) -> Value:
    """Ranks the anomaly model flags (module doc, Ranks): unlike the other
    ranks over their step components and collectives, and slower in one
    component by 5% of the step or more. Evidence: what drove each call."""
    m = _rank_model(p)
    return Value(m["outliers"], {"drivers": {str(k): v for k, v in m["drivers"].items()}, "ranks": m["ranks"]})
