"""Transfer checks (advisor.metrics.transfer and the rules small-packets and
rdma-retransmission) on generated Ascend clusters: communication.json and
communication_matrix.json as torch_npu writes them (bench.scenarios.ascend,
the layout of the corpus's cluster_communication.json), with the
small-packets and rdma-retransmission faults and a healthy control."""

from __future__ import annotations

import pytest

from advisor.pipeline import analyze
from bench.scenarios import Spec, generate
from bench.scenarios.model import SMALL_PACKET_BUCKETS


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """fault -> (report, labels): 4 ranks on 2 hosts (RDMA between them), 5 steps."""
    out = {}
    for fault in ("healthy", "small-packets", "rdma-retransmission"):
        data, labels = generate(Spec(ranks=4, steps=5, fault=fault, seed=4, kernels_per_step=4),
                                tmp_path_factory.mktemp(fault), "ascend-text")
        out[fault] = (analyze(data, jobs=1), labels)
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
