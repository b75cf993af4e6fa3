"""Matrix links are named by global ranks: the profilers write each link's
ends as ranks within its communication group."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.collectors import load_profile
from advisor.collectors.ascend.comm import LINK_COLUMNS, pending_columns
from advisor.collectors.ascend.link_ranks import double_hash, group_ranks, to_global
from advisor.collectors.parallel.batch_tables import PendingTable, build_one
from advisor.pipeline import analyze
from bench.scenarios import Spec, generate

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("fmt", ["ascend-text", "ascend-db"])
def test_a_slow_link_in_the_second_pipeline_stage_is_named_by_its_global_ranks(tmp_path, fmt):
    # 16 ranks, 2 stages: stage 1's data-parallel group holds ranks 8-15,
    # which its files call 0-7; the generator slows link 15 -> 8 (seed 0)
    data, labels = generate(Spec(ranks=16, steps=8, fault="slow-link", seed=0, kernels_per_step=4, pp=2),
                            tmp_path / "s", fmt)
    assert labels["link"] == "15-8"
    report = analyze(data, jobs=1)
    assert report.metrics["cluster.slowest_link"].value == "15-8"
    finding = next(f for f in report.findings if f.rule == "slow-link")
    assert sorted(finding.scope.ranks) == [8, 15]
    links = load_profile(data, jobs=1).links
    assert set(links.loc[links["rank"] >= 8, "src"]) <= set(range(8, 16))  # stage 1 stays in stage 1


def _links(rows: list[tuple], rank: int) -> PendingTable:
    cols = {"src": [r[0] for r in rows], "dst": [r[1] for r in rows], "group": [r[2] for r in rows],
            "size_mb": [1.0] * len(rows)}
    return pending_columns(cols, rank, LINK_COLUMNS)


def test_groups_map_by_the_metadata_and_unmapped_local_groups_are_left_out():
    tp = "10.0.0.1%enp_60000_tp_1_1736"
    groups = group_ranks({tp: {"group_name": "tp", "global_ranks": [13, 12, 14, 15]}})
    assert groups[double_hash(tp)] == [12, 13, 14, 15]
    rows = [(1, 1, double_hash(tp)), (1, 2, double_hash(tp)),  # rank 13 is local 1 of its tp group
            (13, 13, "world"), (13, 5, "world"),              # a group of the whole job, not listed
            (3, 3, "other"), (3, 0, "other")]                  # a local group nobody lists
    table, dropped = to_global(_links(rows, 13), 13, groups)
    assert dropped == 1
    got = build_one(table).to_pydict()
    assert list(zip(got["src"], got["dst"], got["group"])) == [
        (13, 13, double_hash(tp)), (13, 14, double_hash(tp)), (13, 13, "world"), (13, 5, "world")]


def test_a_local_rank_beyond_its_group_is_left_out_and_counted():
    tp = "tp_group"
    groups = group_ranks({tp: {"global_ranks": [8, 9, 10, 11]}})
    rows = [(1, 2, double_hash(tp)), (1, 9, double_hash(tp))]  # 9 cannot be a rank of a 4-rank group
    table, dropped = to_global(_links(rows, 9), 9, groups)
    assert dropped == 1 and build_one(table).to_pydict()["dst"] == [10]


def test_links_already_global_are_kept():
    tp = "tp_group"
    groups = group_ranks({tp: {"global_ranks": [4, 5, 6, 7]}})
    rows = [(5, 5, double_hash(tp)), (5, 6, double_hash(tp))]  # rank 5 wrote its own id, not 1
    table, dropped = to_global(_links(rows, 5), 5, groups)
    assert dropped == 0 and build_one(table).to_pydict()["dst"] == [5, 6]


def test_an_exposed_all_reduce_points_at_the_slow_link_it_waits_on(tmp_path):
    data, _ = generate(Spec(ranks=16, steps=12, fault="slow-nic", seed=3, kernels_per_step=4), tmp_path / "n")
    for lang, words in (("en", "slow link 9-1 (see slow-link)"), ("zh", "慢链路 9-1")):
        fired = {f.rule: f for f in analyze(data, jobs=1, lang=lang).findings}
        assert "slow-link" in fired and words in fired["exposed-allreduce"].message
    # without a slow link the message says nothing of one
    example = REPO / "examples" / "resnet50_8p_allreduce_tail" / "profiler"
    fired = {f.rule: f for f in analyze(example, jobs=1).findings}
    assert "slow-link" not in fired and "slow link" not in fired["exposed-allreduce"].message
