"""Tests of the Ascend (torch_npu / MindSpore) text-layout collector.

Real files come from the read-only corpus (``corpus`` fixture, skipped when
absent); they are read in place or symlinked into tmp_path, never copied
into the repository. Small inputs are built in tmp_path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.collectors.ascend import collector as ascend
from advisor.collectors.ascend.comm import read_communication
from advisor.collectors.ascend.tables import kernel_table, ops_from_kernels, read_kernel_details
from advisor.collectors.ascend.trace_view import decode_trace, read_trace
from advisor.collectors.parallel.arrow_frames import to_pandas
from advisor.errors import InputError

MSTT = Path("mstt/test")
OLD_KERNELS = MSTT / "ut/advisor/advisor_backend/compute_advice/kernel_details.csv"
NEW_KERNELS = MSTT / "ut/advisor/compute_advice/data/kernel_details.csv"
TRACE = MSTT / "ut/advisor/advisor_backend/timeline_advice/trace_view.json"
CLUSTER_PARENT = MSTT / "resource/advisor"

STEP_TRACE_HEADER = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
    "Bubble,Communication(Not Overlapped and Exclude Receive)\n"
)


def make_rank(tmp_path: Path, name: str = "node_1_20240101_ascend_pt", rank: int | None = 0,
              files: dict | None = None) -> Path:
    """A rank folder with profiler_info_{rank}.json and the given output files."""
    root = tmp_path / name
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    if rank is not None:
        (root / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
    for fname, content in (files or {}).items():
        target = out / fname
        if isinstance(content, Path):
            target.symlink_to(content)
        elif isinstance(content, (dict, list)):
            target.write_text(json.dumps(content))
        else:
            target.write_text(content)
    return root


def snapshot(folder: Path) -> dict:
    """Every path under ``folder`` with its size and mtime."""
    return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


# ------------------------------------------------------------ real: cluster

def test_cluster_summary_gives_eight_rank_totals(corpus):
    parent = corpus / CLUSTER_PARENT
    assert ascend.discover(parent) == [parent / "cluster_analysis_output"]
    profile = load_profile(parent)
    steps = profile.steps
    assert profile.meta.source_format == "msprof_cluster"
    assert profile.meta.ranks == list(range(8)) and profile.meta.world_size == 8
    assert sorted(steps["rank"]) == list(range(8))  # the Type=stage row is ignored
    assert steps["step"].isna().all() and str(steps["step"].dtype) == "Int64"
    by_rank = steps.set_index("rank")
    assert by_rank["exposed_comm_us"].idxmax() == 5
    assert by_rank["exposed_comm_us"][5] == pytest.approx(756374.86)
    assert by_rank["free_us"].idxmax() == 1
    computing = by_rank["computing_us"]
    assert (computing.max() - computing.min()) / computing.min() < 0.02
    # duration = computing + exposed communication + free, which matches Stage here
    assert by_rank["duration_us"][0] == pytest.approx(80309.687 + 683731.290 + 990605.104, abs=0.01)
    assert by_rank["duration_us"][0] == pytest.approx(by_rank["stage_us"][0], rel=1e-6)


def test_cluster_communication_json(corpus):
    profile = load_profile(corpus / CLUSTER_PARENT)
    comm = profile.comm
    assert len(comm) == 2 and set(comm["rank"]) == {0, 1}  # each rank's two broadcasts summed
    assert set(comm["kind"]) == {"broadcast"} and set(comm["name"]) == {"hcom_broadcast_"}
    assert set(comm["group"]) == {"6297232067196334501"} and comm["ops"].tolist() == [2, 2]
    ops = read_communication(corpus / CLUSTER_PARENT / "cluster_analysis_output" / "cluster_communication.json",
                             None)[0].to_pandas()
    first = ops[(ops["rank"] == 0) & (ops["name"] == "hcom_broadcast__501_0")].iloc[0]
    assert first["elapse_us"] == pytest.approx(121736.94384375)  # 121.7 ms -> us, as the file's record
    row = comm[comm["rank"] == 0].iloc[0]
    mine = ops[ops["rank"] == 0]
    for col in ("elapse_us", "wait_us", "idle_us"):
        assert row[col] == pytest.approx(mine[col].sum())
    assert row["start_us"] == pytest.approx(mine["start_us"].min())
    bw = profile.bandwidth
    assert "RDMA" not in set(bw["transport"])  # all-zero transports are not rows
    # rolled up per rank, step, kind, transport and size class: rank 0's two
    # broadcasts over HCCS (0.063936 MB in 0.02367 ms, 0.000056 MB in 0.00113 ms)
    hccs = bw[(bw["rank"] == 0) & (bw["kind"] == "broadcast") & (bw["transport"] == "HCCS")]
    assert hccs["ops"].sum() == 2 and sorted(hccs["size_class"]) == [-15, -4]  # floor(log2(MB)) each
    assert hccs["size_mb"].sum() == pytest.approx(0.063936 + 0.000056)
    assert hccs["time_ms"].sum() == pytest.approx(0.02367 + 0.00113, rel=1e-4)
    big = hccs[hccs["size_class"] == -4]
    assert big["bandwidth_gbps"].item() == pytest.approx(0.063936 / 0.02367, rel=1e-3)
    records = read_communication(corpus / CLUSTER_PARENT / "cluster_analysis_output" / "cluster_communication.json",
                                 None)[1].to_pandas()
    by_transport = records.groupby(["rank", "transport"])[["size_mb", "time_ms"]].sum()
    rolled = bw.groupby(["rank", "transport"])[["size_mb", "time_ms"]].sum()
    assert len(rolled) == len(by_transport)
    assert rolled.sort_index().to_numpy() == pytest.approx(by_transport.sort_index().to_numpy())


# -------------------------------------------------------- real: kernel CSVs

def test_old_kernel_details_columns_parse(corpus):
    kernels = read_kernel_details(corpus / OLD_KERNELS)
    assert len(kernels) == 591
    assert "op_state" not in kernels  # the older set has no OP State: stays absent
    assert kernels["duration_us"].sum() == pytest.approx(396807.04)
    ops = to_pandas("ops", ops_from_kernels(kernel_table(corpus / OLD_KERNELS), rank=0))
    assert ops["count"].sum() == 591
    assert (ops["core"] == "HCCL").sum() == 19
    top = ops.iloc[0]
    assert top["name"] == "hcom_broadcast__445_0" and top["total_us"] == pytest.approx(308926.68)
    assert pd.isna(top["input_dtypes"])  # "N/A" is missing, not a dtype
    matmul = ops[ops["name"] == "MatMul104"].iloc[0]
    assert matmul["input_dtypes"] == "FLOAT16;FLOAT16"
    assert matmul["input_shapes"] == "4096,12288;6144,12288"
    assert matmul["count"] == 2 and matmul["max_us"] == pytest.approx(2051.28)


def test_new_kernel_details_tab_timestamps_and_bf16(corpus):
    kernels = read_kernel_details(corpus / NEW_KERNELS)
    assert len(kernels) == 29
    assert kernels["start_us"].dtype == "float64" and kernels["start_us"].notna().all()
    assert kernels["start_us"].iloc[0] == pytest.approx(1736413971558972.912, abs=0.01)
    assert set(kernels["step"].dropna()) == {19}
    dtypes = set(kernels["input_dtypes"].dropna())
    assert "BF16;BF16" in dtypes
    assert not any("DT_" in d for d in dtypes)
    ops = to_pandas("ops", ops_from_kernels(kernel_table(corpus / NEW_KERNELS), rank=0))
    assert ops.iloc[0]["type"] == "FlashAttentionScoreGrad" and ops.iloc[0]["core"] == "MIX_AIC"
    assert ops.iloc[0]["total_us"] == pytest.approx(3038.44)


def test_normalize_dtypes():
    from advisor.collectors.vocab import dtype_text

    written = ["DT_BF16;DT_BF16", "float16", "DT_FLOAT", "BFLOAT16;INT32", None]
    assert [dtype_text(t) for t in written] == ["BF16;BF16", "FLOAT16", "FLOAT", "BF16;INT32", None]


# ------------------------------------------------------------- real: trace

def test_trace_overlap_lanes_give_step_breakdown(corpus):
    facts = read_trace(decode_trace(corpus / TRACE))
    assert facts.device == "ascend" and facts.has_step_markers
    steps = facts.steps
    assert len(steps) == 1 and steps["step"].iloc[0] == 1
    row = steps.iloc[0]
    assert row["computing_us"] == pytest.approx(1788.2505)
    assert row["free_us"] == pytest.approx(9481.667)
    assert row["communication_us"] == 0.0 and row["exposed_comm_us"] == 0.0  # lanes declared, empty
    assert row["duration_us"] == pytest.approx(1788.2505 + 9481.667)
    assert row["start_us"] == pytest.approx(1704161511422904.204, abs=0.01)


def test_rank_folder_built_from_corpus_files(corpus, tmp_path):
    root = make_rank(tmp_path, rank=3, files={"trace_view.json": corpus / TRACE,
                                              "kernel_details.csv": corpus / NEW_KERNELS})
    (root / "profiler_metadata.json").write_text(json.dumps(
        {"distributed_args": json.dumps({"tp": 2, "pp": 1, "dp": 4, "world_size": 8})}))
    assert ascend.discover(root) == [root]
    before = snapshot(tmp_path)
    profile = load_profile(root)
    assert snapshot(tmp_path) == before  # nothing written under the input
    meta = profile.meta
    assert (meta.framework, meta.device, meta.source_format) == ("torch_npu", "ascend", "ascend_pt")
    assert meta.ranks == [3] and meta.world_size == 8
    assert meta.parallel == {"tp": 2, "pp": 1, "dp": 4}
    assert profile.steps["rank"].tolist() == [3] and profile.steps["step"].tolist() == [1]
    assert any("Overlap Analysis" in n for n in meta.notes)
    assert set(profile.ops["rank"]) == {3} and profile.ops["count"].sum() == 29


# --------------------------------------------------------- real: MindSpore

def test_mindspore_cpu_output(corpus):
    root = corpus / "mindspore-cpu"
    units = ascend.discover(root)
    assert len(units) == 1 and units[0].name.endswith("_ascend_ms")
    profile = load_profile(root)
    assert profile.meta.framework == "mindspore" and profile.meta.device == "cpu"
    assert profile.steps is None  # no step markers: no invented steps
    assert any("no step markers" in n for n in profile.meta.notes)
    ops = profile.ops
    assert set(ops["core"]) == {"CPU"} and set(ops["rank"]) == {0}
    matmul = ops[ops["name"] == "MatMul"].iloc[0]
    assert matmul["count"] == 15 and matmul["total_us"] == pytest.approx(32492.8)
    assert profile.skipped == []


# ------------------------------------------------------ synthetic: steps

def test_step_trace_with_device_id_column(tmp_path):
    csv = ("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,"
           "Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive)\n"
           "0,1,100.5,20,5,25,10,0,0,15\n"
           "0,2,110,30,0,30,N/A,0,0,30\n")
    root = make_rank(tmp_path, rank=2, files={"step_trace_time.csv": csv})
    steps = load_profile(root).steps
    assert steps["rank"].tolist() == [2, 2] and steps["step"].tolist() == [1, 2]
    assert steps["duration_us"].iloc[0] == pytest.approx(130.5)
    assert pd.isna(steps["duration_us"].iloc[1])  # Free unknown, Stage 0: no duration invented
    assert steps["receive_us"].tolist() == [5.0, 0.0]
    assert "Device_id" not in steps and "device_id" not in steps


def test_device_busy_from_kernels_joins_steps(tmp_path):
    kernels = ("Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us)\n"
               '1,A,MatMul,AI_CORE,"0\t",10,0\n'
               '1,B,Add,AI_VECTOR_CORE,"5\t",15,1\n'
               '2,A,MatMul,AI_CORE,"100\t",10,N/A\n'
               '2,C,Cast,AI_CPU,"120\t",5,2\n')
    steps = STEP_TRACE_HEADER + "1,20,0,0,0,5,25,0,0\n2,15,0,0,0,10,25,0,0\n"
    root = make_rank(tmp_path, files={"kernel_details.csv": kernels, "step_trace_time.csv": steps})
    profile = load_profile(root)
    assert profile.steps["device_busy_us"].tolist() == [20.0, 15.0]
    ops = profile.ops.set_index("name")
    assert ops.loc["A", "count"] == 2 and ops.loc["A", "total_us"] == 20.0
    assert ops.loc["A", "wait_us"] == 0.0  # N/A is not counted as a wait
    assert "input_dtypes" not in profile.ops  # column absent in the file: absent here


@pytest.mark.parametrize("rows", [4, 1200], ids=["small file", "pyarrow-sized file"])
def test_kernels_written_differently_are_one_operator(tmp_path, rows):
    """Spaces, quotes, DT_ prefixes, dtype aliases and core case do not split
    an operator, whichever reader path the file size picks."""
    header = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Input Shapes,Input Data Types\n"
    variants = ['1,A,MatMul,AI_CORE,0,2,"""4,4""",DT_FLOAT16\n',
                '1, A ,MatMul,ai_core,3,2,"""4,4""",FLOAT16\n',
                '1,"A",MatMul , AI_CORE,6,2," ""4,4"" ",fp16\n',
                '1,B,Cast,AI_CPU,9,1,N/A,N/A\n']
    body = "".join(variants[i % 4] for i in range(rows))
    root = make_rank(tmp_path, files={"kernel_details.csv": header + body})
    assert ((root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").stat().st_size > 32 * 1024) == (rows > 4)
    ops = load_profile(root).ops
    assert ops["name"].tolist() == ["A", "B"]
    a, b = ops.iloc[0], ops.iloc[1]
    assert (a["type"], a["core"], a["input_shapes"], a["input_dtypes"]) == ("MatMul", "AI_CORE", "4,4", "FLOAT16")
    assert a["count"] == rows // 4 * 3 and a["total_us"] == 2.0 * (rows // 4 * 3)
    assert a["max_us"] == a["min_us"] == 2.0
    assert pd.isna(b["input_shapes"]) and pd.isna(b["input_dtypes"]) and b["count"] == rows // 4


def test_junk_numeric_cells_become_nan(tmp_path):
    csv = STEP_TRACE_HEADER + "1,12abc,1,0,1,2,13,0,1\n2,10,1,0,1,2,13,?,1\n"
    steps = load_profile(make_rank(tmp_path, files={"step_trace_time.csv": csv})).steps
    assert pd.isna(steps["computing_us"].iloc[0]) and steps["computing_us"].iloc[1] == 10.0
    assert steps["duration_us"].tolist() == [13.0, 13.0]  # Stage stands in for the unknown sum


def test_step_trace_bom_and_no_step_id(tmp_path):
    csv = "\ufeff" + STEP_TRACE_HEADER + ",1000,200,50,250,300,1500,0,200\n"
    root = make_rank(tmp_path, files={"step_trace_time.csv": csv})
    steps = load_profile(root).steps
    assert len(steps) == 1 and steps["step"].isna().all()
    assert steps["duration_us"].iloc[0] == 1500.0


def test_trace_with_profiler_steps_used_when_no_step_trace(tmp_path):
    events = [
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Overlap Analysis"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 0, "args": {"name": "Computing"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 1, "args": {"name": "Communication"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 2,
         "args": {"name": "Communication(Not Overlapped)"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 3, "args": {"name": "Free"}},
        {"ph": "X", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": "1000", "dur": "100"},
        {"ph": "X", "name": "ProfilerStep#8", "pid": 1, "tid": 1, "ts": "1100", "dur": "100"},
        {"ph": "X", "name": "Computing", "pid": 9, "tid": 0, "ts": "1010", "dur": "50"},
        {"ph": "X", "name": "Communication", "pid": 9, "tid": 1, "ts": "1040", "dur": "30"},
        {"ph": "X", "name": "Communication(Not Overlapped)", "pid": 9, "tid": 2, "ts": "1060",
         "dur": "10"},
        {"ph": "X", "name": "Free", "pid": 9, "tid": 3, "ts": "1070", "dur": "40"},
        {"ph": "X", "name": "Computing", "pid": 9, "tid": 0, "ts": 1110.0, "dur": 80.0},
        {"ph": "X", "name": "Free", "pid": 9, "tid": 3, "ts": 1190, "dur": 15},
    ]
    root = make_rank(tmp_path, files={"trace_view.json": events})
    steps = load_profile(root).steps.set_index("step")
    assert steps.index.tolist() == [7, 8]
    assert steps.loc[7, "computing_us"] == 50 and steps.loc[7, "exposed_comm_us"] == 10
    assert steps.loc[7, "overlapped_us"] == 20 and steps.loc[7, "duration_us"] == 100
    assert steps.loc[8, "communication_us"] == 0 and steps.loc[8, "duration_us"] == 95


# --------------------------------------------------- synthetic: comm files

COMMUNICATION = {
    "step1": {
        "collective": {
            "hcom_allReduce__123_0@g1": {
                "Communication Time Info": {
                    "Start Timestamp(us)": 1000.5, "Elapse Time(ms)": 2.5, "Transit Time(ms)": 1.0,
                    "Wait Time(ms)": 1.25, "Synchronization Time(ms)": 0.5, "Idel Time(ms)": 0.25,
                    "Wait Time Ratio": 0.55, "Synchronization Time Ratio": 0.33},
                "Communication Bandwidth Info": {
                    "HCCS": {"Transit Size(MB)": 10.0, "Transit Time(ms)": 1.0,
                             "Bandwidth(GB/s)": 10.0, "Large Packet Ratio": 0.5,
                             "Size Distribution": {"1.0": [10, 1.0]}},
                    "RDMA": {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0}}},
            "Total Op Info": {"Communication Time Info": {"Elapse Time(ms)": 2.5}},
        },
        "p2p": {
            "hcom_send__5_0@g2": {"Communication Time Info": {"Elapse Time(ms)": 0.1}},
            "hcom_receive__5_1@g2": {"Communication Time Info": {"Elapse Time(ms)": 0.2}},
        },
    }
}
MATRIX = {
    "step1": {
        "collective": {
            "allreduce-top1@g1": {
                "4-5": {"Transport Type": "HCCS", "Transit Size(MB)": 8, "Transit Time(ms)": 0.5,
                        "Bandwidth(GB/s)": 16, "op_name": "hcom_allReduce__123_0@g1"},
                "6-4": {"Transport Type": "RDMA", "Transit Size(MB)": 2, "Transit Time(ms)": 1,
                        "Bandwidth(GB/s)": 2, "op_name": "hcom_allReduce__123_0@g1"},
            },
            "Total Op Info": {"4-5": {"Transport Type": "HCCS", "Transit Size(MB)": 8}},
        },
        "p2p": {},
    }
}


def test_communication_json_per_rank(tmp_path):
    root = make_rank(tmp_path, rank=4, files={"communication.json": COMMUNICATION})
    profile = load_profile(root)
    comm = profile.comm.set_index("name")  # operator types: instance numbers dropped (comm_rollup)
    assert sorted(comm.index) == ["hcom_allReduce_", "hcom_receive_", "hcom_send_"]
    assert comm.loc["hcom_allReduce_", "kind"] == "allreduce"
    assert comm.loc["hcom_send_", "kind"] == "send"
    assert comm.loc["hcom_receive_", "kind"] == "receive"
    assert comm["ops"].tolist() == [1, 1, 1]
    row = comm.loc["hcom_allReduce_"]
    assert (row["elapse_us"], row["wait_us"], row["idle_us"]) == (2500.0, 1250.0, 250.0)
    assert row["start_us"] == 1000.5 and row["group"] == "g1" and row["step"] == 1
    assert set(profile.comm["rank"]) == {4}
    bw = profile.bandwidth
    assert bw["transport"].tolist() == ["HCCS"] and bw["large_packet_ratio"].tolist() == [0.5]


def test_matrix_gives_links_and_rank(tmp_path):
    root = make_rank(tmp_path, rank=None, files={"communication_matrix.json": MATRIX})
    profile = load_profile(root)
    assert profile.meta.ranks == [4]  # the one rank on every link
    links = profile.links.sort_values("src")
    assert links[["src", "dst"]].values.tolist() == [[4, 5], [6, 4]]
    assert links["transport"].tolist() == ["HCCS", "RDMA"]
    assert links["ops"].tolist() == [1, 1] and "name" not in links  # rolled up (comm_rollup)
    assert links["bandwidth_gbps"].tolist() == [16.0, 2.0]
    assert links["size_class"].tolist() == [3, 1]  # floor(log2(MB)) of 8 and 2 MB


# ------------------------------------------------ synthetic: other files

def test_dataset_csv_gives_data_ops(tmp_path):
    csv = ("Operation,Stage,Occurrences,Avg. time(us),Custom Info\n"
           "MapOp,parallel,100,250.5,\n"
           "BatchOp,,50,N/A,x\n")
    root = make_rank(tmp_path, name="w_1_ascend_ms", files={"dataset.csv": csv})
    profile = load_profile(root)
    assert profile.meta.framework == "mindspore"
    d = profile.data_ops
    assert d["name"].tolist() == ["MapOp", "BatchOp"] and d["count"].tolist() == [100, 50]
    assert d["avg_time_us"].iloc[0] == 250.5 and pd.isna(d["avg_time_us"].iloc[1])
    assert d["stage"].iloc[0] == "parallel" and pd.isna(d["stage"].iloc[1])


def test_op_statistic_fallback(tmp_path):
    csv = ("OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
           "MatMulV2,AI_CORE,10,500.0,40,50,60,80\n"
           "Cast,AI_VECTOR_CORE,4,20.0,5,5,5,20\n")
    profile = load_profile(make_rank(tmp_path, files={"op_statistic.csv": csv}))
    ops = profile.ops
    assert ops["name"].tolist() == ["MatMulV2", "Cast"] and ops["count"].tolist() == [10, 4]
    assert ops["total_us"].tolist() == [500.0, 20.0] and "input_dtypes" not in ops
    assert any("op_statistic" in n for n in profile.meta.notes)


def test_rank_unknown_is_zero_with_note(tmp_path):
    root = make_rank(tmp_path, rank=None,
                     files={"step_trace_time.csv": STEP_TRACE_HEADER + "1,1,1,0,1,1,3,0,1\n"})
    profile = load_profile(root)
    assert profile.meta.ranks == [0]
    assert any("rank id not found" in n for n in profile.meta.notes)


def test_output_folder_itself_reads_parent_metadata(tmp_path):
    root = make_rank(tmp_path, rank=6, files={"step_trace_time.csv": STEP_TRACE_HEADER + "1,1,1,0,1,1,3,0,1\n"})
    out = root / "ASCEND_PROFILER_OUTPUT"
    assert ascend.discover(out) == [out]
    profile = load_profile(out)
    assert profile.meta.ranks == [6] and profile.meta.framework == "torch_npu"


# ------------------------------------------------------ synthetic: cluster

def test_parent_of_rank_folders_sorted_by_rank(tmp_path):
    row = STEP_TRACE_HEADER + "1,10,1,0,1,2,13,0,1\n"
    for rank, name in ((2, "b_ascend_pt"), (0, "c_ascend_pt"), (1, "a_ascend_pt")):
        make_rank(tmp_path, name=name, rank=rank, files={"step_trace_time.csv": row})
    cluster = tmp_path / "cluster_analysis_output"
    cluster.mkdir()
    (cluster / "cluster_step_trace_time.csv").write_text("garbage")
    units = ascend.discover(tmp_path)
    assert [u.name for u in units] == ["c_ascend_pt", "a_ascend_pt", "b_ascend_pt"]
    profile = load_profile(tmp_path)
    assert profile.meta.ranks == [0, 1, 2] and sorted(profile.steps["rank"]) == [0, 1, 2]
    assert profile.meta.source_format == "ascend_pt"


def test_ranks_gathered_per_host_are_found_deeper_down(tmp_path):
    """Copies gathered from several hosts nest the rank folders
    (job/host0/prof/*_ascend_pt); the Kineto collector steps aside for any
    Ascend folder, so the Ascend one must find them."""
    row = STEP_TRACE_HEADER + "1,10,1,0,1,2,13,0,1\n"
    for rank in range(4):
        host = tmp_path / "job" / f"host{rank // 2}" / "prof"
        make_rank(host, name=f"n{rank}_ascend_pt", rank=rank, files={"step_trace_time.csv": row})
    assert [u.name for u in ascend.discover(tmp_path)] == ["n0_ascend_pt", "n1_ascend_pt", "n2_ascend_pt",
                                                          "n3_ascend_pt"]
    assert load_profile(tmp_path).meta.ranks == [0, 1, 2, 3]


def test_renamed_rank_folders_holding_the_output_folder_are_ranks(tmp_path):
    row = STEP_TRACE_HEADER + "1,10,1,0,1,2,13,0,1\n"
    for rank in (1, 0):
        make_rank(tmp_path / "run", name=f"rank{rank}", rank=rank, files={"step_trace_time.csv": row})
    assert [u.name for u in ascend.discover(tmp_path)] == ["rank0", "rank1"]
    assert load_profile(tmp_path).meta.ranks == [0, 1]


def test_a_copy_nested_deeper_is_not_mixed_in(tmp_path):
    row = STEP_TRACE_HEADER + "1,10,1,0,1,2,13,0,1\n"
    make_rank(tmp_path, name="a_ascend_pt", rank=0, files={"step_trace_time.csv": row})
    make_rank(tmp_path / "old" / "copy", name="b_ascend_pt", rank=1, files={"step_trace_time.csv": row})
    assert [u.name for u in ascend.discover(tmp_path)] == ["a_ascend_pt"]


def test_discover_ignores_other_layouts(tmp_path):
    (tmp_path / "x.pt.trace.json").write_text("[]")
    assert ascend.discover(tmp_path) == []
    assert ascend.discover(tmp_path / "x.pt.trace.json") == []


# -------------------------------------------------------- synthetic: errors

def test_truncated_required_csv_names_the_file(tmp_path):
    root = make_rank(tmp_path, files={"step_trace_time.csv": STEP_TRACE_HEADER + "1,100.5,20"})
    with pytest.raises(InputError) as err:
        ascend.read(root)
    assert err.value.path.endswith("step_trace_time.csv")
    assert "truncated" in err.value.problem
    assert "\n" not in str(err.value)


def test_empty_csv_names_the_file(tmp_path):
    root = make_rank(tmp_path, files={"kernel_details.csv": ""})
    with pytest.raises(InputError, match=r"kernel_details\.csv: empty file"):
        load_profile(root)


def test_header_only_csv_is_an_input_error(tmp_path):
    root = make_rank(tmp_path, files={"step_trace_time.csv": STEP_TRACE_HEADER})
    with pytest.raises(InputError) as err:
        ascend.read(root)
    assert err.value.path.endswith("step_trace_time.csv")
    assert err.value.problem == "no step rows"


def test_broken_optional_files_are_skipped(tmp_path):
    root = make_rank(tmp_path, files={
        "step_trace_time.csv": STEP_TRACE_HEADER + "1,10,1,0,1,2,13,0,1\n",
        "communication.json": json.dumps(COMMUNICATION)[:120],
        "kernel_details.csv": "Name,Type,Duration(us)\nA,B,1\nC,D\n",
        "trace_view.json": "[{",
    })
    profile = ascend.read(root)
    assert profile.steps["duration_us"].tolist() == [13.0]
    skipped = {Path(s.what).name: s.reason for s in profile.skipped}
    # the steps do not need the trace; the host calls read from it are skipped with the reason
    assert set(skipped) == {"communication.json", "kernel_details.csv", "trace_view.json"}
    assert "JSON" in skipped["communication.json"]
    assert profile.comm is None and profile.ops is None


def test_missing_required_column(tmp_path):
    root = make_rank(tmp_path, files={"kernel_details.csv": "Name,Type\nA,B\n"})
    with pytest.raises(InputError, match=r"missing required column\(s\): Duration\(us\)"):
        ascend.read(root)


def test_rank_folder_without_output(tmp_path):
    root = tmp_path / "n_ascend_pt"
    (root / "PROF_000001_x").mkdir(parents=True)
    with pytest.raises(InputError, match="no ASCEND_PROFILER_OUTPUT"):
        ascend.read(root)


def test_truncated_trace_only_is_an_input_error(tmp_path):
    root = make_rank(tmp_path, files={"trace_view.json": '[{"ph": "X", "ts": "1'})
    with pytest.raises(InputError) as err:
        ascend.read(root)
    assert err.value.path.endswith("trace_view.json") and "JSON" in err.value.problem


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read unreadable files")
def test_unreadable_file_is_skipped(tmp_path):
    root = make_rank(tmp_path, files={
        "step_trace_time.csv": STEP_TRACE_HEADER + "1,10,1,0,1,2,13,0,1\n",
        "kernel_details.csv": "Name,Duration(us)\nA,1\n"})
    (root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").chmod(0)
    profile = ascend.read(root)
    assert [Path(s.what).name for s in profile.skipped] == ["kernel_details.csv"]
