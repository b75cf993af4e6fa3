"""The Python API a notebook user reaches for first: ``print(report)`` is one
line, ``report.save`` writes what ``advisor report -o`` writes,
``report.to_markdown`` is report.md, and ``advisor.compare`` returns what
``advisor compare`` writes as compare.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import advisor
from advisor.errors import ConfigError, InputError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BOUND, FIXED = EXAMPLES / "resnet50_data_bound", EXAMPLES / "resnet50_data_fixed"


@pytest.fixture(scope="module")
def bound():
    return advisor.analyze(BOUND, jobs=1, use_config=False)


@pytest.fixture(scope="module")
def fixed():
    return advisor.analyze(FIXED, jobs=1, use_config=False)


def _undated(text: str) -> str:
    """The text without the time it was generated at."""
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", "<time>", text)


def test_print_is_one_short_line(bound, capsys) -> None:
    print(bound)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and len(out) < 300
    top = bound.findings[0]
    assert out.startswith(f"<advisor Report {BOUND}: problems, 1 finding(s) (+1 contributing); ")
    assert f"top: [{top.severity}] input-bound (ADV001) {top.title}, estimated gain 74 ms/step>" in out
    assert repr(bound) == str(bound)


def test_print_of_a_clean_report_names_no_top_finding(fixed) -> None:
    assert repr(fixed) == f"<advisor Report {FIXED}: {fixed.verdict.status}, 0 finding(s)>"


def test_save_writes_the_cli_report_set(bound, tmp_path: Path, run_cli) -> None:
    paths = bound.save(tmp_path / "api")
    assert {k: p.name for k, p in paths.items()} == {"html": "report.html", "markdown": "report.md",
                                                      "json": "report.json"}
    assert run_cli("report", str(BOUND), "-o", str(tmp_path / "cli"), "--jobs", "1").returncode == 0
    assert sorted(p.name for p in (tmp_path / "api").iterdir()) == sorted(p.name for p in (tmp_path / "cli").iterdir())
    api_md, cli_md = (_undated((tmp_path / d / "report.md").read_text()) for d in ("api", "cli"))
    assert api_md == cli_md
    api, cli = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("api", "cli"))
    assert api["findings"] == cli["findings"] and api["verdict"] == cli["verdict"]
    assert bound.to_markdown() == (tmp_path / "api" / "report.md").read_text()


def test_save_refuses_the_input_folder(bound) -> None:
    with pytest.raises(ConfigError, match="inside the input"):
        bound.save(BOUND / "out")
    assert not (BOUND / "out").exists()


def test_to_markdown_follows_the_language(bound) -> None:
    assert bound.to_markdown().startswith("## advisor")
    assert bound.to_markdown("zh") != bound.to_markdown()


def test_compare_matches_the_cli(bound, fixed, tmp_path: Path, run_cli) -> None:
    result = advisor.compare(bound, fixed)
    step = next(m for m in result.metrics if m.id == "step.time_ms")
    assert step.current < step.baseline / 4  # the 5x speed-up of the fixed input pipeline
    assert {f.rule: f.status for f in result.findings}["input-bound"] == "resolved"
    assert repr(result).startswith(f"<advisor Comparison {BOUND} -> {FIXED}: step time {step.baseline:.4g} -> "
                                   f"{step.current:.4g} ms (")
    assert "resolved input-bound" in repr(result)
    assert run_cli("compare", str(BOUND), str(FIXED), "-o", str(tmp_path / "cmp")).returncode == 0
    cli = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    from_paths = advisor.compare(BOUND, FIXED, use_config=False).model_dump(mode="json")
    for key in ("metrics", "findings", "growth", "shrink"):
        assert from_paths[key] == cli[key], key


def test_compare_reads_a_saved_report(bound, fixed, tmp_path: Path) -> None:
    bound.save(tmp_path / "before")
    again = advisor.compare(tmp_path / "before", fixed).model_dump(mode="json")
    direct = advisor.compare(bound, fixed).model_dump(mode="json")
    assert again["metrics"] == direct["metrics"] and again["findings"] == direct["findings"]


def test_compare_errors_are_one_line(bound, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be between"):
        advisor.compare(bound, bound, alpha=0.9)
    with pytest.raises(InputError, match="no such file or folder"):
        advisor.compare(bound, tmp_path / "missing")
