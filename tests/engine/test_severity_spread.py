"""Severity above medium rests on what the steps support: on a real trace
the per-step metrics carry their standard error over the steady steps, and a
finding whose time at stake is one of them carries the 90% lower bound the
engine sized its severity with (docs/decisions/0046)."""

from __future__ import annotations

from pathlib import Path

import pytest

import advisor
from advisor.collectors import load_profile
from advisor.engine.evaluation import SEVERITY_BY_GAIN
from advisor.metrics import evaluate
from advisor.metrics.steps_view import steady_steps

V100_RUN = Path("kineto-tb-plugin/resnet50_num_workers_0")  # 11 steady steps, data wait ~35% of each


def test_data_wait_carries_its_spread_over_the_steady_steps(corpus):
    profile = load_profile(corpus / V100_RUN, jobs=1)
    metrics, _ = evaluate(profile)
    wait = metrics["step.data_wait_ms"]
    per_step = steady_steps(profile).groupby("step")["data_wait_us"].mean() / 1000
    assert wait.samples == len(per_step) >= 2
    assert wait.stderr == pytest.approx(per_step.std(ddof=1) / len(per_step) ** 0.5)
    assert wait.value == pytest.approx(per_step.mean())


def test_a_finding_keeps_its_band_only_when_the_lower_bound_reaches_it(corpus):
    report = advisor.analyze(corpus / V100_RUN)
    step_ms = report.metrics["step.time_ms"].value
    bounded = [f for f in report.findings if f.time_at_stake_low_ms is not None]
    assert "input-bound" in {f.rule for f in bounded}
    floors = dict((level, bound) for bound, level in SEVERITY_BY_GAIN)
    for f in bounded:
        assert 0 <= f.time_at_stake_low_ms < f.time_at_stake_ms
        if f.severity in ("high", "critical"):
            assert 100 * f.time_at_stake_low_ms / step_ms >= floors[f.severity], f
