"""Raw Ascend profiler fields -> Profile columns: the one table every Ascend
reader takes its field names from.

``FIELDS[layout][source]`` is a ``Source``: for each Profile column (or
``RunMeta`` field), the raw names the profilers write it under. Two
layouts: ``TEXT`` (CSV and JSON files under ``ASCEND_PROFILER_OUTPUT/``,
written by torch_npu and MindSpore, and msprof-analyze's cluster files)
and ``DB`` (``export_type=db``: the per-rank profiler database and
``analysis.db``; table and column names as ``advisor.collectors.ascend.db``
documents them). Where releases spell a field differently, every spelling
is listed and the first one a file has wins (``Step`` / ``Step ID`` /
``Step Id``; ``Idle Time`` / ``Idel Time``), so a new profiler release is
one more entry here, not a code change.

Names starting with ``_`` are intermediate columns a reader derives Profile
columns from (``_exposed_no_recv`` -> ``receive_us``). ``Source.scale``
turns a raw unit into the Profile's; in the JSON files the unit is part of
the key (``Elapse Time(ms)``) and the reader parses it. ``Source.known``
lists fields that are recognised and deliberately not read (the typed
communication decoder accepts a record only when every field is listed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

TEXT = "text"
DB = "db"

US_PER_MS = 1000.0


@dataclass(frozen=True)
class Source:
    """The fields of one raw table, file or record kind (module doc)."""

    fields: Mapping[str, tuple[str, ...]]
    scale: Mapping[str, float] = field(default_factory=dict)
    known: tuple[str, ...] = ()

    def raw(self, column: str) -> str:
        """The first (current) raw name of ``column``."""
        return self.fields[column][0]

    def by_raw(self) -> dict[str, str]:
        """Raw name -> column, every spelling, in table order."""
        return {raw: column for column, raws in self.fields.items() for raw in raws}


_STEP_TRACE = {
    "step": ("Step", "Step ID", "Step Id"),
    "computing_us": ("Computing",),
    "exposed_comm_us": ("Communication(Not Overlapped)",),
    "overlapped_us": ("Overlapped",),
    "communication_us": ("Communication",),
    "free_us": ("Free",),
    "stage_us": ("Stage",),
    "bubble_us": ("Bubble",),
    "_exposed_no_recv": ("Communication(Not Overlapped and Exclude Receive)",),
}

FIELDS: dict[str, dict[str, Source]] = {
    TEXT: {
        "step_trace_time.csv": Source(_STEP_TRACE),
        # msprof-analyze; Type is "rank" or "stage", Index the rank or stage
        "cluster_step_trace_time.csv": Source({"type": ("Type",), "index": ("Index",), **_STEP_TRACE}),
        "kernel_details.csv": Source({
            "step": ("Step Id", "Step ID"),
            "name": ("Name", "Op Name"),
            "type": ("Type", "OP Type"),
            "core": ("Accelerator Core", "Task Type"),
            "start_us": ("Start Time(us)",),
            "duration_us": ("Duration(us)",),
            "wait_us": ("Wait Time(us)",),
            "input_shapes": ("Input Shapes",),
            "input_dtypes": ("Input Data Types",),
            # static or dynamic (CANN 8.0+ with torch_npu's Level1 profiling; absent before)
            "op_state": ("OP State",),
            # pipe busy times of the AI Core's cube part (aic_*) and vector part (aiv_*),
            # written with aic_metrics=PipeUtilization (the default metric set); the file's
            # aic_*_ratio columns are each time over aicore_time / aiv_time
            "aicore_us": ("aicore_time(us)",),
            "aic_mac_us": ("aic_mac_time(us)",),
            "aic_mte2_us": ("aic_mte2_time(us)",),
            "aic_fixpipe_us": ("aic_fixpipe_time(us)",),
            "aiv_us": ("aiv_time(us)",),
            "aiv_vec_us": ("aiv_vec_time(us)",),
            "aiv_mte2_us": ("aiv_mte2_time(us)",),
            "aiv_mte3_us": ("aiv_mte3_time(us)",),
            # cores the kernel was launched on (its blocks); a MIX_AIC kernel's Mix Block Dim
            # is its vector blocks (msprof-analyze block_dim_checker.py reads both)
            "block_dim": ("Block Dim",),
            "mix_block_dim": ("Mix Block Dim",),
        }),
        "op_statistic.csv": Source({
            "type": ("OP Type",),
            "core": ("Core Type",),
            "count": ("Count",),
            "total_us": ("Total Time(us)",),
            "min_us": ("Min Time(us)",),
            "max_us": ("Max Time(us)",),
        }),
        # MindSpore FRAMEWORK/cpu_op_detail_info_{rank}.csv; times in ms
        "cpu_op_detail_info.csv": Source({
            "name": ("full_op_name", "op_name"),
            "type": ("op_type",),
            "count": ("op_occurrences",),
            "total_us": ("op_total_time(ms)",),
        }, scale={"total_us": US_PER_MS}),
        # MindSpore FRAMEWORK/cpu_op_type_info_{rank}.csv; times in ms
        "cpu_op_type_info.csv": Source({
            "type": ("op_type",),
            "count": ("type_occurrences",),
            "total_us": ("total_compute_time", "total_compute_time(ms)", "total_time(ms)"),
        }, scale={"total_us": US_PER_MS}),
        "dataset.csv": Source({
            "name": ("Operation",),
            "stage": ("Stage",),
            "count": ("Occurrences",),
            "avg_time_us": ("Avg. time(us)", "Avg time(us)"),
        }),
        # memory_record.csv (profile_memory=True): the caching allocator's totals over time, per component
        # (PTA, GE, PTA+GE: operator level; APP: the whole process), MB
        "memory_record.csv": Source({
            "component": ("Component",),
            "reserved_mb": ("Total Reserved(MB)",),
            "allocated_mb": ("Total Allocated(MB)",),
        }),
        # operator_memory.csv (profile_memory=True): per tensor, the totals when it was allocated, MB
        "operator_memory.csv": Source({
            "reserved_mb": ("Allocation Total Reserved(MB)",),
            "allocated_mb": ("Allocation Total Allocated(MB)",),
        }),
        # communication.json / cluster_communication.json: the two records of an operator
        "communication.json": Source({
            "time": ("Communication Time Info",),
            "bandwidth": ("Communication Bandwidth Info",),
        }),
        "Communication Time Info": Source({
            "start_us": ("Start Timestamp(us)",),
            "elapse_us": ("Elapse Time(ms)",),
            "transit_us": ("Transit Time(ms)",),
            "wait_us": ("Wait Time(ms)",),
            "sync_us": ("Synchronization Time(ms)",),
            "idle_us": ("Idle Time(ms)", "Idel Time(ms)"),
        }, known=("Wait Time Ratio", "Synchronization Time Ratio")),
        # per transport type, under "Communication Bandwidth Info"
        "Communication Bandwidth Info": Source({
            "size_mb": ("Transit Size(MB)",),
            "time_ms": ("Transit Time(ms)",),
            "bandwidth_gbps": ("Bandwidth(GB/s)",),
            "large_packet_ratio": ("Large Packet Ratio",),
        }, known=("Size Distribution",)),
        # communication_matrix.json: one record per "src-dst" link
        "communication_matrix.json": Source({
            "transport": ("Transport Type",),
            "size_mb": ("Transit Size(MB)",),
            "time_ms": ("Transit Time(ms)",),
            "bandwidth_gbps": ("Bandwidth(GB/s)",),
        }, known=("op_name", "Op Name")),  # a sample's operator: MindSpore, torch_npu
        # trace_view.json: the threads of the "Overlap Analysis" process
        "trace_view.json": Source({
            "computing_us": ("Computing",),
            "communication_us": ("Communication",),
            "exposed_comm_us": ("Communication(Not Overlapped)",),
            "free_us": ("Free",),
        }),
        # profiler_info*.json / profiler_metadata.json: RunMeta fields, first found
        # in a depth-first walk (``advisor.collectors.ascend.meta``)
        "profiler_metadata.json": Source({
            "rank": ("rank_id", "rankId", "rank"),
            "world_size": ("world_size", "rank_size", "worldSize"),
            "tp": ("tp", "tensor_model_parallel_size"),
            "pp": ("pp", "pipeline_model_parallel_size"),
            "dp": ("dp", "data_parallel_size"),
            "cp": ("cp", "context_parallel_size"),
            "ep": ("ep", "expert_model_parallel_size"),
        }),
        # PROF_*/device_{id}/info.json.{id}: the device's core counts, in its "DeviceInfo" list
        # (msprof-analyze advisor/dataset/profiling/device_info.py reads the same keys)
        "info.json DeviceInfo": Source({
            "ai_core_num": ("ai_core_num",),
            "aiv_num": ("aiv_num",),
        }),
        # the framework version, by framework
        "profiler_info.json versions": Source({
            "torch_npu": ("torch_npu_version", "torch_npu", "pta_version"),
            "mindspore": ("mindspore_version", "ms_version", "mindspore"),
        }),
    },
    DB: {
        "StepTraceTime": Source({
            "step": ("step",),
            "computing_us": ("computing",),
            "exposed_comm_us": ("communication_not_overlapped",),
            "overlapped_us": ("overlapped",),
            "communication_us": ("communication",),
            "free_us": ("free",),
            "stage_us": ("stage",),
            "bubble_us": ("bubble",),
            "_exposed_no_recv": ("communication_not_overlapped_and_exclude_receive",),
        }),
        # number columns of a compute task, read where the table has them: the cores its kernel was
        # launched on (msprof "Profile Data File Reference (DB)", COMPUTE_TASK_INFO blockNum / mixBlockNum;
        # kernel_details.csv's Block Dim / Mix Block Dim)
        "COMPUTE_TASK_INFO numbers": Source({
            "block_dim": ("blockNum",),
            "mix_block_dim": ("mixBlockNum",),
        }),
        # text columns (STRING_IDS ids) of a compute task
        "COMPUTE_TASK_INFO": Source({
            "name": ("name",),
            "type": ("opType",),
            "core": ("taskType",),
            "input_dtypes": ("inputDataTypes",),
            "input_shapes": ("inputShapes",),
            "op_state": ("opState",),  # static / dynamic; CANN 8.0 and later (read when present)
        }),
        "COMMUNICATION_OP": Source({
            "name": ("opName",),
            "type": ("opType",),
            "group": ("groupName",),
        }),
        # analysis.db, the tables behind communication.json (times in ms)
        "CommAnalyzerTime": Source({
            "step": ("step",),
            "name": ("hccl_op_name",),
            "group": ("group_name",),
            "start_us": ("start_timestamp",),
            "elapse_us": ("elapse_time",),
            "transit_us": ("transit_time",),
            "wait_us": ("wait_time",),
            "sync_us": ("synchronization_time",),
            "idle_us": ("idle_time",),
        }, scale=dict.fromkeys(("elapse_us", "transit_us", "wait_us", "sync_us", "idle_us"), US_PER_MS)),
        "CommAnalyzerBandwidth": Source({
            "step": ("step",),
            "name": ("hccl_op_name",),
            "group": ("group_name",),
            "transport": ("transport_type",),
            "size_mb": ("transit_size",),
            "time_ms": ("transit_time",),
            "bandwidth_gbps": ("bandwidth",),
            "large_packet_ratio": ("large_packet_ratio",),
        }),
        # ... and communication_matrix.json
        "CommAnalyzerMatrix": Source({
            "step": ("step",),
            "name": ("hccl_op_name",),
            "group": ("group_name",),
            "src": ("src_rank",),
            "dst": ("dst_rank",),
            "transport": ("transport_type",),
            "size_mb": ("transit_size",),
            "time_ms": ("transit_time",),
            "bandwidth_gbps": ("bandwidth",),
        }),
    },
}


def text(source: str) -> Source:
    """The fields of a text-layout file or record kind."""
    return FIELDS[TEXT][source]


def db(table: str) -> Source:
    """The columns of a database table."""
    return FIELDS[DB][table]
