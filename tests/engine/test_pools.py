"""One cause, one finding: rules that claim the same time are one finding
with contributing causes, and gains are never counted twice."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from advisor.engine.evaluation import compile_rule, evaluate_run
from advisor.engine.loader import load_rules, read_rule
from advisor.model import Metric
from advisor.pipeline import analyze

#: rules about the same time share a pool
SHARED = ({"input-bound", "slow-dataset-op"}, {"fp32-compute", "no-tensor-cores"}, {"host-bound", "launch-bound", "device-idle", "fusable-sequence",
                                                                             "host-time-outside-ops", "gc-pause"},
          {"memory-bound-ops", "memory-bound-sequence", "unfused-op-chain"}, {"exposed-allreduce", "grad-sync-per-microbatch"},
          {"slow-rank", "uneven-step-work"}, {"step-outlier", "loader-worker-restart"})


def _metrics(values: dict) -> dict[str, Metric]:
    return {k: Metric(id=k, value=v, unit="-") for k, v in values.items()}


def _rule(tmp_path: Path, name: str, rid: str, claims: str | None, gain: str, confidence: str = "0.8",
          symptom: bool = False) -> Path:
    data = {
        "id": rid, "name": name, "title": f"title of {name}", "group": "host",
        "requires": ["step.free_ratio", "step.time_ms"],
        "condition": "step.free_ratio > 0.1",
        "time_at_stake": "step.free_ratio * step.time_ms",
        "estimated_gain": gain,
        "confidence": confidence,
        "message": f"{name} holds {{{{ stake_ms|ms }}}}",
        "explanation": {"what": "w", "why": "y", "how": "h"},
        "fix": {"default": {"text": f"fix {name}"}},
        "examples": [
            {"name": "fires", "metrics": {"step.free_ratio": 0.5, "step.time_ms": 10}, "expect": "fire"},
            {"name": "passes", "metrics": {"step.free_ratio": 0.0, "step.time_ms": 10}, "expect": "pass"},
        ],
    }
    if claims:
        data["claims"] = claims
    if symptom:
        data["symptom"] = True
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_shipped_rules_about_the_same_time_share_a_pool_and_the_others_do_not():
    rules = {r.name: r for r in load_rules([])}
    pools = {name: r.pool for name, r in rules.items()}
    for group in SHARED:
        assert len({pools[n] for n in group}) == 1, group
    grouped = set().union(*SHARED)
    alone = [pools[n] for n in rules if n not in grouped]
    assert len(alone) == len(set(alone)) and not set(alone) & {pools[n] for n in grouped}


def test_same_pool_merges_into_the_largest_expected_gain_and_gains_are_not_added(tmp_path):
    # expected gains (gain x confidence): idle-b 30 x 0.5 = 15, idle-a 15 x 0.8 = 12
    paths = [_rule(tmp_path, "idle-a", "ADV901", "idle", "step.free_ratio * step.time_ms * 0.3"),
             _rule(tmp_path, "idle-b", "ADV902", "idle", "step.free_ratio * step.time_ms * 0.6", "0.5"),
             _rule(tmp_path, "other", "ADV903", None, "step.free_ratio * step.time_ms * 0.2")]
    compiled = [compile_rule(read_rule(p)) for p in paths]
    run = evaluate_run(compiled, _metrics({"step.free_ratio": 0.5, "step.time_ms": 100.0}))
    by_rule = {f.rule: f for f in run.findings}
    assert set(by_rule) == {"idle-b", "other"}
    primary = by_rule["idle-b"]
    assert [c.rule for c in primary.contributing] == ["idle-a"]
    assert primary.estimated_gain_ms == pytest.approx(30.0)  # its own gain, not 30 + 15
    assert primary.contributing[0].estimated_gain_ms == pytest.approx(15.0)
    assert primary.claims == primary.contributing[0].claims == "idle"
    assert by_rule["other"].claims == "other" and not by_rule["other"].contributing


def test_a_cause_leads_the_symptom_it_explains_whatever_their_estimates(tmp_path):
    # slow steps (step-outlier) and what makes them slow (loader-worker-restart) claim one pool: the
    # finding that names the cause leads, with its own gain, though the symptom's estimate is larger
    paths = [_rule(tmp_path, "slow-steps", "ADV901", "outliers", "step.free_ratio * step.time_ms * 0.6", symptom=True),
             _rule(tmp_path, "the-cause", "ADV902", "outliers", "step.free_ratio * step.time_ms * 0.3")]
    run = evaluate_run([compile_rule(read_rule(p)) for p in paths],
                       _metrics({"step.free_ratio": 0.5, "step.time_ms": 100.0}))
    assert [f.rule for f in run.findings] == ["the-cause"]
    assert [c.rule for c in run.findings[0].contributing] == ["slow-steps"]
    assert run.findings[0].estimated_gain_ms == pytest.approx(15.0)
    # the symptom's own fix would aim elsewhere: the cause's is the one to apply
    symptom = run.findings[0].contributing[0]
    assert symptom.fix is None and "title of the-cause" in symptom.caveats[-1]
    assert run.findings[0].fix is not None


def test_ties_go_to_severity_then_confidence(tmp_path):
    gain = "step.free_ratio * step.time_ms * 0.5"
    paths = [_rule(tmp_path, "sure", "ADV901", "idle", gain, "0.9"),
             _rule(tmp_path, "unsure", "ADV902", "idle", gain, "0.3")]
    run = evaluate_run([compile_rule(read_rule(p)) for p in paths],
                       _metrics({"step.free_ratio": 0.5, "step.time_ms": 100.0}))
    assert [f.rule for f in run.findings] == ["sure"]
    assert [c.rule for c in run.findings[0].contributing] == ["unsure"]


def test_the_primary_gains_are_clamped_to_the_step_least_confident_first(tmp_path):
    paths = [_rule(tmp_path, f"cause-{i}", f"ADV90{i}", f"pool_{i}", "step.free_ratio * step.time_ms",
                   confidence=str(c)) for i, c in enumerate((0.9, 0.6, 0.3))]
    run = evaluate_run([compile_rule(read_rule(p)) for p in paths],
                       _metrics({"step.free_ratio": 0.45, "step.time_ms": 100.0}))
    gains = {f.rule: f.estimated_gain_ms for f in run.findings}
    assert gains == {"cause-0": 45.0, "cause-1": 45.0, "cause-2": 10.0}
    lowered = {f.rule: f for f in run.findings}["cause-2"]
    assert lowered.estimated_gain_pct == pytest.approx(10.0)
    assert "lowered from 45 to 10" in lowered.caveats[-1]
    assert not {f.rule: f for f in run.findings}["cause-0"].caveats


def test_resnet50_data_bound_claims_its_data_wait_once(examples):
    """The MindSpore guide's data-bound case: input-bound and slow-dataset-op
    both measured the same 74 ms of iteration interval; now one finding."""
    report = analyze(examples / "resnet50_data_bound", jobs=1)
    interval = report.metrics["step.iteration_interval_ms"].value
    assert [f.rule for f in report.findings] == ["input-bound"]
    primary = report.findings[0]
    assert [c.rule for c in primary.contributing] == ["slow-dataset-op"]
    op = primary.contributing[0]
    assert op.scope.ops == ["MapOp_3"] and "num_parallel_workers=12" in op.fix.code  # still shown whole
    total = sum(f.estimated_gain_ms for f in report.findings)
    assert total == pytest.approx(interval, abs=0.01)  # 74 ms once, not 148
    assert total < report.metrics["step.time_ms"].value
    assert {f.rule for f in report.all_findings()} == {"input-bound", "slow-dataset-op"}
    # the verdict counts findings as the report lists them: one, with its contributing cause
    assert op.severity in ("medium", "high", "critical") and report.verdict.reason.startswith("1 finding(s) ")


def test_float32_matrix_kernels_are_one_finding_on_the_v100_trace(corpus):
    """kineto-tb-plugin ResNet50 (V100, float32): fp32-compute (operator
    dtypes) and no-tensor-cores (kernel names) are the same GEMMs."""
    report = analyze(corpus / "kineto-tb-plugin" / "resnet50_num_workers_0", jobs=1)
    fp32 = [f for f in report.findings if f.claims == "fp32_matrix"]
    assert len(fp32) == 1 and {fp32[0].rule, *(c.rule for c in fp32[0].contributing)} == {
        "fp32-compute", "no-tensor-cores"}
    stakes = [fp32[0].time_at_stake_ms, *(c.time_at_stake_ms for c in fp32[0].contributing)]
    assert fp32[0].estimated_gain_ms <= max(stakes)


def test_findings_are_ordered_by_gain_weighed_by_confidence(tmp_path):
    # gains 30 / 20 / 10 ms of a 100 ms step; expected: 30 x 0.5 = 15, 20 x 0.9 = 18, 10 x 0.9 = 9
    paths = [_rule(tmp_path, "inferred", "ADV901", None, "step.free_ratio * step.time_ms * 0.6", "0.5"),
             _rule(tmp_path, "measured", "ADV902", None, "step.free_ratio * step.time_ms * 0.4", "0.9"),
             _rule(tmp_path, "small", "ADV903", None, "step.free_ratio * step.time_ms * 0.2", "0.9")]
    run = evaluate_run([compile_rule(read_rule(p)) for p in paths],
                       _metrics({"step.free_ratio": 0.5, "step.time_ms": 100.0}))
    assert [f.rule for f in run.findings] == ["measured", "inferred", "small"]
    assert [f.estimated_gain_ms for f in run.findings] == pytest.approx([20.0, 30.0, 10.0])
