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


def test_idle_time_without_a_cause_is_not_said_to_be_unrecorded():
    """device-idle fires where the idle time is not attributed to a host
    cause; an Ascend profile with trace_view.json does record the host, so
    the message says the profile does not attribute the time, not that it
    does not record the host."""
    message = _message("device-idle")
    assert "does not attribute those stretches" in message
    assert "does not record what the host was doing" not in message


def test_links_slow_through_one_rank_name_that_rank_s_side_not_a_nic_alone():
    message = _message("slow-link", example=1)  # both RDMA links of rank 1 at 28% of their peers
    assert "run through rank 1" in message
    assert "its NIC or port for RDMA, its device's link for HCCS or PCIe" in message


def test_a_slow_link_saves_at_most_the_exposed_communication():
    """Its transfers' excess is what repairing the link saves where the
    collective is exposed: with 2 ms of exposed communication a step, no
    more than that."""
    compiled = compile_rule(next(r for r in load_rules([]) if r.name == "slow-link"))
    values = {**[e for e in compiled.rule.examples if e.expect == "fire"][0].metrics, "step.exposed_comm_ms": 2.0}
    assert values["cluster.slowest_link_excess_ms"] > 2.0
    finding, _ = evaluate_rule(compiled, values, framework="pytorch", device="ascend",
                               run=run_context(framework="pytorch", device="ascend"))
    assert finding.time_at_stake_ms == pytest.approx(2.0) and finding.estimated_gain_ms <= 2.0
