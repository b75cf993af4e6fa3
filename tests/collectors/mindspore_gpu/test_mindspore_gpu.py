"""MindSpore GPU (CUPTI) ``profiler/`` folders: steps, operators, MindData
files and the verdicts they support.

The folders are written by ``gpu_folder`` in the layout the MindSpore
sources write (each file's source is cited there: ``gpu_data_saver.h/.cc``,
``data_saver.h``, ``step_trace_parser.py`` ``GpuStepTraceParser``,
``dataset_profiling.cc`` ``GetNextProfiling``, ``minddata_pipeline_parser.py``).
"""

from __future__ import annotations

from dataclasses import replace

import gpu_folder as gf
import pytest

from advisor.collectors import load_profile
from advisor.collectors.mindinsight import collector as mindinsight
from advisor.collectors.mindspore_gpu import collector as gpu
from advisor.errors import InputError

#: An input-bound float32 run: 45 of 100 ms between steps, empty queues
#: after a 2-worker map op, SIMT float32 GEMM and convolution kernels.
INPUT_BOUND = gf.GpuRun()
#: The same network fed fast and run in float16 on tensor cores.
HEALTHY = gf.GpuRun(
    interval_ms=1.5, fp_bp_ms=40.0, tail_ms=5.0, kernels=gf.FP16_KERNELS,
    pipeline=((0, "Batch", 8, None, None), (1, "Map", 8, 0.9, 0), (2, "ImageFolder", 8, 0.95, 1)),
    getnext_sizes=[60] * 10, host_queue_sizes=[62] * 10,
)


def test_input_bound_folder_gives_steps_operators_and_data(tmp_path):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND)
    profile = load_profile(folder, jobs=1)
    meta = profile.meta
    assert (meta.framework, meta.device, meta.source_format, meta.device_model) == (
        "mindspore", "gpu", "mindspore_gpu", None)
    assert meta.source_version == "2.2.14" and meta.world_size == 1
    steps = profile.steps
    assert steps["step"].tolist() == list(range(1, 11))  # the '-' mean row is no step
    assert steps["duration_us"].tolist() == [100_000.0] * 10
    assert steps["iteration_interval_us"].tolist() == [45_000.0] * 10
    assert steps["fp_bp_us"].tolist() == [48_000.0] * 10
    assert steps["tail_us"].tolist() == [7_000.0] * 10
    ops = profile.ops
    assert set(ops["core"]) == {"GPU"} and set(ops["type"]) == {"compute"}
    sgemm = ops[ops["name"] == "volta_sgemm_128x64_nn"].iloc[0]
    assert (sgemm["count"], sgemm["total_us"]) == (20, 90_000.0)
    assert ops["name"].str.contains("implicit_convolve_sgemm<float, float, 128").any()  # commas kept
    data_ops = profile.data_ops.set_index("op_id")
    assert data_ops.loc[1, "name"] == "Map" and data_ops.loc[1, "workers"] == 2
    assert data_ops.loc[2, "parent_id"] == 1
    queue = profile.data_queue
    device = queue[queue["queue"] == "device"]
    assert device["size"].tolist() == [32.0] + [0.0] * 9
    # GetNext timestamps are ns: the first sample is the first step's start in us
    assert device["time_us"].iloc[0] == pytest.approx(gf.T0_NS / 1000.0)
    assert len(queue[queue["queue"] == "host"]) == 10
    assert profile.skipped == []
    assert gpu.IDLE_NOTE in meta.notes  # why the device-idle checks are not judged


def test_summary_rows_are_not_steps(tmp_path):
    """The GPU step trace ends with a mean row numbered '-'; a row numbered
    0 (older writers' summary) is not a step either."""
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND, txt_trace=None)
    path = folder / "step_trace_raw_0_detail_time.csv"
    lines = path.read_text().splitlines()
    assert lines[-1].startswith("-,")
    path.write_text("\n".join(lines[:-1] + ["0" + lines[-1][1:], "0,0,0,0,0,0,0,0,0"]) + "\n")
    steps = load_profile(folder, jobs=1).steps
    assert steps["step"].tolist() == list(range(1, 11))
    assert steps["duration_us"].min() == 100_000.0


def test_only_summary_rows_is_an_error_naming_the_file(tmp_path):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND, txt_trace=None)
    path = folder / "step_trace_raw_0_detail_time.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[-1]]) + "\n")
    with pytest.raises(InputError, match="step_trace_raw_0_detail_time.csv.*no step rows"):
        load_profile(folder, jobs=1)


