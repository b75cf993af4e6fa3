"""Communication metrics: overlap with compute, exposed all-reduce, bandwidth."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from advisor.collectors.ascend.hccl_rows import SOURCES as COMM_SOURCES
from advisor.metrics.collectives import GROUP_LABELS, KIND_GROUPS, collective_rows, groups_of
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, per_rank_median, rank_evidence, run_ratio, steady_steps
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


#: Collectives in which every rank needs data from every other rank: no rank
#: can finish one before the last rank has started it, so a rank's time in
#: one before the last rank starts it is waiting for that peer.
RENDEZVOUS = ("allreduce", "reducescatter", "allgather", "alltoall")
#: Sources whose ``comm.start_us`` is one clock for all ranks on a host:
#: Kineto writes host-clock microseconds (Ascend DB exports make start times
#: relative to each rank's first step, which cannot be compared across ranks).
SHARED_CLOCK_SOURCES = ("kineto",)
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
    comm = collective_rows(p)
    need = ("rank", "step", "kind", "name", "start_us", "elapse_us")
    if (comm is None or p.meta.ranks_inferred or p.meta.source_format not in SHARED_CLOCK_SOURCES
            or not all(col in comm.columns for col in need)):
        return None
    c = comm[comm["kind"].isin(RENDEZVOUS)].dropna(subset=["step", "start_us", "elapse_us"])
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


# ------------------------------------------------------- exposed, by kind
#
# The exposed communication of a step (``steps.exposed_comm_us``, time the
# rank communicates and does not compute) is split among the collective
# kinds (``KIND_GROUPS``) by the comm rows' ``exposed_share_us`` (Kineto:
# time several collectives share is split evenly, so the kinds add up to the
# step's total). Without that column (Ascend, MindSpore) a step's exposed
# communication belongs to a kind only when that kind is the only one the
# rank ran in the step; ``receive_us`` (pipeline Receive time, part of the
# exposed communication) is send / receive time.


def _step_key(frame: pd.DataFrame) -> pd.Series:
    """Step ids as int64, -1 where the source has none (one window)."""
    if "step" not in frame.columns:
        return pd.Series(-1, index=frame.index, dtype="int64")
    return frame["step"].astype("Float64").fillna(-1).astype("int64")


def _exposure(p: Profile) -> pd.DataFrame:
    """Per steady (rank, step): ``dur`` and, per kind group present in the
    profile, its exposed time net of peer waits (us, NaN when it cannot be
    told), ``raw:<group>`` before and ``wait:<group>`` the waits taken out;
    ``attrs["from"]`` says how the split was made."""
    return p.memo("comm.exposure", lambda: _exposure_frame(p))


def _exposure_frame(p: Profile) -> pd.DataFrame:
    steps = steady_steps(p)
    comm = p.table("comm")
    if comm is None or comm.empty or "kind" not in comm.columns:
        raise NotEvaluated("no collectives in this profile")
    if steps.empty or not {"exposed_comm_us", "duration_us"} <= set(steps.columns):
        raise NotEvaluated("the steps have no exposed communication time")
    frame = pd.DataFrame({"rank": steps["rank"].to_numpy(), "step": _step_key(steps).to_numpy(),
                          "dur": steps["duration_us"].to_numpy(dtype=float),
                          "exposed": steps["exposed_comm_us"].to_numpy(dtype=float)})
    receive = (steps["receive_us"].fillna(0.0).clip(lower=0.0).to_numpy(dtype=float)
               if "receive_us" in steps.columns else None)
    frame = frame[np.isfinite(frame["dur"]) & np.isfinite(frame["exposed"]) & (frame["dur"] > 0)]
    c = comm.assign(group=groups_of(comm["kind"]), step=_step_key(comm))
    groups = [g for g in KIND_GROUPS if (c["group"] == g).any()]
    unsplit: set[str] = set()
    if "exposed_share_us" in c.columns:
        raw, source = _split_shares(frame, c, groups), "exposed_share_us"
    else:
        raw, source = _sole_kind(frame, c, groups, None if receive is None else receive[frame.index],
                                 unsplit), "sole kind"
    frame = frame.reset_index(drop=True)
    waits = _group_waits(p, frame, groups)
    for g in groups:
        frame[f"raw:{g}"] = raw[g].to_numpy()
        frame[f"wait:{g}"] = np.minimum(waits[g].to_numpy(), np.nan_to_num(raw[g].to_numpy()))
        frame[g] = frame[f"raw:{g}"] - frame[f"wait:{g}"]
    frame.attrs["from"] = source
    frame.attrs["less"] = receive is not None and source == "sole kind"
    frame.attrs["matched"] = waits.attrs.get("matched", False)
    frame.attrs["recorded"] = waits.attrs.get("recorded", False)
    frame.attrs["groups"] = groups
    frame.attrs["unsplit"] = unsplit
    return frame


def _split_shares(frame: pd.DataFrame, c: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """Per step row of ``frame``, the summed ``exposed_share_us`` of each
    group; a row counts in the step it starts in, so where a step's rows add
    up to more than its exposed time (a collective running into the next
    step) they are scaled down to it."""
    per = c.groupby(["rank", "step", "group"])["exposed_share_us"].sum().unstack("group")
    at = pd.MultiIndex.from_frame(frame[["rank", "step"]])
    raw = per.reindex(index=at, columns=groups).fillna(0.0).clip(lower=0.0)
    total = raw.sum(axis=1).to_numpy()
    exposed = frame["exposed"].to_numpy()
    scale = np.where(total > exposed, exposed / np.where(total > 0, total, 1.0), 1.0)
    return raw.mul(scale, axis=0).reset_index(drop=True)


def _sole_kind(frame: pd.DataFrame, c: pd.DataFrame, groups: list[str],
               receive: np.ndarray | None, unsplit: set[str]) -> pd.DataFrame:
    """Without per-row shares: a step's exposed time goes to the group when
    it is the only one with collective time in the rank's step (the rank's
    whole profile when rows have no step), else unknown (NaN), and the
    groups of such a step are added to ``unsplit``; with ``receive_us``,
    that part is send / receive and the rest is judged without the send /
    receive rows."""
    busy = c[c["elapse_us"].fillna(0) > 0] if "elapse_us" in c.columns else c
    if receive is not None:
        busy = busy[busy["group"] != "p2p"]
    present = busy[["rank", "step", "group"]].drop_duplicates()
    exposed = frame["exposed"].to_numpy() - (0.0 if receive is None else receive)
    ranks = frame["rank"].to_numpy()
    at = pd.MultiIndex.from_arrays([ranks, frame["step"].to_numpy()])  # each row's (rank, step)
    # ... and its rank's steps without ids
    whole = pd.MultiIndex.from_arrays([ranks, np.full(len(frame), -1, dtype=frame["step"].dtype)])
    if "elapse_us" in busy.columns:  # a kind exposes at most the time its collectives take in the step
        in_step = busy.groupby(["rank", "step"])["elapse_us"].sum()
        cap = in_step.reindex(at).to_numpy(dtype=float)
        cap = np.where(np.isnan(cap), in_step.reindex(whole).to_numpy(dtype=float), cap)
        exposed = np.minimum(exposed, np.nan_to_num(cap, nan=np.inf))
    p2p = groups.index("p2p") if receive is not None and "p2p" in groups else None
    found, known = _groups_present(present, groups, ranks, at, whole)
    count = np.where(known, found.sum(axis=1), -1)
    out = np.full((len(frame), len(groups)), np.nan)
    out[(count == 0) | (count == 1)] = 0.0  # several groups in the step, or none found for it: unknown (NaN)
    alone = np.flatnonzero(count == 1)
    sole = found[alone].argmax(axis=1)
    out[alone, sole] = np.where(0.0 > exposed[alone], 0.0, exposed[alone])  # max(exposed, 0.0)
    unsplit.update(g for g, seen in zip(groups, found[count > 1].any(axis=0)) if seen)
    if p2p is not None:
        out[:, p2p] = receive
    return pd.DataFrame(out, columns=groups)


def _groups_present(present: pd.DataFrame, groups: list[str], ranks: np.ndarray, at: pd.MultiIndex,
                    whole: pd.MultiIndex) -> tuple[np.ndarray, np.ndarray]:
    """Per step row (its rank in ``ranks``, its (rank, step) in ``at``, its
    rank's steps without ids in ``whole``) and group of ``groups``, whether
    the group has collective time in the rank's step (``present``: distinct
    rank, step, group), else in its steps without ids, else in any of its
    steps (bool, rows x groups); and per row whether any of these was found
    (a row with none is unknown)."""
    if present.empty or not groups:
        return np.zeros((len(ranks), len(groups)), dtype=bool), np.zeros(len(ranks), dtype=bool)
    keys, steps = pd.MultiIndex.from_arrays([present["rank"], present["step"]]).factorize()
    flags = np.zeros((len(steps), len(groups)))
    flags[keys, pd.Categorical(present["group"], categories=groups).codes] = 1.0
    flags = pd.DataFrame(flags, index=steps, columns=groups)
    out = flags.reindex(at).to_numpy(copy=True)
    for fallback in (flags.reindex(whole), flags.groupby(level=0).max().reindex(ranks)):
        missing = np.isnan(out[:, 0])
        out[missing] = fallback.to_numpy()[missing]
    return np.nan_to_num(out) > 0, ~np.isnan(out[:, 0])


def _group_waits(p: Profile, frame: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """Per step row of ``frame`` and group, the rank's exposed wait for late
    peers at the group's collectives (:func:`peer_waits`), 0 where none was
    matched; ``attrs["matched"]`` when collectives were matched. Where none
    can be matched and the collectives record their synchronization time
    (``sync_us``: HCCL's time from the operator's start to its first
    transfer, the rank waiting for its peers to arrive), that time instead;
    ``attrs["recorded"]`` then."""
    waits = peer_waits(p)
    if waits is not None and "exposed_wait_us" in waits.columns:
        rows, column, found = waits, "exposed_wait_us", "matched"
    else:
        comm = collective_rows(p)
        if comm is None or "sync_us" not in comm.columns or not (comm["sync_us"].fillna(0.0) > 0).any():
            return pd.DataFrame(0.0, index=frame.index, columns=groups)
        rows, column, found = comm.assign(step=_step_key(comm)), "sync_us", "recorded"
    per = rows.assign(group=groups_of(rows["kind"])).groupby(["rank", "step", "group"])[column].sum().unstack(
        "group")
    at = pd.MultiIndex.from_frame(frame[["rank", "step"]])
    out = per.reindex(index=at, columns=groups).fillna(0.0).clip(lower=0.0).reset_index(drop=True)
    out.attrs[found] = True
    return out


def _least_exposed(p: Profile, known: pd.DataFrame, group: str) -> pd.DataFrame | None:
    """Per step id of ``known`` (``_exposure`` rows with a ``group`` value)
    that every rank recorded: ``net``, the least exposed ``group`` time
    over the ranks, ``rank``, the rank that has it, and ``dur``, the median
    step; None unless there are several labelled ranks and step ids."""
    ranks = known["rank"].nunique()
    if ranks < 2 or p.meta.ranks_inferred or not (known["step"] >= 0).any():
        return None
    numbered = known[known["step"] >= 0]
    g = numbered.groupby("step")
    per = pd.DataFrame({"net": g[group].min(), "rank": numbered.loc[g[group].idxmin(), "rank"].to_numpy(),
                        "dur": g["dur"].median(), "ranks": g["rank"].nunique()})
    return per[per["ranks"] == ranks]


def _group_value(p: Profile, group: str) -> tuple[float, float, dict, tuple[float, int] | None]:
    """(ms per step, share of the step, evidence, (standard error in ms,
    steps) of the per-step mean or None) of a group's exposed time.

    With several labelled ranks and step ids, per step the rank that exposes
    least (net of its waits for late peers): a collective completes only
    when the last rank has joined, so the others' extra wait is imbalance
    (``slow-rank``), not communication a change of its own can hide; the
    minimum also drops one rank's own delay its peers do not share (that
    rank descheduled while it communicates). Mean over the steady steps
    every rank recorded. Otherwise the mean over ranks of each rank's mean."""
    frame = _exposure(p)
    label = GROUP_LABELS[group]
    if group not in frame.attrs["groups"]:
        raise NotEvaluated(f"no {label} in this profile")
    known = frame.dropna(subset=[group])
    if known.empty or group in frame.attrs["unsplit"]:
        raise NotEvaluated(f"the profile does not tell {label} exposure from that of the other "
                           "collectives running in the same steps")
    evidence = {"from": _FROM[frame.attrs["from"]], **_data_evidence(p)}
    if frame.attrs["less"] and group != "p2p":
        evidence["less"] = "pipeline Receive time (receive_us)"
    per = _least_exposed(p, known, group)
    if per is not None and not per.empty:
        kept = known[known["step"].isin(per.index)]
        evidence["from"] += "; per step the least-exposed rank"
        if frame.attrs["matched"] or frame.attrs["recorded"]:
            evidence["from"] += (", net of its waits for late peers (collectives matched across ranks)"
                                 if frame.attrs["matched"] else f", net of its {_RECORDED_SYNC}")
            evidence["exposed_peer_wait_ms"] = round(float(kept[f"wait:{group}"].mean()) / US_PER_MS, 4)
            by_rank = rank_evidence(kept.groupby("rank")[f"wait:{group}"].mean())
            if by_rank:
                evidence["exposed_peer_wait_ms_per_rank"] = by_rank["per_rank"]
        evidence.update(rank_evidence(kept.groupby("rank")[group].mean()))
        spread = (float(per["net"].sem()) / US_PER_MS, len(per)) if len(per) >= 2 else None
        return (float(per["net"].mean()) / US_PER_MS, float((per["net"] / per["dur"]).mean()), evidence, spread)
    if frame.attrs["recorded"]:
        evidence["from"] += f"; net of each rank's {_RECORDED_SYNC}"
    means = known.groupby("rank")[[group, "dur"]].mean()
    evidence.update(rank_evidence(means[group]))
    return (float(means[group].mean()) / US_PER_MS, float((means[group] / means["dur"]).mean()), evidence, None)


