"""Ascend PyTorch Profiler (torch_npu) output, in the text and the database
layout: the one writer of Ascend files for tests and benchmarks.

It is fed two ways:

* ``RankSpec``: one rank described fact by fact (step windows, compute
  tasks, communication operators, step breakdown, communication analysis;
  ``sample_rank`` gives a plausible 4-step one); ``write_text`` and
  ``write_db`` write its rank folder;
* a generated ``Scenario`` (``bench.scenarios.model``): ``write_scenario_text``
  and ``write_scenario_db`` write every rank of it, the database layout
  through ``RankSpec``.

Text layout, one ``{host}_{pid}_{timestamp}_ascend_pt`` folder per rank, as
msprof-analyze expects it (``{worker_name}_{timestamp}_ascend_pt``, rank id
from ``profiler_info_{rank}.json``):

* ``profiler_info_{rank}.json`` (for scenarios: config, start/end info,
  versions, rank_id) and ``profiler_metadata.json`` (``distributed_args`` in
  Megatron names, ``parallel_group_info`` with each group's global ranks);
* ``ASCEND_PROFILER_OUTPUT/step_trace_time.csv``: Step, Computing,
  Communication(Not Overlapped), Overlapped, Communication, Free, Stage,
  Bubble, Communication(Not Overlapped and Exclude Receive);
* ``kernel_details.csv``: for scenarios the newer column set (Start Time with
  the trailing TAB torch_npu writes, quoted shapes), compute kernels plus the
  HCCL rows; for a ``RankSpec`` the columns advisor reads;
* ``communication.json``: ``stepN -> collective|p2p -> op@group ->
  Communication Time Info / Communication Bandwidth Info`` (HCCS, RDMA,
  PCIE, SDMA);
* ``communication_matrix.json``: ``stepN -> collective|p2p -> entry@group
  -> "src-dst"`` with group-local ranks. A scenario has a large (32-64 MB)
  and a small (0.25-0.5 MB) all-reduce per step, written as the profilers
  integrate them: per link ``allreduce-total`` (their sum) and the
  ``-top1``, ``-middle``, ``-bottomN`` samples (``integrated``).

Group ids in a scenario's ``op@group`` are msprof-analyze's ``double_hash``
of the group name, so its cluster analysis can map local ranks back to
global ones.

Database layout: ``ascend_pytorch_profiler_{rank}.db`` (or
``ascend_mindspore_profiler_{rank}.db``) + ``analysis.db``. Table and column
names are the real ones, as torch_npu writes them: torch_npu
``profiler/analysis/prof_common_func/_constant.py`` (``DbConstant``,
``TableColumnsManager``: STRING_IDS, STEP_TIME, RANK_DEVICE_MAP, META_DATA,
StepTraceTime, CommAnalyzerTime, CommAnalyzerBandwidth, CommAnalyzerMatrix)
and ``prof_db_parse/_trace_step_time_db_parser.py`` (StepTraceTime gains a
leading ``deviceId``); TASK, COMPUTE_TASK_INFO and COMMUNICATION_OP columns
from msprof's "Profile Data File Reference (DB)"
(docs/en/user_guide/profile_data_file_references_db.md) and msprof-analyze's
``prof_exports`` queries (compute_op_sum_export.py, hccl_sum_export.py,
cluster_time_summary_export.py).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from advisor.collectors.ascend.link_ranks import double_hash
from bench.scenarios.layout import OpTemplate, layout
from bench.scenarios.model import Link, Scenario

# --------------------------------------------------------------------- layout

OUT = "ASCEND_PROFILER_OUTPUT"
#: start of a ``RankSpec``'s clock: its times are ns offsets from it
T0_NS = 1_700_000_000_000_000_000
STEP_TRACE_COLUMNS = (
    "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
    "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)")
STEP_TRACE_HEADER = ",".join(STEP_TRACE_COLUMNS) + "\n"
#: the kernel columns newer torch_npu writes
KERNEL_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
    "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
    "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,"
    "aicore_time(us),aic_total_cycles,aic_mac_ratio,aiv_time(us),aiv_total_cycles,aiv_vec_ratio\n"
)
#: the kernel columns advisor reads
KERNEL_HEADER_READ = ("Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
                      "Input Shapes,Input Data Types,OP State\n")


def _dumps(obj) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


def _rank_folder(parent: Path, name: str) -> Path:
    """``parent/name`` with its ``ASCEND_PROFILER_OUTPUT`` folder; returns the rank folder."""
    root = parent / name
    (root / OUT).mkdir(parents=True)
    return root


def communication(ops: list[dict]) -> dict:
    """``communication.json`` of operators given as dicts with ``step``,
    ``cat`` (collective or p2p), ``key`` (``op@group``) and ``time`` (time
    info, ms) and/or ``bands`` (transport -> bandwidth info)."""
    out: dict = {}
    for op in ops:
        cat = out.setdefault(f"step{op['step']}", {"collective": {}, "p2p": {}})[op["cat"]]
        rec = cat.setdefault(op["key"], {})
        if "time" in op:
            rec["Communication Time Info"] = op["time"]
        if "bands" in op:
            rec["Communication Bandwidth Info"] = op["bands"]
    return out


def matrix(records: list[dict]) -> dict:
    """``communication_matrix.json`` of link records given as dicts with
    ``step``, ``key`` (``entry@group``), ``link`` (``"src-dst"``) and ``info``."""
    out: dict = {}
    for rec in records:
        step = out.setdefault(f"step{rec['step']}", {"collective": {}, "p2p": {}})
        step["collective"].setdefault(rec["key"], {})[rec["link"]] = rec["info"]
    return out


# -------------------------------------------------------- one rank: its facts

@dataclass
class RankSpec:
    """What one rank's profiler wrote. Times: task/op/window in ns offsets
    from T0_NS; step breakdown in us; communication analysis in ms."""

    rank: int
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # (id, start, end)
    # (name, op type, core, dtypes, shapes, start, end)
    tasks: list[tuple] = field(default_factory=list)
    # (name, op type, group, start, end)
    comm_ops: list[tuple] = field(default_factory=list)
    # op name -> (ENUM_HCCL_DATA_TYPE id, element count) of its COMMUNICATION_OP row; else FP32 x 1024
    comm_counts: dict[str, tuple[int, float]] = field(default_factory=dict)
    # step -> (computing, not overlapped, overlapped, communication, free, stage, bubble, excl. receive)
    breakdown: dict[int, tuple] = field(default_factory=dict)
    # (step, op, group, start_us, elapse, transit, wait, sync, idle) in ms
    comm_time: list[tuple] = field(default_factory=list)
    # (step, op, group, transport, size_mb, time_ms, bw, large_ratio, {package: (count, dur)})
    comm_band: list[tuple] = field(default_factory=list)
    # (step, op, group, src, dst, transport, size_mb, time_ms, bw)
    links: list[tuple] = field(default_factory=list)
    parallel: dict = field(default_factory=dict)
    world_size: int | None = None
    folder: str | None = None  # the rank folder's name (default: node{rank}_{rank}_20250101_{suffix})
    group_info: dict = field(default_factory=dict)  # profiler_metadata.json's parallel_group_info
    # task index -> (Block Dim, Mix Block Dim) of its kernel row (COMPUTE_TASK_INFO blockNum, mixBlockNum); else (24, 0)
    blocks: dict[int, tuple[int, int]] = field(default_factory=dict)


def sample_rank(rank: int, slow: float = 1.0, pp_receive: float = 0.0) -> RankSpec:
    """A plausible 4-step rank: two kernels and an all-reduce per step."""
    spec = RankSpec(rank=rank)
    step_ns = 10_000_000  # 10 ms windows
    for k in range(4):
        step = k + 1
        s0 = k * step_ns
        spec.steps.append((step, s0, s0 + step_ns))
        mm = int(4_000_000 * slow)
        spec.tasks.append(("MatMul_1", "MatMul", "AI_CORE", "DT_BF16;DT_BF16", "4096,4096;4096,4096",
                           s0 + 100_000, s0 + 100_000 + mm))
        spec.tasks.append(("Add_2", "Add", "AI_VECTOR_CORE", "FLOAT;FLOAT", "4096;4096",
                           s0 + 200_000 + mm, s0 + 700_000 + mm))
        ar_start = s0 + 500_000 + mm
        spec.comm_ops.append((f"hcom_allReduce__{step}_0_1", "hcom_allReduce_", "g1",
                              ar_start, ar_start + 2_000_000))
        computing = (mm + 500_000) / 1000
        comm = 2000.0
        overlapped = 200.0
        exposed = comm - overlapped
        free = 10_000 - computing - exposed
        receive = pp_receive
        spec.breakdown[step] = (computing, exposed, overlapped, comm, free,
                                10_000 - receive, receive, exposed - receive)
        spec.comm_time.append((step, f"hcom_allReduce__{step}_0_1", "g1", (T0_NS + ar_start) / 1000,
                               2.0, 1.2, 0.6 * slow, 0.1, 0.2))
        spec.comm_band.append((step, f"hcom_allReduce__{step}_0_1", "g1", "HCCS", 64.0, 1.2,
                               53.3, 0.9, {"8.0": (6, 0.9), "16.0": (1, 0.3)}))
        spec.comm_band.append((step, f"hcom_allReduce__{step}_0_1", "g1", "RDMA", 0.0, 0.0,
                               0.0, 0.0, {}))
        peer = rank ^ 1
        # one all-reduce a step, as torch_npu writes it: the sum (-total) and the
        # single operators ranked by bandwidth (-top1, -middle, -bottom1), here the same one
        for entry in ("allreduce-top1", "allreduce-middle", "allreduce-bottom1", "allreduce-total"):
            spec.links.append((step, entry, "g1", rank, peer, "HCCS", 32.0, 0.8 * slow, 40.0 / slow))
    return spec


# ------------------------------------------------------------- one rank: text

def _rank_root(parent: Path, spec: RankSpec, suffix: str) -> Path:
    root = _rank_folder(parent, spec.folder or f"node{spec.rank}_{spec.rank}_20250101_{suffix}")
    (root / f"profiler_info_{spec.rank}.json").write_bytes(_dumps({"rank_id": spec.rank}))
    if spec.parallel or spec.world_size or spec.group_info:
        args = {"rank": spec.rank, "world_size": spec.world_size, **spec.parallel}
        meta = {"distributed_args": args, **({"parallel_group_info": spec.group_info} if spec.group_info else {})}
        (root / "profiler_metadata.json").write_bytes(_dumps(meta))
    return root


def write_text(parent: Path, spec: RankSpec, suffix: str = "ascend_pt") -> Path:
    """The text layout of ``spec`` under ``parent``; returns the rank folder."""
    root = _rank_root(parent, spec, suffix)
    out = root / OUT
    lines = [STEP_TRACE_HEADER]
    for step, values in sorted(spec.breakdown.items()):
        lines.append(",".join([str(step)] + [repr(float(v)) for v in values]) + "\n")
    (out / "step_trace_time.csv").write_text("".join(lines))
    rows = [KERNEL_HEADER_READ[:-1] + ",Block Dim,Mix Block Dim\n"]
    for i, (name, op_type, core, dtypes, shapes, start, end) in enumerate(spec.tasks):
        step = _step_of(spec, start)
        blocks, mix = spec.blocks.get(i, (24, 0))
        rows.append(f'{step},{name},{op_type},{core},{(T0_NS + start) / 1000!r},{(end - start) / 1000!r},'
                    f'"{shapes}","{dtypes}",dynamic,{blocks},{mix}\n')
    for name, op_type, _group, start, end in spec.comm_ops:
        step = _step_of(spec, start)
        rows.append(f"{step},{name},{op_type},HCCL,{(T0_NS + start) / 1000!r},{(end - start) / 1000!r},,,N/A,,\n")
    (out / "kernel_details.csv").write_text("".join(rows))
    (out / "communication.json").write_bytes(_dumps(communication(_comm_op_records(spec))))
    (out / "communication_matrix.json").write_bytes(_dumps(matrix(_link_records(spec))))
    return root


def _step_of(spec: RankSpec, start: int) -> int | str:
    for step, s, e in spec.steps:
        if s <= start < e:
            return step
    return ""


def _comm_op_records(spec: RankSpec) -> list[dict]:
    """``spec``'s communication analysis as ``communication()`` takes it."""
    ops: dict[tuple, dict] = {}

    def op(step, name, group) -> dict:
        key = f"{name}@{group}"
        return ops.setdefault((step, key), {"step": step, "cat": "collective", "key": key})

    for step, name, group, start_us, elapse, transit, wait, sync, idle in spec.comm_time:
        op(step, name, group)["time"] = {
            "Start Timestamp(us)": start_us, "Elapse Time(ms)": elapse, "Transit Time(ms)": transit,
            "Wait Time(ms)": wait, "Synchronization Time(ms)": sync, "Idle Time(ms)": idle,
            "Wait Time Ratio": 0.0, "Synchronization Time Ratio": 0.0,
        }
    for step, name, group, transport, size, time, bw, large, dist in spec.comm_band:
        op(step, name, group).setdefault("bands", {})[transport] = {
            "Transit Size(MB)": size, "Transit Time(ms)": time, "Bandwidth(GB/s)": bw,
            "Large Packet Ratio": large, "Size Distribution": {k: list(v) for k, v in dist.items()},
        }
    return list(ops.values())


