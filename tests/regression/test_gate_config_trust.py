"""The repository under test cannot switch the gate off unseen.

On the MindSpore ResNet-50 examples (``resnet50_data_bound`` is +425%
slower per step than ``resnet50_data_fixed``, and ``input-bound`` fires on
it): each way a config file in the tree under test turned that regression
into a pass is refused, or, where it is a legitimate choice, named in every
verdict -- and refused under strict config.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from gate_helpers import advisor, one_line_error

from advisor.regression.budgets import GateConfig, weakenings
from advisor.regression.compare import load_report
from advisor.reports.markdown import escape

REPO = Path(__file__).resolve().parents[2]
BOUND = REPO / "examples" / "resnet50_data_bound" / "profiler"
FIXED = REPO / "examples" / "resnet50_data_fixed"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("base") / "fixed.json"
    path.write_text(load_report(FIXED).model_dump_json(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def current(tmp_path_factory) -> Path:
    """report.json of the data-bound run, analyzed without any config."""
    path = tmp_path_factory.mktemp("cur") / "bound.json"
    path.write_text(load_report(BOUND).model_dump_json(), encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git working tree holding the current run's profile, as the current folder."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    shutil.copytree(BOUND, root / "cur")
    monkeypatch.chdir(root)
    return root


def _gate(current, baseline, out: Path, *args):
    code, stdout, stderr = advisor("gate", current, "--baseline", baseline, "-o", out, *args)
    verdict = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else None
    return code, stdout, stderr, verdict


# ---------------------------------------------------------------- values that switch the gate off


@pytest.mark.parametrize("table, needles", [
    ('[tool.advisor.gate]\nalpha = 1e-300\nignore = ["input-bound", "slow-dataset-op"]\n',
     ["tool.advisor.gate.alpha", "greater than or equal to 0.000001"]),
    ('[tool.advisor.gate]\nalpha = nan\n', ["tool.advisor.gate.alpha"]),
    ('[tool.advisor.gate]\nbudgets = {}\nfail_on = []\n', ["tool.advisor.gate.budgets", "is empty"]),
    ('[tool.advisor.gate.budgets]\nstep_time_ms = "+' + "9" * 400 + '%"\n', ["step_time_ms", "not a finite amount"]),
    ('[tool.advisor.gate]\nrun_noise = "' + "9" * 400 + '%"\n', ["tool.advisor.gate.run_noise"]),
    ('[tool.advisor.gate]\nfail_on = ["hgih"]\n', ["tool.advisor.gate.fail_on", "unknown rule 'hgih'"]),
    ('[tool.advisor.thresholds]\n"input-bound.min_data_wait_ratio" = nan\n', ["input-bound.min_data_wait_ratio",
                                                                              "not a finite number"]),
    ('[tool.advisor.thresholds]\n"input-bound.min_data_wait_ratio" = inf\n', ["not a finite number"]),
])
def test_values_that_switch_the_gate_off_are_refused(repo, baseline, table, needles):
    (repo / "pyproject.toml").write_text(table)
    code, _, stderr, _ = _gate(repo / "cur", baseline, repo.parent / "g")
    one_line_error(code, stderr, str(repo / "pyproject.toml"), *needles)


@pytest.mark.parametrize("table, needles", [
    ('[thresholds]\n"input-bound.min_data_wait_ratio" = nan\n', ["input-bound.min_data_wait_ratio",
                                                                  "not a finite number"]),
    ("[gate]\nalpha = 1e-300\n", ["gate.alpha"]),
    ("[gate]\nbudgets = {}\nfail_on = []\n", ["gate.budgets", "is empty"]),
])
def test_advisor_toml_cannot_switch_the_gate_off_either(repo, baseline, table, needles):
    (repo / "advisor.toml").write_text(table)
    code, _, stderr, _ = _gate(repo / "cur", baseline, repo.parent / "g")
    one_line_error(code, stderr, str(repo / "advisor.toml"), *needles)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_set_refuses_non_finite_thresholds(tmp_path, value):
    code, _, stderr = advisor("report", BOUND, "-o", tmp_path / "r", "--set", f"input-bound.min_data_wait_ratio={value}")
    one_line_error(code, stderr, "--set", "not a finite number")
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- what the verdict names


def test_every_verdict_names_the_config_and_the_overrides_behind_it(baseline, tmp_path):
    """A report made with ``--set`` and gated under a trusted ``--config``:
    the terminal, gate.md, junit.xml and gate.json name both the gate's file
    and the input's override; report.json records its own."""
    rep = tmp_path / "rep"
    code, stdout, stderr = advisor("report", BOUND, "-o", rep, "--set", "input-bound.min_data_wait_ratio=0.95")
    assert code == 0, stderr
    assert "config:" in stdout and "--set input-bound.min_data_wait_ratio=0.95" in stdout
    config = json.loads((rep / "report.json").read_text())["run"]["config"]
    assert config["overrides"] == {"input-bound.min_data_wait_ratio": 0.95} and config["file"] is None
    trusted = tmp_path / "trusted.toml"
    trusted.write_text('[gate]\nfail_on = ["high"]\n')
    code, stdout, stderr, verdict = _gate(rep, baseline, tmp_path / "g", "--config", trusted)
    assert code == 1, stderr
    assert str(trusted) in stdout and "--set input-bound.min_data_wait_ratio=0.95" in stdout
    md = (tmp_path / "g" / "gate.md").read_text()
    assert escape(str(trusted), None) in md and escape("--set input-bound.min_data_wait_ratio=0.95", None) in md
    props = {p.get("name"): p.get("value")
             for p in ET.fromstring((tmp_path / "g" / "junit.xml").read_text().split("\n", 1)[1]).iter("property")}
    named = " ".join(v for k, v in props.items() if k.startswith("config."))
    assert str(trusted) in named and "--set input-bound.min_data_wait_ratio=0.95" in named
    assert verdict["config"]["file"] == str(trusted) and verdict["config"]["gate"] == {"fail_on": ["high"]}
    assert [i["config"]["overrides"] for i in verdict["inputs"] if i["side"] == "current"] == [
        {"input-bound.min_data_wait_ratio": 0.95}]
    # under strict config the gate will not take findings made with thresholds it does not set
    code, _, stderr, _ = _gate(rep, baseline, tmp_path / "g2", "--config", trusted, "--strict-config")
    one_line_error(code, stderr, str(rep), "analyzed with thresholds the gate does not set")


