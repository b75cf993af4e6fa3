"""Communication at profiler Level0 (the default): no communication.json.

torch_npu writes ``communication.json`` / ``communication_matrix.json`` only
at ``profiler_level`` Level1 / Level2 (torch_npu
``profiler/experimental_config.py``: ``ProfilerLevel.Level0`` is the
default; ``profiler/analysis/prof_config/_parser_config.py`` runs the
communication parsers from Level1). At Level0 the step trace keeps its
communication columns and ``kernel_details.csv`` its HCCL rows
(``Accelerator Core`` HCCL, ``Name`` ``hcom_allReduce__<id>_<step>_1``, as
bench/scenarios writes them after the torch_npu "kernel_details.csv" field
table). The readers here; whole generated runs at both levels in test_level0_runs.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.collectors.ascend import collector, hccl_rows, tables
from advisor.collectors.parallel import batch_tables

#: kernel_details.csv columns as torch_npu writes them (a subset, in its order)
KERNEL_HEADER = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
                 "Wait Time(us),Block Dim,Input Shapes,Input Data Types,Input Formats\n")



def _rank(tmp_path: Path, kernels: str, step_trace: str | None = None, op_statistic: str | None = None) -> Path:
    out = tmp_path / "node_1_20250101_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out.parent / "profiler_info_3.json").write_text('{"rank_id": 3}')
    if kernels:
        (out / "kernel_details.csv").write_text(KERNEL_HEADER + kernels)
    if step_trace:
        (out / "step_trace_time.csv").write_text(step_trace)
    if op_statistic:
        (out / "op_statistic.csv").write_text(op_statistic)
    return out.parent


STEP_TRACE = ("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
              "Communication(Not Overlapped and Exclude Receive)\n"
              "5,700.0,260.0,10.0,270.0,40.0,1000.0,0,260.0\n")


def test_kernel_hccl_rows_become_comm_rows_with_kinds_and_sizes(tmp_path: Path) -> None:
    """HCCL rows of each family; a row with shapes and dtypes gets its size
    (here 1024 x 1024 BF16 + 256 FLOAT = 2 098 176 bytes)."""
    rows = (
        '5,4294967295,11,2,aclnnMatmul_MatMulV2,MatMulV2,AI_CORE,"100.0\t",700.0,0,24,"""1024,1024""",DT_BF16,ND\n'
        '5,4294967295,N/A,N/A,hcom_allReduce__606_5_1,hcom_allReduce_,HCCL,"800.0\t",200.0,0,0,'
        '"""1024,1024;256""",DT_BF16;FLOAT,ND;ND\n'
        '5,4294967295,N/A,N/A,hcom_allGather__607_5_1,hcom_allGather_,HCCL,"1000.0\t",20.0,0,0,N/A,N/A,N/A\n'
        '5,4294967295,N/A,N/A,hcom_reduceScatter__608_5_1,hcom_reduceScatter_,HCCL,"1020.0\t",20.0,0,0,N/A,N/A,N/A\n'
        '5,4294967295,N/A,N/A,hcom_alltoallv__609_5_1,hcom_alltoallv_,HCCL,"1040.0\t",10.0,0,0,N/A,N/A,N/A\n'
        '5,4294967295,N/A,N/A,hcom_send__610_5_1,hcom_send_,HCCL,"1050.0\t",5.0,0,0,N/A,N/A,N/A\n'
        '5,4294967295,N/A,N/A,hcom_receive__611_5_1,hcom_receive_,HCCL,"1055.0\t",5.0,0,0,N/A,N/A,N/A\n'
        '5,4294967295,N/A,N/A,hcom_broadcast__612_5_1,hcom_broadcast_,HCCL,"1060.0\t",4.0,0,0,N/A,N/A,N/A\n'
    )
    profile = collector.read(_rank(tmp_path, rows, STEP_TRACE))
    comm = profile.comm.set_index("kind")
    assert sorted(comm.index) == sorted(["allreduce", "allgather", "reducescatter", "alltoall", "send",
                                         "receive", "broadcast"])
    assert comm.loc["allreduce", "elapse_us"] == 200.0
    assert comm.loc["allreduce", "size_mb"] == pytest.approx((1024 * 1024 * 2 + 256 * 4) / 1e6)
    assert comm.loc["allgather"].isna()["size_mb"]
    assert set(comm["step"]) == {5} and set(comm["rank"]) == {3}
    assert profile.meta.comm_source == {3: hccl_rows.LEVEL0}
    assert any("Level0" in n for n in profile.meta.notes)


def test_communication_json_wins_over_kernel_rows(tmp_path: Path) -> None:
    """At Level1 the communication analysis is read, not the kernel rows."""
    rows = '5,4294967295,N/A,N/A,hcom_allReduce__606_5_1,hcom_allReduce_,HCCL,"800.0\t",200.0,0,0,N/A,N/A,N/A\n'
    root = _rank(tmp_path, rows, STEP_TRACE)
    (root / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(
        '{"step5": {"collective": {"hcom_allReduce__606_5_1@123": {"Communication Time Info": '
        '{"Start Timestamp(us)": 800.0, "Elapse Time(ms)": 0.25, "Transit Time(ms)": 0.2, '
        '"Wait Time(ms)": 0.05, "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.05}}}}}')
    profile = collector.read(root)
    assert profile.meta.comm_source == {3: hccl_rows.LEVEL1}
    assert profile.comm["elapse_us"].tolist() == [250.0]


def test_op_statistic_hccl_rows_stand_in_without_kernels(tmp_path: Path) -> None:
    """op_statistic.csv (torch_npu: OP Type, Core Type, Count, Total Time(us), ...)."""
    stats = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
             "3,MatMulV2,AI_CORE,40,28000.0,600.0,700.0,800.0,93.0\n"
             "3,hcom_allReduce_,HCCL,8,2000.0,240.0,250.0,260.0,7.0\n")
    profile = collector.read(_rank(tmp_path, "", STEP_TRACE, stats))
    assert profile.comm["kind"].tolist() == ["allreduce"]
    assert profile.comm["ops"].tolist() == [8]
    assert profile.comm["elapse_us"].tolist() == [2000.0]
    assert profile.meta.comm_source == {3: hccl_rows.LEVEL0_OP_STATISTIC}


def test_no_hccl_rows_no_comm(tmp_path: Path) -> None:
    rows = '5,4294967295,11,2,aclnnMatmul_MatMulV2,MatMulV2,AI_CORE,"100.0\t",700.0,0,24,N/A,N/A,N/A\n'
    profile = collector.read(_rank(tmp_path, rows, STEP_TRACE))
    assert profile.comm is None and profile.meta.comm_source == {}


@pytest.mark.parametrize("shapes, dtypes, mb", [
    ('"1024,1024"', "DT_BF16", 2 * 1024 * 1024 / 1e6),
    ("4;4", "FLOAT;INT64", (16 + 32) / 1e6),
    ("N/A", "N/A", None),
    ("4;4", "FLOAT", None),          # counts differ
    ("4", "NOT_A_TYPE", None),
    ("4,x", "FLOAT", None),
])
def test_message_mb(shapes, dtypes, mb) -> None:
    got = hccl_rows.message_mb(shapes, dtypes)
    assert got == (None if mb is None else pytest.approx(mb))


def test_comm_from_kernels_without_step_or_start_columns(tmp_path: Path) -> None:
    """Older kernel_details.csv without Step Id: rows without steps."""
    path = tmp_path / "kernel_details.csv"
    path.write_text("Name,Type,Accelerator Core,Duration(us)\nhcom_allReduce__1_0_1,hcom_allReduce_,HCCL,50.0\n"
                    "MatMul,MatMul,AI_CORE,10.0\n")
    cols = batch_tables.build_one(hccl_rows.comm_from_kernels(tables.kernel_table(path), 0)).to_pydict()
    assert cols["kind"] == ["allreduce"] and cols["elapse_us"] == [50.0]
    assert "step" not in cols or cols["step"] == [None]


def test_db_communication_op_sizes_from_dtype_and_count(tmp_path: Path) -> None:
    """Database layout without CommAnalyzer tables (Level0): COMMUNICATION_OP
    rows; size = count x ENUM_HCCL_DATA_TYPE bytes (msprof "Profile Data File
    Reference (DB)"; msprof-analyze prof_exports/slow_link_export.py), N/A
    (65534) unknown."""
    from bench.scenarios.ascend import HCCL_BF16, HCCL_NA, sample_rank, write_db

    spec = sample_rank(0)
    named = [op[0] for op in spec.comm_ops]
    spec.comm_counts[named[0]] = (HCCL_BF16, 3_000_000)
    for name in named[1:]:
        spec.comm_counts[name] = (HCCL_NA, 0)
    profile = collector.read(write_db(tmp_path, spec, comm_analysis=False))
    assert set(profile.meta.comm_source.values()) == {hccl_rows.LEVEL0}
    sizes = profile.comm.set_index("step")["size_mb"]
    first_step = int(profile.comm["step"].min())
    assert sizes.loc[first_step] == pytest.approx(6.0)
    assert sizes.drop(first_step).isna().all()


@pytest.mark.parametrize("name, size", [("BFP16", 2), ("FP32", 4), ("INT128", 16), ("N/A", None), (None, None)])
def test_hccl_dtype_bytes(name, size) -> None:
    assert hccl_rows.hccl_dtype_bytes(name) == size


def test_rank_read_without_kernels_takes_its_collectives_from_op_statistic(tmp_path: Path) -> None:
    """A large cluster's ranks outside the kernel sample (``kernel_sample``)
    have no kernels read: op_statistic.csv gives their kinds of collective."""
    from advisor.collectors.parallel import arrow_frames

    rows = '5,4294967295,N/A,N/A,hcom_allReduce__606_5_1,hcom_allReduce_,HCCL,"800.0\t",200.0,0,0,N/A,N/A,N/A\n'
    stats = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
             "3,hcom_allReduce_,HCCL,1,200.0,200.0,200.0,200.0,100.0\n")
    profile = arrow_frames.profile_to_pandas(collector.read_arrow(_rank(tmp_path, rows, STEP_TRACE, stats),
                                                                  kernels=False))
    assert profile.ops is None
    assert profile.comm["kind"].tolist() == ["allreduce"] and profile.comm["step"].isna().all()
    assert profile.meta.comm_source == {3: hccl_rows.LEVEL0_OP_STATISTIC}


def test_level0_rows_with_sizes_give_the_bucket_proposal(tmp_path: Path) -> None:
    """Where the HCCL rows carry shapes and dtypes, the gradient size and a
    bucket size follow at Level0: one all-reduce of 4096 x 1024 BF16
    (8.39 MB = 8 MiB) after all compute each step -> buckets of 2 MiB."""
    from advisor.collectors import load_profile
    from advisor.metrics import evaluate

    rows, trace = [], [STEP_TRACE.splitlines()[0] + "\n"]
    for step in range(1, 7):
        t0 = step * 2000.0
        rows.append(f'{step},4294967295,11,2,aclnnMatmul_MatMulV2,MatMulV2,AI_CORE,"{t0}\t",1400.0,0,24,'
                    f'"""1024,1024""",DT_BF16,ND\n')
        rows.append(f'{step},4294967295,N/A,N/A,hcom_allReduce__{600 + step}_{step}_1,hcom_allReduce_,HCCL,'
                    f'"{t0 + 1390}\t",520.0,0,0,"""4096,1024""",DT_BF16,ND\n')
        trace.append(f"{step},1400.0,510.0,10.0,520.0,90.0,2000.0,0,510.0\n")
    profile = load_profile(_rank(tmp_path, "".join(rows), "".join(trace)), jobs=1)
    metrics, _ = evaluate(profile)
    assert metrics["comm.allreduce_layout"].value == "one"
    assert metrics["comm.gradient_mb"].value == pytest.approx(4096 * 1024 * 2 / 1e6, rel=1e-4)
    assert metrics["comm.bucket_cap_mb"].value == 2.0
    assert metrics["comm.exposed_allreduce_ratio"].value == pytest.approx(0.255, abs=0.001)