def _link_records(spec: RankSpec) -> list[dict]:
    """``spec``'s links as ``matrix()`` takes them."""
    return [{"step": step, "key": f"{name}@{group}", "link": f"{src}-{dst}",
             "info": {"Transport Type": transport, "Transit Size(MB)": size, "Transit Time(ms)": time,
                      "Bandwidth(GB/s)": bw, "op_name": name}}
            for step, name, group, src, dst, transport, size, time, bw in spec.links]


# --------------------------------------------------------- one rank: database

PROFILER_TABLES = {
    "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
    "STEP_TIME": "id INTEGER, startNs INTEGER, endNs INTEGER",
    "RANK_DEVICE_MAP": "rankId INTEGER, deviceId INTEGER",
    "META_DATA": "name TEXT, value TEXT",
    "TASK": ("startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, "
             "globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, "
             "streamId INTEGER, taskId INTEGER, modelId INTEGER"),
    "COMPUTE_TASK_INFO": ("name INTEGER, globalTaskId INTEGER, blockNum INTEGER, mixBlockNum INTEGER, "
                          "taskType INTEGER, opType INTEGER, inputFormats INTEGER, "
                          "inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER, "
                          "outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER, "
                          "opState INTEGER, hf32Eligible INTEGER"),
    "COMMUNICATION_OP": ("opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, "
                         "groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, "
                         "dataType INTEGER, algType INTEGER, count NUMERIC, opType INTEGER"),
}
ANALYSIS_TABLES = {
    "StepTraceTime": ("deviceId INTEGER, step TEXT, computing NUMERIC, communication_not_overlapped NUMERIC, "
                      "overlapped NUMERIC, communication NUMERIC, free NUMERIC, stage NUMERIC, "
                      "bubble NUMERIC, communication_not_overlapped_and_exclude_receive NUMERIC, "
                      "preparing NUMERIC"),
    "CommAnalyzerTime": ("hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, elapse_time NUMERIC, "
                         "transit_time NUMERIC, wait_time NUMERIC, synchronization_time NUMERIC, "
                         "idle_time NUMERIC, step TEXT, type TEXT"),
    "CommAnalyzerBandwidth": ("hccl_op_name TEXT, group_name TEXT, transport_type TEXT, "
                              "transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, "
                              "large_packet_ratio NUMERIC, package_size NUMERIC, count NUMERIC, "
                              "total_duration NUMERIC, step TEXT, type TEXT"),
    "CommAnalyzerMatrix": ("hccl_op_name TEXT, group_name TEXT, src_rank TEXT, dst_rank TEXT, "
                           "transport_type TEXT, transit_size NUMERIC, transit_time NUMERIC, "
                           "bandwidth NUMERIC, step TEXT, type TEXT, op_name TEXT"),
}


