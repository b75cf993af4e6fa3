"""The anomaly model on generated step series: it finds injected stalls and
stays silent on healthy runs (false-positive rate measured over many seeds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.metrics import evaluate
from advisor.pipeline import analyze_profile
from advisor.profile import Profile, RunMeta


def _profile(n_steps: int, seed: int, stall_every: int = 0, ranks: int = 1) -> Profile:
    """Steps of ~100 ms (2% noise) split into compute/comm/free; optional stalls
    of +40 ms free time every ``stall_every`` steps."""
    rng = np.random.default_rng(seed)
    rows = []
    for rank in range(ranks):
        for step in range(1, n_steps + 1):
            computing = rng.normal(70_000, 1_400)
            comm = rng.normal(10_000, 500)
            free = rng.normal(20_000, 800)
            if stall_every and step % stall_every == 0:
                free += 40_000
            rows.append(dict(rank=rank, step=step, computing_us=computing, exposed_comm_us=comm,
                             free_us=free, duration_us=computing + comm + free))
    return Profile(meta=RunMeta(ranks=list(range(ranks))), steps=pd.DataFrame(rows))


def test_periodic_stalls_are_found_with_their_period_and_driver():
    metrics, _ = evaluate(_profile(60, seed=1, stall_every=10, ranks=2))
    assert metrics["anomaly.step_outliers"].value == [10, 20, 30, 40, 50, 60]
    assert metrics["anomaly.step_outlier_period"].value == 10
    assert metrics["anomaly.step_outlier_drivers"].value == ["free"]
    assert metrics["anomaly.step_outlier_excess_ms"].value == pytest.approx(40 * 6 / 59, rel=0.15)


def test_step_outlier_rule_fires_on_stalls():
    report = analyze_profile(_profile(60, seed=2, stall_every=10))
    finding = next(f for f in report.findings if f.rule == "step-outlier")
    assert finding.scope.steps == [10, 20, 30, 40, 50, 60]
    assert "every 10 steps" in finding.message


@pytest.mark.parametrize("n_steps", [10, 30, 100])
def test_false_positive_rate_on_healthy_runs(n_steps):
    """Across 40 healthy runs, at most 1 run may have any step flagged."""
    runs_with_alarm = 0
    for seed in range(40):
        metrics, _ = evaluate(_profile(n_steps, seed=100 + seed))
        runs_with_alarm += bool(metrics["anomaly.step_outliers"].value)
    assert runs_with_alarm <= 1


def test_too_few_steps_is_not_evaluated():
    metrics, skipped = evaluate(_profile(5, seed=3))
    assert "anomaly.step_outliers" not in metrics
    assert any("steady steps" in s.reason for s in skipped if s.what == "metric anomaly.step_outliers")
