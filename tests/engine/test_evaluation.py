"""The rule engine on hand-written rules: CEL semantics, overrides, severity,
and the errors a rule author sees."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from advisor.engine.check import check_rules
from advisor.engine.evaluation import compile_rule, evaluate_rule, namespaces
from advisor.engine.loader import load_rules, read_rule
from advisor.errors import ConfigError

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
    assert namespaces({"step.free_ratio": 0.2, "comm.bandwidth_gbps": {"HCCS": 3.0}}) == {
        "step": {"free_ratio": 0.2}, "comm": {"bandwidth_gbps": {"HCCS": 3.0}},
        "data": {}, "ops": {}, "cluster": {}, "anomaly": {},
    }


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