def test_config_means_only_that_file(repo, baseline):
    """The tree's ignore list does not ride along with ``--config``."""
    (repo / "advisor.toml").write_text('[gate]\nignore = ["input-bound", "slow-dataset-op"]\n')
    code, _, stderr, verdict = _gate(repo / "cur", baseline, repo.parent / "g")
    assert code == 1, stderr   # the budget still fails, the findings are ignored, and it says so
    assert not any(c["name"] == "finding input-bound" for c in verdict["checks"])
    assert verdict["config"]["file"] == str(repo / "advisor.toml") and verdict["config"]["origin"] == "found"
    assert "ignore" in (repo.parent / "g" / "gate.md").read_text()
    trusted = repo.parent / "trusted.toml"
    trusted.write_text("[gate]\nalpha = 0.01\n")
    code, _, stderr, verdict = _gate(repo / "cur", baseline, repo.parent / "g2", "--config", trusted)
    assert code == 1, stderr
    assert "finding input-bound" in {c["name"] for c in verdict["checks"] if c["status"] == "fail"}
    assert verdict["config"]["file"] == str(trusted) and verdict["config"]["in_working_tree"] is False


def test_config_is_not_taken_from_above_the_current_folder_outside_a_repository(baseline, tmp_path, monkeypatch):
    (tmp_path / "advisor.toml").write_text('[gate]\nignore = ["input-bound", "slow-dataset-op"]\n')
    work = tmp_path / "work"
    shutil.copytree(BOUND, work / "cur")
    monkeypatch.chdir(work)
    code, stdout, stderr, verdict = _gate(work / "cur", baseline, tmp_path / "g")
    assert code == 1, stderr
    assert verdict["config"]["file"] is None and "finding input-bound" in {c["name"] for c in verdict["checks"]}
    assert "gate config: no config file (built-in defaults)" in stdout


def test_config_is_not_taken_from_above_the_repository_root(baseline, tmp_path, monkeypatch):
    """A folder above the working tree (a shared /tmp, a home folder) is
    not the repository's: its advisor.toml does not apply."""
    (tmp_path / "advisor.toml").write_text('[gate]\nignore = ["input-bound", "slow-dataset-op"]\n')
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    shutil.copytree(BOUND, root / "sub" / "cur")
    monkeypatch.chdir(root / "sub")
    code, _, stderr, verdict = _gate(root / "sub" / "cur", baseline, tmp_path / "g")
    assert code == 1, stderr
    assert verdict["config"]["file"] is None and "finding input-bound" in {c["name"] for c in verdict["checks"]}


# ---------------------------------------------------------------- strict config


LOOSENING = [
    ('[gate]\nignore = ["input-bound"]\n', "gate.ignore"),
    ("[gate]\nalpha = 0.001\n", "gate.alpha"),
    ('[gate]\nfail_on = ["critical"]\n', "gate.fail_on"),
    ('[gate]\nfail_on = ["input-bound"]\n', "gate.fail_on"),
    ('[gate.budgets]\nstep_time_ms = "+50%"\n', "gate.budgets.step_time_ms"),
    ('[gate.budgets]\n"step.computing_ms" = "+5%"\n', "gate.budgets.step_time_ms"),
    ('[gate]\nrun_noise = "10%"\n', "gate.run_noise"),
    ('[thresholds]\n"input-bound.min_data_wait_ratio" = 0.9\n', "thresholds.input-bound.min_data_wait_ratio"),
]


