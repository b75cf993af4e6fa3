"""The run's verdict: problems, clean, or inconclusive with what is missing."""

from __future__ import annotations

import pytest

from advisor.engine.evaluation import compile_rule, evaluate_run
from advisor.engine.loader import load_rules
from advisor.engine.verdict import CHECK_GROUPS, MAX_METRICS, MAX_REASONS, judge
from advisor.model import Metric
from advisor.pipeline import analyze
from advisor.profile import RunMeta

PROBLEM_EXAMPLES = ("resnet50_data_bound", "vgg16_fp32", "resnet50_8p_allreduce_tail")


def _verdict(values: dict, *, framework="pytorch", device="gpu", ranks=(0,), collectives=False,
             reasons=None, lang="en", ranks_inferred=False):
    compiled = [compile_rule(r) for r in load_rules([], lang=lang)]
    metrics = {k: Metric(id=k, value=v, unit="-") for k, v in values.items()}
    run = evaluate_run(compiled, metrics, framework=framework, device=device, lang=lang)
    meta = RunMeta(framework=framework, device=device, ranks=list(ranks), ranks_inferred=ranks_inferred)
    return judge(run.outcomes, run.findings, meta=meta, collectives=collectives, metric_values=values,
                 metric_reasons=reasons or {}, lang=lang), run


#: a healthy single-GPU step: data, host idle and compute measured, nothing above its threshold
HEALTHY_GPU = {"step.time_ms": 100.0, "step.data_wait_ratio": 0.01, "step.data_wait_ms": 1.0, "data.batch_wait_ratio": 0.01, "data.batch_wait_ms": 1.0,
               "step.host_idle_ratio": 0.05, "step.idle_host_ops_ratio": 0.04, "step.launch_queue_ms": 0.01,
               "ops.fp32_matrix_ratio": 0.05, "ops.fp32_matrix_ms": 3.0}


def test_checks_ran_and_nothing_fired_is_clean():
    v, run = _verdict(HEALTHY_GPU)
    assert v.status == "clean" and not run.findings
    assert {c.group for c in v.checks if c.judged} == {"data", "host", "compute"}
    assert "3 of 3 kinds of checks ran" in v.reason and not v.missing


def test_nearly_every_check_skipped_is_inconclusive_not_clean():
    """11 of 12 rules skipped used to print a green 'no problems found'."""
    v, _ = _verdict({"step.time_ms": 100.0, "step.data_wait_ratio": 0.01, "step.data_wait_ms": 1.0, "data.batch_wait_ratio": 0.01, "data.batch_wait_ms": 1.0},
                    reasons={"step.idle_host_ops_ratio": "the steps table has no idle_host_ops_us values"})
    assert v.status == "inconclusive"
    assert "only 1 of 3 kinds of checks that matter for pytorch on gpu" in v.reason
    assert any(m.startswith("host / device idle: ") and
               "step.idle_host_ops_ratio: the steps table has no idle_host_ops_us values" in m for m in v.missing)
    assert any(m.startswith("compute: ") for m in v.missing)


def test_only_minor_findings_is_clean_and_says_so():
    values = {**HEALTHY_GPU, "ops.fp32_matrix_ratio": 0.45, "ops.fp32_matrix_ms": 6.0}  # 6% of the step: low
    v, run = _verdict(values)
    assert [f.severity for f in run.findings] == ["low"]
    assert v.status == "clean" and "1 minor finding(s) are listed" in v.reason


def test_a_medium_finding_is_problems_even_with_checks_missing():
    v, run = _verdict({"step.time_ms": 100.0, "step.data_wait_ratio": 0.3, "step.data_wait_ms": 30.0, "data.batch_wait_ratio": 0.3, "data.batch_wait_ms": 30.0})
    assert v.status == "problems" and run.findings[0].rule == "input-bound"
    assert "led by: Training waits for input data" in v.reason
    assert "2 of 3 kinds of checks could not be evaluated" in v.reason and len(v.missing) == 2


def test_a_window_of_start_up_is_inconclusive_whatever_fired():
    v, run = _verdict({**HEALTHY_GPU, "step.idle_host_ops_ratio": 0.9, "window.warmup_ratio": 0.97})
    assert run.findings and v.status == "inconclusive"
    assert v.reason.startswith("the window is mostly start-up (97% of it)") and "profile later steps" in v.reason


