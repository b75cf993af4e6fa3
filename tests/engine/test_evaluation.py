"""The rule engine on hand-written rules: CEL semantics, overrides, severity,
and the errors a rule author sees."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from advisor.engine.check import check_rules
from advisor.engine.evaluation import compile_rule, evaluate_rule, evaluate_run, namespaces
from advisor.engine.loader import load_rules, read_rule
from advisor.errors import ConfigError
from advisor.metrics import REGISTRY, metric_namespaces
from advisor.model import Metric

BASE = {
    "id": "ADV900",
    "name": "too-much-free",
    "title": "Too much free time",
    "group": "host",
    "requires": ["step.free_ratio", "step.time_ms"],
    "params": {"limit": {"default": 0.3, "description": "free share"}},
    "condition": "step.free_ratio > params.limit",
    "time_at_stake": "step.free_ratio * step.time_ms",
    "estimated_gain": "step.free_ratio * step.time_ms * 2.0",
    "message": "free {{ step.free_ratio|pct }} of {{ step.time_ms|ms }}",
    "explanation": {"what": "w", "why": "y", "how": "h"},
    "fix": {"default": {"text": "do less", "code": "x = {{ step.time_ms|round(0) }}"}},
    "examples": [
        {"name": "fires", "metrics": {"step.free_ratio": 0.5, "step.time_ms": 10}, "expect": "fire"},
        {"name": "passes", "metrics": {"step.free_ratio": 0.1, "step.time_ms": 10}, "expect": "pass"},
    ],
}


def _rule(tmp_path: Path, **changes) -> Path:
    data = {**BASE, **changes}
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_namespaces_nest_dotted_ids():
    tree = namespaces({"step.free_ratio": 0.2, "comm.bandwidth_gbps": {"HCCS": 3.0}})
    assert tree["step"] == {"free_ratio": 0.2} and tree["comm"] == {"bandwidth_gbps": {"HCCS": 3.0}}
    assert set(tree) == {mid.split(".")[0] for mid in REGISTRY}  # every namespace, empty or not
    assert {"step", "comm", "data", "ops", "cluster", "pipeline", "anomaly"} <= set(tree)


def _stake_run(tmp_path: Path, stake_ms: float, stderr: float | None, samples: int = 9):
    """A rule whose time at stake is the exposed all-reduce, over a 10 ms
    step, that time a mean over ``samples`` steps with ``stderr``."""
    stake = "comm.exposed_allreduce_ms"
    examples = [{"name": "fires", "metrics": {stake: 3.0, "step.time_ms": 10}, "expect": "fire"},
                {"name": "passes", "metrics": {stake: 0.5, "step.time_ms": 10}, "expect": "pass"}]
    rule = read_rule(_rule(tmp_path, requires=[stake, "step.time_ms"], condition=f"{stake} > 1.0",
                           time_at_stake=stake, estimated_gain=f"{stake} / 2.0",
                           message="exposed {{ comm.exposed_allreduce_ms|ms }}", examples=examples))
    metrics = {stake: Metric(id=stake, value=stake_ms, unit="ms", stderr=stderr,
                             samples=samples if stderr is not None else None),
               "step.time_ms": Metric(id="step.time_ms", value=10.0, unit="ms")}
    (finding,) = evaluate_run([compile_rule(rule)], metrics).findings
    return finding


def test_a_share_only_its_mean_puts_above_medium_is_medium(tmp_path):
    # 3.0 ms of 10: high by its mean; the steps support 3.0 - t(8, 0.9) x 0.8 = 1.88 ms (18.8%)
    held = _stake_run(tmp_path, 3.0, 0.8)
    assert held.severity == "medium"
    assert held.time_at_stake_ms == pytest.approx(3.0)
    assert held.time_at_stake_low_ms == pytest.approx(3.0 - 1.3968 * 0.8, abs=1e-3)
    # the same mean measured tightly keeps its band, and without a spread nothing changes
    assert _stake_run(tmp_path, 3.0, 0.1).severity == "high"
    assert _stake_run(tmp_path, 3.0, None).severity == "high"
    assert _stake_run(tmp_path, 3.0, None).time_at_stake_low_ms is None
    # a spread never lowers a finding below medium, nor moves one that is medium or below
    assert _stake_run(tmp_path, 3.0, 5.0).severity == "medium"
    assert _stake_run(tmp_path, 1.5, 1.0).severity == "medium"
    assert _stake_run(tmp_path, 6.0, 0.5).severity == "critical"  # 6.0 - 0.7 = 5.3 ms: still over half
    assert _stake_run(tmp_path, 6.0, 1.0).severity == "high"


def test_fires_with_gain_clamped_to_time_at_stake(tmp_path):
    rule = read_rule(_rule(tmp_path))
    finding, _ = evaluate_rule(compile_rule(rule), {"step.free_ratio": 0.6, "step.time_ms": 10.0})
    assert finding.time_at_stake_ms == pytest.approx(6.0)
    assert finding.estimated_gain_ms == pytest.approx(6.0)  # 12 ms asked, clamped
    assert finding.estimated_gain_pct == pytest.approx(60.0)
    assert finding.severity == "critical"  # 60% of the step at stake
    assert finding.message == "free 60.0% of 10.00 ms"
    assert finding.fix.code == "x = 10.0"
    assert finding.evidence == {"step.free_ratio": 0.6, "step.time_ms": 10.0}


def test_the_gain_names_the_time_at_stake_once(tmp_path):
    rule = read_rule(_rule(tmp_path, time_at_stake="step.free_ratio * step.time_ms * 1.5",
                           estimated_gain="time_at_stake * params.limit"))
    finding, _ = evaluate_rule(compile_rule(rule), {"step.free_ratio": 0.4, "step.time_ms": 10.0})
    assert finding.time_at_stake_ms == pytest.approx(6.0)
    assert finding.estimated_gain_ms == pytest.approx(1.8)  # 0.3 of the stake
    # a stake past the step is clamped to it before the gain reads it
    finding, _ = evaluate_rule(compile_rule(rule), {"step.free_ratio": 0.8, "step.time_ms": 10.0})
    assert (finding.time_at_stake_ms, finding.estimated_gain_ms) == (pytest.approx(10.0), pytest.approx(3.0))
    # without a time at stake the name is unknown: a checked evaluation says so
    assert any("time_at_stake" in p for p in check_rules([_rule(tmp_path, time_at_stake=None,
                                                                 estimated_gain="time_at_stake * 0.5")])[0])


def test_a_case_the_parts_share_is_written_once_as_let(tmp_path):
    """``let`` names an expression once: later lets, the gain, the confidence,
    the message and the fixes read it as ``let.NAME`` (in file order: here
    sorted, as yaml.safe_dump writes them)."""
    rule = read_rule(_rule(
        tmp_path,
        let={"big": "time_at_stake > 4.0", "huge": "let.big && step.free_ratio > 0.7"},
        estimated_gain="let.big ? time_at_stake * 0.5 : time_at_stake * 0.1",
        confidence="let.huge ? 0.9 : 0.6",
        message="free {{ step.free_ratio|pct }}{% if let.big %}, a large share{% endif %}",
        fix={"default": {"text": "{% if let.huge %}do much less{% else %}do less{% endif %}"}},
    ))
    finding, _ = evaluate_rule(compile_rule(rule), {"step.free_ratio": 0.8, "step.time_ms": 10.0}, checked=True)
    assert (finding.estimated_gain_ms, finding.confidence) == (pytest.approx(4.0), 0.9)
    assert finding.message.endswith("a large share") and finding.fix.text == "do much less"
    finding, _ = evaluate_rule(compile_rule(rule), {"step.free_ratio": 0.35, "step.time_ms": 10.0}, checked=True)
    assert (finding.estimated_gain_ms, finding.confidence) == (pytest.approx(0.35), 0.6)
    assert finding.message == "free 35.0%" and finding.fix.text == "do less"


def test_a_let_that_fails_or_is_misnamed_is_an_error_in_validation(tmp_path):
    """A let whose expression fails names itself; a template reading a let
    the rule does not define is a typo. Outside validation a failing let is
    undefined: the finding stands, without the parts that read it."""
    failing = read_rule(_rule(tmp_path, let={"large": "step.free_ratio > params.limt"},
                              estimated_gain="let.large ? 1.0 : 2.0"))
    with pytest.raises(ConfigError, match="^let.large: "):
        evaluate_rule(compile_rule(failing), BASE["examples"][0]["metrics"], checked=True)
    finding, _ = evaluate_rule(compile_rule(failing), BASE["examples"][0]["metrics"])
    assert finding is not None and finding.estimated_gain_ms is None
    misnamed = read_rule(_rule(tmp_path, let={"large": "true"}, message="{% if let.lagre %}x{% endif %}"))
    with pytest.raises(ConfigError, match="^message: "):
        evaluate_rule(compile_rule(misnamed), BASE["examples"][0]["metrics"], checked=True)
    with pytest.raises(ConfigError, match="let name"):
        read_rule(_rule(tmp_path, let={"Large": "true"}))
    with pytest.raises(ConfigError, match="more than the 16 a rule may have"):  # each runs whenever it fires
        read_rule(_rule(tmp_path, let={f"x{i}": "true" for i in range(17)}))


def test_override_changes_threshold_and_unknown_param_is_an_error(tmp_path):
    rule = read_rule(_rule(tmp_path))
    values = {"step.free_ratio": 0.5, "step.time_ms": 10}
    assert evaluate_rule(compile_rule(rule, {"limit": 0.6}), values)[0] is None
    with pytest.raises(ConfigError, match="no parameter 'lmit'"):
        compile_rule(rule, {"lmit": 0.6})


def test_missing_metric_is_a_skip_with_reason(tmp_path):
    rule = read_rule(_rule(tmp_path))
    finding, skip = evaluate_rule(compile_rule(rule), {"step.time_ms": 10})
    assert finding is None and "step.free_ratio" in skip.reason


def test_bad_cel_names_rule_and_field(tmp_path):
    rule = read_rule(_rule(tmp_path, condition="step.free_ratio >"))
    with pytest.raises(ConfigError, match="too-much-free: condition: invalid CEL"):
        compile_rule(rule)


@pytest.mark.parametrize(
    "changes,fragment",
    [
        ({"name": "Not_Kebab"}, "kebab-case"),
        ({"id": "X1"}, "id"),
        ({"severity": "red"}, "severity"),
        ({"examples": BASE["examples"][:1]}, "at least 2"),
        ({"fix": {"tensorflow": {"text": "t"}}}, "unknown framework"),
    ],
)
def test_schema_errors_name_the_file(tmp_path, changes, fragment):
    path = _rule(tmp_path, **changes)
    with pytest.raises(ConfigError) as err:
        read_rule(path)
    assert str(path) in str(err.value) and fragment in str(err.value)


def test_validate_reports_unknown_metrics_and_wrong_examples(tmp_path):
    bad = dict(BASE["examples"][1], expect="fire")
    _rule(tmp_path, condition="step.free_ratio > params.limit && step.bogus > 1.0",
          examples=[*BASE["examples"], bad])
    problems, count = check_rules([tmp_path])
    assert count == 1
    assert any("unknown metric id(s): step.bogus" in p for p in problems)
    assert any("expected fire, got pass" in p for p in problems)


def test_user_rule_loads_beside_builtins_and_duplicate_id_is_refused(tmp_path):
    _rule(tmp_path)
    names = {r.name for r in load_rules([tmp_path])}
    assert {"too-much-free", "input-bound"} <= names
    _rule(tmp_path, name="other-name", id="ADV001")
    with pytest.raises(ConfigError, match="ADV001 is already used"):
        load_rules([tmp_path])


# --- every namespace is checked (a pipeline.* typo was accepted) ------------------------

@pytest.mark.parametrize("namespace", metric_namespaces())
def test_validate_reports_a_misspelt_metric_in_any_namespace(tmp_path, namespace):
    _rule(tmp_path, confidence=f"has({namespace}.no_such_metric) ? 0.8 : 0.5")
    problems, _ = check_rules([tmp_path])
    assert any(f"unknown metric id(s): {namespace}.no_such_metric" in p for p in problems), problems


def test_validate_reports_the_misspelt_pipeline_metric(tmp_path):
    _rule(tmp_path, confidence="has(pipeline.stage_spred_ratio) ? 0.8 : 0.5")
    problems, _ = check_rules([tmp_path])
    assert any("unknown metric id(s): pipeline.stage_spred_ratio" in p for p in problems), problems


def test_slow_stage_evidence_holds_the_value_its_confidence_reads():
    (rule,) = [r for r in load_rules() if r.name == "slow-pipeline-stage"]
    assert "pipeline.stage_spread_ratio" in rule.confidence
    example = next(e for e in rule.examples if e.expect == "fire")
    finding, _ = evaluate_rule(compile_rule(rule), example.metrics)
    assert finding.evidence["pipeline.stage_spread_ratio"] == example.metrics["pipeline.stage_spread_ratio"]
    assert finding.confidence == 0.8


# --- expressions that cannot evaluate on the rule's own examples ------------------------

@pytest.mark.parametrize(
    "changes,field",
    [
        ({"estimated_gain": "step.free_ratio * step.time_ms * params.expected_hiden_share"}, "estimated_gain"),
        ({"time_at_stake": "step.free_ratio * step.time_ms * params.lmit"}, "time_at_stake"),
        ({"confidence": "params.limt > 0.5 ? 0.9 : 0.5"}, "confidence"),
        ({"scope": {"ranks": "params.rank"}}, "scope.ranks"),
        ({"condition": "step.free_ratio > params.limt"}, "condition"),
        ({"message": "free {{ step.free_ratio|pct }} over {{ params.limt }}"}, "message"),
        ({"message": "free {{ stpe.free_ratio|pct }}"}, "message"),
        ({"fix": {"default": {"text": "do less", "code": "x = {{ params.limt }}"}}}, "fix.default.code"),
        ({"estimated_gain": "'fast'"}, "estimated_gain"),
    ],
)
def test_validate_reports_an_expression_that_fails_on_an_example(tmp_path, changes, field):
    rule = read_rule(_rule(tmp_path, **changes))
    problems, _ = check_rules([tmp_path])
    assert any(f"example 'fires': {field}: " in p for p in problems), problems
    with pytest.raises(ConfigError, match=f"^{field}: "):
        evaluate_rule(compile_rule(rule), BASE["examples"][0]["metrics"], checked=True)


def test_analysis_keeps_a_finding_whose_gain_fails(tmp_path):
    """Outside validation a failing expression only empties its part."""
    rule = read_rule(_rule(tmp_path, estimated_gain="step.free_ratio * params.expected_hiden_share"))
    finding, skip = evaluate_rule(compile_rule(rule), {"step.free_ratio": 0.6, "step.time_ms": 10.0})
    assert skip is None and finding.estimated_gain_ms is None and finding.time_at_stake_ms == pytest.approx(6.0)


def test_optional_metric_absent_from_an_example_is_not_an_error(tmp_path):
    _rule(tmp_path, message="free {{ step.free_ratio|pct }}{% if step.host_wait_ratio is defined %}, "
                            "host {{ step.host_wait_ratio|pct }}{% endif %}, data {{ step.data_wait_ratio|pct }}")
    assert check_rules([tmp_path]) == ([], 1)


# --- examples state the finding's severity and gain -------------------------------------

def _examples(**fire_fields) -> list[dict]:
    return [{**BASE["examples"][0], **fire_fields}, BASE["examples"][1]]


def test_example_severity_and_gain_are_checked(tmp_path):
    # free 0.5 of 10 ms: 5 ms at stake (50%: critical), gain 10 ms clamped to 5 ms
    _rule(tmp_path, examples=_examples(severity="critical", gain_ms=5.0))
    assert check_rules([tmp_path]) == ([], 1)
    _rule(tmp_path, examples=_examples(severity="high", gain_ms=4.0))
    problems, _ = check_rules([tmp_path])
    assert any("expected severity high, got critical" in p for p in problems), problems
    assert any("expected an estimated gain of 4 ms (+- 0.01), got 5 ms" in p for p in problems), problems
    _rule(tmp_path, examples=_examples(gain_ms=4.0, gain_tolerance_ms=1.0))
    assert check_rules([tmp_path]) == ([], 1)


def test_example_gain_without_a_gain_estimate_is_a_problem(tmp_path):
    _rule(tmp_path, estimated_gain=None, time_at_stake=None, examples=_examples(gain_ms=5.0))
    problems, _ = check_rules([tmp_path])
    assert any("expected an estimated gain of 5 ms (+- 0.01), got none" in p for p in problems), problems


def test_only_a_firing_example_states_severity_or_gain(tmp_path):
    path = _rule(tmp_path, examples=[BASE["examples"][0], {**BASE["examples"][1], "severity": "low"}])
    with pytest.raises(ConfigError, match="only a 'fire' example"):
        read_rule(path)
