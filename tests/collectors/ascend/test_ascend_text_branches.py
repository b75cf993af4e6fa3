"""Text-layout reader branches real torch_npu / msprof-analyze output takes.

Shapes from the torch_npu "Performance data files" reference
(kernel_details.csv, op_statistic.csv) and msprof-analyze's cluster files
(``cluster_analyse/analysis/step_trace_time_analysis.py`` writes Type
``rank`` and ``stage`` rows; ``comm_matrix_analysis.py`` the matrix):
kernels launched before the first step marker carry an empty Step Id;
a kernel whose Duration is not recorded; op_statistic.csv of versions
without the Core Type column; a cluster matrix that holds no link.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.collectors.ascend import collector, tables

STEP_TRACE = ("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
              "Communication(Not Overlapped and Exclude Receive)\n"
              "1,700.0,0.0,0.0,0.0,300.0,1000.0,0,0.0\n")
KERNELS = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"


def _rank(tmp_path: Path, **files: str) -> Path:
    out = tmp_path / "n_1_2_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out.parent / "profiler_info_0.json").write_text('{"rank_id": 0}')
    for name, text in files.items():
        (out / name.replace("_csv", ".csv").replace("_json", ".json")).write_text(text)
    return out.parent


def test_kernels_before_the_first_step_are_left_out_of_device_busy(tmp_path: Path) -> None:
    kernels = KERNELS + (",Warmup,Warmup,AI_CORE,10.0,500.0\n"          # no step yet
                         "1,MatMul,MatMul,AI_CORE,1000.0,400.0\n"
                         "1,Add,Add,AI_VECTOR_CORE,1300.0,300.0\n")      # overlaps MatMul: union 600
    profile = collector.read(_rank(tmp_path, step_trace_time_csv=STEP_TRACE, kernel_details_csv=kernels))
    assert profile.steps.set_index("step").loc[1, "device_busy_us"] == pytest.approx(600.0)
    assert set(profile.ops["name"]) == {"Warmup", "MatMul", "Add"}


def test_kernel_without_a_duration_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(KERNELS + "1,MatMul,MatMul,AI_CORE,1000.0,400.0\n1,Odd,Odd,AI_CORE,1500.0,N/A\n")
    assert tables.kernel_table(path).column("name").to_pylist() == ["MatMul"]


def test_kernels_that_all_lack_a_duration_are_no_kernels(tmp_path: Path) -> None:
    profile = collector.read(_rank(tmp_path, step_trace_time_csv=STEP_TRACE,
                                   kernel_details_csv=KERNELS + "1,Odd,Odd,AI_CORE,1500.0,\n"))
    assert profile.ops is None and profile.skipped and "no kernel rows" in profile.skipped[0].reason


def test_op_statistic_without_core_type(tmp_path: Path) -> None:
    stats = "OP Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\nMatMul,4,800.0,200,200,200,100\n"
    profile = collector.read(_rank(tmp_path, step_trace_time_csv=STEP_TRACE, op_statistic_csv=stats))
    assert profile.ops["name"].tolist() == ["MatMul"] and "core" not in profile.ops.columns
    assert any("op_statistic.csv" in note for note in profile.meta.notes)


def test_cluster_matrix_without_links_is_a_skip_beside_the_step_trace(tmp_path: Path) -> None:
    folder = tmp_path / "cluster_analysis_output"
    folder.mkdir()
    (folder / "cluster_step_trace_time.csv").write_text(
        "Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
        "Communication(Not Overlapped and Exclude Receive)\n"
        ",rank,0,700,100,0,100,200,1000,0,100\n,rank,1,750,50,0,50,200,1000,0,50\n,stage,\"(0, 1)\",725,75,0,75,200,1000,0,75\n")
    (folder / "cluster_communication_matrix.json").write_text('{"(0, 1)": {"step1": {}}}')
    profile = collector.read(folder)
    assert sorted(profile.steps["rank"]) == [0, 1]
    assert profile.links is None
    assert [s.reason for s in profile.skipped] == ["no src-dst link records found"]


def test_cluster_step_trace_with_only_stage_rows_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cluster_step_trace_time.csv"
    path.write_text("Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,Communication,Free\n"
                    ",stage,\"(0, 1)\",725,75,0,75,200\n")
    with pytest.raises(Exception, match="no Type=rank rows"):
        tables.read_cluster_step_trace(path)
