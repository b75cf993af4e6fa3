"""A finding's message says what its metrics establish and no more: each
case renders a built-in rule on one of its own examples, changed where the
claim depends on it."""

from __future__ import annotations

import pytest

from advisor.engine.evaluation import compile_rule, evaluate_rule, run_context
from advisor.engine.loader import load_rules


def _message(rule: str, example: int = 0, **metrics) -> str:
    compiled = compile_rule(next(r for r in load_rules([]) if r.name == rule))
    fired = [e for e in compiled.rule.examples if e.expect == "fire"]
    values = {**fired[example].metrics, **metrics}
    finding, skip = evaluate_rule(compiled, values, framework="pytorch", device="gpu",
                                  run=run_context(framework="pytorch", device="gpu"))
    assert skip is None and finding is not None
    return finding.message


@pytest.mark.parametrize("ratio, says", [
    (3.0, "the split gives it more work"),
    (1.0, "the same work takes it longer"),
    (0.5, "fewer FLOPs than the other stages"),
])
def test_a_slow_stage_is_explained_by_its_flops_only_as_far_as_they_go(ratio, says):
    message = _message("slow-pipeline-stage", **{"pipeline.slowest_stage_flops_ratio": ratio})
    assert says in message
    if ratio != 1.0:
        assert "about those of the other stages" not in message


def test_a_rank_slower_in_every_step_is_said_to_be_so_only_with_a_measured_scatter():
    steady = _message("slow-rank", **{"cluster.rank_count": 2, "cluster.slow_rank_step_share": 1.0,
                                      "cluster.slow_rank_zscore": 9.0})
    unmeasured = _message("slow-rank", **{"cluster.rank_count": 2, "cluster.slow_rank_step_share": 1.0})
    assert "by about as much in each" in steady
    assert "by about as much in each" not in unmeasured
