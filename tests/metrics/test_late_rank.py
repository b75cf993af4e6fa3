"""Per collective, the rank that arrives last (``cluster.late_rank``): it
waits least inside the collective, and the others wait its lead for it."""

from __future__ import annotations


import numpy as np
import pytest


from advisor.pipeline import analyze
from bench.scenarios import Spec, build, generate


@pytest.mark.parametrize("fmt", ["ascend-text", "ascend-db"])
def test_a_straggler_is_the_last_to_arrive_at_the_all_reduce(tmp_path, fmt):
    spec = Spec(ranks=16, steps=10, fault="slow-rank", seed=2, kernels_per_step=4)
    data, labels = generate(spec, tmp_path, fmt)
    report = analyze(data, jobs=1)
    late = report.metrics["cluster.late_rank"]
    assert [late.value] == labels["ranks"]
    assert late.evidence["kind"] == "allreduce" and late.evidence["zscore"] >= 3.5
    # the others wait for it what it arrives late by, from the generator's own
    # waits (us): per rank the median over steady steps, median rank minus it
    slow = labels["ranks"][0]
    per_rank = np.median(build(spec).wait[1:], axis=0)
    assert report.metrics["cluster.late_rank_lead_ms"].value == pytest.approx(
        (np.median(per_rank) - per_rank[slow]) / 1000, rel=1e-3)
    finding = next(f for f in report.findings if f.rule == "slow-rank")
    assert f"Rank {slow} is also the last to arrive at the allreduce collectives" in finding.message
    assert finding.confidence == 0.9
    zh = analyze(data, jobs=1, lang="zh")
    assert f"卡 {slow} 也是最后到达 allreduce 集合通信的卡" in next(f for f in zh.findings if f.rule == "slow-rank").message


@pytest.mark.parametrize("fault,pp", [("healthy", 1), ("data-starved", 1), ("slow-stage", 2)])
def test_no_late_rank_without_one_rank_standing_out(tmp_path, fault, pp):
    """Healthy runs; a host of half the ranks (no single rank stands out of
    the median); pipeline receives, which wait for the previous stage by
    design and are not collectives."""
    spec = Spec(ranks=16, steps=10, fault=fault, seed=2, kernels_per_step=4, pp=pp)
    data, _ = generate(spec, tmp_path, "ascend-text")
    report = analyze(data, jobs=1)
    assert "cluster.late_rank" not in report.metrics
    assert any(s.what == "metric cluster.late_rank" for s in report.skipped)


def test_traces_without_measured_waits_are_not_judged(tmp_path):
    """Kineto traces carry no per-operator wait (peers are matched instead,
    ``comm.peer_waits``): the metric is not evaluated, and says why."""
    spec = Spec(ranks=8, steps=6, fault="slow-rank", seed=2, kernels_per_step=4)
    data, _ = generate(spec, tmp_path, "kineto")
    report = analyze(data, jobs=1)
    assert "cluster.late_rank" not in report.metrics
    reason = next(s.reason for s in report.skipped if s.what == "metric cluster.late_rank")
    assert "wait" in reason