class _Strings:
    def __init__(self):
        self.ids: dict[str, int] = {}

    def __call__(self, value: str | None) -> int | None:
        if value is None:
            return None
        return self.ids.setdefault(value, len(self.ids) + 1)


def _create(path: Path, schema: dict) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    for table, cols in schema.items():
        con.execute(f"CREATE TABLE {table} ({cols})")
    return con


def write_db(parent: Path, spec: RankSpec, suffix: str = "ascend_pt", analysis: bool = True,
             db_name: str | None = None, comm_analysis: bool = True) -> Path:
    """The database layout of ``spec`` under ``parent``; returns the rank
    folder. ``comm_analysis`` False: analysis.db without its CommAnalyzer
    tables (profiler Level0)."""
    root = _rank_root(parent, spec, suffix)
    out = root / OUT
    name = db_name or (f"ascend_pytorch_profiler_{spec.rank}.db" if suffix == "ascend_pt"
                       else f"ascend_mindspore_profiler_{spec.rank}.db")
    s = _Strings()
    con = _create(out / name, PROFILER_TABLES)
    con.executemany("INSERT INTO STEP_TIME VALUES (?,?,?)",
                    [(i, T0_NS + a, T0_NS + b) for i, a, b in spec.steps])
    con.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?,?)", (spec.rank, spec.rank % 8))
    con.execute("INSERT INTO META_DATA VALUES (?,?)", ("torch_npu_version", "2.5.1"))
    if spec.group_info:
        con.execute("INSERT INTO META_DATA VALUES (?,?)", ("parallel_group_info", json.dumps(spec.group_info)))
    for gid, (tname, op_type, core, dtypes, shapes, start, end) in enumerate(spec.tasks, 1):
        con.execute("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (T0_NS + start, T0_NS + end, spec.rank % 8, gid, gid, 1, s(core), 0, 2, gid, 0))
        con.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (s(tname), gid, *spec.blocks.get(gid - 1, (24, 0)), s(core), s(op_type), s("ND;ND"),
                     s(dtypes), s(shapes),
                     s("ND"), s("FLOAT"), s("4096,4096"), s("N/A"), s("dynamic"), s("NO")))
    for k, (oname, op_type, group, start, end) in enumerate(spec.comm_ops, 1):
        dtype, count = spec.comm_counts.get(oname, (4, 1024))
        con.execute("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (s(oname), T0_NS + start, T0_NS + end, 10_000 + k, s(group), k, 0, 0, dtype,
                     s("MESH-RING"), count, s(op_type)))
    con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(i, v) for v, i in s.ids.items()])
    con.commit()
    con.close()
    if analysis:
        _write_analysis(out / "analysis.db", spec, comm_analysis)
    return root


