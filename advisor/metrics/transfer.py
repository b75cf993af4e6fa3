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


# ---------------------------------------------------------------- link types below their nominal bandwidth

#: Nominal bandwidth (GB/s) of a link of each type: msprof's cluster analysis
#: (CANN toolkit, ``common_func/ms_constant/number_constant.py``, used as
#: ``HcclAnalysisTool.StandardBandWidth`` in ``msparser/cluster/meta_parser.py``)
#: gives HCCS 18, PCIE 20, RDMA 12.5 for the Atlas training series (chip
#: v2.1.0) and HCCS 28, RDMA 25 for Atlas A2 (chip v4.1.0). A profile does not
#: say which chip ran, so each type takes the lowest figure msprof gives it: a
#: type below it is below its nominal on every chip msprof knows. SIO
#: (die-to-die) has no published figure there and is not judged.
NOMINAL_GBPS = {"HCCS": 18.0, "PCIE": 20.0, "RDMA": 12.5}
#: The smallest operator transfer (MB) judged per link type: smaller ones are
#: latency bound and never reach the nominal (the small-transfer bounds of
#: msprof-analyze's packet.yaml, ``SMALL_BOUNDS``: HCCS and PCIE are SDMA
#: links, inside a node). The small-packets check covers the transfers below.
LINK_TYPE_FLOOR_MB = {"HCCS": SMALL_SDMA_MB, "PCIE": SMALL_SDMA_MB, "RDMA": SMALL_RDMA_MB}


def _judged(p: Profile, transport: str) -> tuple[pd.DataFrame, str]:
    """The operator transfers of ``transport`` at or above its floor, and what
    they are: those of operators that ran alone (``comm_contention``, nothing
    computing beside them: the link's own speed) where the profile tells
    them apart, else all of them (``bandwidth``)."""
    bound = int(math.log2(LINK_TYPE_FLOOR_MB[transport]))
    alone = p.table("comm_contention")
    if alone is not None:
        alone = alone[(alone["transport"].astype(str).str.upper() == transport) & ~alone["beside_compute"].astype(bool)
                      & (alone["size_class"] >= bound) & (alone["size_mb"] > 0) & (alone["time_ms"] > 0)]
        if not alone.empty:
            return alone, "operators alone (no compute beside them)"
    bw = _transfers(p)
    return bw[(bw["transport"].astype(str).str.upper() == transport) & (bw["size_class"] >= bound)], "all operators"


def _link_type_ratios(p: Profile) -> tuple[str, pd.DataFrame, dict]:
    """Per (rank, step, link type): the bandwidth the operator transfers of
    that type reach (size over time, transfers at or above the type's floor),
    its ratio to the nominal, and the time beyond what the nominal needs.
    Returns the type whose median ratio over rank-steps is the lowest, the
    rows, and which transfers each type was judged on (once per profile)."""
    return p.memo("transfer.link_type_ratios", lambda: _link_type_table(p))


def _link_type_table(p: Profile) -> tuple[str, pd.DataFrame, dict]:
    parts, judged = [], {}
    for transport, nominal in NOMINAL_GBPS.items():
        rows, what = _judged(p, transport)
        if rows.empty:
            continue
        sums = rows.groupby(["rank", "step"], dropna=False)[["size_mb", "time_ms"]].sum()
        sums["ratio"] = sums["size_mb"] / sums["time_ms"] / nominal
        sums["excess_ms"] = (sums["time_ms"] - sums["size_mb"] / nominal).clip(lower=0.0)
        parts.append(sums.assign(transport=transport, nominal=nominal).reset_index())
        judged[transport] = what
    if not parts:
        floors = ", ".join(f"{t} from {mb} MB" for t, mb in LINK_TYPE_FLOOR_MB.items())
        raise NotEvaluated(f"no operator transfer large enough to reach a link's nominal bandwidth ({floors})")
    table = pd.concat(parts, ignore_index=True)
    medians = table.groupby("transport")["ratio"].median()
    return str(medians.idxmin()), table, judged


@metric("transfer.link_type_ratio", unit="ratio", needs=["bandwidth.size_mb", "bandwidth.time_ms"])
def link_type_ratio(p: Profile) -> Value:
    """The bandwidth the slowest link type reaches as a share of its nominal
    (``NOMINAL_GBPS``): per rank, step and type (HCCS, PCIE, RDMA), the
    summed size over the summed time of the operator transfers of at least
    the type's floor (``LINK_TYPE_FLOOR_MB``) divided by the nominal; the
    median over rank-steps, so one slow link (slow-link's finding) or one
    retransmission does not move it and a low value means the type as a
    whole is slow. Where the profile tells operators beside compute from
    those alone (``comm_contention``), only those alone are judged, so
    contention (``transfer.contention_ratio``) is not taken for a slow link.
    The type with the lowest median is ``transfer.slow_link_type``; the
    evidence gives every type's median GB/s, nominal and judged transfers."""
    worst, table, judged = _link_type_ratios(p)
    types = {}
    for t, g in table.groupby("transport"):
        types[str(t)] = {"gbps": round(float(g["ratio"].median() * g["nominal"].iloc[0]), 3),
                         "nominal_gbps": float(g["nominal"].iloc[0]), "ranks": int(g["rank"].nunique()),
                         "judged": judged[str(t)]}
    mine = table[table["transport"] == worst]
    evidence = {"types": types}
    evidence.update(rank_evidence(mine.groupby("rank")["ratio"].median(), scale=1.0))
    return Value(float(mine["ratio"].median()), evidence)


