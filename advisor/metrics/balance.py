"""Work balance across ranks within each step (the ``balance`` metrics).

A synchronous data-parallel step ends at its collectives: in every step the
ranks given less work wait there for the one given most. ``slow-rank``
(:mod:`advisor.metrics.cluster`) names a rank that is late in most steps;
these metrics describe imbalance that moves from rank to rank between
steps -- batches of variable-length samples padded per batch, per-rank
length bucketing, uneven sample counts -- where no rank is the straggler
and each one's mean looks like the others'.

Over the steady steps every rank recorded (``steps_view.steady_steps``):

* peer wait: per rank and step, the exposed time the rank spent in
  collectives waiting for its last peer to arrive (``exposed_wait_us`` of
  the collectives matched across ranks, :func:`advisor.metrics.comm.peer_waits`);
  the mean over ranks and steps;
* FLOPs spread: per step, (max - min) / max of the ranks' FLOPs (the
  ``flops`` table: matrix products and convolutions from the shapes a
  PyTorch trace recorded, ``collectors/kineto/work.py``); the mean over
  the steps;
* excess work: per step, the heaviest rank's FLOPs over the ranks' mean,
  as time at the ranks' pace (their median of computing time per FLOP
  over those steps): the time the step lasts longer than it would with
  the same work split evenly; the mean over the steps;
* heaviest-rank share: among the steps whose FLOPs spread is at least
  ``UNEVEN_STEP``, the share in which the most frequent heaviest rank is
  the heaviest: 1 for a fixed straggler, about 1 / ranks when the rank
  given most work changes from step to step.
"""

from __future__ import annotations

import pandas as pd

from advisor.metrics.comm import peer_waits
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, common_steady_steps
from advisor.profile import Profile

#: A step whose ranks' FLOPs differ by less than this share of the largest
#: is even: it names no heaviest rank (the same batch shape on every rank
#: gives equal FLOPs; a few percent is a ragged last batch or a padding
#: bucket of one more row).
UNEVEN_STEP = 0.05
_WAIT_NEEDS = ["comm.kind", "comm.start_us", "comm.elapse_us", "comm.exposed_us", "steps.duration_us"]
_FLOPS_NEEDS = ["flops.step", "flops.mflops", "steps.duration_us"]
_PACE_NEEDS = [*_FLOPS_NEEDS, "steps.computing_us"]


def _common_steps(p: Profile) -> pd.DataFrame:
    """Steady (rank, step) rows of the steps every rank recorded as steady
    (``steps_view.common_steady_steps``); NotEvaluated without two ranks
    that share one."""
    steps = common_steady_steps(p)
    if steps.empty or steps["rank"].nunique() < 2:
        raise NotEvaluated("needs a steady step with a step id recorded by every rank, on two ranks or more")
    return steps


def _peer_wait_per_step(p: Profile) -> tuple[pd.Series, float]:
    """(per rank, mean exposed peer wait per common steady step in us; the
    mean step time in us)."""
    return p.memo("balance.peer_wait", lambda: _peer_wait(p))


def _peer_wait(p: Profile) -> tuple[pd.Series, float]:
    if p.meta.ranks_inferred:
        raise NotEvaluated("ranks were assigned to files without rank information")
    steps = _common_steps(p)
    waits = peer_waits(p)
    if waits is None or "exposed_wait_us" not in waits.columns:
        raise NotEvaluated("the collectives could not be matched across ranks (one clock, same collectives)")
    keys = steps[["rank", "step"]]
    per = waits.groupby(["rank", "step"])["exposed_wait_us"].sum().rename("wait").reset_index()
    per = keys.merge(per, on=["rank", "step"], how="left").fillna({"wait": 0.0})
    return per.groupby("rank")["wait"].mean(), float(steps["duration_us"].mean())


@metric("balance.peer_wait_ms", unit="ms", needs=_WAIT_NEEDS)
def peer_wait_ms(p: Profile) -> Value:
    """Exposed time per step a rank spends in collectives waiting for its
    last peer (module doc: peer wait), the mean over ranks and the steady
    steps every rank recorded. Evidence: per rank."""
    per_rank, _ = _peer_wait_per_step(p)
    return Value(float(per_rank.mean()) / US_PER_MS,
                 {"per_rank_ms": {str(r): round(float(v) / US_PER_MS, 3) for r, v in per_rank.items()}})


@metric("balance.peer_wait_ratio", unit="ratio", needs=_WAIT_NEEDS)
def peer_wait_ratio(p: Profile) -> float:
    """``balance.peer_wait_ms`` as a share of the mean step time."""
    per_rank, step_us = _peer_wait_per_step(p)
    if step_us <= 0:
        raise NotEvaluated("no step time")
    return float(per_rank.mean()) / step_us


