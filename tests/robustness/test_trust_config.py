"""What the repository under test cannot do to the gate under strict config.

The config format is ``advisor.settings`` / ``advisor.regression.budgets``
(``docs/ci.md``, Configuration); the profiles are the MindSpore examples
``resnet50_data_bound`` (current) and ``resnet50_data_fixed`` (baseline),
through the real command line in process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advisor.regression.compare import load_report
from advisor.settings import CI_MARKERS, strict_default
from tests.regression.gate_helpers import advisor, one_line_error

REPO = Path(__file__).resolve().parents[2]
BOUND = REPO / "examples" / "resnet50_data_bound" / "profiler"
FIXED = REPO / "examples" / "resnet50_data_fixed"
LOOSE = '[gate]\nignore = ["input-bound"]\nrun_noise = "900%"\n'


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reports")
    out = {}
    for name, source in (("bound", BOUND), ("fixed", FIXED)):
        out[name] = root / f"{name}.json"
        out[name].write_text(load_report(source).model_dump_json(), encoding="utf-8")
    return out


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git working tree as the current folder (the code under test)."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    monkeypatch.chdir(root)
    return root


def test_a_config_linked_from_the_working_tree_to_outside_is_the_trees(reports, repo, tmp_path):
    """The code under test can write /tmp and link its own ``--config`` path
    there: the file is still the working tree's, and its loosening refused."""
    outside = tmp_path / "planted.toml"
    outside.write_text(LOOSE)
    (repo / ".ci").mkdir()
    (repo / ".ci" / "advisor.toml").symlink_to(outside)
    code, _, stderr = advisor("gate", reports["bound"], "--baseline", reports["fixed"], "-o", tmp_path / "g",
                              "--config", ".ci/advisor.toml", "--strict-config")
    one_line_error(code, stderr, ".ci/advisor.toml", "gate.ignore", "strict config")


def test_a_config_outside_the_working_tree_is_still_trusted(reports, repo, tmp_path):
    outside = tmp_path / "ci.toml"
    outside.write_text(LOOSE)
    code, stdout, stderr = advisor("gate", reports["bound"], "--baseline", reports["fixed"], "-o", tmp_path / "g",
                                   "--config", outside, "--strict-config", "--no-color")
    assert code in (0, 1), stderr
    assert "outside the working tree" in stdout and 'ignore = ["input-bound"]' in stdout


def test_a_longer_history_window_is_a_loosening(reports, repo, tmp_path):
    """``baseline_runs`` reaching further back than the default: an older
    median and a wider run-to-run floor."""
    (repo / "advisor.toml").write_text("[gate]\nbaseline_runs = 1000\n")
    code, _, stderr = advisor("gate", reports["bound"], "--baseline", reports["fixed"], "-o", tmp_path / "g",
                              "--strict-config")
    one_line_error(code, stderr, "advisor.toml", "gate.baseline_runs", "strict config")
    (repo / "advisor.toml").write_text("[gate]\nbaseline_runs = 5\n")
    code, _, stderr = advisor("gate", reports["bound"], "--baseline", reports["fixed"], "-o", tmp_path / "g",
                              "--strict-config")
    assert code == 1, stderr                    # a shorter window is accepted; data-bound vs fixed regresses


@pytest.mark.parametrize("marker", CI_MARKERS)
def test_ci_systems_that_do_not_set_ci_get_strict_config_too(marker):
    assert strict_default({marker: "True"}) is True
    assert strict_default({marker: "True", "ADVISOR_STRICT_CONFIG": "0"}) is False
    assert strict_default({}) is False


def test_a_baseline_that_is_the_current_run_cannot_pass(reports, tmp_path):
    """The same per-step times on both sides: not a pass but unmeasurable
    (exit 2), whatever the copy is called."""
    copy = tmp_path / "copy" / "report.json"
    copy.parent.mkdir()
    shutil.copy(reports["bound"], copy)
    code, _, stderr = advisor("gate", reports["bound"], "--baseline", copy, "-o", tmp_path / "g")
    one_line_error(code, stderr, "cannot measure", "the current run itself")
    verdict = json.loads((tmp_path / "g" / "gate.json").read_text())
    assert verdict["verdict"] == "unmeasurable"


def test_a_history_holding_the_current_run_among_others_says_so(reports, tmp_path):
    db = tmp_path / "h" / "history.db"
    for source in (reports["fixed"], reports["fixed"], reports["bound"]):
        code, _, stderr = advisor("history", "add", source, "--db", db, "--branch", "main")
        assert code == 0, stderr
    code, stdout, stderr = advisor("gate", reports["bound"], "--history", db, "-o", tmp_path / "g", "--no-color")
    assert code in (0, 1), stderr               # the other runs decide (their spread is the run-to-run floor)
    assert "1 of the 3 baseline runs are the current run itself" in (tmp_path / "g" / "gate.md").read_text()