@metric("transfer.slow_link_type", unit="text", needs=["bandwidth.size_mb", "bandwidth.time_ms"])
def slow_link_type(p: Profile) -> Value:
    """The link type with the lowest median share of its nominal bandwidth
    (``transfer.link_type_ratio``): HCCS, PCIE or RDMA."""
    return Value(_link_type_ratios(p)[0])


@metric("transfer.link_type_excess_ms", unit="ms", needs=["bandwidth.size_mb", "bandwidth.time_ms"])
def link_type_excess_ms(p: Profile) -> Value:
    """Transfer time per step that the slowest link type
    (``transfer.slow_link_type``) takes beyond what its nominal bandwidth
    needs for the same bytes (the judged transfers' time minus size over
    nominal): the median over the rank-steps that move such transfers, as
    ``transfer.link_type_ratio`` (one retransmission does not set it).
    Transfers of one operator on several links of the type run at once, so
    this is transfer time, an upper bound of the wall time."""
    worst, table, _ = _link_type_ratios(p)
    return Value(float(table.loc[table["transport"] == worst, "excess_ms"].median()))


# ---------------------------------------------------------------- bandwidth contention

#: The transport the contention check judges: SDMA, the copy engines inside a
#: node, which share the device memory with the compute cores
#: (msprof-analyze's BandwidthContentionChecker reads each operator's SDMA
#: bandwidth).
CONTENTION_TRANSPORT = "SDMA"


def _contention(p: Profile) -> pd.DataFrame:
    """Per rank: the SDMA transfers of operators beside compute against the
    bandwidth the same rank's operators of the same size class reach alone
    (``comm_contention``): their time (ms), the time the alone bandwidth
    would need (ms), the time beyond it and their exposed time (us); once
    per profile."""
    return p.memo("transfer.contention", lambda: _contention_table(p))


def _contention_table(p: Profile) -> pd.DataFrame:
    t = p.table("comm_contention")
    t = t[(t["transport"].astype(str).str.upper() == CONTENTION_TRANSPORT) & (t["size_mb"] > 0) & (t["time_ms"] > 0)]
    beside = t["beside_compute"].astype(bool)
    keys = ["rank", "size_class"]
    alone = t[~beside].groupby(keys)[["size_mb", "time_ms", "ops"]].sum()
    near = t[beside].groupby(keys)[["size_mb", "time_ms", "ops", "exposed_us"]].sum()
    both = near.join(alone.add_suffix("_alone"), how="inner")
    if both.empty:
        raise NotEvaluated(f"no {CONTENTION_TRANSPORT} operator ran alone in a size class of those beside compute "
                           "on the same rank: nothing to compare their bandwidth with")
    both["expected_ms"] = both["size_mb"] / (both["size_mb_alone"] / both["time_ms_alone"])
    both["slow_ms"] = (both["time_ms"] - both["expected_ms"]).clip(lower=0.0)
    return both.groupby(level="rank").sum()


@metric("transfer.contention_ratio", unit="ratio",
        needs=["comm_contention.size_mb", "comm_contention.time_ms", "comm_contention.beside_compute"])
def contention_ratio(p: Profile) -> Value:
    """The SDMA bandwidth of communication operators that run beside compute
    (kernels computing during at least half of their span) as a share of the
    bandwidth the same rank's operators of the same size class reach alone
    (nothing computing beside them): per rank, the time the alone bandwidth
    needs for the bytes moved beside compute over the time they took; mean
    over ranks. Not evaluated without operators alone to compare with."""
    per = _contention(p)
    ratio = per["expected_ms"] / per["time_ms"]
    evidence = {"beside_ops": int(per["ops"].sum()), "alone_ops": int(per["ops_alone"].sum()),
                "beside_gbps": round(float(per["size_mb"].sum() / per["time_ms"].sum()), 3),
                "alone_gbps": round(float(per["size_mb_alone"].sum() / per["time_ms_alone"].sum()), 3)}
    evidence.update(rank_evidence(ratio, scale=1.0))
    return Value(float(ratio.mean()), evidence)


@metric("transfer.contention_ms", unit="ms",
        needs=["comm_contention.size_mb", "comm_contention.time_ms", "comm_contention.exposed_us"])
def contention_ms(p: Profile) -> Value:
    """Exposed communication time per step that the contention adds: per
    rank, the SDMA transfer time of the operators beside compute beyond what
    their bytes need at the rank's alone bandwidth (``transfer.contention_ratio``),
    at most the time within those operators' spans when nothing computes
    (a slowdown hidden behind compute costs nothing); over the window divided
    by the rank's steps, mean over ranks."""
    per = _contention(p)
    added = pd.concat([per["slow_ms"] * US_PER_MS, per["exposed_us"]], axis=1).min(axis=1)
    return Value(per_step_ms(p, added))
