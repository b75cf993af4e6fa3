"""MindSpore / MindInsight ``profiler/`` collector: the guide's three tuning
cases (examples/) read back with the guide's numbers, plus bad inputs."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.collectors.mindinsight import collector as mindinsight
from advisor.errors import InputError

CASES = (
    "resnet50_data_bound",
    "resnet50_data_fixed",
    "vgg16_fp32",
    "vgg16_fp16",
    "resnet50_8p_allreduce_tail",
    "resnet50_8p_overlapped",
)


def _load(examples: Path, case: str):
    path = examples / case
    if not path.is_dir():
        pytest.skip(f"example {case} not generated (python examples/make_tuning_cases.py)")
    return load_profile(path)


def _ms(series: pd.Series) -> float:
    return float(series.mean()) / 1000.0


# ------------------------------------------------------------- the examples


@pytest.mark.parametrize("case", CASES)
def test_examples_read_cleanly(examples, case):
    profile = _load(examples, case)
    assert profile.meta.framework == "mindspore"
    assert profile.meta.device == "ascend"
    assert profile.meta.source_format == "mindinsight"
    assert profile.skipped == []
    steps = profile.steps
    assert steps is not None and {"rank", "step", "duration_us", "iteration_interval_us"} <= set(steps.columns)
    assert steps["step"].dtype == "Int64" and steps["step"].notna().all()  # average row dropped
    assert (steps["duration_us"] > 0).all()


@pytest.mark.parametrize("case", CASES)
def test_examples_are_small(examples, case):
    folder = examples / case
    if not folder.is_dir():
        pytest.skip("example not generated")
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    assert size < 150 * 1024


def test_case1_data_bound_step_trace(examples):
    steps = _load(examples, "resnet50_data_bound").steps
    assert _ms(steps["duration_us"]) == pytest.approx(90.0, abs=0.05)
    assert _ms(steps["iteration_interval_us"]) == pytest.approx(72.8, abs=0.05)
    # phases add up to the step
    parts = steps["iteration_interval_us"] + steps["fp_bp_us"] + steps["tail_us"]
    assert (parts - steps["duration_us"]).abs().max() < 0.1


def test_case1_pipeline_map_is_the_bottleneck(examples):
    ops = _load(examples, "resnet50_data_bound").data_ops.set_index("op_id")
    assert ops.loc[3, "name"] == "MapOp"
    assert ops.loc[3, "workers"] == 1
    # queue before MapOp_3 (its child's output) is full, queues after it are empty
    assert ops.loc[4, "output_queue_usage"] > 0.9
    for op_id in (3, 2, 1):
        assert ops.loc[op_id, "output_queue_usage"] < 0.1
    assert ops.loc[3, "parent_id"] == 2 and pd.isna(ops.loc[0, "parent_id"])
    assert ops.loc[3, "output_queue_capacity"] == 16


def test_case1_queues_drain_after_warmup(examples):
    queue = _load(examples, "resnet50_data_bound").data_queue
    for name in ("device", "host"):
        q = queue[queue["queue"] == name].sort_values("index")
        assert q["size"].iloc[0] > 0  # prefetched during graph compile
        after = q[q["index"] > 5]
        assert (after["size"] == 0).mean() > 0.9
    host = queue[queue["queue"] == "host"]
    assert (host["capacity"] == 16).all() and host["time_us"].notna().all()


def test_case1_fixed(examples):
    profile = _load(examples, "resnet50_data_fixed")
    steps = profile.steps
    assert _ms(steps["duration_us"]) == pytest.approx(18.07, abs=0.02)
    assert _ms(steps["iteration_interval_us"]) == pytest.approx(0.25, abs=0.01)
    ops = profile.data_ops.set_index("op_id")
    assert ops.loc[3, "workers"] == 12
    assert ops.loc[3, "output_queue_usage"] > 0.5
    device = profile.data_queue[profile.data_queue["queue"] == "device"]
    assert (device["size"] == 0).mean() < 0.05


def _matmul_share(profile) -> float:
    ops = profile.ops
    return float(ops.loc[ops["type"] == "MatMul", "total_us"].sum() / ops["total_us"].sum())


def test_case2_vgg16_fp32(examples):
    profile = _load(examples, "vgg16_fp32")
    steps = profile.steps
    assert _ms(steps["duration_us"]) == pytest.approx(113.79, abs=0.02)
    assert _ms(steps["fp_bp_us"]) == pytest.approx(82.45, abs=0.02)  # inference: forward only
    assert "tail_us" not in steps  # the inference trace has no BP point
    ops = profile.ops
    assert {"name", "type", "core", "count", "total_us", "input_dtypes", "input_shapes"} <= set(ops.columns)
    matmul = ops[ops["type"] == "MatMul"]
    assert len(matmul) == 3 and (matmul["input_dtypes"] == "FLOAT;FLOAT").all()
    assert _matmul_share(profile) > 0.5
    top = ops.groupby("type")["total_us"].sum().idxmax()
    assert top == "MatMul"
    assert (ops["count"] == 30).all()
    assert "32,25088;4096,25088" in set(matmul["input_shapes"])


def test_case2_vgg16_fp16(examples):
    profile = _load(examples, "vgg16_fp16")
    assert _ms(profile.steps["fp_bp_us"]) == pytest.approx(16.89, abs=0.02)
    ops = profile.ops
    assert (ops.loc[ops["type"] == "MatMul", "input_dtypes"] == "FLOAT16;FLOAT16").all()
    assert _matmul_share(profile) < 0.25


def test_case3_allreduce_tail(examples):
    profile = _load(examples, "resnet50_8p_allreduce_tail")
    steps = profile.steps
    assert profile.meta.ranks == list(range(8))
    assert profile.meta.world_size == 8
    assert sorted(steps["rank"].unique()) == list(range(8))
    assert _ms(steps["duration_us"]) == pytest.approx(23.6, abs=0.02)
    assert _ms(steps["tail_us"]) == pytest.approx(6.15, abs=0.02)
    comm = profile.comm
    assert set(comm["kind"]) == {"allreduce"}
    assert comm["name"].nunique() == 1
    assert comm["tensor_count"].max() == 160
    assert sorted(comm["rank"].unique()) == list(range(8))
    # the all-reduce starts after the BP point: inside the tail
    s0 = steps[steps["rank"] == 0].set_index("step")
    c0 = comm[comm["rank"] == 0].set_index("step")
    bp_end = s0["start_us"] + s0["iteration_interval_us"] + s0["fp_bp_us"]
    assert (c0["start_us"] >= bp_end.loc[c0.index] - 1e-6).all()
    assert _ms(c0["elapse_us"]) == pytest.approx(5.23, abs=0.05)


def test_case3_overlapped(examples):
    profile = _load(examples, "resnet50_8p_overlapped")
    steps = profile.steps
    assert _ms(steps["tail_us"]) < 1.5
    assert _ms(steps["duration_us"]) == pytest.approx(18.0, abs=0.05)
    comm = profile.comm
    counts = comm[comm["rank"] == 0].groupby("name")["tensor_count"].first()
    assert sorted(counts.tolist()) == [40, 55, 65] and counts.sum() == 160


# ------------------------------------------------------------- discovery


def test_discover_flat_cluster_folder(examples):
    folder = examples / "resnet50_8p_allreduce_tail"
    if not folder.is_dir():
        pytest.skip("example not generated")
    units = mindinsight.discover(folder)
    assert [u.name for u in units] == [f"step_trace_raw_{r}_detail_time.csv" for r in range(8)]


def test_discover_ignores_other_layouts(tmp_path):
    (tmp_path / "trace.pt.trace.json").write_text("{}")
    (tmp_path / "x_ascend_pt").mkdir()
    (tmp_path / "x_ascend_pt" / "step_trace_raw_0_detail_time.csv").write_text("step_num,total\n1,5\n")
    assert mindinsight.discover(tmp_path) == []


def test_old_cluster_layout_uses_rank_folders(tmp_path, examples):
    src = examples / "resnet50_data_fixed" / "profiler" / "step_trace_raw_0_detail_time.csv"
    if not src.is_file():
        pytest.skip("example not generated")
    for rank in (1, 2):  # MindInsight r1.3: cluster_profiler/{rank}/profiler/..._0_...
        dst = tmp_path / "cluster_profiler" / str(rank) / "profiler"
        dst.mkdir(parents=True)
        shutil.copy(src, dst / src.name)
    profile = load_profile(tmp_path)
    assert profile.meta.ranks == [1, 2]
    assert sorted(profile.steps["rank"].unique()) == [1, 2]


# ------------------------------------------------------------- formats


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


STEP_HEADER = "step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,fp_and_bp,tail\n"


def _step_trace(folder: Path, rank: int = 0) -> Path:
    rows = [
        "1,1000000,3000000,2000000,1000000,2500000,0,1500000,500000",
        "2,3000000,5100000,2100000,3100000,4600000,100000,1500000,500000",
        "-,2000000,4050000,2050000,2050000,3550000,50000,1500000,500000",
    ]
    return _write(folder / f"step_trace_raw_{rank}_detail_time.csv", STEP_HEADER + "\n".join(rows) + "\n")


def test_step_trace_ticks_are_10ns(tmp_path):
    _step_trace(tmp_path)
    steps = load_profile(tmp_path).steps
    assert steps["step"].tolist() == [1, 2]
    assert steps["duration_us"].tolist() == [20000.0, 21000.0]  # 2e6 ticks * 10 ns
    assert steps["iteration_interval_us"].tolist() == [0.0, 1000.0]
    assert steps["tail_us"].tolist() == [5000.0, 5000.0]


def test_inference_step_trace(tmp_path):
    _write(
        tmp_path / "step_trace_raw_0_detail_time.csv",
        "step_num,start_point,end_point,total,fp_point,iteration_interval,fp\n"
        "1,100,900,800,100,0,800\n2,900,1900,1000,1100,200,800\n-,500,1400,900,600,100,800\n",
    )
    steps = load_profile(tmp_path).steps
    assert steps["fp_bp_us"].tolist() == [8.0, 8.0]
    assert "tail_us" not in steps


def test_pipeline_json_when_no_csv(tmp_path):
    _step_trace(tmp_path)
    info = {
        "sampling_interval": 10,
        "op_info": [
            {"op_id": 0, "op_type": "DeviceQueueOp", "num_workers": 1, "metrics": None, "children": [1]},
            {"op_id": 1, "op_type": "BatchOp", "num_workers": 1,
             "metrics": {"output_queue": {"size": [0, 1, 0, 1], "length": 8}}, "children": [2]},
            {"op_id": 2, "op_type": "TFReaderOp", "num_workers": 4,
             "metrics": {"output_queue": {"size": [8, 8, 8, 8], "length": 8}}, "children": None},
        ],
    }
    _write(tmp_path / "pipeline_profiling_0.json", json.dumps(info))
    ops = load_profile(tmp_path).data_ops.set_index("op_id")
    assert ops.loc[1, "output_queue_usage"] == pytest.approx(0.0625)
    assert ops.loc[2, "output_queue_usage"] == 1.0 and ops.loc[2, "workers"] == 4
    assert ops.loc[2, "parent_id"] == 1 and pd.isna(ops.loc[0, "parent_id"])


def test_dataset_iterator_four_field_records(tmp_path):
    _step_trace(tmp_path)
    _write(tmp_path / "dataset_iterator_profiling_0.txt", "1 64 1 5\n1 64 2 0\n0 0 2 7\n")
    queue = load_profile(tmp_path).data_queue
    assert queue["queue"].tolist() == ["host", "host"]
    assert queue["size"].tolist() == [5.0, 0.0] and "time_us" not in queue


def test_ops_of_the_2x_layout(tmp_path):
    _step_trace(tmp_path)
    _write(
        tmp_path / "aicore_intermediate_0_detail.csv",
        "full_op_name,task_duration,execution_frequency,task_type\n"
        "Default/MatMul-op1,100.0,4,AI_CORE\nDefault/Cast-op2,5.0,4,AI_VECTOR_CORE\n",
    )
    op_info = json.dumps({"Input_0": {"format": "ND", "data_type": "DTFLOAT16", "shape": "8,16"},
                          "Input_1": {"format": "ND", "data_type": "DTFLOAT16", "shape": "16,4"}})
    with open(tmp_path / "framework_raw_0.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["task_id", "stream_id", "block_dim", "full_op_name", "op_name", "op_type", "subgraph",
                         "op_info", "model_id", "kernel_type"])
        writer.writerow([1, 2, 8, "Default/MatMul-op1", "MatMul-op1", "MatMul", "Default", op_info, 1, "AI_CORE"])
    ops = load_profile(tmp_path).ops.set_index("name")
    assert ops.loc["MatMul-op1", "total_us"] == 400.0 and ops.loc["MatMul-op1", "count"] == 4
    assert ops.loc["MatMul-op1", "input_dtypes"] == "FLOAT16;FLOAT16"
    assert ops.loc["MatMul-op1", "input_shapes"] == "8,16;16,4"
    assert ops.loc["Cast-op2", "core"] == "AI_VECTOR_CORE" and ops.loc["Cast-op2", "type"] == "Cast"


# ------------------------------------------------------------- bad input


def test_truncated_step_trace_is_an_input_error(tmp_path):
    path = _write(tmp_path / "step_trace_raw_0_detail_time.csv", STEP_HEADER + "1,1000000,3000000,2000000,10\n")
    with pytest.raises(InputError) as err:
        load_profile(tmp_path)
    assert err.value.path == str(path)
    assert "\n" not in str(err.value)


def test_header_only_step_trace_is_an_input_error(tmp_path):
    _write(tmp_path / "step_trace_raw_0_detail_time.csv", STEP_HEADER)
    with pytest.raises(InputError, match="step_trace_raw_0_detail_time.csv"):
        load_profile(tmp_path)


def test_broken_optional_files_are_skipped(tmp_path):
    _step_trace(tmp_path)
    bad_csv = _write(tmp_path / "minddata_pipeline_raw_0.csv", "op_id,op_type,num_workers\n0,DeviceQueueOp\n")
    bad_txt = _write(tmp_path / "device_queue_profiling_0.txt", "1 16 1 3 1700\n1 16\n")
    bad_json = _write(tmp_path / "profiler_info_0.json", '{"rank_size": 8')
    _write(tmp_path / "minddata_aicpu_0.txt", "node_name start_time end_time queue_size\nGetNext_dequeue_wait 1 2 4\n")
    profile = load_profile(tmp_path)
    skipped = {s.what for s in profile.skipped}
    assert {str(bad_csv), str(bad_txt), str(bad_json)} <= skipped
    assert len(profile.steps) == 2  # the rest still read
    assert profile.data_queue["queue"].tolist() == ["device"]
    assert profile.data_ops is None


def test_broken_csv_falls_back_to_json(tmp_path):
    _step_trace(tmp_path)
    _write(tmp_path / "minddata_pipeline_raw_0.csv", "")
    _write(tmp_path / "pipeline_profiling_0.json", json.dumps(
        {"sampling_interval": 10, "op_info": [{"op_id": 0, "op_type": "DeviceQueueOp", "num_workers": 1}]}))
    profile = load_profile(tmp_path)
    assert profile.data_ops["name"].tolist() == ["DeviceQueueOp"]
    assert len(profile.skipped) == 1


def test_only_broken_files_is_an_input_error(tmp_path):
    _write(tmp_path / "minddata_pipeline_raw_0.csv", "op_id,op_type\n0,DeviceQueueOp,extra,cells\n")
    with pytest.raises(InputError):
        load_profile(tmp_path)


def test_reader_never_writes(tmp_path, examples):
    src = examples / "resnet50_8p_allreduce_tail"
    if not src.is_dir():
        pytest.skip("example not generated")
    dst = tmp_path / "case"
    shutil.copytree(src, dst)
    dst.chmod(0o555)
    for sub in dst.rglob("*"):
        sub.chmod(0o555 if sub.is_dir() else 0o444)
    try:
        before = sorted(p.name for p in dst.rglob("*"))
        load_profile(dst)
        assert sorted(p.name for p in dst.rglob("*")) == before
    finally:
        for sub in [dst, *dst.rglob("*")]:
            sub.chmod(0o755 if sub.is_dir() else 0o644)
