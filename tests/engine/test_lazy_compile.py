"""Built-in rules compiled lazily on the report path (``pipeline.compile_rules_for``,
``evaluation.compile_rule(lazy=True)``): the same findings as compiled at
once, user rule files still checked before anything is read, and every
rule compiled at once under ``ADVISOR_STRICT``."""

from __future__ import annotations

import pytest
import yaml

from advisor import pipeline
from advisor.engine.evaluation import compile_rule, evaluate_rule
from advisor.engine.loader import builtin_rule_files, load_rules
from advisor.errors import ConfigError

RULES = load_rules()
CASES = [(r, e) for r in RULES for e in r.examples]


@pytest.mark.parametrize("rule,example", CASES, ids=[f"{r.name}:{e.name}" for r, e in CASES])
def test_lazily_compiled_rule_gives_the_same_outcome(rule, example):
    kw = dict(framework=example.framework, device=example.device)
    eager = evaluate_rule(compile_rule(rule), example.metrics, **kw)
    lazy = evaluate_rule(compile_rule(rule, lazy=True), example.metrics, **kw)
    assert lazy == eager


def _bad_rule(tmp_path, condition: str = "step.free_ratio >", message: str = "ok"):
    """A copy of a shipped rule (rules/*.yaml format) with a new id and name
    and the given condition and message."""
    data = yaml.safe_load(builtin_rule_files()[0].read_text())
    data.update(id="ADV999", name="broken-copy", condition=condition, message=message)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def test_a_user_rule_with_bad_cel_fails_before_reading(tmp_path, monkeypatch):
    monkeypatch.delenv("ADVISOR_STRICT", raising=False)
    with pytest.raises(ConfigError, match="broken-copy: condition: invalid CEL"):
        pipeline.compile_rules_for([_bad_rule(tmp_path)], None, "en")


def test_a_user_rule_with_a_bad_template_fails_before_reading(tmp_path, monkeypatch):
    monkeypatch.delenv("ADVISOR_STRICT", raising=False)
    path = _bad_rule(tmp_path, condition="true", message="{{ x.__class__ }}")
    with pytest.raises(ConfigError, match="broken-copy: invalid template"):
        pipeline.compile_rules_for([path], None, "en")


def test_a_lazy_rule_compiles_an_expression_when_first_run():
    compiled = compile_rule(RULES[0], lazy=True)
    assert "condition" in compiled.programs and not compiled.programs._programs
    compiled.programs["condition"]
    assert list(compiled.programs._programs) == ["condition"]


def test_strict_mode_compiles_every_rule_at_once(monkeypatch):
    monkeypatch.setenv("ADVISOR_STRICT", "1")
    compiled = pipeline.compile_rules_for((), None, "en")
    assert all(set(c.programs._programs) == set(c.programs) for c in compiled)
    monkeypatch.delenv("ADVISOR_STRICT")
    compiled = pipeline.compile_rules_for((), None, "en")
    assert not any(c.programs._programs for c in compiled)
