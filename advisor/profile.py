"""The normalized Profile: what every collector produces and every metric reads.

A Profile is run metadata plus a few long pandas tables. Every table has a
``rank`` column (int), so one Profile holds one rank or a whole cluster.
All times are **microseconds** (float64), sizes MB, bandwidths GB/s.
A table or column the source does not have is absent (None / missing
column), never filled with invented zeros; metrics that need it are then
"not evaluated" with the reason.

Tables and their columns (optional columns in brackets):

``steps`` -- one row per (rank, step). ``step`` is the profiler's step id
    (nullable Int64: NA when the source has only per-rank totals, as in a
    cluster summary). ``duration_us`` is the step's wall time.
    [``start_us``, ``computing_us`` (device compute, union of compute kernels),
    ``communication_us`` (all communication time), ``overlapped_us`` (compute
    and communication at once), ``exposed_comm_us`` (communication not
    overlapped by compute), ``free_us`` (device neither computing nor
    communicating), ``stage_us``, ``bubble_us``, ``receive_us``,
    ``iteration_interval_us`` (end of previous step's last device op to
    start of this step's first: host/data wait, MindSpore step trace),
    ``fp_bp_us`` (forward + backward), ``tail_us`` (end of backward to end
    of step: gradient all-reduce and optimizer), ``data_wait_us`` (host time
    inside the dataloader, e.g. ``enumerate(DataLoader)`` in Kineto),
    ``device_busy_us`` (union of all device kernels, copies and sets),
    ``host_wait_us`` (device idle in gaps longer than 50 us: waiting for the
    host to issue work), ``kernel_gap_us`` (device idle in gaps of 50 us or
    less between device operations: launch gaps), ``sync_wait_us`` (host
    time blocked in synchronizing calls)]

``ops`` -- device operators aggregated per rank: one row per (rank, name,
    type, core, input_dtypes, input_shapes). Columns: ``name``, ``type``,
    ``core`` (accelerator core: AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC,
    HCCL, GPU, CPU, ...), ``count``, ``total_us``. ``type`` of GPU copies
    says their direction: memcpy_h2d, memcpy_d2h, memcpy_d2d, memcpy_p2p.
    [``short_count`` (launches shorter than 10 us), ``input_dtypes``
    (";"-joined, normalized upper-case: FLOAT, FLOAT16, BF16, INT32...),
    ``input_shapes``, ``max_us``, ``min_us``, ``wait_us``]

``comm`` -- communication operators per rank (``communication.json``, or
    collective kernels in a trace). Kineto traces: one row per operator.
    Ascend layouts: summed per (rank, step, kind, group, operator type)
    (``comm_rollup``: ``name`` is the type, ``hcom_allReduce__123_0`` ->
    ``hcom_allReduce_``; times summed; ``start_us`` the first start; ``ops``
    the operators summed). Columns: ``name`` (e.g. hcom_allReduce__123_0),
    ``kind`` (allreduce, allgather, broadcast, reducescatter, send, receive,
    sendrecv, alltoall, other: ``advisor.collectors.vocab``), ``group``,
    ``elapse_us``. [``step``, ``start_us``,
    ``transit_us``, ``wait_us``, ``sync_us``, ``idle_us``, ``exposed_us``
    (time within the operator's span when the rank communicates without
    computing; operators in flight at once each count the time they
    share), ``tensor_count``
    (gradient tensors fused into one all-reduce, from its input list),
    ``size_mb``]

``bandwidth`` -- transfers per rank, step, collective kind and transport
    type, summed over the communication operators (``comm_rollup``; a
    per-operator row each step would be tens of millions at 1024 ranks):
    ``rank``, ``step`` (NA when the file has none), ``kind``, ``transport``
    (SDMA, RDMA, HCCS, PCIE, SIO, NVLINK, ...), ``ops`` (operator records
    summed), ``size_mb``, ``time_ms`` (milliseconds, as the profilers write
    it), ``bandwidth_gbps`` (size_mb / time_ms). [``large_packet_ratio``
    (mean weighted by size)]. Records with no size or no time are left out.

``links`` -- point-to-point links (``communication_matrix.json``; of its
    ``{type}-total`` and ``-top1`` / ``-middle`` / ``-bottomN`` entries only
    the totals, the others repeat single operators) summed the same way per
    ``rank`` (the file's rank), ``step``, ``src``, ``dst``
    (global ranks: the files' group-local ones mapped, see
    ``collectors/link_ranks.py``), ``transport`` and ``size_class`` (floor(log2(MB)) of each
    record before summing): ``ops``, ``size_mb``, ``time_ms``
    (milliseconds), ``bandwidth_gbps``.

``data_queue`` -- samples of a data queue's fill level over time: ``queue``
    (``device`` for the device data queue, ``host`` for the host queue),
    ``index`` (sample number or step), ``size`` (elements in the queue).
    [``capacity``, ``time_us``]

``data_ops`` -- dataset-pipeline operators: ``name`` (e.g. MapOp),
    [``op_id`` (pipeline id; absent in ``dataset.csv``), ``workers`` (num_parallel_workers), ``output_queue_usage``
    (mean fill ratio 0..1 of the op's output connector queue),
    ``output_queue_size``, ``output_queue_capacity``, ``parent_id`` (the op
    that consumes this op's output; NA for the root), ``avg_time_us``,
    ``stage``, ``count``]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pandas as pd
from pydantic import BaseModel, Field

TABLES = ("steps", "ops", "comm", "bandwidth", "links", "data_queue", "data_ops")

Framework = Literal["mindspore", "pytorch", "torch_npu", "unknown"]
Device = Literal["ascend", "gpu", "cpu", "unknown"]


class Skip(BaseModel):
    """Something that could not be read or evaluated, and why."""

    what: str = Field(description="file, table, metric or rule that was skipped")
    reason: str


class RunMeta(BaseModel):
    """What the run was and where its data came from."""

    framework: Framework = "unknown"
    device: Device = "unknown"
    source_format: str = Field(
        "unknown",
        description="ascend_pt, ascend_ms, mindinsight, msprof_cluster, kineto, ...",
    )
    source_version: str | None = None
    source_path: str = ""
    ranks: list[int] = Field(default_factory=list)
    ranks_inferred: bool = Field(
        False,
        description="ranks were assigned to files that declare none (e.g. several captures "
        "of one worker); cross-rank comparisons are then not made",
    )
    world_size: int | None = None
    hosts: dict[int, str] = Field(
        default_factory=dict,
        description="rank -> host, where the output names it (a worker folder or trace file "
        "named {host}_{pid}_...; absent otherwise)",
    )
    stages: dict[int, int] = Field(
        default_factory=dict,
        description="rank -> pipeline stage, where the profiler metadata lists the rank's "
        "pipeline-parallel group (absent otherwise)",
    )
    parallel: dict[str, int] = Field(
        default_factory=dict, description="e.g. {'dp': 8, 'tp': 1, 'pp': 1}"
    )
    time_unit: str = "us"
    notes: list[str] = Field(default_factory=list)


@dataclass
class Profile:
    """Run metadata plus the normalized tables listed in the module docstring."""

    meta: RunMeta
    steps: pd.DataFrame | None = None
    ops: pd.DataFrame | None = None
    comm: pd.DataFrame | None = None
    bandwidth: pd.DataFrame | None = None
    links: pd.DataFrame | None = None
    data_queue: pd.DataFrame | None = None
    data_ops: pd.DataFrame | None = None
    skipped: list[Skip] = field(default_factory=list)
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def memo(self, key: str, compute):
        """``compute()`` once per profile (tables never change after collection);
        metrics share derived views such as steady-state steps through it."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def table(self, name: str) -> pd.DataFrame | None:
        """The named table, or None when absent or empty."""
        df = getattr(self, name)
        if df is None or len(df) == 0:
            return None
        return df

    def has(self, name: str, *columns: str) -> bool:
        """True when table ``name`` exists, is non-empty, and has ``columns``
        with at least one non-null value each."""
        df = self.table(name)
        if df is None:
            return False
        return all(c in df.columns and df[c].notna().any() for c in columns)

    def skip(self, what: str, reason: str) -> None:
        self.skipped.append(Skip(what=what, reason=reason))


def merge_profiles(parts: list[Profile], meta: RunMeta) -> Profile:
    """Concatenate per-rank Profiles (each already carrying its ``rank``
    column) into one cluster Profile with the given metadata."""
    out = Profile(meta=meta)
    for name in TABLES:
        frames = [getattr(p, name) for p in parts if p.table(name) is not None]
        if frames:
            setattr(out, name, pd.concat(frames, ignore_index=True))
    for p in parts:
        out.skipped.extend(p.skipped)
        for note in p.meta.notes:
            if note not in out.meta.notes:
                out.meta.notes.append(note)
    ranks = set(meta.ranks)
    for p in parts:
        ranks.update(p.meta.ranks)
        out.meta.ranks_inferred |= p.meta.ranks_inferred
        for rank, host in p.meta.hosts.items():
            out.meta.hosts.setdefault(rank, host)
        for rank, stage in p.meta.stages.items():
            out.meta.stages.setdefault(rank, stage)
    out.meta.ranks = sorted(ranks)
    return out
