"""Every shipped rule validates and its own examples fire or pass as stated,
with the severity and gain they state, every expression evaluating on them
(one generic test, SQLFluff-style: adding a rule adds cases, not test code)."""

from __future__ import annotations

import json
import re

import pytest

from advisor.engine.check import check_example, check_rule, check_rules, referenced_metrics
from advisor.engine.evaluation import compile_rule, evaluate_rule
from advisor.engine.loader import builtin_rule_files, load_rules
from advisor.metrics import REGISTRY

RULES = load_rules()
CASES = [(r, e) for r in RULES for e in r.examples]

# The public contract: users' CI configs refer to these names.
CONTRACT = {
    "input-bound", "slow-dataset-op", "fp32-compute", "exposed-allreduce",
    "slow-rank", "slow-link", "host-bound",
}


def test_contract_rule_names_are_shipped():
    assert CONTRACT <= {r.name for r in RULES}


def test_ids_and_names_unique():
    assert len({r.id for r in RULES}) == len(RULES) == len({r.name for r in RULES})
    assert len(builtin_rule_files()) == len(RULES)


@pytest.mark.parametrize("rule,example", CASES, ids=[f"{r.name}:{e.name}" for r, e in CASES])
def test_rule_example(rule, example):
    compiled = compile_rule(rule)
    assert check_example(compiled, example) == []
    finding, _ = evaluate_rule(compiled, example.metrics, framework=example.framework, device=example.device,
                               checked=True)
    if finding is not None:
        assert finding.rule == rule.name and finding.message
        assert "{{" not in finding.message and "{%" not in finding.message
        assert finding.fix is not None and finding.fix.text
        # the evidence holds every metric the rule reads that the example has
        assert _metrics_read(rule) & {m for m, v in example.metrics.items() if v is not None} <= set(finding.evidence)


def _metrics_read(rule) -> set[str]:
    """Registered metric ids named in the rule's expressions and texts (found
    by id, independently of the engine's namespace pattern)."""
    text = json.dumps(rule.model_dump(include={"requires", "requires_any", "condition", "time_at_stake",
                                               "estimated_gain", "confidence", "scope", "message", "fix"}))
    return {m for m in REGISTRY if re.search(rf"(?<![\w.]){re.escape(m)}(?![\w])", text)}


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_is_valid_and_names_known_metrics(rule):
    assert check_rule(rule) == []
    assert referenced_metrics(rule)


def test_builtin_rules_validate_as_a_set():
    problems, count = check_rules([])
    assert problems == [] and count == len(RULES)
