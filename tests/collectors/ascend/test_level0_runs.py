"""The same generated run at profiler Level0 and Level1 gives the same
exposed-allreduce verdict, each report naming the data it rests on.

Level0 (torch_npu's default ``profiler_level``) writes no communication.json
/ communication_matrix.json (database layout: no CommAnalyzer tables); see
test_level0.py for the readers. Runs: bench/scenarios at ``level`` 0 and 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.collectors.ascend import hccl_rows
from advisor.pipeline import analyze
from bench.scenarios import Spec, generate

#: The run the acceptance describes: 8 ranks, the all-reduce after all
#: compute, 26% of every step exposed, ~4% of it overlapped.
SPEC = Spec(ranks=8, steps=8, fault="exposed-allreduce", severity=0.26, seed=5, kernels_per_step=8)


def _finding(report, name: str):
    return next((f for f in report.all_findings() if f.rule == name), None)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    out = {}
    for fmt in ("ascend-text", "ascend-db"):
        for level in (0, 1):
            data, _ = generate(SPEC, tmp_path_factory.mktemp(f"{fmt}{level}") / "run", fmt, level)
            out[fmt, level] = analyze(data, jobs=1)
    return out


@pytest.mark.parametrize("fmt", ["ascend-text", "ascend-db"])
def test_level0_and_level1_give_the_same_exposed_allreduce_verdict(reports, fmt: str) -> None:
    found = {}
    for level in (0, 1):
        report = reports[fmt, level]
        assert report.verdict.status == "problems", (fmt, level)
        finding = _finding(report, "exposed-allreduce")
        assert finding is not None, (fmt, level, [f.rule for f in report.all_findings])
        found[level] = finding
        # the report says which level's data the finding rests on
        source = finding.evidence["comm.source"]
        assert f"Level{level}" in source and "communication analysis" in source
        assert f"Level{level}" in finding.message
        # the fusion proposal: bucket the gradients so reduction starts in backward
        assert "bucket_cap_mb" in finding.fix.code
    ratios = {level: f.evidence["comm.exposed_allreduce_ratio"] for level, f in found.items()}
    assert ratios[0] == pytest.approx(0.26, abs=0.03)
    assert ratios[0] == pytest.approx(ratios[1], abs=0.02)
    assert found[0].severity == found[1].severity


def test_level0_text_says_what_is_missing_for_the_bucket_size(reports) -> None:
    finding = _finding(reports["ascend-text", 0], "exposed-allreduce")
    assert finding.evidence["comm.allreduce_layout"] == "one"
    assert "no message size" in finding.message


def test_healthy_level0_run_keeps_exposed_allreduce_quiet(tmp_path: Path) -> None:
    data, _ = generate(Spec(ranks=4, steps=6, fault="healthy", seed=2, kernels_per_step=6),
                       tmp_path / "run", "ascend-text", 0)
    assert not list(data.rglob("communication.json"))
    report = analyze(data, jobs=1)
    assert _finding(report, "exposed-allreduce") is None
    assert report.metrics["comm.source"].value == hccl_rows.SOURCES[hccl_rows.LEVEL0]


