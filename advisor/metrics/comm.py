"""Communication metrics: overlap with compute, exposed all-reduce, bandwidth."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, rank_evidence, run_ratio, steady_steps
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


#: Collectives in which every rank needs data from every other rank: no rank
#: can finish one before the last rank has started it, so a rank's time in
#: one before the last rank starts it is waiting for that peer.
RENDEZVOUS = ("allreduce", "reducescatter", "allgather", "alltoall")
#: Sources whose ``comm.start_us`` is one clock for all ranks on a host:
#: Kineto writes host-clock microseconds (Ascend DB exports make start times
#: relative to each rank's first step, which cannot be compared across ranks).
SHARED_CLOCK_SOURCES = ("kineto",)
#: Name prefix of PyTorch's dispatcher front-end of a collective
#: (``c10d::allreduce_``): it enqueues the collective on the process group's
#: backend and returns. When the backend's own span is in the trace too
#: (``gloo:all_reduce`` on a gloo worker thread), that span is where the
#: ranks meet and the front-ends are not matched.
FRONT_END_PREFIX = "c10d::"
#: How far (us) a matched collective may seem to end on one rank before it
#: started on another (timestamp rounding); see :func:`_peer_waits`.
CLOCK_SLACK_US = 5.0


def peer_waits(p: Profile) -> pd.DataFrame | None:
    """Rendezvous collectives matched across ranks (:func:`_peer_waits`):
    one row per rank and instance with ``rank``, ``step``, ``kind``,
    ``name``, ``elapse_us``, ``wait_us`` and, when the comm table has
    ``exposed_us``, ``exposed_wait_us``; None when nothing can be matched."""
    return p.memo("comm.peer_waits", lambda: _peer_waits(p))


def _peer_waits(p: Profile) -> pd.DataFrame | None:
    """The n-th collective of a (step, kind, name, group) on every rank is
    one instance. A key is matched only when every rank that recorded the
    step has the same number of instances of it (for a named process group:
    at least two ranks, all with the same number). For a matched instance,
    with ``last_start`` its latest start over the ranks:

    * ``wait_us`` = clip(last_start - start_us, 0, elapse_us): the rank's
      time in the collective before its last peer arrived, the wait window
      ``[start_us, start_us + wait_us]``;
    * ``exposed_wait_us``: a lower bound of the rank's exposed time (not
      overlapped by compute) spent in that wait. Each instance keeps the
      part of its wait window that no earlier-started instance of the rank
      already has (collectives in flight at once wait for the same peer
      together), ``own_wait``; the collective's ``exposed_us`` outside that
      part is at most ``elapse_us - own_wait``, so at least
      clip(exposed_us - (elapse_us - own_wait), 0) of it lies inside. The
      parts are disjoint, so a rank's ``exposed_wait_us`` add up.

    Assumes the ranks share a clock (``SHARED_CLOCK_SOURCES``: ranks on one
    host). Guard: no rank can finish a rendezvous collective before every
    rank has started it. When an instance ends on some rank more than
    ``CLOCK_SLACK_US`` before its last start, its key in that step is not
    matched: either the n-th spans are not the same collective (a backend
    with several worker threads, such as gloo, may start queued collectives
    out of order) or the ranks' clocks disagree (ranks on different hosts),
    in which case no step matches."""
    comm = p.table("comm")
    need = ("rank", "step", "kind", "name", "start_us", "elapse_us")
    if (comm is None or p.meta.ranks_inferred or p.meta.source_format not in SHARED_CLOCK_SOURCES
            or not all(col in comm.columns for col in need)):
        return None
    c = comm[comm["kind"].isin(RENDEZVOUS)].dropna(subset=["step", "start_us", "elapse_us"])
    front = c["name"].astype(str).str.startswith(FRONT_END_PREFIX)
    if (~front).any():
        c = c[~front]
    if c.empty or c["rank"].nunique() < 2:
        return None
    group = c["group"] if "group" in c.columns else pd.Series(None, index=c.index, dtype=object)
    named = group.notna() & (group.astype(str) != "")
    c = c.assign(_group=group.astype(str).where(named, ""), _named=named, step=c["step"].astype("int64"))
    key = ["step", "kind", "name", "_group"]
    c = c.sort_values(["rank", *key, "start_us"], kind="stable")
    c["_n"] = c.groupby(["rank", *key]).cumcount()
    counts = c.groupby([*key, "rank"]).size().groupby(level=key)
    per_key = pd.DataFrame({"ranks": counts.size(), "lo": counts.min(), "hi": counts.max()}).reset_index()
    per_key["step_ranks"] = per_key["step"].map(_ranks_per_step(p)).fillna(0)
    c = c.merge(per_key, on=key, how="left")
    c = c[(c["lo"] == c["hi"]) & (c["ranks"] >= 2) & (c["_named"] | (c["ranks"] == c["step_ranks"]))]
    if c.empty:
        return None
    inst = [*key, "_n"]
    last_start = c.groupby(inst)["start_us"].transform("max")
    first_end = (c["start_us"] + c["elapse_us"]).groupby([c[k] for k in inst]).transform("min")
    acausal = (first_end < last_start - CLOCK_SLACK_US).groupby([c[k] for k in key]).transform("any")
    c, last_start = c[~acausal], last_start[~acausal]
    if c.empty:
        return None
    elapse = c["elapse_us"].clip(lower=0)
    wait = (last_start - c["start_us"]).clip(lower=0).clip(upper=elapse)
    out = c[["rank", "step", "kind", "name", "start_us", "elapse_us"]].assign(wait_us=wait)
    if "exposed_us" in c.columns:
        out["exposed_us"] = c["exposed_us"].fillna(0).clip(lower=0)
        out = out.sort_values(["rank", "start_us"], kind="stable")
        window_end = out["start_us"] + out["wait_us"]
        # End of the rank's earlier wait windows (NaN for its first instance).
        reach = window_end.groupby(out["rank"]).cummax().groupby(out["rank"]).shift(1)
        lo = np.fmax(out["start_us"], reach)
        own = (window_end - lo).clip(lower=0)
        out["exposed_wait_us"] = (out["exposed_us"] - (out["elapse_us"].clip(lower=0) - own)).clip(lower=0)
    return out.reset_index(drop=True)


def _ranks_per_step(p: Profile) -> pd.Series:
    """Number of ranks that recorded each step id (index: int step)."""
    steps = p.table("steps")
    if steps is None or "step" not in steps.columns:
        return pd.Series(dtype="int64")
    steps = steps.dropna(subset=["step"])
    return steps.groupby(steps["step"].astype("int64"))["rank"].nunique()


def _last_arrival(p: Profile, column: str) -> tuple[float, float, dict] | None:
    """Per step, the exposed communication of the rank that exposes least,
    after taking each rank's exposed peer wait out of it: ``(mean ms, mean
    share of the step, evidence)`` over the steady steps every rank
    recorded, or None for one rank / unlabelled ranks / no step ids.

    A collective completes only when the last rank has joined, so the ranks
    that arrive earlier wait for it: that wait is imbalance (``slow-rank``),
    not gradient synchronization a bucket / fusion change can hide. Where
    collectives are matched across ranks (:func:`peer_waits`), each rank's
    ``exposed_wait_us`` in the step is taken out of its exposed
    communication, whichever rank was late at whichever collective. The
    minimum over ranks then also drops one rank's own delay its peers do not
    share (e.g. that rank descheduled while it communicates)."""
    if p.meta.ranks_inferred:
        return None
    steps = steady_steps(p)
    if "step" not in steps.columns or column not in steps.columns:
        return None
    steps = steps.dropna(subset=["step", column, "duration_us"])
    ranks = steps["rank"].nunique()
    if ranks < 2:
        return None
    steps = steps.assign(step=steps["step"].astype("int64"), wait=0.0)
    waits = peer_waits(p) if column == "exposed_comm_us" else None
    evidence: dict = {}
    if waits is not None and "exposed_wait_us" in waits.columns:
        per = waits.groupby(["rank", "step"])["exposed_wait_us"].sum()
        at = pd.MultiIndex.from_frame(steps[["rank", "step"]])
        steps["wait"] = per.reindex(at).fillna(0.0).to_numpy()
    steps["sync"] = _without_receive(steps, column) - np.minimum(steps["wait"], steps[column].clip(lower=0))
    g = steps.groupby("step")
    per = pd.DataFrame({"exposed": g["sync"].min(), "dur": g["duration_us"].median(),
                        "ranks": g["rank"].nunique()})
    per = per[(per["ranks"] == ranks) & (per["dur"] > 0)]
    if per.empty:
        return None
    if waits is not None and "exposed_wait_us" in waits.columns:
        kept = steps[steps["step"].isin(per.index)]
        evidence["exposed_peer_wait_ms"] = round(float(kept["wait"].mean()) / US_PER_MS, 4)
        by_rank = rank_evidence(kept.groupby("rank")["wait"].mean())
        if by_rank:
            evidence["exposed_peer_wait_ms_per_rank"] = by_rank["per_rank"]
    ratio = float((per["exposed"] / per["dur"]).mean())
    return float(per["exposed"].mean()) / US_PER_MS, ratio, evidence


def _without_receive(steps: pd.DataFrame, column: str) -> pd.Series:
    """``column`` less the pipeline Receive time in it (``receive_us``, part of
    the exposed communication of a pipeline-parallel step): a stage waiting
    for its neighbour is the pipeline bubble (``slow-pipeline-stage``), not
    gradient sync a bucket or fusion change can hide."""
    if column != "exposed_comm_us" or "receive_us" not in steps.columns:
        return steps[column]
    return steps[column] - steps["receive_us"].fillna(0.0).clip(lower=0.0)


def _has_receive(p: Profile) -> bool:
    return p.has("steps", "receive_us") and bool(p.table("steps")["receive_us"].fillna(0).gt(0).any())


def _per_rank_sync(p: Profile, column: str) -> pd.DataFrame:
    """Per rank, the means over steady steps of ``_without_receive`` (``sync``)
    and of the step duration (``dur``), ranks with ``sync`` (memoized per
    profile: the ms and the ratio metric read it; callers never modify it)."""
    return p.memo(f"per_rank_sync:{column}", lambda: _sync_means(p, column))


def _sync_means(p: Profile, column: str) -> pd.DataFrame:
    steps = steady_steps(p)
    if column not in steps.columns:
        return pd.DataFrame(columns=["sync", "dur"])
    frame = pd.DataFrame({"rank": steps["rank"], "sync": _without_receive(steps, column),
                          "dur": steps["duration_us"] if "duration_us" in steps.columns else np.nan})
    return frame.groupby("rank")[["sync", "dur"]].mean().dropna(subset=["sync"])


_LAST_ARRIVAL = "exposed_comm_us, per step the least-exposed rank (the last to arrive)"
_LAST_ARRIVAL_MATCHED = ("exposed_comm_us minus each rank's exposed wait for late peers "
                         "(collectives matched across ranks), per step the least-exposed rank")


def _source(waits_used: bool) -> str:
    return _LAST_ARRIVAL_MATCHED if waits_used else _LAST_ARRIVAL


@metric("comm.exposed_allreduce_ms", unit="ms", needs=["steps", "comm"])
def exposed_allreduce_ms(p: Profile) -> Value:
    """Time per step spent on gradient synchronization that backward does not
    hide: the step-trace tail where the source has one (MindSpore: end of
    backward to end of step), else the exposed communication time. With
    several ranks and step ids, exposed communication is taken per step from
    the rank that exposes least; where collectives can be matched across
    ranks (Kineto traces), each rank's exposed communication first loses the
    part it spent waiting at a collective for a late peer. Waiting for a
    late peer is imbalance between ranks (``slow-rank``), not gradient sync
    a bucket / fusion change can hide. Evaluated only when the profile
    contains all-reduce or reduce-scatter collectives."""
    column = _exposed_source(p)
    receive = column == "exposed_comm_us" and _has_receive(p)
    less = {"less": "pipeline Receive time (receive_us)"} if receive else {}
    per_rank = _per_rank_sync(p, column)["sync"]
    last = _last_arrival(p, column) if column == "exposed_comm_us" else None
    if last is not None:
        ms, _, evidence = last
        return Value(ms, {"from": _source(bool(evidence)), **less, **evidence, **rank_evidence(per_rank)})
    if per_rank.empty:
        raise NotEvaluated(f"no {column} values")
    return Value(float(per_rank.mean()) / US_PER_MS, {"from": column, **less, **rank_evidence(per_rank)})


@metric("comm.exposed_allreduce_ratio", unit="ratio", needs=["steps.duration_us", "comm"])
def exposed_allreduce_ratio(p: Profile) -> Value:
    """``comm.exposed_allreduce_ms`` as a share of the step."""
    column = _exposed_source(p)
    last = _last_arrival(p, column) if column == "exposed_comm_us" else None
    if last is not None:
        return Value(last[1], {"from": _source(bool(last[2]))})
    both = _per_rank_sync(p, column).dropna()
    both = both[both["dur"] > 0]
    if both.empty:
        raise NotEvaluated(f"no {column} values with a positive step duration")
    return Value(float((both["sync"] / both["dur"]).mean()), {"from": column})


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
