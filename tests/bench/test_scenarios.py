"""The scenario generator writes files the real collectors read, and the
labelled faults of clear cases are found. Small and fast; no timing asserts."""

from __future__ import annotations

import orjson
import pytest

from advisor.collectors import load_profile
from advisor.pipeline import analyze
from bench.scenarios import Spec, build, generate

CLUSTER_RULES = {"slow-rank", "slow-link", "step-outlier"}


def _fired(report) -> dict:
    return {f.rule: f for f in report.findings}


def test_step_trace_is_consistent_with_synchronous_training():
    sc = build(Spec(ranks=8, steps=6, fault="slow-rank", seed=1, severity=0.2))
    slow = sc.labels["ranks"][0]
    total = sc.computing + sc.exposed + sc.free
    assert abs(total - total[:, :1]).max() < 1e-6  # same step time on every rank
    others = [r for r in range(8) if r != slow]
    # the slow rank waits least; the others show its excess as communication wait
    assert (sc.exposed[1:, slow] < sc.exposed[1:, others].min(axis=1)).all()


def test_text_layout_reads_back(tmp_path):
    data, labels = generate(Spec(ranks=4, steps=5, seed=2, kernels_per_step=6), tmp_path / "s")
    assert orjson.loads((tmp_path / "s" / "labels.json").read_bytes())["fault"] == "healthy"
    p = load_profile(data, jobs=1)
    assert p.meta.ranks == [0, 1, 2, 3]
    assert p.meta.framework == "torch_npu"
    assert len(p.steps) == 20 and p.steps["duration_us"].gt(0).all()
    for table in ("ops", "comm", "bandwidth", "links"):
        assert p.table(table) is not None, table
    assert {"HCCS", "LOCAL"} <= set(p.links["transport"])
    assert set(p.ops["core"]) >= {"AI_CORE", "HCCL"}


def test_kineto_layout_reads_back(tmp_path):
    data, _ = generate(Spec(ranks=2, steps=4, seed=3, kernels_per_step=6), tmp_path / "k", "kineto")
    p = load_profile(data, jobs=1)
    assert p.meta.ranks == [0, 1] and not p.meta.ranks_inferred
    assert p.steps["step"].tolist() == [1, 2, 3, 4, 1, 2, 3, 4]
    assert (p.steps["communication_us"] > 0).all()
    assert "allreduce" in set(p.comm["kind"])


def test_db_layout_reads_back(tmp_path):
    pytest.importorskip("sqlite3")
    data, _ = generate(Spec(ranks=2, steps=4, seed=4, kernels_per_step=4), tmp_path / "d", "ascend-db")
    assert list(data.rglob("ascend_pytorch_profiler_*.db"))
    p = load_profile(data, jobs=1)
    assert p.meta.ranks == [0, 1]
    assert p.steps is not None and len(p.steps) == 8


def test_slow_rank_is_found(tmp_path):
    data, labels = generate(Spec(ranks=8, steps=12, fault="slow-rank", seed=5, severity=0.25,
                                 kernels_per_step=4), tmp_path / "r")
    fired = _fired(analyze(data, jobs=1))
    assert "slow-rank" in fired
    assert fired["slow-rank"].scope.ranks == labels["ranks"]


def test_slow_link_is_found(tmp_path):
    data, labels = generate(Spec(ranks=8, steps=8, fault="slow-link", seed=6, severity=0.2,
                                 kernels_per_step=4), tmp_path / "l")
    report = analyze(data, jobs=1)
    assert report.metrics["cluster.slowest_link"].value == labels["link"]
    finding = _fired(report)["slow-link"]
    # the gain: per step, the link's transfer time beyond what its peers'
    # bandwidth would need; the generator slowed it to `severity` of theirs
    links = load_profile(data, jobs=1).links
    src, dst = map(int, labels["link"].split("-"))
    own = links[(links["src"] == src) & (links["dst"] == dst)]
    expected = own["time_ms"].sum() / own["step"].nunique() * (1 - labels["severity"])
    assert finding.estimated_gain_ms == pytest.approx(expected, rel=0.2)


def test_periodic_stalls_in_ascend_step_traces_are_found(tmp_path):
    """Ascend durations are the sum of their components; the anomaly model must
    still separate stall steps (regression: a singular covariance hid them)."""
    data, labels = generate(Spec(ranks=8, steps=20, fault="stall", seed=0, kernels_per_step=4), tmp_path / "s")
    fired = _fired(analyze(data, jobs=1))
    assert fired["step-outlier"].scope.steps == labels["steps"]


def test_healthy_has_no_cluster_finding(tmp_path):
    data, _ = generate(Spec(ranks=8, steps=12, seed=7, kernels_per_step=4), tmp_path / "h")
    assert not CLUSTER_RULES & set(_fired(analyze(data, jobs=1)))


def test_labels_name_the_fault():
    starved = build(Spec(ranks=16, steps=4, fault="data-starved", seed=8)).labels
    assert len(starved["ranks"]) == 8 and starved["ranks"] == list(range(starved["ranks"][0], starved["ranks"][0] + 8))
    stall = build(Spec(ranks=4, steps=20, fault="stall", seed=9, stall_every=5)).labels
    assert stall["steps"] == [5, 10, 15, 20]
    stage = build(Spec(ranks=8, steps=4, fault="slow-stage", seed=10)).labels
    assert stage["pp"] == 2 and len(stage["ranks"]) == 4