@pytest.mark.parametrize("form", ["point", "step"])
def test_profiler_text_step_trace_gives_the_same_steps(tmp_path, form):
    """Without the CSV, ``step_trace_profiling`` (either form) gives the
    steps GpuStepTraceParser would: the per-step form exactly; the per-point
    form starts the first step at its forward start (no earlier point) and
    each later one where the previous iteration-end op starts (50 us before
    the previous step's end in these files)."""
    run = replace(INPUT_BOUND, allreduce_ms=3.0)
    folder = gf.write(tmp_path / "profiler", run, csv_trace=False, txt_trace=form)
    profile = load_profile(folder, jobs=1)
    steps = profile.steps
    assert steps["step"].tolist() == list(range(1, 11))
    assert steps["fp_bp_us"].tolist() == [48_000.0] * 10
    assert steps["tail_us"].tolist() == [7_000.0] * 10
    if form == "step":
        assert steps["duration_us"].tolist() == [100_000.0] * 10
        assert steps["iteration_interval_us"].tolist() == [45_000.0] * 10
    else:
        assert steps["duration_us"].tolist() == [55_000.0] + [100_050.0] * 9
        assert steps["iteration_interval_us"].tolist() == [0.0] + [45_050.0] * 9
    comm = profile.comm
    assert set(comm["kind"]) == {"allreduce"} and len(comm) == 10
    assert comm["elapse_us"].tolist() == [3_000.0] * 10


def test_csv_step_trace_allreduce_columns_become_comm(tmp_path):
    folder = gf.write(tmp_path / "profiler", replace(INPUT_BOUND, allreduce_ms=2.5), txt_trace=None)
    comm = load_profile(folder, jobs=1).comm
    assert comm["elapse_us"].tolist() == [2_500.0] * 10 and set(comm["kind"]) == {"allreduce"}


def test_multi_device_folder_and_rank_folders(tmp_path):
    """Every process of a multi-card job writes into one folder, naming its
    files by rank; per-rank folders are read alike."""
    shared = tmp_path / "shared" / "profiler"
    gf.write(shared, replace(INPUT_BOUND, dev=0))
    gf.write(shared, replace(HEALTHY, dev=1))
    units = gpu.discover(shared.parent)
    assert [u.name for u in units] == ["gpu_op_detail_info_0.csv", "gpu_op_detail_info_1.csv"]
    profile = load_profile(shared.parent, jobs=1)
    assert profile.meta.ranks == [0, 1]
    per_rank = profile.steps.groupby("rank")["iteration_interval_us"].mean()
    assert per_rank.to_dict() == {0: 45_000.0, 1: 1_500.0}
    assert profile.skipped == []
    for rank in (0, 1):
        gf.write(tmp_path / "job" / f"rank_{rank}" / "profiler", replace(INPUT_BOUND, dev=rank))
    assert load_profile(tmp_path / "job", jobs=1).meta.ranks == [0, 1]


def test_mindinsight_reader_leaves_gpu_files_alone(tmp_path):
    """The step-trace and MindData files the two layouts share belong to the
    GPU device: the MindInsight reader claims neither the folder nor a file."""
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND)
    assert mindinsight.discover(folder) == []
    assert mindinsight.discover(folder / "step_trace_raw_0_detail_time.csv") == []
    assert mindinsight.discover(folder / "minddata_pipeline_raw_0.csv") == []
    # an Ascend rank beside it (another id) is still MindInsight's
    (folder / "step_trace_raw_5_detail_time.csv").write_text(
        (folder / "step_trace_raw_0_detail_time.csv").read_text())
    assert [u.name for u in mindinsight.discover(folder)] == ["step_trace_raw_5_detail_time.csv"]


def test_operator_detail_when_kernel_file_is_missing(tmp_path):
    """Without gpu_activity_data the framework ops are the operators, timed
    by their kernels' device time (cuda_activity_cost_time)."""
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND)
    (folder / "gpu_activity_data_0.csv").unlink()
    ops = load_profile(folder, jobs=1).ops.set_index("name")
    assert ops.loc["MatMul-op2", "type"] == "MatMul"
    assert ops.loc["MatMul-op2", "total_us"] == pytest.approx(90_000.0)
    assert ops.loc["Conv2D-op107", "count"] == 10


def test_operator_types_when_only_the_type_file_is_left(tmp_path):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND)
    (folder / "gpu_activity_data_0.csv").unlink()
    (folder / "gpu_op_detail_info_0.csv").unlink()
    profile = load_profile(folder, jobs=1)
    assert set(profile.ops["name"]) == {"MatMul", "Conv2D", "BatchNorm", "ApplyMomentum"}
    assert any("measured on the host" in n for n in profile.meta.notes)