def test_communication_and_cluster_matter_only_for_a_distributed_run():
    single, _ = _verdict(HEALTHY_GPU)
    assert {c.group for c in single.checks} == {"data", "host", "compute"}
    several, _ = _verdict(HEALTHY_GPU, ranks=(0, 1, 2, 3))
    assert {c.group for c in several.checks} == set(CHECK_GROUPS)
    assert several.status == "clean" and "3 of 5 kinds of checks ran" in several.reason  # at least half judged
    assert [m.split(":")[0] for m in several.missing] == ["communication", "rank balance"]
    captures, _ = _verdict(HEALTHY_GPU, ranks=(0, 1), ranks_inferred=True)  # files of one worker
    assert {c.group for c in captures.checks} == {"data", "host", "compute"}
    collectives, _ = _verdict(HEALTHY_GPU, collectives=True)
    assert "communication" in {c.group for c in collectives.checks}


def test_checks_that_do_not_apply_to_the_device_do_not_count():
    v, _ = _verdict({"step.time_ms": 100.0, "step.data_wait_ratio": 0.01, "step.data_wait_ms": 1.0, "data.batch_wait_ratio": 0.01, "data.batch_wait_ms": 1.0,
                     "step.host_idle_ratio": 0.05}, framework="mindspore", device="cpu")
    assert "compute" not in {c.group for c in v.checks}  # no compute rule applies to a CPU
    assert v.status == "clean"


def test_zh_verdict():
    v, _ = _verdict({"step.time_ms": 100.0, "step.data_wait_ratio": 0.3, "step.data_wait_ms": 30.0, "data.batch_wait_ratio": 0.3, "data.batch_wait_ms": 30.0}, lang="zh")
    assert v.status == "problems" and "训练在等待输入数据" in v.reason and v.missing[0].startswith("Host/设备空闲：")


# ------------------------------------------------------------ real inputs


@pytest.mark.parametrize("name", PROBLEM_EXAMPLES)
def test_the_guide_cases_have_problems(examples, name):
    assert analyze(examples / name, jobs=1).verdict.status == "problems"


def test_the_guide_cases_after_their_fix_are_not_problems(examples):
    for name in ("resnet50_8p_overlapped", "vgg16_fp16"):
        v = analyze(examples / name, jobs=1).verdict
        assert v.status == "clean", (name, v)
    # the fixed data pipeline: the step trace holds neither operators nor device idle time
    v = analyze(examples / "resnet50_data_fixed", jobs=1).verdict
    assert v.status == "inconclusive" and {m.split(":")[0] for m in v.missing} == {"host / device idle", "compute"}
    # each line names what its first rules lacked and counts the rest, whatever the number of rules
    compute = next(m for m in v.missing if m.startswith("compute"))
    assert "ops.fp32_matrix_ratio" in compute or "more" in compute, compute
    assert all(len(m.split("; ")) <= MAX_REASONS + 1 for m in v.missing), v.missing
    assert all(max(len(part.split(", ")) for part in m.split("; ")) <= MAX_METRICS for m in v.missing), v.missing


def test_mindspore_cpu_without_steps_is_inconclusive(corpus):
    """MindSpore 2.10 on CPU, no step markers: it used to say 'no problems found'."""
    report = analyze(corpus / "mindspore-cpu", jobs=1)
    v = report.verdict
    assert not report.findings and v.status == "inconclusive"
    assert v.reason.startswith("none of the")
    assert any("no steps table in this profile" in m for m in v.missing)


def test_a_pipeline_file_alone_is_inconclusive(corpus):
    """MindData pipeline samples without a step trace cannot say whether the
    pipeline holds the device back."""
    v = analyze(corpus / "mindinsight-minddata" / "minddata_pipeline_raw_0.csv", jobs=1).verdict
    assert v.status == "inconclusive" and any(m.startswith("input data:") for m in v.missing)


def test_report_json_carries_the_verdict(examples, tmp_path):
    import json

    from advisor.reports import write_reports

    report = analyze(examples / "resnet50_data_bound", jobs=1)
    paths = write_reports(report, tmp_path)
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert data["verdict"]["status"] == "problems" and data["verdict"]["missing"]
    assert data["findings"][0]["contributing"][0]["rule"] == "slow-dataset-op"