def _write_analysis(path: Path, spec: RankSpec, comm_analysis: bool = True) -> None:
    con = _create(path, ANALYSIS_TABLES if comm_analysis else {"StepTraceTime": ANALYSIS_TABLES["StepTraceTime"]})
    for step, values in sorted(spec.breakdown.items()):
        con.execute("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (spec.rank % 8, str(step), *values, 0.0))
    for step, op, group, start_us, elapse, transit, wait, sync, idle in spec.comm_time if comm_analysis else ():
        con.execute("INSERT INTO CommAnalyzerTime VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (op, group, start_us, elapse, transit, wait, sync, idle, f"step{step}", "collective"))
    for step, op, group, transport, size, time, bw, large, dist in spec.comm_band if comm_analysis else ():
        packets = list(dist.items()) or [(None, (None, None))]
        for package, (count, duration) in packets:
            con.execute("INSERT INTO CommAnalyzerBandwidth VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (op, group, transport, size, time, bw, large,
                         None if package is None else float(package), count, duration,
                         f"step{step}", "collective"))
    for step, op, group, src, dst, transport, size, time, bw in spec.links if comm_analysis else ():
        con.execute("INSERT INTO CommAnalyzerMatrix VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (op, group, str(src), str(dst), transport, size, time, bw, f"step{step}",
                     "collective", op))
    con.commit()
    con.close()


# ------------------------------------------------- scenarios: what ranks hold

TEMPLATES = [
    OpTemplate("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", "DT_BF16;DT_BF16",
               '8192,4096;4096,4096', 0.42),
    OpTemplate("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
               "FlashAttentionScore", "MIX_AIC", "DT_BF16;DT_BF16;DT_BF16",
               '4,32,2048,128;4,32,2048,128;4,32,2048,128', 0.24),
    OpTemplate("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", "DT_BF16;DT_BF16",
               '8192,4096;8192,4096', 0.08),
    OpTemplate("aclnnRmsNorm_RmsNorm_RmsNorm", "RmsNorm", "AI_VECTOR_CORE", "DT_BF16;DT_FLOAT",
               '8192,4096;4096', 0.08),
    OpTemplate("aclnnSwiGlu_SwiGlu_SwiGlu", "SwiGlu", "AI_VECTOR_CORE", "DT_BF16",
               '8192,22016', 0.10),
    OpTemplate("aclnnCast_CastAiCore_Cast", "Cast", "AI_VECTOR_CORE", "DT_FLOAT", '4096,4096', 0.05),
    OpTemplate("aclnnInplaceCopy_TensorMove_TensorMove", "TensorMove", "AI_VECTOR_CORE", "DT_BF16",
               '8192,4096', 0.03),
]
#: (transport, size class) -> (transit MB per link and op, healthy GB/s)
LINK_SIZES = {("HCCS", "big"): (48.0, 18.0), ("HCCS", "small"): (0.375, 6.0),
              ("RDMA", "big"): (24.0, 11.0), ("RDMA", "small"): (0.375, 3.5),
              ("LOCAL", "big"): (48.0, 50.0), ("LOCAL", "small"): (0.375, 20.0)}