def _flops_per_step(p: Profile) -> pd.DataFrame:
    """Per common steady step (rows) and rank (columns), the MFLOPs executed."""
    return p.memo("balance.flops", lambda: _flops(p))


def _flops(p: Profile) -> pd.DataFrame:
    steps = _common_steps(p)
    flops = p.table("flops").dropna(subset=["step", "mflops"]).astype({"step": "int64"})
    per = flops.groupby(["step", "rank"])["mflops"].sum().unstack("rank")
    per = per.reindex(index=sorted(steps["step"].unique()), columns=sorted(steps["rank"].unique()))
    per = per.dropna(how="any")
    per = per[per.max(axis=1) > 0]
    if per.empty:
        raise NotEvaluated("no steady step has FLOPs recorded on every rank (traces without shapes)")
    return per


@metric("balance.flops_spread", unit="ratio", needs=_FLOPS_NEEDS)
def flops_spread(p: Profile) -> Value:
    """Per step, (max - min) / max of the ranks' FLOPs, the mean over the
    steady steps every rank recorded with FLOPs (module doc). 0 when every
    rank gets the same work in each step. Evidence: the steps and the
    largest per-step spread."""
    per = _flops_per_step(p)
    spread = (per.max(axis=1) - per.min(axis=1)) / per.max(axis=1)
    return Value(float(spread.mean()), {"steps": int(len(per)), "largest": round(float(spread.max()), 4)})


def _excess_work_us(p: Profile) -> tuple[float, float, float]:
    """(mean excess work per step in us, the pace in us per MFLOP, the mean
    step time in us) over the common steady steps with FLOPs (module doc)."""
    return p.memo("balance.excess_work", lambda: _excess_work(p))


def _excess_work(p: Profile) -> tuple[float, float, float]:
    per = _flops_per_step(p)
    steps = _common_steps(p)
    steps = steps[steps["step"].isin(per.index)]
    work = per.stack().rename("mflops").reset_index()
    paced = steps.merge(work, on=["step", "rank"]).groupby("rank")[["computing_us", "mflops"]].sum()
    paced = paced[(paced["mflops"] > 0) & (paced["computing_us"] > 0)]
    if paced.empty:
        raise NotEvaluated("no rank has both computing time and FLOPs in the steady steps")
    pace = float((paced["computing_us"] / paced["mflops"]).median())
    excess = (per.max(axis=1) - per.mean(axis=1)).mean() * pace
    return float(excess), pace, float(steps["duration_us"].mean())


@metric("balance.excess_work_ms", unit="ms", needs=_PACE_NEEDS)
def excess_work_ms(p: Profile) -> Value:
    """Per step, the heaviest rank's FLOPs above the ranks' mean, in time at
    the ranks' median computing time per FLOP; the mean over the steady
    steps every rank recorded with FLOPs (module doc): what an even split
    of each step's work would take off the step. Evidence: the pace."""
    excess, pace, _ = _excess_work_us(p)
    return Value(excess / US_PER_MS, {"us_per_mflop": round(pace, 4)})


@metric("balance.excess_work_ratio", unit="ratio", needs=_PACE_NEEDS)
def excess_work_ratio(p: Profile) -> float:
    """``balance.excess_work_ms`` as a share of the mean step time."""
    excess, _, step_us = _excess_work_us(p)
    if step_us <= 0:
        raise NotEvaluated("no step time")
    return excess / step_us


@metric("balance.heaviest_rank_share", unit="ratio", needs=_FLOPS_NEEDS)
def heaviest_rank_share(p: Profile) -> Value:
    """Among the steady steps whose FLOPs spread is at least ``UNEVEN_STEP``,
    the share in which the most frequent heaviest rank (most FLOPs) is the
    heaviest (module doc): 1 for a rank given more work in every step,
    about 1 / ranks when it changes from step to step. Not evaluated
    without an uneven step. Evidence: per rank, the steps it was heaviest in."""
    per = _flops_per_step(p)
    uneven = per[(per.max(axis=1) - per.min(axis=1)) >= UNEVEN_STEP * per.max(axis=1)]
    if uneven.empty:
        raise NotEvaluated("every rank executes about the same FLOPs in every step")
    counts = uneven.idxmax(axis=1).value_counts()
    return Value(float(counts.iloc[0]) / len(uneven),
                 {"heaviest_in": {str(r): int(n) for r, n in counts.items()}, "uneven_steps": int(len(uneven))})
