"""Pipeline-parallel stage metrics and the slow-pipeline-stage rule."""

from __future__ import annotations

import pytest

from advisor.collectors import load_profile
from advisor.metrics import evaluate
from advisor.pipeline import analyze

from bench.scenarios.ascend import sample_rank, write_db, write_text

#: Stage 0 (ranks 0, 1) waits 3 ms per 10 ms step in Receive; stage 1 (ranks 2, 3) 0.5 ms.
RECEIVE_US = {0: 3000.0, 1: 3000.0, 2: 500.0, 3: 500.0}


def _pipeline(parent, pp: int | None, writer=write_text):
    for rank, receive in RECEIVE_US.items():
        spec = sample_rank(rank, pp_receive=receive)
        if pp is not None:
            spec.parallel, spec.world_size = {"pp": pp}, 4
        writer(parent, spec)
    return parent


def test_stages_grouped_by_pp(tmp_path):
    profile = load_profile(_pipeline(tmp_path, pp=2), jobs=1)
    assert profile.meta.parallel == {"pp": 2} and profile.meta.world_size == 4
    m, _ = evaluate(profile)
    assert m["pipeline.slowest_stage"].value == 1
    assert m["pipeline.slowest_stage_ranks"].value == [2, 3]
    ev = m["pipeline.slowest_stage"].evidence
    assert ev["grouped_by"] == "stage"
    assert ev["per_stage"]["0"]["stage_ms"] == pytest.approx(7.0)
    assert ev["per_stage"]["1"]["stage_ms"] == pytest.approx(9.5)
    assert ev["per_stage"]["0"]["receive_ms"] == pytest.approx(3.0)
    # pure communication 1.8 ms per step, 0.5 ms of it Receive on stage 1
    assert ev["per_stage"]["1"]["pure_comm_no_receive_ms"] == pytest.approx(1.3)
    # 9.5 - 7.0, the other stage (the median of both, 8.25, would halve the gap it waits)
    assert m["pipeline.slowest_stage_excess_ms"].value == pytest.approx(2.5)
    assert m["pipeline.slowest_stage_excess_ratio"].value == pytest.approx(0.25)
    assert m["pipeline.stage_spread_ratio"].value == pytest.approx(2.5 / 8.25, rel=1e-4)
    assert m["pipeline.bubble_ratio"].value == pytest.approx((0.3 + 0.3 + 0.05 + 0.05) / 4)
    report = analyze(tmp_path, jobs=1)
    finding = next(f for f in report.findings if f.rule == "slow-pipeline-stage")
    assert finding.id == "ADV009" and finding.scope.ranks == [2, 3]
    assert "stage 1" in finding.message


@pytest.mark.parametrize("writer,where", [(write_text, "json"), (write_db, "json"), (write_db, "META_DATA")])
def test_stages_from_the_pipeline_groups_in_the_metadata(tmp_path, writer, where):
    """A rank order where pipeline parallel is not the outermost dimension:
    the stages are ranks {0, 2} and {1, 3} (pipeline groups [0, 1] and
    [2, 3]), which ``rank // (world / pp)`` would get wrong. The groups come
    from profiler_metadata.json, or from the database's META_DATA table."""
    receive = {0: 3000.0, 2: 3000.0, 1: 500.0, 3: 500.0}
    for rank, wait in receive.items():
        spec = sample_rank(rank, pp_receive=wait)
        spec.parallel, spec.world_size = {"pp": 2}, 4
        chain = [rank - rank % 2, rank - rank % 2 + 1]
        spec.group_info = {f"10.0.0.1%enp_60000_pp_{chain[0]}_1": {"group_name": "pp", "group_rank": rank % 2,
                                                                   "global_ranks": chain}}
        root = writer(tmp_path, spec)
        if where == "META_DATA":
            (root / "profiler_metadata.json").unlink()
    profile = load_profile(tmp_path, jobs=1)
    assert profile.meta.stages == {0: 0, 1: 1, 2: 0, 3: 1}
    m, _ = evaluate(profile)
    assert m["pipeline.slowest_stage"].evidence["grouped_by"] == "stage"
    assert m["pipeline.slowest_stage_ranks"].value == [1, 3]
    assert m["pipeline.slowest_stage_excess_ms"].value == pytest.approx(2.5)


def test_without_layout_each_rank_is_a_group(tmp_path):
    m, _ = evaluate(load_profile(_pipeline(tmp_path, pp=None), jobs=1))
    assert m["pipeline.slowest_stage"].evidence["grouped_by"] == "rank"
    assert m["pipeline.slowest_stage"].value == 2  # first of the slowest ranks


def test_pp_1_is_not_evaluated(tmp_path):
    for rank in range(2):
        spec = sample_rank(rank)
        spec.parallel, spec.world_size = {"pp": 1}, 2
        write_text(tmp_path, spec)
    m, skipped = evaluate(load_profile(tmp_path, jobs=1))
    assert "pipeline.slowest_stage" not in m
    reason = next(s.reason for s in skipped if s.what == "metric pipeline.slowest_stage")
    assert "pp=1" in reason


def test_database_layout_gives_the_same_stage_metrics(tmp_path):
    text, _ = evaluate(load_profile(_pipeline(tmp_path / "t", pp=2), jobs=1))
    db, _ = evaluate(load_profile(_pipeline(tmp_path / "d", pp=2, writer=write_db), jobs=1))
    for mid in [k for k in text if k.startswith("pipeline.")]:
        assert db[mid].model_dump() == text[mid].model_dump(), mid
