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


# ---------------------------------------------------------------- unaligned SDMA transfers

#: SDMA moves data in blocks of this many bytes; a transfer whose size is not a
#: multiple of it ends in a partial block and loses bandwidth (msprof-analyze's
#: ByteAlignmentChecker ``_BASE_SIZE``).
ALIGN_BYTES = 512
#: Transfers of at most this many bytes are left out: they are latency bound
#: whatever their alignment (byte_alignment.yaml ``min_size: 512``).
ALIGN_MIN_BYTES = 512
#: Link types whose copies stay on the chip and are not checked
#: (ByteAlignmentChecker skips ``ON_CHIP``).
ALIGN_SKIP_LINKS = ("ON_CHIP",)


def _sdma_checked(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    """The HCCL tasks the alignment check looks at (SDMA, off the chip, above
    ``ALIGN_MIN_BYTES``) and which of them are unaligned."""
    tasks = p.table("hccl_tasks")
    tasks = tasks[(tasks["transport"].astype(str).str.upper() == "SDMA")
                  & ~tasks["link"].astype(str).str.upper().isin(ALIGN_SKIP_LINKS)
                  & (tasks["size_bytes"] > ALIGN_MIN_BYTES) & (tasks["total_us"] > 0)]
    if tasks.empty:
        raise NotEvaluated(f"no SDMA transfer task above {ALIGN_MIN_BYTES} B between chips in the HCCL task records")
    return tasks, tasks["size_bytes"] % ALIGN_BYTES != 0


@metric("transfer.unaligned_sdma_share", unit="ratio",
        needs=["hccl_tasks.size_bytes", "hccl_tasks.total_us", "hccl_tasks.transport"])
def unaligned_sdma_share(p: Profile) -> Value:
    """Share of SDMA transfer-task time (HCCL ``Memcpy`` / ``Reduce_Inline``
    tasks between chips, above ``ALIGN_MIN_BYTES``) in tasks whose size is not
    a multiple of ``ALIGN_BYTES`` (512 B), per rank, mean over ranks: the
    time msprof-analyze's byte-alignment check flags. Needs the per-task
    records of Level1+ profiles; the evidence names the unaligned sizes that
    take the most time."""
    tasks, bad = _sdma_checked(p)
    total = tasks.groupby("rank")["total_us"].sum()
    part = tasks[bad].groupby("rank")["total_us"].sum().reindex(total.index, fill_value=0.0)
    share = part / total
    sizes = tasks[bad].groupby("size_bytes")["total_us"].sum().sort_values(ascending=False)
    evidence = {"unaligned_tasks": int(tasks.loc[bad, "count"].sum()), "tasks": int(tasks["count"].sum()),
                "align_bytes": ALIGN_BYTES,
                "top_sizes_bytes": [int(s) for s in sizes.index[:5]]}
    evidence.update(rank_evidence(share, scale=1.0))
    return Value(float(share.mean()), evidence)


@metric("transfer.unaligned_sdma_ms", unit="ms",
        needs=["hccl_tasks.size_bytes", "hccl_tasks.total_us", "hccl_tasks.transport"])
def unaligned_sdma_ms(p: Profile) -> Value:
    """SDMA transfer-task time per step in tasks whose size is not a multiple
    of ``ALIGN_BYTES`` (see ``transfer.unaligned_sdma_share``): per rank, the
    summed task time over the window divided by the rank's steps, mean over
    ranks. Tasks of one operator may run in parallel on several links, so this
    is task time, an upper bound of the wall time they take."""
    tasks, bad = _sdma_checked(p)
    ranks = tasks["rank"].unique()
    per_rank = tasks[bad].groupby("rank")["total_us"].sum().reindex(ranks, fill_value=0.0)
    return Value(per_step_ms(p, per_rank))