#: What HCCL's ``sync_us`` is, as the evidence names it where it is taken out.
_RECORDED_SYNC = "recorded synchronization time (waiting for peers to arrive)"
_FROM = {"exposed_share_us": "exposed_comm_us split among the collectives in flight (exposed_share_us)",
         "sole kind": "exposed_comm_us of the steps in which this is the only kind of collective"}


def _group_metric(p: Profile, group: str, ratio: bool) -> Value:
    ms, share, evidence, spread = p.memo(f"comm.group_value:{group}", lambda: _group_value(p, group))
    if ratio:
        return Value(share, {"from": evidence["from"]})
    stderr, steps = spread or (None, None)
    return Value(ms, evidence, stderr=stderr, samples=steps)


@metric("comm.exposed_ms_by_kind", unit="map", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_ms_by_kind(p: Profile) -> Value:
    """Exposed communication per step by kind of collective: a map from
    kind group (``allreduce``, ``alltoall``, ``fsdp`` = all-gather and
    reduce-scatter, ``p2p`` = send / receive, ``broadcast``, ``other``) to
    ms per step, each as ``comm.exposed_<group>_ms`` defines it (per step
    the least-exposed rank, net of waits for late peers). Only groups the
    profile has, and whose share of the exposed time it can tell; evidence:
    the same as shares of the step (``ratio``)."""
    frame = _exposure(p)
    values, ratios = {}, {}
    for group in frame.attrs["groups"]:
        try:
            ms, share, _, _ = p.memo(f"comm.group_value:{group}", lambda g=group: _group_value(p, g))
        except NotEvaluated:
            continue
        values[group], ratios[group] = round(ms, 4), round(share, 4)
    if not values:
        raise NotEvaluated("the profile does not tell which collectives the exposed communication belongs to")
    return Value(values, {"ratio": ratios, "from": _FROM[frame.attrs["from"]]})


def _tail(p: Profile) -> Value | None:
    """``comm.exposed_allreduce_ms`` from the step-trace tail (MindSpore:
    end of backward to end of step), or None when the steps have none."""
    comm = p.table("comm")
    if not p.has("steps", "tail_us") or comm is None or not (comm["kind"] == "allreduce").any():
        return None
    means = _per_rank_tail(p)
    if means.empty:
        raise NotEvaluated("no tail_us values with a positive step duration")
    return Value(float(means["tail_us"].mean()) / US_PER_MS,
                 {"from": "tail_us", **_data_evidence(p), **rank_evidence(means["tail_us"])})


def _per_rank_tail(p: Profile) -> pd.DataFrame:
    steps = steady_steps(p)
    means = steps.groupby("rank")[["tail_us", "duration_us"]].mean().dropna()
    return means[means["duration_us"] > 0]


@metric("comm.exposed_allreduce_ms", unit="ms", needs=["steps", "comm.kind"])
def exposed_allreduce_ms(p: Profile) -> Value:
    """Time per step spent on gradient all-reduce that backward does not
    hide: the step-trace tail where the source has one (MindSpore: end of
    backward to end of step), else the all-reduce part of the exposed
    communication (``comm.exposed_ms_by_kind``). With several ranks and step
    ids, per step the rank that exposes least; where collectives can be
    matched across ranks (Kineto traces), each rank's exposed all-reduce
    first loses the part it spent waiting for a late peer, and where they
    cannot but record their synchronization time (Ascend HCCL's ``sync_us``),
    that time. A kind's exposed time in a step is at most the time its
    collectives take there. Waiting for a
    late peer is imbalance between ranks (``slow-rank``), not gradient sync
    a bucket / fusion change can hide. Evaluated only when the profile
    contains all-reduce collectives; all-to-all, all-gather / reduce-scatter
    and send / receive have their own metrics."""
    tail = _tail(p)
    return tail if tail is not None else _group_metric(p, "allreduce", ratio=False)


@metric("comm.exposed_allreduce_ratio", unit="ratio", needs=["steps.duration_us", "comm.kind"])
def exposed_allreduce_ratio(p: Profile) -> Value:
    """``comm.exposed_allreduce_ms`` as a share of the step."""
    if _tail(p) is not None:
        means = _per_rank_tail(p)
        return Value(float((means["tail_us"] / means["duration_us"]).mean()), {"from": "tail_us"})
    return _group_metric(p, "allreduce", ratio=True)


@metric("comm.exposed_alltoall_ms", unit="ms", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_alltoall_ms(p: Profile) -> Value:
    """Time per step spent in all-to-all (MoE token dispatch, embedding
    exchange of DLRM-style models) that nothing overlaps: the all-to-all
    part of the exposed communication, per step the least-exposed rank,
    net of waits for late peers (as ``comm.exposed_allreduce_ms``)."""
    return _group_metric(p, "alltoall", ratio=False)


@metric("comm.exposed_alltoall_ratio", unit="ratio", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_alltoall_ratio(p: Profile) -> Value:
    """``comm.exposed_alltoall_ms`` as a share of the step."""
    return _group_metric(p, "alltoall", ratio=True)


@metric("comm.exposed_fsdp_ms", unit="ms", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_fsdp_ms(p: Profile) -> Value:
    """Time per step spent in all-gather and reduce-scatter (FSDP / ZeRO:
    gathering sharded parameters before a layer runs, scattering its
    gradients after) that nothing overlaps: that part of the exposed
    communication, per step the least-exposed rank, net of waits for late
    peers (as ``comm.exposed_allreduce_ms``)."""
    return _group_metric(p, "fsdp", ratio=False)


@metric("comm.exposed_fsdp_ratio", unit="ratio", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_fsdp_ratio(p: Profile) -> Value:
    """``comm.exposed_fsdp_ms`` as a share of the step."""
    return _group_metric(p, "fsdp", ratio=True)


@metric("comm.exposed_p2p_ms", unit="ms", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_p2p_ms(p: Profile) -> Value:
    """Time per step spent in point-to-point send / receive (pipeline stages
    passing activations and gradients) that nothing overlaps: that part of
    the exposed communication (with ``receive_us``, the pipeline Receive
    time), per step the least-exposed rank. A stage waiting for its
    neighbour is the pipeline bubble."""
    return _group_metric(p, "p2p", ratio=False)


@metric("comm.exposed_p2p_ratio", unit="ratio", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_p2p_ratio(p: Profile) -> Value:
    """``comm.exposed_p2p_ms`` as a share of the step."""
    return _group_metric(p, "p2p", ratio=True)


@metric("comm.exposed_broadcast_ms", unit="ms", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_broadcast_ms(p: Profile) -> Value:
    """Time per step spent in broadcasts (DDP's buffers before each forward
    under ``broadcast_buffers``, data sent to a tensor-parallel group, a
    loop copying rank 0's parameters to the others) that nothing overlaps:
    that part of the exposed communication, per step the least-exposed
    rank, net of waits for late peers (as ``comm.exposed_allreduce_ms``)."""
    return _group_metric(p, "broadcast", ratio=False)


@metric("comm.exposed_broadcast_ratio", unit="ratio", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_broadcast_ratio(p: Profile) -> Value:
    """``comm.exposed_broadcast_ms`` as a share of the step."""
    return _group_metric(p, "broadcast", ratio=True)


@metric("comm.exposed_other_ms", unit="ms", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_other_ms(p: Profile) -> Value:
    """Time per step spent in collectives of no kind above (reduce, gather,
    scatter, barrier, and collectives the profile does not name) that
    nothing overlaps: that part of the exposed communication, per step the
    least-exposed rank, net of waits for late peers (as
    ``comm.exposed_allreduce_ms``)."""
    return _group_metric(p, "other", ratio=False)


@metric("comm.exposed_other_ratio", unit="ratio", needs=["steps.exposed_comm_us", "comm.kind"])
def exposed_other_ratio(p: Profile) -> Value:
    """``comm.exposed_other_ms`` as a share of the step."""
    return _group_metric(p, "other", ratio=True)


def _steady_collectives(p: Profile) -> tuple[pd.DataFrame, pd.Series, int]:
    """(collective rows of the steady steps, how many collectives each row
    stands for -- its ``ops`` where rows are sums over operators, else 1 --,
    number of steady (rank, step)s)."""
    return p.memo("comm.steady_collectives", lambda: _collectives_in_steady_steps(p))


def _collectives_in_steady_steps(p: Profile) -> tuple[pd.DataFrame, pd.Series, int]:
    rows = collective_rows(p)
    steps = steady_steps(p)
    if rows is None or "step" not in rows.columns or "step" not in steps.columns:
        raise NotEvaluated("no collectives with step ids")
    steady = steps[["rank", "step"]].dropna().astype({"step": "int64"})
    if steady.empty:
        raise NotEvaluated("no steady steps with step ids")
    rows = rows.dropna(subset=["step"]).astype({"step": "int64"}).merge(steady, on=["rank", "step"])
    ops = rows["ops"].fillna(1) if "ops" in rows.columns else pd.Series(1, index=rows.index)
    return rows, ops, len(steady)


def _group_collectives(p: Profile, group: str) -> tuple[pd.DataFrame, pd.Series, int]:
    """``_steady_collectives`` of kind group ``group`` only."""
    rows, ops, steady = _steady_collectives(p)
    chosen = groups_of(rows["kind"]) == group
    if not chosen.any():
        raise NotEvaluated(f"the steady steps hold no {GROUP_LABELS[group]}")
    return rows[chosen], ops[chosen], steady


def _fewer_small(p: Profile, group: str, exposed_ms: float, kept: int) -> Value:
    """What sending the data of the collectives of ``group`` in ``kept`` a
    step would save: ``exposed_ms`` times (n - kept) / n, n being how many a
    steady step holds (mean over steps and ranks), when n > kept and the
    median of their sizes is at most ``LATENCY_BOUND_MB`` (each costs its
    latency, not its bytes). Evidence: n, kept and that median size."""
    chosen, ops, steady = _group_collectives(p, group)
    per_step = float(ops.sum()) / steady
    size = float(chosen["size_mb"].median()) if chosen["size_mb"].notna().any() else math.nan
    if per_step <= kept or not size <= LATENCY_BOUND_MB:
        raise NotEvaluated(f"{per_step:.1f} {GROUP_LABELS[group]} a step, median size {size:g} MB: "
                           f"not more than {kept} small ones")
    return Value(exposed_ms * (per_step - kept) / per_step,
                 {"per_step": round(per_step, 2), "kept": kept, "median_mb": round(size, 6)})


@metric("comm.other_collectives_per_step", unit="map", needs=["comm.kind", "comm.step", "steps.step"])
def other_collectives_per_step(p: Profile) -> Value:
    """The collectives of ``comm.exposed_other_ms`` by name: a map from the
    collective's name (``gloo:reduce``, ``gloo:barrier``, a kernel's name)
    to how many a steady step holds, the mean over steps and ranks, the
    five most frequent."""
    other, ops, steady = _group_collectives(p, "other")
    counts = (ops.groupby(other["name"]).sum() / steady).sort_values(ascending=False, kind="stable")
    return Value({str(k): round(float(v), 2) for k, v in counts.head(5).items()})


#: Collectives of at most this many MB cost about their latency whatever
#: they carry (``comm.fewer_other_collectives_save_ms``): below about 1 MiB
#: an all-reduce is latency-bound (``BUCKET_MIN_MIB``).
LATENCY_BOUND_MB = 1.0


@metric("comm.fewer_other_collectives_save_ms", unit="ms", needs=["comm.kind", "comm.step", "comm.size_mb"])
def fewer_other_collectives_save_ms(p: Profile) -> Value:
    """What sending the values of the collectives of ``comm.exposed_other_ms``
    in one collective a step would save (``_fewer_small``: that exposed
    time times (n - 1) / n for n small ones a step)."""
    return _fewer_small(p, "other", exposed_other_ms(p).value, 1)


@metric("comm.fewer_broadcasts_save_ms", unit="ms", needs=["comm.kind", "comm.step", "comm.size_mb"])
def fewer_broadcasts_save_ms(p: Profile) -> Value:
    """What sending the data of a step's broadcasts in one flat buffer per
    rank that sends would save (``_fewer_small`` with one kept per rank:
    ``comm.exposed_broadcast_ms`` times (n - ranks) / n for n small ones a
    step): a sharded optimizer's per-parameter broadcasts against its
    bucketed ones."""
    return _fewer_small(p, "broadcast", exposed_broadcast_ms(p).value, int(collective_rows(p)["rank"].nunique()))


@metric("comm.broadcasts_per_parameter", unit="ratio", needs=["comm.kind", "comm.step", "steps.param_tensors"])
def broadcasts_per_parameter(p: Profile) -> Value:
    """Broadcasts per step for each parameter tensor the step accumulates a
    gradient into (``steps.param_tensors``), per rank the median over its
    steady steps of the ratio, the least over ranks: about 1 for a loop
    broadcasting every parameter every step. Evidence: both counts, the
    same way."""
    rows = collective_rows(p)
    steps = steady_steps(p).dropna(subset=["step", "param_tensors"])
    steps = steps[steps["param_tensors"] > 0]
    if rows is None or steps.empty:
        raise NotEvaluated("no steady step with parameter gradients")
    bcast = rows[(rows["kind"] == "broadcast") & rows["step"].notna()]
    if bcast.empty:
        raise NotEvaluated("no broadcasts with step ids")
    index = pd.MultiIndex.from_frame(steps[["rank", "step"]].astype({"step": "int64"}))
    count = bcast.groupby([bcast["rank"], bcast["step"].astype("int64")]).size().reindex(index, fill_value=0)
    ratio = pd.Series(count.to_numpy() / steps["param_tensors"].to_numpy(), index=index)
    per_rank = ratio.groupby(level="rank").median()
    return Value(float(per_rank.min()), {"broadcasts": float(count.groupby(level="rank").median().min()),
                                          "parameter_tensors": float(steps["param_tensors"].median())})


# ------------------------------------------------ gradient all-reduce layout
#
# Read from the all-reduces of each steady step (one row per collective:
# ``collective_rows``): how many, how many bytes, and whether those before
# the step's last one ran while compute still did (DDP issues a bucket's
# all-reduce from backward as soon as its gradients are ready; a loop of
# all-reduces after ``backward()``, or one bucket holding every gradient,
# starts only once backward has ended).

#: An all-reduce before the step's last is taken to run alongside backward
#: when compute overlaps at least this share of the time of those
#: all-reduces together. Issued after backward, nothing but the optimizer
#: waits to run, so they overlap next to nothing (a few per cent from
#: timestamp skew); issued during backward they overlap whatever backward
#: still computes. A tenth tells the two apart with room on both sides.
BUCKET_OVERLAP_MIN = 0.1
#: The proposed bucket holds this share of the gradients: about four
#: buckets, the first three reduced while backward still runs and the last
#: (the first layers' gradients, ready last) exposed, so about a quarter of
#: the sync stays exposed. More buckets shrink that tail further, but each
#: all-reduce pays a fixed latency (tens of us on NCCL, milliseconds on a
#: loaded gloo host).
BUCKET_SHARE = 0.25
#: The proposed bucket is at least this large (MiB) when the gradients
#: allow it: below about 1 MiB a NCCL all-reduce is latency-bound (its
#: bandwidth falls with the size), which is why DDP's own first bucket is
#: 1 MiB.
BUCKET_MIN_MIB = 1.0
#: ...but never more than this share of the gradients, so that the proposal
#: always splits them (at least two buckets).
BUCKET_MAX_SHARE = 0.5
#: An all-reduce of at most this many bytes carries a few values (16
#: float32): a loss or metric reduced for logging, a flag, DDP's map of the
#: parameters used (``find_unused_parameters``, 4 bytes per parameter
#: tensor of a small model), not gradients: DDP fills each bucket with
#: whole parameters' gradients up to ``bucket_cap_mb`` (25 MiB, the first
#: 1 MiB), so only a model's last bucket can be that small, and only when
#: it holds a handful of biases. Such all-reduces are left out of the
#: gradient layout (``comm.small_allreduces_per_step`` counts them).
SMALL_ALLREDUCE_BYTES = 64
#: DDP's ``bucket_cap_mb`` counts MiB.
BYTES_PER_MIB = 1 << 20
#: ``comm.size_mb`` counts 10^6 bytes.
BYTES_PER_MB = 1e6


def _allreduce_steps(p: Profile) -> pd.DataFrame:
    """Per steady (rank, step) with all-reduces: ``n`` (how many),
    ``mb`` (their summed size, NaN when one is unknown), ``overlap`` (share
    of the time of all but the last one overlapped by compute, NaN for one
    all-reduce or without ``exposed_us``), ``tail_ms`` and ``tail_mb`` (the
    last one's exposed share and size)."""
    return p.memo("comm.allreduce_steps", lambda: _allreduce_table(p))


def _allreduce_table(p: Profile) -> pd.DataFrame:
    ar, _ = _steady_allreduces(p)
    if "size_mb" in ar.columns:  # a few values, not gradients (unknown sizes stay)
        ar = ar[~_few_values(ar)]
    if ar.empty:
        raise NotEvaluated("no all-reduces of gradients in the steady steps")
    order = ["rank", "step", "start_us"] if "start_us" in ar.columns else ["rank", "step"]
    ar = ar.sort_values(order, kind="stable")
    g = ar.groupby(["rank", "step"])
    last = g.tail(1).set_index(["rank", "step"])
    # rows summed over operators (Ascend sums): ``ops`` says how many, and no row is the last
    summed = "ops" in ar.columns and bool((ar["ops"].fillna(1) > 1).any())
    out = pd.DataFrame({"n": g["ops"].sum() if "ops" in ar.columns else g.size()})
    out["mb"] = (g["size_mb"].sum(min_count=1).where(g["size_mb"].count() == g.size())
                 if "size_mb" in ar.columns else np.nan)
    out["tail_mb"] = last["size_mb"] if "size_mb" in ar.columns and not summed else np.nan
    out["tail_ms"] = (last["exposed_share_us"] / US_PER_MS
                      if "exposed_share_us" in ar.columns and not summed else np.nan)
    out["overlap"] = np.nan
    if "exposed_us" in ar.columns and not summed:
        before = ar.drop(index=g.tail(1).index)
        bg = before.groupby(["rank", "step"])
        elapse = bg["elapse_us"].sum()
        hidden = (before["elapse_us"] - before["exposed_us"].clip(upper=before["elapse_us"])).groupby(
            [before["rank"], before["step"]]).sum()
        out["overlap"] = (hidden / elapse.where(elapse > 0)).reindex(out.index)
    return out


def _steady_allreduces(p: Profile) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The all-reduce rows of steady (rank, step)s, and those (rank, step)
    pairs; not evaluated without all-reduces with step ids."""
    rows = collective_rows(p)
    steps = steady_steps(p)
    if rows is None or "step" not in rows.columns or "step" not in steps.columns:
        raise NotEvaluated("no all-reduces with step ids")
    ar = rows[(rows["kind"] == "allreduce") & rows["step"].notna()]
    steady = steps[["rank", "step"]].dropna().astype({"step": "int64"})
    return ar.astype({"step": "int64"}).merge(steady, on=["rank", "step"]), steady


def _few_values(ar: pd.DataFrame) -> pd.Series:
    """Mask of the all-reduces of at most ``SMALL_ALLREDUCE_BYTES`` (False
    where the size is unknown)."""
    return ar["size_mb"] * BYTES_PER_MB <= SMALL_ALLREDUCE_BYTES


@metric("comm.small_allreduces_per_step", unit="count", needs=["comm.kind", "comm.step", "comm.size_mb", "steps.step"])
def small_allreduces_per_step(p: Profile) -> Value:
    """All-reduces per step of at most ``SMALL_ALLREDUCE_BYTES`` (a logged
    loss or metric, a flag, DDP's map of used parameters: not gradients),
    the median over steady steps, the least over ranks; only when there
    are any. Evidence: their exposed time per step (``exposed_share_us``,
    the same way), and the bytes of the largest."""
    ar, steady = _steady_allreduces(p)
    small = ar[_few_values(ar)]
    if small.empty:
        raise NotEvaluated(f"no all-reduce of at most {SMALL_ALLREDUCE_BYTES} bytes in the steady steps")
    index = pd.MultiIndex.from_frame(steady)
    count = small.groupby(["rank", "step"]).size().reindex(index, fill_value=0)
    evidence = {"max_bytes": int(round(float(small["size_mb"].max()) * BYTES_PER_MB))}
    if "exposed_share_us" in small.columns:
        exposed = small.groupby(["rank", "step"])["exposed_share_us"].sum().reindex(index, fill_value=0.0)
        evidence["exposed_ms"] = round(float(exposed.groupby(level="rank").median().min()) / US_PER_MS, 4)
    return Value(float(count.groupby(level="rank").median().min()), evidence)


def _layout(p: Profile) -> tuple[str, dict]:
    """``comm.allreduce_layout`` and its evidence (per-step layouts counted)."""
    t = _allreduce_steps(p)
    several = t["n"] >= 2
    if several.any() and t.loc[several, "overlap"].isna().all():
        raise NotEvaluated("the profile does not say which all-reduces overlap compute")
    layout = pd.Series("one", index=t.index)
    layout[several] = np.where(t.loc[several, "overlap"] >= BUCKET_OVERLAP_MIN, "bucketed", "after_backward")
    counts = layout.value_counts()
    # ties: the layout that advises least (no bucket change when in doubt)
    best = max(counts.index, key=lambda k: (counts[k], ("one", "after_backward", "bucketed").index(k)))
    evidence = {"steps": {k: int(v) for k, v in counts.items()}}
    overlap = t.loc[several, "overlap"].dropna()
    if not overlap.empty:
        evidence["overlap_before_last"] = round(float(overlap.median()), 3)
    return best, evidence


@metric("comm.allreduce_per_step", unit="count", needs=["comm.kind", "comm.step", "steps.step"])
def allreduce_per_step(p: Profile) -> Value:
    """All-reduces per step: the median over steady steps and ranks of the
    number of all-reduce collectives in a step (DDP: one per bucket; rows
    summed over operators count their ``ops``)."""
    return Value(float(_allreduce_steps(p)["n"].median()))


@metric("comm.collectives_per_step", unit="map", needs=["comm.kind", "comm.step", "steps.step"])
def collectives_per_step(p: Profile) -> Value:
    """Collectives per step by kind: a map from collective kind to the mean
    number per steady step and rank (one per collective: a c10d front end
    and its backend op count once; rows summed over operators count their
    ``ops``), kinds that occur only."""
    rows, ops, steady = _steady_collectives(p)
    counts = ops.groupby(rows["kind"]).sum() / steady
    if counts.empty:
        raise NotEvaluated("no collectives in the steady steps")
    return Value({str(k): round(float(v), 3) for k, v in counts.items()})


@metric("comm.grad_syncs_per_step", unit="count", needs=["steps.ddp_synced_forwards", "steps.optimizer_steps"])
def grad_syncs_per_step(p: Profile) -> Value:
    """DDP forwards per step followed by a gradient all-reduce
    (``collectors/kineto/grad_sync.py``): median over steady steps, the
    least over ranks. Evidence: DDP forwards and optimizer steps per step,
    the same way."""
    synced = per_rank_median(p, "ddp_synced_forwards")
    if synced.empty:
        raise NotEvaluated("no DistributedDataParallel forward in the steady steps")
    return Value(float(synced.min()), {"ddp_forwards": float(per_rank_median(p, "ddp_forwards").min()),
                                       "optimizer_steps": float(per_rank_median(p, "optimizer_steps").min())})


@metric("comm.unapplied_grad_syncs_per_step", unit="count",
        needs=["steps.ddp_synced_forwards", "steps.optimizer_steps"])
def unapplied_grad_syncs_per_step(p: Profile) -> Value:
    """Gradient all-reduces per step that no optimizer step follows on its
    own: DDP forwards followed by an all-reduce minus the optimizer's
    ``step()`` calls, at least 0, median over steady steps, the least over
    ranks (every rank runs the same loop). Above 0, gradients of
    micro-batches that are only accumulated are all-reduced all the same
    (their forward did not run under ``model.no_sync()``)."""
    steps = steady_steps(p)
    both = steps.dropna(subset=["ddp_synced_forwards", "optimizer_steps"])
    if both.empty or not (both["optimizer_steps"] > 0).any():
        raise NotEvaluated("no steady step with both a DistributedDataParallel forward and an optimizer step")
    extra = (both["ddp_synced_forwards"] - both["optimizer_steps"]).clip(lower=0)
    return Value(float(extra.groupby(both["rank"]).median().min()))


@metric("comm.gradient_mb", unit="MB", needs=["comm.kind", "comm.step", "comm.size_mb", "steps.step"])
def gradient_mb(p: Profile) -> Value:
    """Gradient bytes synchronized per step, in MB (10^6 bytes): the summed
    message size of a step's all-reduces, median over steady steps and
    ranks. Steps with an all-reduce of unknown size are left out."""
    mb = _allreduce_steps(p)["mb"].dropna()
    if mb.empty:
        raise NotEvaluated("the all-reduces record no message size (Kineto: record_shapes=True, "
                           "or PyTorch 2.1+ for the collectives' size arguments)")
    return Value(round(float(mb.median()), 4), {"steps": int(mb.size)})


@metric("comm.allreduce_layout", unit="text", needs=["comm.kind", "comm.step", "steps.step"])
def allreduce_layout(p: Profile) -> Value:
    """How a step's gradient all-reduce is laid out, the most frequent over
    steady steps and ranks (ties go to the later in this list): ``one`` (a
    single all-reduce: one bucket holds every gradient), ``after_backward``
    (several, none running alongside compute: issued after backward, e.g.
    a loop over parameters), ``bucketed`` (several, those before the last
    overlapped by compute for at least ``BUCKET_OVERLAP_MIN`` of their time:
    DDP's buckets reduced during backward). Evidence: steps of each layout,
    median overlapped share of the all-reduces before the last."""
    layout, evidence = _layout(p)
    return Value(layout, evidence)


@metric("comm.bucket_cap_mb", unit="MiB", needs=["comm.kind", "comm.step", "comm.size_mb", "steps.step"])
def bucket_cap_mb(p: Profile) -> Value:
    """A DDP ``bucket_cap_mb`` (MiB, as DDP counts it) that splits the
    measured gradients into buckets reduced during backward, when the
    profile shows one bucket holding them all or all-reduces only after
    backward (``comm.allreduce_layout`` one / after_backward):
    ``BUCKET_SHARE`` of ``comm.gradient_mb``, at least ``BUCKET_MIN_MIB``
    when the gradients allow, at most ``BUCKET_MAX_SHARE`` of them, rounded
    to two significant digits. Not evaluated where DDP already splits them
    (``bucketed``): smaller buckets do not hide the last one, which only
    starts when backward ends."""
    layout, _ = _layout(p)
    if layout == "bucketed":
        raise NotEvaluated("the all-reduces already run in buckets during backward")
    grad_mib = gradient_mb(p).value * BYTES_PER_MB / BYTES_PER_MIB
    cap = min(max(grad_mib * BUCKET_SHARE, BUCKET_MIN_MIB), grad_mib * BUCKET_MAX_SHARE)
    if not cap > 0:
        raise NotEvaluated("no gradient bytes to split")
    rounded = float(f"{cap:.2g}")
    return Value(rounded, {"gradient_mib": round(grad_mib, 3), "layout": layout})


@metric("comm.allreduce_tail_ms", unit="ms", needs=["comm.kind", "comm.step", "comm.exposed_share_us"])
def allreduce_tail_ms(p: Profile) -> Value:
    """Exposed time of the step's last all-reduce (DDP: the last bucket, the
    first layers' gradients, reduced only after backward has ended), as a
    part of ``comm.exposed_allreduce_ms``: per steady (rank, step) its
    ``exposed_share_us``, at most the rank's exposed all-reduce in that
    step net of its waits for late peers (``_exposure``: a rank that
    finishes backward early waits for the others in its last bucket, and
    that wait is imbalance, not the bucket's cost). With several ranks, per
    step the rank that exposes least, as ``comm.exposed_allreduce_ms``
    takes; mean over the steps (over rank-steps otherwise), so it is never
    more than that metric. Evidence: its size (``tail_mb``)."""
    t = _allreduce_steps(p).dropna(subset=["tail_ms"])
    if t.empty:
        raise NotEvaluated("no exposed share of the all-reduces")
    tail = t["tail_ms"]
    try:
        frame = _exposure(p)
    except NotEvaluated:
        frame = None
    if frame is not None and "allreduce" in frame.attrs["groups"]:
        known = frame.dropna(subset=["allreduce"])
        net = known.set_index(["rank", "step"])["allreduce"] / US_PER_MS
        tail = np.minimum(tail, net.reindex(tail.index).fillna(np.inf))
        per = _least_exposed(p, known, "allreduce")
        if per is not None and not per.empty:
            chosen = tail.reindex(pd.MultiIndex.from_arrays([per["rank"].to_numpy(), per.index.to_numpy()]))
            tail = chosen.dropna() if chosen.notna().any() else tail
    evidence = {}
    if t["tail_mb"].notna().any():
        evidence["tail_mb"] = round(float(t["tail_mb"].median()), 4)
    return Value(round(float(tail.mean()), 4), evidence)


#: The part of an all-reduce's cost that grows with its size is fitted over
#: size classes (powers of two of its bytes) whose median sizes span at
#: least this factor: two sizes closer than that tell noise, not a slope.
FIT_SIZE_SPREAD = 4.0


def _allreduce_costs(p: Profile) -> pd.DataFrame:
    """The gradient all-reduces of the steady steps that record a size, with
    ``cost_us``: the time in each less the rank's wait for a late peer
    (:func:`peer_waits`) where the ranks' collectives are matched."""
    ar, _ = _steady_allreduces(p)
    if "size_mb" not in ar.columns:
        raise NotEvaluated("the all-reduces record no message size")
    ar = ar[~_few_values(ar)].dropna(subset=["size_mb", "elapse_us"])
    ar = ar[ar["size_mb"] > 0]
    if ar.empty:
        raise NotEvaluated("no gradient all-reduce with a size in the steady steps")
    cost = ar["elapse_us"].clip(lower=0).to_numpy(dtype=float)
    waits = peer_waits(p)
    if waits is not None and "start_us" in ar.columns:
        wait = waits[waits["kind"] == "allreduce"].groupby(["rank", "start_us"])["wait_us"].first()
        cost = cost - wait.reindex(pd.MultiIndex.from_frame(ar[["rank", "start_us"]])).fillna(0.0).to_numpy()
    return ar.assign(cost_us=np.clip(cost, 0.0, None))


def _per_mb_ms(p: Profile) -> tuple[float, int]:
    """(ms per MB of a gradient all-reduce's cost, size classes fitted): the
    Theil-Sen slope of the median cost on the median size over the size
    classes (``FIT_SIZE_SPREAD``), at least 0."""
    costs = _allreduce_costs(p)
    size_class = np.floor(np.log2(costs["size_mb"].to_numpy() * BYTES_PER_MB))
    classes = costs.groupby(size_class).agg(mb=("size_mb", "median"), cost=("cost_us", "median"))
    if len(classes) < 2 or classes["mb"].max() < FIT_SIZE_SPREAD * classes["mb"].min():
        raise NotEvaluated("the gradient all-reduces have too few distinct sizes to tell the cost that grows "
                           f"with size from the fixed cost (sizes {FIT_SIZE_SPREAD:g}x apart needed)")
    mb, ms = classes["mb"].to_numpy(), classes["cost"].to_numpy() / US_PER_MS
    i, j = np.triu_indices(len(mb), 1)
    return max(float(np.median((ms[j] - ms[i]) / (mb[j] - mb[i]))), 0.0), len(classes)


@metric("comm.allreduce_fixed_ms", unit="ms", needs=["comm.kind", "comm.step", "comm.size_mb", "steps.step"])
def allreduce_fixed_ms(p: Profile) -> Value:
    """What one gradient all-reduce issued after backward costs whatever its
    size (``comm.allreduce_layout`` after_backward): ``comm.exposed_allreduce_ms``
    less the part that grows with the bytes (``comm.gradient_mb`` times the
    ms per MB fitted over their sizes, ``_per_mb_ms``), divided by
    ``comm.allreduce_per_step``. Latency, the call and the rendezvous of
    every rank: what each extra all-reduce adds. Evidence: ms per MB, size
    classes fitted."""
    layout, _ = _layout(p)
    if layout != "after_backward":
        raise NotEvaluated({"one": "one all-reduce holds every gradient",
                            "bucketed": "the all-reduces run in buckets during backward"}[layout])
    per_mb, classes = _per_mb_ms(p)
    exposed = exposed_allreduce_ms(p).value
    fixed = (exposed - per_mb * gradient_mb(p).value) / allreduce_per_step(p).value
    return Value(round(max(fixed, 0.0), 4), {"per_mb_ms": round(per_mb, 5), "size_classes": classes})


@metric("comm.fewer_allreduces_save_ms", unit="ms", needs=["comm.kind", "comm.step", "comm.size_mb", "steps.step"])
def fewer_allreduces_save_ms(p: Profile) -> Value:
    """Time per step that reducing the gradients issued after backward in
    buckets of ``comm.bucket_cap_mb`` would save by their number alone:
    ``comm.allreduce_fixed_ms`` for each all-reduce fewer (the buckets
    being ceil(gradients / cap)), before any overlap with backward; at most
    ``comm.exposed_allreduce_ms``. Evidence: all-reduces and buckets per
    step."""
    fixed = allreduce_fixed_ms(p).value
    count = allreduce_per_step(p).value
    cap = bucket_cap_mb(p)
    buckets = math.ceil(cap.evidence["gradient_mib"] / cap.value)
    if count <= buckets:
        raise NotEvaluated(f"{count:g} all-reduces per step, no more than the {buckets} buckets proposed")
    saved = min((count - buckets) * fixed, exposed_allreduce_ms(p).value)
    return Value(round(saved, 4), {"allreduces": count, "buckets": buckets})


@metric("comm.allreduce_peer_wait_ms", unit="ms", needs=["comm.kind", "comm.exposed_us", "steps.exposed_comm_us"])
def allreduce_peer_wait_ms(p: Profile) -> Value:
    """Exposed time per step that ranks spent at all-reduces waiting for a
    late peer (collectives matched across ranks, :func:`peer_waits`): the
    mean over ranks and steady steps. It is not counted in
    ``comm.exposed_allreduce_ms``: ranks waiting on one another is
    imbalance (``slow-rank``), not gradient sync."""
    frame = _exposure(p)
    if not frame.attrs["matched"] or "wait:allreduce" not in frame.columns:
        raise NotEvaluated("the all-reduces could not be matched across ranks")
    return Value(round(float(frame["wait:allreduce"].mean()) / US_PER_MS, 4))


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


def _sources(p: Profile) -> dict[str, list[int]]:
    """What the comm table was read from (``RunMeta.comm_source`` keys) -> the ranks read from it."""
    out: dict[str, list[int]] = {}
    for rank, source in sorted(p.meta.comm_source.items()):
        out.setdefault(source, []).append(rank)
    return out


def _words(key: str) -> str:
    """A source key in words (``hccl_rows.SOURCES``); an unknown key as it is."""
    return COMM_SOURCES.get(key, key)


def _data_evidence(p: Profile) -> dict:
    """``{"data": <comm.source>}`` where the collector says what the comm table rests on, else {}."""
    sources = _sources(p)
    return {"data": "; ".join(_words(k) for k in sources)} if sources else {}


@metric("comm.source", unit="text", needs=["comm"])
def source(p: Profile) -> Value:
    """What the communication metrics rest on: the files the collectives
    were read from, naming the profiler level where the layout has levels
    (Ascend: ``communication.json`` of the Level1 / Level2 communication
    analysis, or at Level0, the default, the step trace's communication
    columns with the HCCL rows of ``kernel_details.csv``, else the HCCL lanes
    of ``trace_view.json``), in English words, several joined by "; " when
    ranks differ. Evidence: the ranks read from each."""
    sources = _sources(p)
    if not sources:
        raise NotEvaluated("the collector does not say what the communication data was read from")
    return Value("; ".join(_words(k) for k in sources), {"ranks": {_words(k): len(v) for k, v in sources.items()}})


@metric("comm.source_key", unit="text", needs=["comm"])
def source_key(p: Profile) -> Value:
    """``comm.source`` as stable keys (``level0_kernels``, ``level0_trace_view``,
    ``level0_op_statistic``, ``level1_communication_json``,
    ``level1_cluster_communication_json``), joined by "; " when ranks differ:
    for messages that word the source in their own language. Evidence: the
    ranks read from each."""
    sources = _sources(p)
    if not sources:
        raise NotEvaluated("the collector does not say what the communication data was read from")
    return Value("; ".join(sources), {"ranks": {k: len(v) for k, v in sources.items()}})
