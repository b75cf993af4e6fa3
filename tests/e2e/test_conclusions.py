"""The verdicts a good advisor reaches on real and rebuilt profiles.

Corpus conclusions come from ../shared/corpus/README.md; the tuning cases are
the three worked cases of the MindSpore performance-tuning guide, rebuilt in
the real MindInsight file formats under examples/ (make_tuning_cases.py).
"""

from __future__ import annotations

import pytest

from advisor.model import SEVERITY_ORDER
from advisor.pipeline import analyze


def _by_rule(report):
    return {f.rule: f for f in report.all_findings()}


def _serious(report):
    return [f.rule for f in report.all_findings() if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["medium"]]


# --- the MindSpore tuning guide's three cases -------------------------------------------

def test_resnet50_data_bound_is_input_bound_with_slow_map_op(examples):
    report = analyze(examples / "resnet50_data_bound")
    found = _by_rule(report)
    assert report.findings[0].rule in {"input-bound", "slow-dataset-op"}
    assert found["input-bound"].severity == "critical"
    assert 85 <= report.metrics["step.time_ms"].value <= 95
    assert 70 <= report.metrics["step.iteration_interval_ms"].value <= 76
    assert report.metrics["data.queue_empty_ratio"].value >= 0.9
    op = found["slow-dataset-op"]
    assert op.scope.ops == ["MapOp_3"]
    assert "num_parallel_workers=1" in op.message
    assert "num_parallel_workers=12" in op.fix.code  # the guide's fix
    usage = report.metrics["data.op_queue_usage"].value
    assert usage["ImageFolderOp_4"] > 0.9 and usage["MapOp_3"] < 0.1
    assert op.fix.framework == "mindspore"
    assert op.estimated_gain_ms == pytest.approx(report.metrics["step.iteration_interval_ms"].value, abs=0.01)


def test_vgg16_fp32_is_fp32_compute_with_fp16_fix(examples):
    report = analyze(examples / "vgg16_fp32")
    fp32 = _by_rule(report)["fp32-compute"]
    assert fp32.severity in {"high", "critical"}
    assert report.metrics["step.fp_bp_ms"].value == pytest.approx(82.45, rel=0.02)
    assert report.metrics["ops.fp32_matrix_ratio"].value > 0.5
    assert "amp.auto_mixed_precision(network, amp_level=\"O2\")" in fp32.fix.code
    assert 0 < fp32.estimated_gain_ms <= fp32.time_at_stake_ms < report.metrics["step.time_ms"].value


def test_resnet50_8p_tail_is_exposed_allreduce_with_split(examples):
    report = analyze(examples / "resnet50_8p_allreduce_tail")
    assert report.run.ranks == list(range(8))
    ar = _by_rule(report)["exposed-allreduce"]
    assert report.metrics["step.tail_ms"].value == pytest.approx(6.15, rel=0.02)
    assert report.metrics["comm.allreduce_tensor_count"].value == 160
    split = report.metrics["comm.fusion_split"].value
    assert split[-1] == 160 and 0 < split[0] < 160
    assert f"all_reduce_fusion_config={split}" in ar.fix.code
    assert ar.severity == "high"  # 26% of the step at stake
    # a fusion split hides part of the tail (the guide: 6.15 -> 4.20 ms)
    assert 1.0 <= ar.estimated_gain_ms <= 3.0


@pytest.mark.parametrize("case", ["resnet50_data_fixed", "vgg16_fp16", "resnet50_8p_overlapped"])
def test_healthy_counterparts_have_no_serious_finding(examples, case):
    report = analyze(examples / case)
    assert _serious(report) == []
    assert report.metrics["step.time_ms"].value < 20


# --- real profiler outputs (../shared/corpus) --------------------------------------------