@pytest.mark.parametrize("text, key", LOOSENING)
@pytest.mark.parametrize("how", ["--strict-config", "ADVISOR_STRICT_CONFIG=1", "CI=true"])
def test_strict_config_refuses_loosening_from_the_working_tree(repo, baseline, monkeypatch, text, key, how):
    (repo / "advisor.toml").write_text(text)
    args = []
    if how.startswith("--"):
        args.append(how)
    else:
        monkeypatch.setenv(*how.split("="))
    code, _, stderr, _ = _gate(repo / "cur", baseline, repo.parent / "g", *args)
    one_line_error(code, stderr, str(repo / "advisor.toml"), key, "strict config")
    # a --config file inside the working tree is the tree's too
    code, _, stderr, _ = _gate(repo / "cur", baseline, repo.parent / "g", "--config", repo / "advisor.toml", *args)
    one_line_error(code, stderr, key, "strict config")
    # --no-strict-config (the CI job's own choice) lets it apply, and the verdict names it
    code, _, stderr, verdict = _gate(repo / "cur", baseline, repo.parent / "g", "--no-strict-config")
    assert code in (0, 1), stderr
    assert verdict["config"]["file"] == str(repo / "advisor.toml") and verdict["config"]["strict"] is False


def test_strict_config_accepts_tightening_and_a_trusted_file(repo, baseline, tmp_path):
    (repo / "advisor.toml").write_text('[gate]\nalpha = 0.05\nfail_on = ["medium", "slow-rank"]\n'
                                       'fail_on_anomaly = true\n[gate.budgets]\nstep_time_ms = "+2%"\n'
                                       '"step.computing_ms" = "+10%"\n')
    code, _, stderr, verdict = _gate(repo / "cur", baseline, tmp_path / "g", "--strict-config")
    assert code == 1, stderr
    assert verdict["config"]["strict"] is True and verdict["config"]["gate"]["alpha"] == 0.05
    trusted = tmp_path / "trusted.toml"   # outside the working tree: the CI job's own file
    trusted.write_text('[gate]\nignore = ["slow-dataset-op"]\nrun_noise = "10%"\n')
    code, _, stderr, verdict = _gate(repo / "cur", baseline, tmp_path / "g2", "--strict-config", "--config", trusted)
    assert code == 1, stderr
    assert verdict["config"]["gate"] == {"ignore": ["slow-dataset-op"], "run_noise": "10%"}


def test_strict_config_refuses_thresholds_for_reports_too(repo, tmp_path):
    (repo / "advisor.toml").write_text('[thresholds]\n"input-bound.min_data_wait_ratio" = 0.9\n')
    code, _, stderr = advisor("report", repo / "cur", "-o", tmp_path / "r", "--strict-config")
    one_line_error(code, stderr, "thresholds.input-bound.min_data_wait_ratio", "strict config")
    # the command line and a file outside the working tree are the CI job's own
    trusted = tmp_path / "trusted.toml"
    trusted.write_text('[thresholds]\n"input-bound.min_data_wait_ratio" = 0.8\n')
    code, _, stderr = advisor("report", repo / "cur", "-o", tmp_path / "r", "--set",
                              "slow-dataset-op.min_wait_ratio=0.5", "--strict-config", "--config", trusted)
    assert code == 0, stderr
    config = json.loads((tmp_path / "r" / "report.json").read_text())["run"]["config"]
    assert config == {"file": str(trusted), "origin": "given", "in_working_tree": False, "strict": True,
                      "rules": [], "thresholds": {"input-bound.min_data_wait_ratio": 0.8},
                      "overrides": {"slow-dataset-op.min_wait_ratio": 0.5}, "gate": {}}


def test_weakenings_name_each_loosened_default():
    assert weakenings(GateConfig()) == []
    assert weakenings(GateConfig(alpha=0.05, fail_on=["medium", "slow-rank"], fail_on_anomaly=True,
                                 budgets={"step.time_ms": "+3%", "step.free_ms": "+1ms"})) == []
    keys = [k for k, _ in weakenings(GateConfig(alpha=0.001, ignore=["step-outlier"], fail_on=[],
                                                budgets={"step_time_ms": "+6%"}, run_noise="1%"))]
    assert keys == ["alpha", "ignore", "fail_on", "budgets.step_time_ms", "run_noise"]
    assert [k for k, _ in weakenings(GateConfig(budgets={"step_time_ms": "+2ms"}))] == ["budgets.step_time_ms"]
    assert [k for k, _ in weakenings(GateConfig(budgets={"step_time_ms": "-5%"}))] == ["budgets.step_time_ms"]
