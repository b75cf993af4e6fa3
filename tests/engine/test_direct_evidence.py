"""Confidence follows evidence: a cause inferred without its direct
evidence gets a lower confidence and says what would confirm it; the
evidence lists every value the rule read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from advisor.engine.evaluation import compile_rule, evaluate_rule
from advisor.engine.loader import load_rules, read_rule
from advisor.engine.schema import INFERRED_CONFIDENCE
from advisor.errors import ConfigError
from advisor.pipeline import analyze

#: the MindInsight files that time the step (kept) and those that sample the data queues (dropped)
STEP_TRACE_FILES = ("step_trace_raw_0_detail_time.csv", "profiler_info_0.json")


def _rules() -> dict:
    return {r.name: compile_rule(r) for r in load_rules([])}


def _without_queue_data(examples: Path, tmp_path: Path) -> Path:
    """examples/resnet50_data_bound as a MindInsight run profiled without
    data-pipeline profiling: the step trace only."""
    out = tmp_path / "run" / "profiler"
    out.mkdir(parents=True)
    for name in STEP_TRACE_FILES:
        shutil.copy(examples / "resnet50_data_bound" / "profiler" / name, out / name)
    return out.parent


def test_input_bound_from_the_iteration_interval_alone_is_inferred(examples, tmp_path):
    report = analyze(_without_queue_data(examples, tmp_path), jobs=1)
    assert "data.queue_empty_ratio" not in report.metrics
    f = next(f for f in report.all_findings() if f.rule == "input-bound")
    assert f.direct_evidence is False
    assert f.confidence <= INFERRED_CONFIDENCE
    assert "inferred from the iteration interval alone" in f.message
    for name in ("minddata_pipeline_raw_N.csv", "device_queue_profiling_N.txt", "data_process=True"):
        assert name in f.message  # what would confirm it
    assert "sets the pace" not in f.message  # no claim the evidence does not show
    assert f.severity == "critical"  # the time at stake is what it is
    assert f.title == "Training waits for input data (inferred)"  # the headline says so too
    assert "led by: Training waits for input data (inferred)" in report.verdict.reason


def test_input_bound_with_the_queue_samples_is_direct(examples):
    f = next(f for f in analyze(examples / "resnet50_data_bound", jobs=1).findings if f.rule == "input-bound")
    assert f.direct_evidence is True and f.confidence == 0.9
    assert "inferred" not in f.message and "sets the pace" in f.message
    assert f.title == "Training waits for input data"
    assert f.evidence["data.queue_empty_ratio"] == 1.0


def test_exposed_allreduce_from_the_step_tail_is_inferred(examples):
    """The MindSpore 8P case times only the step-trace tail (which also holds
    the optimizer update), not the collectives against compute."""
    f = next(f for f in analyze(examples / "resnet50_8p_allreduce_tail", jobs=1).findings
             if f.rule == "exposed-allreduce")
    assert f.direct_evidence is False and f.confidence <= INFERRED_CONFIDENCE
    assert "step tail after backward" in f.message and "nothing overlaps" not in f.message
    assert "profile_communication=True" in f.message


def test_launch_bound_without_launch_times_is_inferred_and_says_from_what():
    """Short kernels and short gaps are also what host work or synchronizations
    leave; only the launch-to-start times show the host as the cause."""
    rule = _rules()["launch-bound"]
    values = {"step.time_ms": 12.0, "ops.short_kernel_ratio": 0.85, "step.kernel_gap_ratio": 0.45,
              "step.kernel_gap_ms": 5.4}
    f, _ = evaluate_rule(rule, values)
    assert f.direct_evidence is False and f.confidence <= INFERRED_CONFIDENCE
    assert f.title.endswith("(inferred)")
    assert "inferred from the kernels' lengths and the gaps between them" in f.message
    assert "the step is launch-bound" not in f.message
    direct, _ = evaluate_rule(rule, {**values, "step.launch_queue_ms": 0.004})
    assert direct.direct_evidence is True and direct.confidence == 0.8
    assert "Kernels start 4 us after their launch (per step the median, over steps the mean)" in direct.message
    assert "the step is launch-bound" in direct.message and "inferred" not in direct.title


def test_exposed_p2p_without_stage_times_infers_the_bubble_and_says_from_what():
    """Send / receive is what a pipeline bubble waits in, and also what ring
    attention or a hand-written exchange uses: without the stage times the
    bubble is a guess."""
    rule = _rules()["exposed-p2p"]
    values = {"step.time_ms": 200.0, "comm.exposed_p2p_ms": 80.0, "comm.exposed_p2p_ratio": 0.4}
    f, _ = evaluate_rule(rule, values)
    assert f.direct_evidence is False and f.confidence <= INFERRED_CONFIDENCE and f.title.endswith("(inferred)")
    assert "inferred from the operators' kind alone" in f.message
    assert "nothing overlaps: pipeline stages waiting" not in f.message
    direct, _ = evaluate_rule(rule, {**values, "pipeline.bubble_ratio": 0.35})
    assert direct.direct_evidence is True and direct.confidence == 0.7
    assert "nothing overlaps: pipeline stages waiting" in direct.message and "inferred" not in direct.message


def test_exposed_allreduce_measured_against_compute_is_direct():
    rule = _rules()["exposed-allreduce"]
    values = {"step.time_ms": 100.0, "comm.exposed_allreduce_ms": 20.0, "comm.exposed_allreduce_ratio": 0.2,
              "step.exposed_comm_ms": 20.0, "comm.overlap_ratio": 0.3}
    f, _ = evaluate_rule(rule, values)
    assert f.direct_evidence is True and f.confidence == 0.8 and "nothing overlaps" in f.message


def test_a_rule_without_a_confirm_check_states_nothing_about_it():
    f, _ = evaluate_rule(_rules()["fp32-compute"], {"step.time_ms": 100.0, "ops.fp32_matrix_ratio": 0.8,
                                                    "ops.fp32_matrix_ms": 60.0})
    assert f.direct_evidence is None and f.confidence == 0.8


def test_the_zh_text_says_it_is_inferred_too():
    rule = compile_rule({r.name: r for r in load_rules([], lang="zh")}["input-bound"])
    f, _ = evaluate_rule(rule, {"step.time_ms": 100.0, "step.iteration_interval_ms": 40.0,
                                "step.iteration_interval_ratio": 0.4})
    assert "推断" in f.message and "minddata_pipeline_raw_N.csv" in f.message
    assert "决定训练速度的是数据处理流水线" not in f.message


def test_evidence_holds_every_metric_read_and_the_step_time_shares_use(examples):
    report = analyze(examples / "resnet50_data_bound", jobs=1)
    op = report.findings[0].contributing[0]
    # the condition and gain read the interval, the message the op and workers; the shares read the step time
    assert {"data.bottleneck_op", "data.bottleneck_usage_drop", "data.bottleneck_workers",
            "data.queue_empty_ratio", "step.iteration_interval_ms", "step.iteration_interval_ratio",
            "step.time_ms"} <= set(op.evidence)


def _user_rule(tmp_path: Path, **changes) -> Path:
    data = {
        "id": "ADV950", "name": "idle-guess", "title": "t", "group": "host",
        "requires": ["step.free_ratio", "step.time_ms"], "condition": "step.free_ratio > 0.1",
        "confidence": "0.9",
        "confirm": {"direct": "has(step.host_wait_ratio)",
                    "text": "Inferred from free time: host waits of {{ step.free_ratio|pct }} would confirm it."},
        "message": "free {{ step.free_ratio|pct }}{% if inferred %} (inferred){% endif %}",
        "explanation": {"what": "w", "why": "y", "how": "h"}, "fix": {"default": {"text": "x"}},
        "examples": [
            {"name": "fires", "metrics": {"step.free_ratio": 0.5, "step.time_ms": 10}, "expect": "fire"},
            {"name": "passes", "metrics": {"step.free_ratio": 0.0, "step.time_ms": 10}, "expect": "pass"},
        ],
    }
    data.update(changes)
    path = tmp_path / "idle_guess.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_user_rule_can_declare_its_direct_evidence(tmp_path):
    rule = compile_rule(read_rule(_user_rule(tmp_path)))
    inferred, _ = evaluate_rule(rule, {"step.free_ratio": 0.5, "step.time_ms": 10.0})
    assert inferred.message == "free 50.0% (inferred) Inferred from free time: host waits of 50.0% would confirm it."
    assert inferred.confidence == INFERRED_CONFIDENCE and inferred.direct_evidence is False
    direct, _ = evaluate_rule(rule, {"step.free_ratio": 0.5, "step.time_ms": 10.0, "step.host_wait_ratio": 0.4})
    assert direct.message == "free 50.0%" and direct.confidence == 0.9
    assert direct.evidence["step.host_wait_ratio"] == 0.4  # read by the direct-evidence check


def test_a_bad_direct_evidence_expression_is_a_config_error(tmp_path):
    rule = read_rule(_user_rule(tmp_path, confirm={"direct": "has(step.free_ratio", "text": "x"}))
    with pytest.raises(ConfigError, match="confirm.direct: invalid CEL"):
        compile_rule(rule)


def test_a_data_wait_that_is_not_most_of_the_step_is_not_said_to_set_the_pace():
    """10% of a step spent waiting for the batch adds to the step; it does not
    set its pace (the claim needs ``pace_ratio`` of the step, most of it)."""
    from advisor.engine.evaluation import compile_rule, evaluate_run
    from advisor.engine.loader import load_rules
    from advisor.model import Metric

    rule = next(r for r in load_rules() if r.name == "input-bound")
    for share, says in ((0.12, False), (0.75, True)):
        metrics = {k: Metric(id=k, value=v, unit="-") for k, v in {
            "step.time_ms": 100.0, "step.data_wait_ratio": share, "step.data_wait_ms": 100.0 * share, "data.batch_wait_ratio": share, "data.batch_wait_ms": 100.0 * share}.items()}
        (f,) = evaluate_run([compile_rule(rule)], metrics).findings
        assert ("sets the pace" in f.message) is says, f.message
