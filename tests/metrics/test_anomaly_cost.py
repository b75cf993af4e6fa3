"""The anomaly model's cost does not depend on the layout: it fits on
per-rank summaries, only when some rank is materially slower, with the
numpy fit of advisor.metrics.robust_fit and the closed-form quantiles of
advisor.metrics.quantiles (scikit-learn and SciPy, over a second of
imports, are never loaded)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.metrics import anomaly
from advisor.profile import Profile, RunMeta

#: The checkout: the scripts run in a fresh interpreter import the test modules from it.
REPO = Path(__file__).resolve().parents[2]


def _cluster(ranks: int, seed: int, slow: dict[int, float] = {}) -> Profile:  # noqa: B006 -- read only
    """``ranks`` ranks x 10 steps of ~100 ms (1% noise per rank); ``slow``:
    rank -> extra computing in us on every step."""
    rng = np.random.default_rng(seed)
    rows = []
    for rank in range(ranks):
        base = rng.normal(70_000, 700)
        for step in range(1, 11):
            computing = base * rng.normal(1, 0.003) + slow.get(rank, 0.0)
            free = rng.normal(20_000, 300)
            rows.append(dict(rank=rank, step=step, computing_us=computing, free_us=free,
                             data_wait_us=rng.normal(3_000, 60), duration_us=computing + free + 10_000))
    return Profile(meta=RunMeta(ranks=list(range(ranks))), steps=pd.DataFrame(rows))


def test_a_cluster_is_judged_without_sklearn_or_scipy():
    """1024 ranks with two slow ones, a healthy cluster and one whose ranks
    compute exactly alike: the calls, and neither heavy module loaded."""
    code = textwrap.dedent("""
        import sys
        from tests.metrics.test_anomaly_cost import _cluster
        from advisor.metrics import anomaly
        slow = anomaly._fit_ranks(_cluster(1024, seed=4, slow={38: 15_000, 931: 12_000}))
        healthy = anomaly._fit_ranks(_cluster(1024, seed=5))
        p = _cluster(64, seed=6)
        p.steps["computing_us"] = 70_000.0
        alike = anomaly._fit_ranks(p)
        print(slow["outliers"], healthy["outliers"], alike["outliers"],
              "sklearn" in sys.modules, "scipy" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[38,", "931]", "[]", "[]", "False", "False"]


@pytest.mark.parametrize("ranks", [64, 1024])
def test_a_slow_rank_is_found_at_any_size(ranks):
    slow = ranks // 3
    m = anomaly._fit_ranks(_cluster(ranks, seed=7, slow={slow: 14_000}))
    assert m["outliers"] == [slow] and m["drivers"][slow] == ["computing"]


def _steps(slow: tuple[int, ...], steps: int = 21) -> Profile:
    """One rank, ``steps`` steps of ~90 ms (the first is left out as warm-up);
    the ``slow`` steps compute 30 ms longer."""
    rng = np.random.default_rng(3)
    rows = []
    for step in range(1, steps + 1):
        computing = rng.normal(70_000, 300) + (30_000 if step in slow else 0)
        free = rng.normal(20_000, 200)
        rows.append(dict(rank=0, step=step, computing_us=computing, free_us=free, duration_us=computing + free))
    return Profile(meta=RunMeta(ranks=[0]), steps=pd.DataFrame(rows))


def test_the_recurrence_rate_is_the_clopper_pearson_lower_bound():
    """4 flagged of 20 steady steps at no fixed interval support a rate of
    9.0% (the metric's definition: the 10% quantile of Beta(4, 17))."""
    v = anomaly.step_outlier_recurring_ms(_steps(slow=(3, 4, 11, 17)))
    assert (v.evidence["flagged"], v.evidence["steps"], v.evidence["rate_from"]) == (4, 20, "lower bound")
    assert round(v.evidence["rate"], 3) == 0.090


def test_the_step_model_loads_no_scipy():
    """Even steps (recurring cost 0) and flagged ones (the Beta quantile
    taken): SciPy stays unloaded."""
    code = textwrap.dedent("""
        import sys
        from tests.metrics.test_anomaly_cost import _steps
        from advisor.metrics import anomaly
        even = anomaly.step_outlier_recurring_ms(_steps(slow=())).value
        flagged = anomaly.step_outlier_recurring_ms(_steps(slow=(3, 4, 11, 17))).evidence["rate_from"]
        print(even, flagged.replace(" ", "_"), "scipy" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.0", "lower_bound", "False"]