def group_name(sc: Scenario, group: str) -> str:
    """An HCCL-like group name for a generated group label."""
    return f"10.0.{sc.spec.seed % 250}.1%enp189s0f0_60000_{group}_1736413971558972"


def group_id(sc: Scenario, group: str) -> str:
    return double_hash(group_name(sc, group))


def pp_label(sc: Scenario, rank: int) -> str:
    """The generated label of ``rank``'s pipeline-parallel group (its chain
    of stages): ``pp_{position within the stage}``."""
    return f"pp_{rank % (sc.spec.ranks // sc.pp)}"


def folder_name(sc: Scenario, rank: int) -> str:
    host = rank // sc.ranks_per_host
    return f"node{host}_{20000 + rank}_20250101120000{rank % 1000:03d}_ascend_pt"


# -------------------------------------------------------- scenarios: metadata

def _profiler_info(rank: int, export_type: str = "text", level: int = 1) -> dict:
    return {
        "config": {
            "common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                              "schedule": {"wait": 1, "warmup": 1, "active": 20, "repeat": 1,
                                           "skip_first": 10},
                              "record_shapes": True, "profile_memory": False, "with_stack": False,
                              "with_flops": False, "with_modules": False},
            "experimental_config": {"_profiler_level": f"Level{level}", "_aic_metrics": "PipeUtilization",
                                    "_l2_cache": False, "_data_simplification": True,
                                    "_export_type": [export_type]},
        },
        "start_info": {"syscnt_enable": True, "freq": 100.0, "start_cnt": 4417316573894,
                       "start_monotonic": 4417316573894000},
        "end_info": {"collectionTimeEnd": 1736413999000000000, "MonotonicTimeEnd": 4445316573894000},
        "torch_npu_version": "2.1.0.post8",
        "cann_version": "8.0.RC3",
        "rank_id": rank,
    }


def _metadata(sc: Scenario, rank: int) -> dict:
    R = sc.spec.ranks
    groups = {}
    ranks = sc.group_ranks(rank)
    groups[group_name(sc, f"dp_{sc.stage_of(rank)}")] = {
        "group_name": "dp", "group_rank": ranks.index(rank), "global_ranks": ranks}
    if sc.pp > 1:
        per = R // sc.pp
        chain = [s * per + rank % per for s in range(sc.pp)]
        groups[group_name(sc, pp_label(sc, rank))] = {
            "group_name": "pp", "group_rank": chain.index(rank), "global_ranks": chain}
    return {
        "distributed_args": {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": sc.pp,
                             "data_parallel_size": R // sc.pp, "context_parallel_size": 1,
                             "expert_model_parallel_size": 1, "sequence_parallel": False,
                             "world_size": R, "rank": rank},
        "parallel_group_info": groups,
        "ENV_VARIABLES": {"ASCEND_GLOBAL_LOG_LEVEL": "3", "HCCL_RDMA_TC": "", "HCCL_RDMA_SL": ""},
    }


# ----------------------------------------------------------- scenarios: files

def _step_trace(sc: Scenario, r: int) -> str:
    comp, exposed = sc.computing[:, r], sc.exposed[:, r]
    cols = np.column_stack([
        comp, exposed, sc.overlapped[:, r], sc.communication[:, r], sc.free[:, r],
        sc.duration[:, r] - sc.bubble[:, r], sc.bubble[:, r], exposed - sc.bubble[:, r]])
    lines = [STEP_TRACE_HEADER]
    for s, row in zip(sc.step_ids, cols):
        lines.append(f"{s}," + ",".join(f"{v:.3f}" for v in row) + "\n")
    return "".join(lines)


def _kernels(sc: Scenario, r: int, per_step: int) -> str:
    k = layout(sc, r, TEMPLATES, per_step)
    rows = [KERNEL_HEADER]
    task = 1000
    for i in range(len(k.start)):
        t = TEMPLATES[k.template[i]]
        task += 1
        d = k.dur[i]
        aic = t.core in ("AI_CORE", "MIX_AIC")
        rows.append(
            f'{k.step[i]},4294967295,{task},2,{t.name},{t.type},dynamic,{t.core},'
            f'"{k.start[i]:.3f}\t",{d:.3f},{0.9 + (task % 7) * 0.1:.3f},{24 if aic else 48},0,NO,'
            f'"""{t.shapes}""",{t.dtypes},ND;ND,"""8192,4096""",DT_BF16,ND,N/A,'
            f'{d * 0.98 if aic else 0:.3f},{int(d * 1850) if aic else 0},{0.82 if aic else 0},'
            f'{0 if aic else d * 0.97:.3f},{0 if aic else int(d * 1850)},{0 if aic else 0.61}\n')
    for j, s in enumerate(sc.step_ids):
        rows.append(f'{s},4294967295,N/A,N/A,hcom_allReduce__{600 + j}_{s}_1,hcom_allReduce_,N/A,HCCL,'
                    f'"{k.ar_start[j]:.3f}\t",{k.ar_dur[j]:.3f},{sc.wait[j, r]:.3f},0,N/A,N/A,N/A,N/A,'
                    'N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A\n')
        if k.recv_dur[j] > 0:
            rows.append(f'{s},4294967295,N/A,N/A,hcom_receive__{700 + j}_{s}_1,hcom_receive_,N/A,HCCL,'
                        f'"{k.recv_start[j]:.3f}\t",{k.recv_dur[j]:.3f},{k.recv_dur[j]:.3f},0,N/A,N/A,'
                        'N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A\n')
    return "".join(rows)


