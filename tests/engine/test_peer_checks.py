"""The coverage table of the incumbent tools' checks (docs/peer_checks.yaml):
every rule, metric and command it names exists, and it lists every check
the installed incumbents make (when their virtual environment is here)."""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path

import pytest

from advisor.cli.app import cli
from advisor.engine import peer_checks
from advisor.engine.loader import load_rules
from advisor.metrics import REGISTRY

PEER_VENV = Path(os.environ.get("ADVISOR_PEER_VENV", "/tmp/venv-peers"))
SITE = next(iter(sorted(PEER_VENV.glob("lib/python3*/site-packages"))), None)


def _names():
    return {r.name for r in load_rules()}, set(REGISTRY), set(cli.commands)


def test_every_rule_metric_and_command_named_exists():
    table = peer_checks.load()
    rules, metrics, commands = _names()
    assert peer_checks.problems(table, rules, metrics, commands) == []
    covered, total = table.share()
    with_planned, _ = table.share(with_planned=True)
    print(f"\npeer checks covered: {covered}/{total} now, {with_planned}/{total} with the planned rules "
          f"({with_planned / total:.0%})")
    assert covered > 0 and total >= 40


def test_a_renamed_rule_or_metric_is_caught():
    table = peer_checks.load()
    rules, metrics, commands = _names()
    one = next(c for c in table.checks if c.rules and c.rules[0] in rules)
    renamed = dataclasses.replace(one, rules=("no-such-rule",), metrics=("step.no_such_metric",))
    broken = dataclasses.replace(table, checks=(renamed,))
    found = peer_checks.problems(broken, rules, metrics, commands)
    assert any("no rule named 'no-such-rule'" in p for p in found)
    assert any("no metric 'step.no_such_metric'" in p for p in found)
    # a planned name that has landed must leave the planned list
    landed = dataclasses.replace(table, planned=frozenset({one.rules[0]}), checks=())
    assert peer_checks.problems(landed, rules, metrics, commands) == [
        f"planned rule {one.rules[0]!r} exists now: remove it from `planned`"]


def test_each_check_gives_a_cover_or_the_data_it_would_need():
    for c in peer_checks.load().checks:
        assert bool(c.rules or c.metrics or c.command) != bool(c.not_covered), c.check
        assert c.source.endswith(".py"), c.check


def test_categories_match_the_rows_the_incumbent_writes():
    # category strings as msprof-analyze 26.2 writes them: OptimizeItem's first
    # argument in analyzer/*, the prompt classes (display/prompt/en/*.py) and
    # the rules' `problem` texts (rules/en/*.yaml); per-rank analyses prefix
    # "RANK n " (operator_checker.py) and pipeline stages "Rank n "
    # (pp_stage_computation_analyzer.py)
    table = peer_checks.load()
    expect = {
        "slow rank": "slow-rank", "slow link": "slow-link", "Packet Analysis": "packet",
        "RANK 4 operator dynamic shape issues": "dynamic-shape", "Rank 2 AICPU Issues": "aicpu",
        "Synchronize Stream Issues": "synchronize-stream", "Conjectured Gc": "conjectured-gc",
        "GC Analysis": "gc", "Memory Operator Issues": "memory-operators", "FA Operator Perf Analysis":
        "aicore-performance", "Kernel compare of Rank 0 Step 1 and Rank 1 Step 1": "rank-comparison",
    }
    for category, check in expect.items():
        got = table.for_category(category)
        assert got is not None and got.check == check, category
    assert table.for_category("Something else entirely") is None


def _imported_analyzer_modules(interface: Path) -> set[str]:
    tree = ast.parse(interface.read_text(encoding="utf-8"))
    return {node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and ".analyzer." in node.module}


@pytest.mark.skipif(SITE is None or not (SITE / "msprof_analyze").is_dir(),
                    reason=f"msprof-analyze is not installed in {PEER_VENV} (set ADVISOR_PEER_VENV)")
def test_every_msprof_analyze_analyzer_has_a_row():
    """Each analyzer `advisor all` runs (interface.py's imports) has a row
    whose source lies in the analyzer's folder."""
    sources = {c.source for c in peer_checks.load().checks if c.peer == "msprof-analyze"}
    modules = _imported_analyzer_modules(SITE / "msprof_analyze/advisor/interface/interface.py")
    assert len(modules) >= 20
    for module in modules:
        folder = str(Path(*module.split(".")).parent)
        assert any(s.startswith(folder + "/") for s in sources), module
    for s in sources:
        assert (SITE / s).is_file(), s


@pytest.mark.skipif(SITE is None or not (SITE / "hta").is_dir(),
                    reason=f"HolisticTraceAnalysis is not installed in {PEER_VENV} (set ADVISOR_PEER_VENV)")
def test_every_hta_analysis_has_a_row():
    """Each public analysis of TraceAnalysis is named in a row's title,
    except the ones that only list steps or write a trace file."""
    not_checks = {"get_profiler_steps", "generate_trace_with_counters", "overlay_critical_path_analysis"}
    tree = ast.parse((SITE / "hta/trace_analysis.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TraceAnalysis")
    methods = {f.name for f in cls.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}
    titles = " ".join(c.title for c in peer_checks.load().checks if c.peer == "hta")
    missing = sorted(m for m in methods - not_checks if m not in titles)
    assert missing == []
    for c in peer_checks.load().checks:
        if c.peer == "hta":
            assert (SITE / c.source).is_file(), c.source
