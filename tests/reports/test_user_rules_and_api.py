"""Acceptance 5 (a user rule file in a temporary folder is validated,
loaded from the command line and from a config file, and fires), the
Python API (``advisor.analyze``, DataFrames, ``_repr_html_``), and the
generated rule reference being current."""

from __future__ import annotations

import json
import subprocess
import sys
from html import unescape
from pathlib import Path

import pandas as pd
import pytest

import advisor
from advisor.engine.docs import DOC_PATH, rules_markdown
from advisor.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vgg16_fp32"

USER_RULE = """\
id: ADV901
name: long-step
title: Steps are longer than the team's budget
group: stability
status: preview
severity: medium
requires: [step.time_ms]
params:
  max_step_ms:
    default: 50.0
    description: The team's step-time budget.
condition: step.time_ms > params.max_step_ms
message: "Each step takes {{ step.time_ms|ms }}, over the budget of {{ params.max_step_ms }} ms."
explanation:
  what: Step time above a fixed budget.
  why: The training schedule assumes the budget.
  how: Apply the other findings of this report.
fix:
  default:
    text: Apply the top finding first.
examples:
  - name: over budget
    metrics: {step.time_ms: 80.0}
    expect: fire
  - name: within budget
    metrics: {step.time_ms: 20.0}
    expect: pass
"""


@pytest.fixture
def user_folder(tmp_path: Path) -> Path:
    rules = tmp_path / "team_rules"
    rules.mkdir()
    (rules / "long_step.yaml").write_text(USER_RULE, encoding="utf-8")
    return tmp_path


def test_user_rule_validated_loaded_and_fires(user_folder: Path, run_cli) -> None:
    _advisor = run_cli
    rules = user_folder / "team_rules"
    done = _advisor("rules", "validate", str(rules), cwd=user_folder)
    assert done.returncode == 0 and "1 rule(s) valid" in done.stdout, done.stderr
    # a broken copy is refused with the file and the problem named
    (user_folder / "bad").mkdir()
    (user_folder / "bad" / "r.yaml").write_text(
        USER_RULE.replace("step.time_ms]", "step.no_such_metric]").replace("  - name: within budget\n", "  - name: x\n"),
        encoding="utf-8")
    done = _advisor("rules", "validate", str(user_folder / "bad"), cwd=user_folder)
    assert done.returncode == 2 and "unknown metric id(s): step.no_such_metric" in done.stderr
    # from advisor.toml in the current folder, with a threshold override
    (user_folder / "advisor.toml").write_text(
        'rules = ["team_rules"]\n[thresholds]\n"long-step.max_step_ms" = 60.0\n"input-bound.min_interval_ratio" = 0.99\n',
        encoding="utf-8")
    cfg = load_settings(start=user_folder)
    assert cfg.rules == [rules] and cfg.overrides["long-step"] == {"max_step_ms": 60.0}
    done = _advisor("report", str(EXAMPLE), "-o", str(user_folder / "out"), "-j", "1", cwd=user_folder)
    assert done.returncode == 0, done.stderr
    report = json.loads((user_folder / "out" / "report.json").read_text(encoding="utf-8"))
    fired = {f["rule"]: f for f in report["findings"]}
    assert "long-step" in fired and "over the budget of 60.0 ms" in fired["long-step"]["message"]
    assert "input-bound" not in fired  # the config's threshold applied
    assert "long-step" in done.stdout
    # --set on the command line wins over the config
    done = _advisor("report", str(EXAMPLE), "-o", str(user_folder / "out2"), "-j", "1",
                    "--set", "long-step.max_step_ms=1000", cwd=user_folder)
    report = json.loads((user_folder / "out2" / "report.json").read_text(encoding="utf-8"))
    assert "long-step" not in {f["rule"] for f in report["findings"]}
    # and the rule is documented like a built-in one
    done = _advisor("rules", "explain", "long-step", cwd=user_folder)
    assert "long-step.max_step_ms = 50" in done.stdout and "over budget" in done.stdout


def test_pyproject_tool_advisor(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.advisor]\nrules = ["r"]\n', encoding="utf-8")
    assert load_settings(start=tmp_path).rules == [tmp_path / "r"]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert load_settings(start=tmp_path).rules == []


def test_python_api(user_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(user_folder)  # no config here: the API reads it like the CLI
    report = advisor.analyze(EXAMPLE, rules=user_folder / "team_rules", overrides={"long-step": {"max_step_ms": 10}},
                             jobs=1)
    assert {"fp32-compute", "long-step"} <= {f.rule for f in report.findings}
    frames = report.dataframes
    assert {"step_breakdown", "step_series", "top_ops", "metrics", "findings"} <= set(frames)
    steps = report.frame("step_breakdown")
    assert isinstance(steps, pd.DataFrame) and len(steps) == len(report.tables["step_breakdown"])
    assert report.frame("findings")["rule"].tolist() == [f.rule for f in report.findings]
    with pytest.raises(KeyError, match="rank_heatmap"):
        report.frame("rank_heatmap")
    html = report._repr_html_()
    assert html.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts' in html
    doc = unescape(html.split('srcdoc="', 1)[1].split('" sandbox=', 1)[0])
    assert doc == report.to_html() and report.findings[0].title in doc
    zh = advisor.analyze(EXAMPLE, lang="zh", jobs=1, use_config=False)
    assert zh.lang == "zh" and '&lt;html lang=&quot;zh&quot;&gt;' in zh._repr_html_()
    assert "lang" not in json.loads(zh.model_dump_json())  # not part of report.json


def test_import_advisor_is_light() -> None:
    code = "import sys, advisor; print(sorted(m for m in ('pandas', 'advisor.pipeline', 'celpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_rule_reference_is_current() -> None:
    assert DOC_PATH.read_text(encoding="utf-8") == rules_markdown("en"), (
        "docs/rules.md is stale: run `python -m advisor.engine.docs`")


def test_root_config_applies_in_a_subfolder_of_the_repository(user_folder: Path, run_cli) -> None:
    """One config for rules, thresholds and the gate: from a subfolder of a
    git repository, the root advisor.toml's ``rules``, ``thresholds`` and
    ``[gate]`` all apply."""
    repo = user_folder
    (repo / ".git").mkdir()
    sub = repo / "src" / "train"
    sub.mkdir(parents=True)
    (repo / "advisor.toml").write_text(
        'rules = ["team_rules"]\n[thresholds]\n"long-step.max_step_ms" = 60.0\n[gate]\nfail_on = ["long-step"]\n',
        encoding="utf-8")
    baseline = repo / "baseline.json"
    baseline.write_text(advisor.analyze(EXAMPLE, jobs=1, use_config=False).model_dump_json(), encoding="utf-8")

    done = run_cli("report", str(EXAMPLE), "-o", str(repo / "out"), "-j", "1", cwd=sub)
    assert done.returncode == 0, done.stderr
    fired = {f["rule"]: f for f in json.loads((repo / "out" / "report.json").read_text(encoding="utf-8"))["findings"]}
    assert "long-step" in fired and "over the budget of 60.0 ms" in fired["long-step"]["message"]

    done = run_cli("gate", str(EXAMPLE), "--baseline", str(baseline), "-o", str(repo / "gate"), cwd=sub)
    verdict = json.loads((repo / "gate" / "gate.json").read_text(encoding="utf-8"))
    assert done.returncode == 1, done.stderr
    assert Path(verdict["config_source"]) == (repo / "advisor.toml").resolve()
    assert [c["name"] for c in verdict["checks"] if c["status"] == "fail"] == ["finding long-step"]
