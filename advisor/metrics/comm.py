"""Communication metrics: overlap with compute, exposed all-reduce, bandwidth."""

from __future__ import annotations

import math

import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import (
    US_PER_MS, per_rank_mean, rank_evidence, run_mean_ms, run_ratio, steady_steps,
)
from advisor.profile import Profile


@metric(
    "comm.overlap_ratio",
    unit="ratio",
    needs=["steps.overlapped_us", "steps.communication_us"],
)
def overlap_ratio(p: Profile) -> Value:
    """Compute-communication overlap: overlapped time / communication time,
    mean over ranks. 1 means all communication is hidden behind compute;
    0 means the device does nothing else while communicating."""
    value = run_ratio(p, "overlapped_us", base="communication_us")
    if value is None:
        raise NotEvaluated("no communication time in steady-state steps")
    return Value(value)


#: Collectives that synchronize gradients in data-parallel training.
GRADIENT_SYNC = ("allreduce", "reducescatter")


def _exposed_source(p: Profile) -> str:
    """Which step column measures gradient sync the step waits on."""
    comm = p.table("comm")
    if "kind" not in comm.columns or not comm["kind"].isin(GRADIENT_SYNC).any():
        raise NotEvaluated("no all-reduce / reduce-scatter collectives in this profile")
    if p.has("steps", "tail_us"):
        return "tail_us"
    if p.has("steps", "exposed_comm_us"):
        return "exposed_comm_us"
    raise NotEvaluated("the profile has neither a step tail nor exposed communication")


def _last_arrival(p: Profile, column: str) -> tuple[float, float] | None:
    """Exposed communication of the rank that arrives last, per step:
    ``(mean ms, mean share of the step)`` over the steady steps that every
    rank recorded, or None for one rank / unlabelled ranks / no step ids.

    A collective completes only when the last rank has joined, so the ranks
    that arrive earlier also wait for it: their exposed communication is the
    last rank's plus the imbalance (reported by ``slow-rank``). The minimum
    over ranks of a step's exposed communication is the synchronization no
    rank can avoid, the part a bucket / fusion change can hide."""
    if p.meta.ranks_inferred:
        return None
    steps = steady_steps(p)
    if "step" not in steps.columns or column not in steps.columns:
        return None
    steps = steps.dropna(subset=["step", column, "duration_us"])
    ranks = steps["rank"].nunique()
    if ranks < 2:
        return None
    g = steps.groupby("step")
    per = pd.DataFrame({"exposed": g[column].min(), "dur": g["duration_us"].median(),
                        "ranks": g["rank"].nunique()})
    per = per[(per["ranks"] == ranks) & (per["dur"] > 0)]
    if per.empty:
        return None
    return float(per["exposed"].mean()) / US_PER_MS, float((per["exposed"] / per["dur"]).mean())


_LAST_ARRIVAL = "exposed_comm_us, per step the least-exposed rank (the last to arrive)"


@metric("comm.exposed_allreduce_ms", unit="ms", needs=["steps", "comm"])
def exposed_allreduce_ms(p: Profile) -> Value:
    """Time per step spent on gradient synchronization that backward does not
    hide: the step-trace tail where the source has one (MindSpore: end of
    backward to end of step), else the exposed communication time. With
    several ranks and step ids, exposed communication is taken per step from
    the rank that exposes least (the last to arrive at the collectives; the
    others' extra wait is imbalance, not gradient sync). Evaluated only when
    the profile contains all-reduce or reduce-scatter collectives."""
    column = _exposed_source(p)
    last = _last_arrival(p, column) if column == "exposed_comm_us" else None
    if last is not None:
        return Value(last[0], {"from": _LAST_ARRIVAL, **rank_evidence(per_rank_mean(p, column))})
    value = run_mean_ms(p, column)
    if value is None:
        raise NotEvaluated(f"no {column} values")
    return Value(value, {"from": column, **rank_evidence(per_rank_mean(p, column))})


@metric("comm.exposed_allreduce_ratio", unit="ratio", needs=["steps.duration_us", "comm"])
def exposed_allreduce_ratio(p: Profile) -> Value:
    """``comm.exposed_allreduce_ms`` as a share of the step."""
    column = _exposed_source(p)
    last = _last_arrival(p, column) if column == "exposed_comm_us" else None
    if last is not None:
        return Value(last[1], {"from": _LAST_ARRIVAL})
    value = run_ratio(p, column)
    if value is None:
        raise NotEvaluated(f"no {column} values with a positive step duration")
    return Value(value, {"from": column})


@metric("comm.allreduce_tensor_count", unit="count", needs=["comm.tensor_count"])
def allreduce_tensor_count(p: Profile) -> Value:
    """Gradient tensors synchronized by all-reduce in one step: the largest
    ``tensor_count`` of any all-reduce operator (a fused all-reduce lists all
    the gradients it carries as inputs)."""
    comm = p.table("comm")
    ar = comm[comm["kind"] == "allreduce"]["tensor_count"].dropna()
    if ar.empty:
        raise NotEvaluated("no all-reduce operator with a tensor count")
    return Value(int(ar.max()))


@metric("comm.fusion_split", unit="list", needs=["comm.tensor_count"])
def fusion_split(p: Profile) -> Value:
    """A starting point for splitting gradient all-reduce fusion so that it
    overlaps backward: ``[k, n]`` for n gradients, with k = ceil(n / 2).
    Backward produces the last layers' gradients first, so the second group
    (k..n) can be reduced while backward still computes gradients 0..k. The
    best k is found by trying a few splits around this one."""
    n = allreduce_tensor_count(p).value
    if n < 2:
        raise NotEvaluated("fewer than two gradient tensors: nothing to split")
    return Value([math.ceil(n / 2), n], {"tensors": n})


@metric("comm.bandwidth_gbps", unit="GB/s", needs=["bandwidth.bandwidth_gbps", "bandwidth.size_mb"])
def bandwidth_gbps(p: Profile) -> Value:
    """Achieved bandwidth per transport type (SDMA, RDMA, HCCS, PCIE, ...):
    total transferred MB / total transfer time, over all ranks and operators
    with a non-zero transfer. A map transport -> GB/s."""
    bw = p.table("bandwidth")
    bw = bw[(bw["size_mb"] > 0) & (bw["time_ms"] > 0)]
    if bw.empty:
        raise NotEvaluated("no transfers with a positive size and time")
    sums = bw.groupby("transport")[["size_mb", "time_ms"]].sum()
    # MB / ms == GB / s
    values = {str(t): round(float(r.size_mb / r.time_ms), 4) for t, r in sums.iterrows()}
    sizes = {str(t): round(float(r.size_mb), 3) for t, r in sums.iterrows()}
    return Value(values, {"transit_size_mb": sizes})


@metric("comm.wait_ratio", unit="ratio", needs=["comm.wait_us", "comm.elapse_us"])
def wait_ratio(p: Profile) -> Value:
    """Share of collective time spent waiting for peers to arrive (wait time /
    elapsed time over all communication operators); high values point at
    imbalance between ranks rather than at slow links."""
    comm = p.table("comm")
    elapse = comm["elapse_us"].sum()
    if elapse <= 0:
        raise NotEvaluated("no communication time")
    per_rank = comm.groupby("rank")["wait_us"].sum() / comm.groupby("rank")["elapse_us"].sum()
    return Value(float(comm["wait_us"].sum() / elapse), rank_evidence(per_rank, scale=1.0))