def test_msprof_cluster_free_time_imbalance_not_compute(corpus):
    report = analyze(corpus / "mstt/test/resource/advisor/cluster_analysis_output")
    m = report.metrics
    assert report.run.ranks == list(range(8))
    slow = _by_rule(report)["slow-rank"]
    assert slow.scope.ranks == [1]
    assert m["cluster.slow_component"].value.startswith("free")
    assert m["cluster.waiting_rank"].value == 5
    assert m["cluster.compute_spread_ratio"].value < 0.02
    assert "not a compute straggler" in slow.message
    spread = m["cluster.component_spread"].value
    assert spread["free (host/data)"]["max_rank"] == 1 and spread["free (host/data)"]["min_rank"] == 5
    assert spread["compute"]["excess_pct"] < 1.0
    # collectives here are mostly waiting for peers: not an all-reduce problem
    assert "exposed-allreduce" not in _by_rule(report)


def test_kineto_num_workers_0_is_input_bound(corpus):
    report = analyze(corpus / "kineto-tb-plugin/resnet50_num_workers_0")
    found = _by_rule(report)
    assert "input-bound" in found
    assert 0.3 <= report.metrics["step.data_wait_ratio"].value <= 0.45
    # the headline is what to fix first: the data wait gives back more than mixed
    # precision would, though float32 matrix work (convolutions, not batch norm) holds more of the step
    assert report.findings[0].rule == "input-bound", [(f.rule, f.estimated_gain_ms) for f in report.findings]
    assert found["fp32-compute"].time_at_stake_ms > found["input-bound"].time_at_stake_ms
    assert found["fp32-compute"].severity == "high" and found["input-bound"].severity == "high"
    gains = [f.estimated_gain_ms for f in report.findings]
    assert None not in gains and gains == sorted(gains, reverse=True)
    assert "num_workers=" in found["input-bound"].fix.code
    assert "pin_memory=True" in found["input-bound"].fix.code
    # two captures of one worker are not a cluster
    assert "slow-rank" not in found


def test_kineto_num_workers_4_is_not_input_bound(corpus):
    report = analyze(corpus / "kineto-tb-plugin/resnet50_num_workers_4")
    assert "input-bound" not in _by_rule(report)
    assert report.metrics["step.data_wait_ratio"].value < 0.05


def test_nccl_trace_is_host_bound_and_poorly_overlapped(corpus):
    report = analyze(corpus / "hta/nccl_parser_config/nccl_data.json.gz")
    assert 0.72 <= report.metrics["step.device_idle_ratio"].value <= 0.82
    assert 0.10 <= report.metrics["comm.overlap_ratio"].value <= 0.20
    assert report.findings[0].rule == "host-bound"


def test_older_kernel_details_finding_rests_on_present_columns(corpus):
    report = analyze(corpus / "mstt/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv")
    assert "ops.top" in report.metrics
    # FLOAT16 MatMuls: no fp32 finding; no column-less claims (e.g. dynamic shape)
    assert report.metrics["ops.fp32_matrix_ratio"].value == 0.0
    assert all(f.rule != "fp32-compute" for f in report.findings)
    assert not any("dynamic" in f.message.lower() for f in report.findings)


def test_mindspore_cpu_output_says_no_steps(corpus):
    folder = next((corpus / "mindspore-cpu").glob("*_ascend_ms"))
    report = analyze(folder)
    assert report.run.framework == "mindspore"
    assert report.run.steps_found == 0
    assert any("no step markers" in n for n in report.run.notes)
    assert "step.time_ms" not in report.metrics


def test_cli_report_writes_three_files_and_summary(examples, tmp_path):
    """`advisor report` end to end: exit 0, report.html/md/json, a ranked summary."""
    import json
    import subprocess
    import sys

    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "advisor", "report", str(examples / "vgg16_fp32"), "-o", str(out), "--no-color"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert {p.name for p in out.iterdir()} >= {"report.html", "report.md", "report.json"}
    data = json.loads((out / "report.json").read_text())
    assert data["findings"][0]["rule"] == "fp32-compute"
    assert {"rule", "id", "severity", "message", "estimated_gain_ms", "estimated_gain_pct",
            "scope", "evidence", "fix"} <= set(data["findings"][0])
    assert data["run"]["framework"] == "mindspore" and data["run"]["steps_found"] == 30
    assert "fp32-compute" in result.stdout and "\x1b[" not in result.stdout
