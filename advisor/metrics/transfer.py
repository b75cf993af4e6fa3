"""Transfer metrics: what the communication operators' transfers look like
on Ascend (the ``bandwidth`` table, from ``communication.json`` or
``CommAnalyzerBandwidth``, and the ``links`` table, from
``communication_matrix.json``): the share of transfer time in small
transfers, and transfers so long that only a retransmission explains them.

Both tables keep each operator's transfers apart by ``size_class``
(floor(log2(MB)) of each record before summing), so "below 16 MB" is a
class bound, not a guess.
"""

from __future__ import annotations

import math

import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import per_step_ms, rank_evidence
from advisor.profile import Profile

#: An SDMA (intra-node) transfer below this many MB is small: msprof-analyze's
#: packet check (packet.yaml ``min_sdma_size: 16``). A power of two, so the
#: size classes split exactly at it.
SMALL_SDMA_MB = 16
#: An RDMA (inter-node) transfer below this many MB is small (packet.yaml
#: ``min_rdma_size: 1``).
SMALL_RDMA_MB = 1
#: The transport each bound applies to, as communication.json names them.
SMALL_BOUNDS = {"SDMA": SMALL_SDMA_MB, "RDMA": SMALL_RDMA_MB}
US_PER_MS = 1000.0


def _transfers(p: Profile) -> pd.DataFrame:
    bw = p.table("bandwidth")
    if "size_class" not in bw.columns or bw["size_class"].isna().all():
        raise NotEvaluated("the bandwidth table has no per-operator size classes")
    bw = bw[(bw["size_mb"] > 0) & (bw["time_ms"] > 0) & bw["size_class"].notna()]
    if bw.empty:
        raise NotEvaluated("no transfers with a positive size and time")
    return bw


def _small(p: Profile, transport: str) -> tuple[pd.DataFrame, pd.Series]:
    bw = _transfers(p)
    bw = bw[bw["transport"].astype(str).str.upper() == transport]
    if bw.empty:
        raise NotEvaluated(f"no {transport} transfers in this profile")
    bound = int(math.log2(SMALL_BOUNDS[transport]))
    return bw, bw["size_class"] < bound


def _small_share(p: Profile, transport: str) -> Value:
    bw, small = _small(p, transport)
    total = bw.groupby("rank")["time_ms"].sum()
    part = bw[small].groupby("rank")["time_ms"].sum().reindex(total.index, fill_value=0.0)
    share = (part / total)[total > 0]
    ops = bw.groupby("rank")["ops"].sum()
    small_ops = bw[small].groupby("rank")["ops"].sum().reindex(ops.index, fill_value=0)
    evidence = {"small_ops": int(small_ops.sum()), "ops": int(ops.sum()),
                "count_share": round(float(small_ops.sum() / ops.sum()), 4) if ops.sum() else None,
                "bound_mb": SMALL_BOUNDS[transport]}
    evidence.update(rank_evidence(share, scale=1.0))
    return Value(float(share.mean()), evidence)


@metric("transfer.small_sdma_share", unit="ratio", needs=["bandwidth.size_mb", "bandwidth.time_ms"])
def small_sdma_share(p: Profile) -> Value:
    """Share of SDMA (intra-node) transfer time in operator transfers smaller
    than 16 MB (``SMALL_SDMA_MB``, msprof-analyze's bound), per rank, mean
    over ranks. Weighed by time, not by count: many small transfers that
    take no time are not a problem. The evidence gives the count share too
    (msprof-analyze's ratio)."""
    return _small_share(p, "SDMA")


@metric("transfer.small_rdma_share", unit="ratio", needs=["bandwidth.size_mb", "bandwidth.time_ms"])
def small_rdma_share(p: Profile) -> Value:
    """Share of RDMA (inter-node) transfer time in operator transfers smaller
    than 1 MB (``SMALL_RDMA_MB``), per rank, mean over ranks (see
    ``transfer.small_sdma_share``)."""
    return _small_share(p, "RDMA")


@metric("transfer.small_ms", unit="ms", needs=["bandwidth.size_mb", "bandwidth.time_ms"])
def small_ms(p: Profile) -> Value:
    """Transfer time per step in small transfers (SDMA below 16 MB, RDMA
    below 1 MB): per rank, the larger of the two transports' small-transfer
    time over the window (an operator's SDMA and RDMA transfers run at once)
    divided by the rank's number of steps, mean over ranks."""
    parts = []
    for transport in SMALL_BOUNDS:
        try:
            bw, small = _small(p, transport)
        except NotEvaluated:
            continue
        parts.append(bw[small].groupby("rank")["time_ms"].sum())
    if not parts:
        raise NotEvaluated("no SDMA or RDMA transfers in this profile")
    ranks = p.table("bandwidth")["rank"].unique()
    per_rank = pd.concat(parts, axis=1).max(axis=1).reindex(ranks, fill_value=0.0) * US_PER_MS
    return Value(per_step_ms(p, per_rank))


# ---------------------------------------------------------------- long RDMA transfers


def _rdma_longest(p: Profile) -> pd.Series:
    """The bandwidth row (rank, step, kind, size class) whose RDMA records
    take the longest on average."""
    bw = p.table("bandwidth")
    if "ops" not in bw.columns:
        raise NotEvaluated("the bandwidth table has no record counts")
    rdma = bw[(bw["transport"].astype(str).str.upper() == "RDMA") & (bw["ops"] > 0) & (bw["time_ms"] > 0)]
    if rdma.empty:
        raise NotEvaluated("no RDMA transfers in this profile")
    per_op = rdma["time_ms"] / rdma["ops"]
    return pd.concat([rdma.loc[per_op.idxmax()], pd.Series({"per_op_ms": float(per_op.max())})])


@metric("transfer.rdma_longest_ms", unit="ms", needs=["bandwidth.transport", "bandwidth.time_ms"])
def rdma_longest_ms(p: Profile) -> Value:
    """The longest RDMA transfer of one communication operator (ms), as far
    as the rolled-up records show it: the largest mean transfer time per
    operator record of a bandwidth row (per rank, step, collective kind and
    size class; communication.json's per-operator RDMA Transit Time). A mean
    is a lower bound of the longest record in it, so the value never
    overstates. The evidence names the rank and step."""
    best = _rdma_longest(p)
    evidence = {"rank": int(best["rank"]), "kind": str(best["kind"]), "size_mb": round(float(best["size_mb"]), 3)}
    if not pd.isna(best.get("step")):
        evidence["step"] = int(best["step"])
    return Value(float(best["per_op_ms"]), evidence)


@metric("transfer.rdma_longest_rank", unit="rank", scope="rank", needs=["bandwidth.transport", "bandwidth.time_ms"])
def rdma_longest_rank(p: Profile) -> Value:
    """The rank whose RDMA transfer is the longest (``transfer.rdma_longest_ms``)."""
    return Value(int(_rdma_longest(p)["rank"]))
