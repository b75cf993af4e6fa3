"""Startup cost and the user cache (advisor.runtime.cache).

* scikit-learn and ``scipy.stats`` (over a second to import) are never
  loaded by a report, also when the anomaly model has slow steps to judge.
* The CEL parser and the compiled report template come from the cache when
  it holds them, give the same results as freshly built ones, and a damaged
  or unwritable cache only costs the rebuild (a planted one: test_fs_cache.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from advisor.profile import Profile, RunMeta
from advisor.runtime import cache


def _run(code: str, **env: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False,
                         env={**os.environ, **env}, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _steps(n_steps: int, seed: int, stall_every: int = 0) -> Profile:
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(1, n_steps + 1):
        computing = rng.normal(70_000, 1_400)
        comm = rng.normal(10_000, 500)
        free = rng.normal(20_000, 800) + (40_000 if stall_every and step % stall_every == 0 else 0)
        rows.append(dict(rank=0, step=step, computing_us=computing, exposed_comm_us=comm,
                         free_us=free, duration_us=computing + comm + free))
    return Profile(meta=RunMeta(ranks=[0]), steps=pd.DataFrame(rows))


def test_report_path_does_not_import_sklearn_or_scipy_stats():
    out = _run("""
        import sys
        import advisor.cli, advisor.pipeline, advisor.reports, advisor.reports.terminal
        print(sorted(m for m in ("sklearn", "scipy.stats") if m in sys.modules))
    """)
    assert out.strip() == "[]"


def test_the_anomaly_model_judges_stalled_steps_without_sklearn_or_scipy_stats():
    code = """
        import sys
        sys.path.insert(0, {tests!r})
        from test_startup_and_cache import _steps
        from advisor.metrics import evaluate
        metrics, _ = evaluate(_steps(40, seed=5, stall_every={stall}))
        print(metrics["anomaly.step_outliers"].value, "sklearn" in sys.modules, "scipy.stats" in sys.modules)
    """
    tests = os.path.dirname(__file__)
    assert _run(code.format(tests=tests, stall=0)).split() == ["[]", "False", "False"]
    assert _run(code.format(tests=tests, stall=10)).split() == ["[10,", "20,", "30,", "40]", "False", "False"]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache folder, and the engine's CEL parser not yet built."""
    from celpy.celparser import CELParser

    from advisor.engine import cel

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    saved = CELParser.CEL_PARSER
    CELParser.CEL_PARSER = None
    cel.environment.cache_clear()
    yield tmp_path / "advisor"
    CELParser.CEL_PARSER = saved
    cel.environment.cache_clear()


def _parse_all(rules) -> list:
    from celpy.celparser import CELParser

    exprs = [e for r in rules for e in (r.condition, r.estimated_gain, r.time_at_stake, r.confidence) if e]
    return [CELParser.CEL_PARSER.parse(e) for e in exprs]


def test_cel_parser_from_the_cache_parses_the_same(fresh_cache):
    from celpy.celparser import CELParser

    from advisor.engine import cel
    from advisor.engine.loader import load_rules

    rules = load_rules()
    cel.environment()
    built = _parse_all(rules)
    assert next(p.name for p in fresh_cache.iterdir()).startswith("cel-parser-")
    CELParser.CEL_PARSER = None
    cel.environment.cache_clear()
    cel.environment()
    assert _parse_all(rules) == built
    finding = next(f for f in _analyze_stalls().findings if f.rule == "step-outlier")
    assert finding.scope.steps == [10, 20, 30, 40, 50, 60]


def _analyze_stalls():
    from advisor.pipeline import analyze_profile

    return analyze_profile(_steps(60, seed=2, stall_every=10))


def test_reports_are_the_same_built_cached_or_after_damage(tmp_path):
    """Three processes: an empty cache (filled), the full cache, a damaged
    one (rebuilt), and a cache path that cannot be a folder (no cache)."""
    code = f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_startup_and_cache import _analyze_stalls
        from advisor.reports import render_html, render_json
        report = _analyze_stalls()
        report.run.generated_at = "then"
        print(render_json(report) + render_html(report))
    """
    folder = tmp_path / "advisor"
    state = str(tmp_path / "state")
    first = _run(code, XDG_CACHE_HOME=str(tmp_path), XDG_STATE_HOME=state)
    names = sorted(p.name.split("-")[0] for p in folder.iterdir())
    assert names == ["cel", "jinja"]
    assert _run(code, XDG_CACHE_HOME=str(tmp_path), XDG_STATE_HOME=state) == first
    for entry in folder.iterdir():
        entry.write_bytes(b"not a cache entry")
    assert _run(code, XDG_CACHE_HOME=str(tmp_path), XDG_STATE_HOME=state) == first
    assert all(entry.read_bytes() != b"not a cache entry" for entry in folder.iterdir())
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _run(code, XDG_CACHE_HOME=str(blocker), XDG_STATE_HOME=state) == first
    assert blocker.read_text() == ""


def test_cache_write_is_atomic_and_read_returns_it(fresh_cache):
    cache.write("entry.bin", b"payload")
    assert cache.read("entry.bin") == b"payload"
    assert [p.name for p in fresh_cache.iterdir()] == ["entry.bin"]  # no temporary left behind
    assert cache.read("missing.bin") is None
