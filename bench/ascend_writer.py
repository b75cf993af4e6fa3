"""Small Ascend rank folders for tests, in the text and in the database layout.

One ``RankSpec`` describes a rank (step windows, compute tasks, communication
operators, step breakdown, communication analysis); ``write_text`` and
``write_db`` write the same facts as ``step_trace_time.csv``,
``kernel_details.csv``, ``communication.json``, ``communication_matrix.json``
or as ``ascend_pytorch_profiler_{rank}.db`` + ``analysis.db``.

Database table and column names are the real ones, as torch_npu writes them:
torch_npu ``profiler/analysis/prof_common_func/_constant.py``
(``DbConstant``, ``TableColumnsManager``: STRING_IDS, STEP_TIME, RANK_DEVICE_MAP,
META_DATA, StepTraceTime, CommAnalyzerTime, CommAnalyzerBandwidth,
CommAnalyzerMatrix) and ``prof_db_parse/_trace_step_time_db_parser.py``
(StepTraceTime gains a leading ``deviceId``); TASK, COMPUTE_TASK_INFO and
COMMUNICATION_OP columns from msprof's "Profile Data File Reference (DB)"
(docs/en/user_guide/profile_data_file_references_db.md) and msprof-analyze's
``prof_exports`` queries (compute_op_sum_export.py, hccl_sum_export.py,
cluster_time_summary_export.py).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

STEP_TRACE_HEADER = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
    "Bubble,Communication(Not Overlapped and Exclude Receive)\n"
)
KERNEL_HEADER = ("Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
                 "Input Shapes,Input Data Types\n")
T0_NS = 1_700_000_000_000_000_000


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


# ------------------------------------------------------------------- text

def _rank_root(parent: Path, spec: RankSpec, suffix: str) -> Path:
    root = parent / (spec.folder or f"node{spec.rank}_{spec.rank}_20250101_{suffix}")
    (root / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    info = {"rank_id": spec.rank}
    (root / f"profiler_info_{spec.rank}.json").write_text(json.dumps(info))
    if spec.parallel or spec.world_size or spec.group_info:
        args = {"rank": spec.rank, "world_size": spec.world_size, **spec.parallel}
        meta = {"distributed_args": args, **({"parallel_group_info": spec.group_info} if spec.group_info else {})}
        (root / "profiler_metadata.json").write_text(json.dumps(meta))
    return root


def write_text(parent: Path, spec: RankSpec, suffix: str = "ascend_pt") -> Path:
    """The text layout of ``spec`` under ``parent``; returns the rank folder."""
    root = _rank_root(parent, spec, suffix)
    out = root / "ASCEND_PROFILER_OUTPUT"
    lines = [STEP_TRACE_HEADER]
    for step, values in sorted(spec.breakdown.items()):
        lines.append(",".join([str(step)] + [repr(float(v)) for v in values]) + "\n")
    (out / "step_trace_time.csv").write_text("".join(lines))
    rows = [KERNEL_HEADER]
    for name, op_type, core, dtypes, shapes, start, end in spec.tasks:
        step = _step_of(spec, start)
        rows.append(f'{step},{name},{op_type},{core},{(T0_NS + start) / 1000!r},{(end - start) / 1000!r},'
                    f'"{shapes}","{dtypes}"\n')
    for name, op_type, _group, start, end in spec.comm_ops:
        step = _step_of(spec, start)
        rows.append(f"{step},{name},{op_type},HCCL,{(T0_NS + start) / 1000!r},{(end - start) / 1000!r},,\n")
    (out / "kernel_details.csv").write_text("".join(rows))
    (out / "communication.json").write_text(json.dumps(_communication_json(spec)))
    (out / "communication_matrix.json").write_text(json.dumps(_matrix_json(spec)))
    return root


def _step_of(spec: RankSpec, start: int) -> int | str:
    for step, s, e in spec.steps:
        if s <= start < e:
            return step
    return ""


def _communication_json(spec: RankSpec) -> dict:
    out: dict = {}
    for step, op, group, start_us, elapse, transit, wait, sync, idle in spec.comm_time:
        rec = out.setdefault(f"step{step}", {}).setdefault("collective", {}).setdefault(f"{op}@{group}", {})
        rec["Communication Time Info"] = {
            "Start Timestamp(us)": start_us, "Elapse Time(ms)": elapse, "Transit Time(ms)": transit,
            "Wait Time(ms)": wait, "Synchronization Time(ms)": sync, "Idle Time(ms)": idle,
            "Wait Time Ratio": 0.0, "Synchronization Time Ratio": 0.0,
        }
    for step, op, group, transport, size, time, bw, large, dist in spec.comm_band:
        rec = out.setdefault(f"step{step}", {}).setdefault("collective", {}).setdefault(f"{op}@{group}", {})
        rec.setdefault("Communication Bandwidth Info", {})[transport] = {
            "Transit Size(MB)": size, "Transit Time(ms)": time, "Bandwidth(GB/s)": bw,
            "Large Packet Ratio": large, "Size Distribution": {k: list(v) for k, v in dist.items()},
        }
    return out


def _matrix_json(spec: RankSpec) -> dict:
    out: dict = {}
    for step, op, group, src, dst, transport, size, time, bw in spec.links:
        ops = out.setdefault(f"step{step}", {}).setdefault("collective", {})
        ops.setdefault(f"{op}@{group}", {})[f"{src}-{dst}"] = {
            "Transport Type": transport, "Transit Size(MB)": size, "Transit Time(ms)": time,
            "Bandwidth(GB/s)": bw, "op_name": op,
        }
    return out


# --------------------------------------------------------------- database

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
             db_name: str | None = None) -> Path:
    """The database layout of ``spec`` under ``parent``; returns the rank folder."""
    root = _rank_root(parent, spec, suffix)
    out = root / "ASCEND_PROFILER_OUTPUT"
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
                    (s(tname), gid, 24, 0, s(core), s(op_type), s("ND;ND"), s(dtypes), s(shapes),
                     s("ND"), s("FLOAT"), s("4096,4096"), s("N/A"), s("static"), s("NO")))
    for k, (oname, op_type, group, start, end) in enumerate(spec.comm_ops, 1):
        con.execute("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (s(oname), T0_NS + start, T0_NS + end, 10_000 + k, s(group), k, 0, 0, 4,
                     s("MESH-RING"), 1024, s(op_type)))
    con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(i, v) for v, i in s.ids.items()])
    con.commit()
    con.close()
    if analysis:
        _write_analysis(out / "analysis.db", spec)
    return root


def _write_analysis(path: Path, spec: RankSpec) -> None:
    con = _create(path, ANALYSIS_TABLES)
    for step, values in sorted(spec.breakdown.items()):
        con.execute("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (spec.rank % 8, str(step), *values, 0.0))
    for step, op, group, start_us, elapse, transit, wait, sync, idle in spec.comm_time:
        con.execute("INSERT INTO CommAnalyzerTime VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (op, group, start_us, elapse, transit, wait, sync, idle, f"step{step}", "collective"))
    for step, op, group, transport, size, time, bw, large, dist in spec.comm_band:
        packets = list(dist.items()) or [(None, (None, None))]
        for package, (count, duration) in packets:
            con.execute("INSERT INTO CommAnalyzerBandwidth VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (op, group, transport, size, time, bw, large,
                         None if package is None else float(package), count, duration,
                         f"step{step}", "collective"))
    for step, op, group, src, dst, transport, size, time, bw in spec.links:
        con.execute("INSERT INTO CommAnalyzerMatrix VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (op, group, str(src), str(dst), transport, size, time, bw, f"step{step}",
                     "collective", op))
    con.commit()
    con.close()