def _bw(size: float, time: float, dist: dict | None = None) -> dict:
    return {"Transit Size(MB)": round(size, 6), "Transit Time(ms)": round(time, 6),
            "Bandwidth(GB/s)": round(size / time, 4) if time > 0 else 0,
            "Large Packet Ratio": 0.95 if size > 1 else 0.0, "Size Distribution": dist or {}}


def _op_gbps(sc: Scenario, r: int, transport: str) -> float:
    """The bandwidth rank ``r``'s operators reach on ``transport``: a healthy
    link's (``LINK_SIZES``) times the mean factor of the rank's links of that
    type (a slow link or a slow link type lowers it)."""
    factors = [lk.factor for lk in sc.links if lk.src == r and lk.transport == transport]
    return LINK_SIZES[(transport, "big")][1] * (float(np.mean(factors)) if factors else 1.0)


def _beside_compute(begin_us: float, span_ms: float, compute_end_us: float) -> bool:
    """Whether most of an operator's span lies before the end of its step's compute."""
    return compute_end_us - begin_us >= 500.0 * span_ms


def comm_ops(sc: Scenario, r: int) -> list[dict]:
    """Communication operators of rank ``r``: dicts with step, key, category,
    time info (ms) and bandwidth info per transport. Each transport's time is
    its bytes over the bandwidth the rank's links reach (``_op_gbps``),
    lowered by ``Scenario.contention`` for operators beside compute; SDMA is
    the sum of HCCS, PCIE and SIO, as the profilers write it."""
    ops = []
    hosts_in_group = len({x // sc.ranks_per_host for x in sc.group_ranks(r)})
    gid = group_id(sc, f"dp_{sc.stage_of(r)}")
    hccs_gbps, rdma_gbps = _op_gbps(sc, r, "HCCS"), _op_gbps(sc, r, "RDMA")
    for j, s in enumerate(sc.step_ids):
        t = sc.transfer[j] / 1000
        w = sc.wait[j, r] / 1000
        start = sc.start_us[j] + sc.data_wait[j, r] + sc.bubble[j, r] + sc.computing[j, r] - sc.overlapped[j, r]
        compute_end = start + sc.overlapped[j, r]
        transit = 0.9 * t
        n = sc.buckets
        mine = sc.retransmit.get((j, r), 0.0)
        for b in range(1, n + 1):  # bucket b: 1/n of the bytes and time; the first waits for the peers
            tb, wb = t / n, (w if b == 1 else 0.0)
            xb = transit / n
            begin = start if b == 1 else start + 1000 * (w + (b - 1) * tb)
            slow = sc.contention if _beside_compute(begin, tb + wb, compute_end) else 1.0
            hccs = 350.0 / n / (hccs_gbps * slow)
            rdma = 180.0 / n / rdma_gbps + (mine if b == 1 else 0.0)  # contention: the SDMA engines
            packets = (175, 90) if n == 1 else (175 / n, 90 / n)  # counts as written before buckets
            bands = {"HCCS": _bw(350.0 / n, hccs, {"2.0": [packets[0], hccs]}),
                     "RDMA": (_bw(180.0 / n, rdma, {"2.0": [packets[1], rdma]})
                              if hosts_in_group > 1 else _bw(0, 0)),
                     "PCIE": _bw(0, 0), "SDMA": _bw(350.0 / n, hccs)}
            ops.append({"step": int(s), "cat": "collective", "key": f"hcom_allReduce__{600 + j}_{s}_{b}@{gid}",
                        "time": {"Start Timestamp(us)": round(float(begin), 3), "Elapse Time(ms)": tb + wb,
                                 "Transit Time(ms)": xb, "Wait Time(ms)": wb + 0.002,
                                 "Synchronization Time(ms)": 0.8 * wb, "Idle Time(ms)": tb + wb - xb,
                                 "Wait Time Ratio": round(wb / (wb + xb), 4),
                                 "Synchronization Time Ratio": round(0.8 * wb / (0.8 * wb + xb), 4)},
                        "bands": bands})
        stuck = max((ms for (jj, _), ms in sc.retransmit.items() if jj == j), default=0.0)
        small = 0.02 * (t - stuck)
        ops.append({"step": int(s), "cat": "collective", "key": f"hcom_allReduce__{800 + j}_{s}_1@{gid}",
                    "time": {"Start Timestamp(us)": round(float(start) - 5000.0, 3), "Elapse Time(ms)": small,
                             "Transit Time(ms)": 0.8 * small, "Wait Time(ms)": 0.001,
                             "Synchronization Time(ms)": 0.0005, "Idle Time(ms)": 0.2 * small,
                             "Wait Time Ratio": 0.001, "Synchronization Time Ratio": 0.0005},
                    "bands": {"HCCS": _bw(3.0, 0.6 * small), "RDMA": _bw(0, 0), "PCIE": _bw(0, 0),
                              "SDMA": _bw(3.0, 0.6 * small)}})
        if sc.pp > 1 and sc.bubble[j, r] > 0:
            pid = group_id(sc, pp_label(sc, r))
            b = sc.bubble[j, r] / 1000
            ops.append({"step": int(s), "cat": "p2p", "key": f"hcom_receive__{700 + j}_{s}_1@{pid}",
                        "time": {"Start Timestamp(us)": round(float(sc.start_us[j] + sc.data_wait[j, r]), 3),
                                 "Elapse Time(ms)": b, "Transit Time(ms)": 0.05 * b, "Wait Time(ms)": 0.95 * b,
                                 "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.0,
                                 "Wait Time Ratio": 0.95, "Synchronization Time Ratio": 0.0},
                        "bands": {"HCCS": _bw(16.0, 16.0 / hccs_gbps), "RDMA": _bw(0, 0), "PCIE": _bw(0, 0),
                                  "SDMA": _bw(16.0, 16.0 / hccs_gbps)}})
    return ops


def link_records(sc: Scenario, r: int) -> list[dict]:
    """Matrix records of the links whose source is ``r`` (group-local ranks)."""
    rng = np.random.default_rng([sc.spec.seed, r, 11])
    gid = group_id(sc, f"dp_{sc.stage_of(r)}")
    mine: list[Link] = [lk for lk in sc.links if lk.src == r]
    out = []
    n = sc.buckets
    for j, s in enumerate(sc.step_ids):
        ops = [("big", f"hcom_allReduce__{600 + j}_{s}_{b}", n) for b in range(1, n + 1)]
        for size_class, op, parts in (*ops, ("small", f"hcom_allReduce__{800 + j}_{s}_1", 1)):
            for lk in mine:
                size0, bw0 = LINK_SIZES[(lk.transport, size_class)]
                size = size0 / parts * float(1 + rng.normal(0, 0.03))
                bw = bw0 * lk.factor * float(1 + rng.normal(0, 0.04))
                took = size / bw
                if lk.transport == "RDMA" and op.endswith(f"_{s}_1") and size_class == "big":
                    took += sc.retransmit.get((j, r), 0.0)  # the retransmitted transfer
                    bw = size / took
                out.append({"step": int(s), "key": f"{op}@{gid}", "link": f"{lk.local_src}-{lk.local_dst}",
                            "info": {"Transport Type": lk.transport, "Transit Size(MB)": round(size, 6),
                                     "Transit Time(ms)": round(took, 6),
                                     "Bandwidth(GB/s)": round(bw, 4), "op_name": op},
                            "src": lk.src, "dst": lk.dst, "local": (lk.local_src, lk.local_dst)})
    return out


def integrated(records: list[dict]) -> list[dict]:
    """Matrix records as torch_npu and MindSpore write them: not one entry
    per operator but, per step, collective type, group and link, the sum
    over the operators (``allreduce-total``) and single operators ranked by
    bandwidth (``-top1``, ``-middle``, ``-bottom1``, and ``-bottom2`` /
    ``-bottom3`` with two / three operators or more)."""
    per_link: dict[tuple, list[dict]] = {}
    for rec in records:
        gid = rec["key"].partition("@")[2]
        per_link.setdefault((rec["step"], gid, rec["link"]), []).append(rec)
    out = []
    for (_, gid, _), recs in per_link.items():
        recs = sorted(recs, key=lambda r: r["info"]["Bandwidth(GB/s)"], reverse=True)
        size = sum(r["info"]["Transit Size(MB)"] for r in recs)
        time = sum(r["info"]["Transit Time(ms)"] for r in recs)
        total = {**recs[0], "info": {"Transport Type": recs[0]["info"]["Transport Type"],
                                     "Transit Size(MB)": round(size, 6), "Transit Time(ms)": round(time, 6),
                                     "Bandwidth(GB/s)": round(size / time, 4)}}
        picks = [("top1", recs[0]), ("middle", recs[len(recs) // 2]), ("bottom1", recs[-1]), ("total", total)]
        picks += [("bottom2", recs[-2])] if len(recs) >= 2 else []
        picks += [("bottom3", recs[-3])] if len(recs) >= 3 else []
        out += [{**rec, "key": f"allreduce-{role}@{gid}"} for role, rec in picks]
    return out


#: Gradient bytes (MB) of a scenario's all-reduce: half the 350 MB its
#: communication.json records moving over HCCS (a ring all-reduce moves
#: about twice the message).
GRADIENT_MB = 175.0
#: ``ENUM_HCCL_DATA_TYPE`` ids (msprof "Profile Data File Reference (DB)"):
#: BFP16, and N/A, which COMMUNICATION_OP rows carry at Level0.
HCCL_BF16, HCCL_NA = 11, 65534
#: Profiler levels a scenario is written at: torch_npu's ``profiler_level``
#: Level0 (the default) writes no communication analysis
#: (``communication.json``, ``communication_matrix.json``; in the database
#: layout, no ``CommAnalyzer*`` tables), Level1 writes it.
LEVELS = (0, 1)


def write_scenario_text(sc: Scenario, parent: Path, level: int = 1) -> list[Path]:
    """The text layout of every rank under ``parent`` at profiler ``level``
    (``LEVELS``); returns rank folders."""
    folders = []
    for r in range(sc.spec.ranks):
        root = _rank_folder(parent, folder_name(sc, r))
        out = root / OUT
        (root / f"profiler_info_{r}.json").write_bytes(_dumps(_profiler_info(r, level=level)))
        (root / "profiler_metadata.json").write_bytes(_dumps(_metadata(sc, r)))
        (out / "step_trace_time.csv").write_text(_step_trace(sc, r))
        (out / "kernel_details.csv").write_text(_kernels(sc, r, sc.spec.kernels_per_step))
        if level >= 1:
            (out / "communication.json").write_bytes(_dumps(communication(comm_ops(sc, r))))
            (out / "communication_matrix.json").write_bytes(_dumps(matrix(integrated(link_records(sc, r)))))
        folders.append(root)
    return folders


# -------------------------------------------------------- scenarios: database

def write_scenario_db(sc: Scenario, parent: Path, level: int = 1) -> list[Path]:
    """The database layout of every rank (through ``RankSpec``) at profiler
    ``level`` (``LEVELS``)."""
    t0_us = T0_NS / 1000
    base = sc.start_us[0]

    def ns(us: float) -> int:  # absolute us -> ns offset from the writer's T0
        return int(round((us - base) * 1000))

    folders = []
    for r in range(sc.spec.ranks):
        spec = RankSpec(rank=r, world_size=sc.spec.ranks, folder=folder_name(sc, r),
                        parallel={"pp": sc.pp, "dp": sc.spec.ranks // sc.pp, "tp": 1})
        k = layout(sc, r, TEMPLATES, sc.spec.kernels_per_step)
        for j, s in enumerate(sc.step_ids):
            spec.steps.append((int(s), ns(sc.start_us[j]), ns(sc.start_us[j] + sc.duration[j, r])))
        for i in range(len(k.start)):
            t = TEMPLATES[k.template[i]]
            spec.tasks.append((t.name, t.type, t.core, t.dtypes, t.shapes,
                               ns(k.start[i]), ns(k.start[i] + k.dur[i])))
            spec.blocks[i] = (24 if t.core in ("AI_CORE", "MIX_AIC") else 48, 0)  # as the text layout's Block Dim
        gid = group_id(sc, f"dp_{sc.stage_of(r)}")
        for j, s in enumerate(sc.step_ids):
            spec.comm_ops.append((f"hcom_allReduce__{600 + j}_{s}_1", "hcom_allReduce_", gid,
                                  ns(k.ar_start[j]), ns(k.ar_start[j] + k.ar_dur[j])))
            spec.comm_counts[spec.comm_ops[-1][0]] = ((HCCL_BF16, GRADIENT_MB * 1e6 / 2) if level >= 1
                                                      else (HCCL_NA, 0))
            if k.recv_dur[j] > 0:  # the pipeline receive, as kernel_details.csv lists it
                spec.comm_ops.append((f"hcom_receive__{700 + j}_{s}_1", "hcom_receive_",
                                      group_id(sc, pp_label(sc, r)),
                                      ns(k.recv_start[j]), ns(k.recv_start[j] + k.recv_dur[j])))
            exposed = sc.exposed[j, r]
            spec.breakdown[int(s)] = (sc.computing[j, r], exposed, sc.overlapped[j, r],
                                      sc.communication[j, r], sc.free[j, r],
                                      sc.duration[j, r] - sc.bubble[j, r], sc.bubble[j, r],
                                      exposed - sc.bubble[j, r])
        for op in comm_ops(sc, r) if level >= 1 else ():
            name, group = op["key"].split("@")
            ti = op["time"]
            spec.comm_time.append((op["step"], name, group, ti["Start Timestamp(us)"] - base + t0_us,
                                   ti["Elapse Time(ms)"], ti["Transit Time(ms)"], ti["Wait Time(ms)"],
                                   ti["Synchronization Time(ms)"], ti["Idle Time(ms)"]))
            for transport, b in op["bands"].items():
                spec.comm_band.append((op["step"], name, group, transport, b["Transit Size(MB)"],
                                       b["Transit Time(ms)"], b["Bandwidth(GB/s)"],
                                       b["Large Packet Ratio"],
                                       {k2: tuple(v) for k2, v in b["Size Distribution"].items()}))
        for rec in integrated(link_records(sc, r)) if level >= 1 else ():
            name, group = rec["key"].split("@")
            info = rec["info"]
            spec.links.append((rec["step"], name, group, rec["local"][0], rec["local"][1],
                               info["Transport Type"], info["Transit Size(MB)"], info["Transit Time(ms)"],
                               info["Bandwidth(GB/s)"]))
        root = write_db(parent, spec, comm_analysis=level >= 1)
        # the metadata files torch_npu writes beside either layout, as the text layout has them
        (root / f"profiler_info_{r}.json").write_bytes(_dumps(_profiler_info(r, "db", level)))
        (root / "profiler_metadata.json").write_bytes(_dumps(_metadata(sc, r)))
        folders.append(root)
    return folders
