"""Transfer checks (advisor.metrics.transfer and the rules small-packets,
rdma-retransmission, slow-link-type and bandwidth-contention) on generated
Ascend clusters: communication.json and communication_matrix.json as
torch_npu writes them (bench.scenarios.ascend, the layout of the corpus's
cluster_communication.json and of the MindSpore profiling guide's
communication.json reference, with SDMA the sum of HCCS, PCIE and SIO as in
that corpus file), kernel_details.csv beside them, with the faults and
healthy controls."""

from __future__ import annotations

import pytest

from advisor.pipeline import analyze
from bench.scenarios import Spec, generate
from bench.scenarios.model import SMALL_PACKET_BUCKETS


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """fault -> (report, labels): 4 ranks on 2 hosts (RDMA between them), 5 steps."""
    out = {}
    for fault in ("healthy", "small-packets", "rdma-retransmission", "slow-link", "slow-link-type",
                  "bandwidth-contention"):
        data, labels = generate(Spec(ranks=4, steps=5, fault=fault, seed=4, kernels_per_step=4),
                                tmp_path_factory.mktemp(fault), "ascend-text")
        out[fault] = (analyze(data, jobs=1), labels)
    # the healthy run's gradients in 8 buckets: the last ones run after compute, alone
    data, labels = generate(Spec(ranks=4, steps=5, seed=4, kernels_per_step=4, collectives=8),
                            tmp_path_factory.mktemp("buckets"), "ascend-text")
    out["healthy-buckets"] = (analyze(data, jobs=1), labels)
    return out


def _rules(report) -> set[str]:
    return {f.rule for f in report.all_findings()}


def test_small_packets_fire_when_the_all_reduce_goes_in_small_pieces(runs):
    report, labels = runs["small-packets"]
    assert labels["buckets"] == SMALL_PACKET_BUCKETS  # 350 MB of SDMA in 64 transfers of 5.5 MB
    share = report.metrics["transfer.small_sdma_share"]
    assert share.value == pytest.approx(1.0)
    assert share.evidence["count_share"] == pytest.approx(1.0)
    assert report.metrics["transfer.small_rdma_share"].value == 0.0  # 2.8 MB RDMA pieces: not below 1 MB
    assert "small-packets" in _rules(report)


def test_small_packets_quiet_when_small_collectives_take_no_time(runs):
    report, _ = runs["healthy"]
    share = report.metrics["transfer.small_sdma_share"]
    # one 3 MB all-reduce beside the 350 MB one every step: half the operators
    # (msprof-analyze's count ratio, above its 20%), a few percent of the time
    assert share.evidence["count_share"] == pytest.approx(0.5)
    assert share.value < 0.1
    assert "small-packets" not in _rules(report)


def test_rdma_retransmission_fires_and_names_the_rank(runs):
    report, labels = runs["rdma-retransmission"]
    longest = report.metrics["transfer.rdma_longest_ms"]
    assert longest.value >= labels["retransmit_ms"]
    assert longest.evidence["rank"] == labels["ranks"][0] and longest.evidence["step"] == labels["steps"][0]
    finding = next(f for f in report.all_findings() if f.rule == "rdma-retransmission")
    assert finding.scope.ranks == labels["ranks"]
    assert f"rank {labels['ranks'][0]}" in finding.message


def test_rdma_retransmission_quiet_on_healthy_transfers(runs):
    report, _ = runs["healthy"]
    assert report.metrics["transfer.rdma_longest_ms"].value < 100.0
    assert "rdma-retransmission" not in _rules(report)


def _skip_reason(report, metric_id: str) -> str:
    return next(s.reason for s in report.skipped if s.what == f"metric {metric_id}")


def test_slow_link_type_fires_when_every_hccs_link_is_slow(runs):
    report, labels = runs["slow-link-type"]
    assert report.metrics["transfer.slow_link_type"].value == "HCCS"
    # healthy HCCS operators reach 18 GB/s, msprof's nominal: the ratio is the injected severity
    assert report.metrics["transfer.link_type_ratio"].value == pytest.approx(labels["severity"], rel=0.06)
    rules = _rules(report)
    assert "slow-link-type" in rules
    assert "slow-link" not in rules  # every link equally slow: no link is slow against its peers
    finding = next(f for f in report.all_findings() if f.rule == "slow-link-type")
    assert finding.estimated_gain_ms <= report.metrics["step.exposed_comm_ms"].value + 1e-3  # gains are rounded


def test_slow_link_type_quiet_on_healthy_links_and_on_one_slow_link(runs):
    healthy, _ = runs["healthy"]
    assert healthy.metrics["transfer.link_type_ratio"].value > 0.8
    assert "slow-link-type" not in _rules(healthy)
    one, _ = runs["slow-link"]
    assert "slow-link" in _rules(one)
    assert one.metrics["transfer.link_type_ratio"].value > 0.8  # the median rank's links are healthy
    assert "slow-link-type" not in _rules(one)


def test_bandwidth_contention_fires_and_is_not_taken_for_a_slow_link_type(runs):
    report, labels = runs["bandwidth-contention"]
    ratio = report.metrics["transfer.contention_ratio"]
    # the buckets beside compute move their bytes at `severity` of the alone ones' bandwidth
    assert ratio.value == pytest.approx(labels["severity"], rel=0.03)
    assert ratio.evidence["alone_ops"] > 0 and ratio.evidence["beside_ops"] > 0
    rules = _rules(report)
    assert "bandwidth-contention" in rules
    # the link types are judged on the operators alone: at their healthy speed
    assert report.metrics["transfer.link_type_ratio"].evidence["types"]["HCCS"]["judged"].startswith("operators alone")
    assert "slow-link-type" not in rules
    finding = next(f for f in report.all_findings() if f.rule == "bandwidth-contention")
    assert 0 < finding.estimated_gain_ms <= report.metrics["step.exposed_comm_ms"].value + 1e-3


def test_bandwidth_contention_quiet_when_operators_beside_compute_keep_their_speed(runs):
    report, _ = runs["healthy-buckets"]
    ratio = report.metrics["transfer.contention_ratio"]
    assert ratio.evidence["alone_ops"] > 0
    assert ratio.value == pytest.approx(1.0, abs=0.05)
    assert "bandwidth-contention" not in _rules(report)


def test_bandwidth_contention_not_evaluated_without_operators_alone(runs):
    report, _ = runs["healthy"]  # one all-reduce a step, overlapping compute
    assert "transfer.contention_ratio" not in report.metrics
    assert "nothing to compare" in _skip_reason(report, "transfer.contention_ratio")
    assert "bandwidth-contention" not in _rules(report)


def test_contention_reads_the_same_from_the_database_layout(runs, tmp_path):
    text, _ = runs["bandwidth-contention"]
    data, _ = generate(Spec(ranks=4, steps=5, fault="bandwidth-contention", seed=4, kernels_per_step=4),
                       tmp_path, "ascend-db")
    db = analyze(data, jobs=1)
    for mid in ("transfer.contention_ratio", "transfer.contention_ms", "transfer.link_type_ratio"):
        assert db.metrics[mid].value == pytest.approx(text.metrics[mid].value, rel=1e-3), mid
    assert "bandwidth-contention" in _rules(db)
