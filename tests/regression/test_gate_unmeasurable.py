"""The gate never passes what it cannot measure.

The MindSpore ResNet-50 examples: ``resnet50_data_bound`` is +425% slower
per step than ``resnet50_data_fixed``. A copy of the data-bound profile
without its step trace, or with impossible step times, used to pass
("budget skip", "-625.7%, within limit"); now a budget that cannot be
evaluated is exit 2 (or a failure with ``on_unmeasurable = "fail"``) and
impossible values are bad input naming the file.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from gate_helpers import advisor, one_line_error

from advisor.regression.compare import load_report

REPO = Path(__file__).resolve().parents[2]
BOUND = REPO / "examples" / "resnet50_data_bound" / "profiler"
FIXED = REPO / "examples" / "resnet50_data_fixed"
STEP_TRACE = "step_trace_raw_0_detail_time.csv"
VGG32, VGG16 = REPO / "examples" / "vgg16_fp32", REPO / "examples" / "vgg16_fp16"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """report.json of the fixed run (analyzed once)."""
    path = tmp_path_factory.mktemp("base") / "fixed.json"
    path.write_text(load_report(FIXED).model_dump_json(), encoding="utf-8")
    return path


def _current(tmp_path: Path, edit=None) -> Path:
    """A copy of the data-bound profile, its step trace rows edited by ``edit(row)``."""
    cur = tmp_path / "cur"
    shutil.copytree(BOUND, cur)
    if edit is not None:
        path = cur / STEP_TRACE
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        for i, row in enumerate(rows):
            edit(i, row)
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return cur


def test_with_the_step_trace_the_regression_fails(baseline, tmp_path):
    """The control: the same run, intact, is a +425% regression."""
    code, stdout, stderr = advisor("gate", _current(tmp_path), "--baseline", baseline, "-o", tmp_path / "g")
    assert code == 1, stderr
    step = next(c for c in json.loads((tmp_path / "g" / "gate.json").read_text())["checks"]
                if c["metric"] == "step.time_ms")
    assert step["status"] == "fail" and step["change_pct"] > 400


def test_without_the_step_trace_the_gate_cannot_measure(baseline, tmp_path):
    cur = _current(tmp_path)
    (cur / STEP_TRACE).unlink()
    out = tmp_path / "g"
    code, stdout, stderr = advisor("gate", cur, "--baseline", baseline, "-o", out)
    one_line_error(code, stderr, str(cur), "cannot measure", "budget step.time_ms +5%", "not measured in the current run")
    result = json.loads((out / "gate.json").read_text())
    assert result["verdict"] == "unmeasurable" and result["exit_code"] == 2
    step = next(c for c in result["checks"] if c["metric"] == "step.time_ms")
    assert step["status"] == "error" and "cannot be evaluated" in step["message"]
    # every output says so: the terminal, the PR comment and the JUnit report
    assert "advisor gate: unmeasurable" in stdout
    assert "cannot measure" in (out / "gate.md").read_text()
    suite = ET.fromstring((out / "junit.xml").read_text().split("\n", 1)[1])
    assert suite.get("errors") == "1" and suite.find("testcase/error") is not None


def test_unmeasurable_can_count_as_a_failure(baseline, tmp_path):
    cur = _current(tmp_path)
    (cur / STEP_TRACE).unlink()
    cfg = tmp_path / "gate.toml"
    cfg.write_text('[gate]\non_unmeasurable = "fail"\n')
    code, _, stderr = advisor("gate", cur, "--baseline", baseline, "--config", cfg, "-o", tmp_path / "g")
    assert code == 1, stderr
    result = json.loads((tmp_path / "g" / "gate.json").read_text())
    step = next(c for c in result["checks"] if c["metric"] == "step.time_ms")
    assert result["verdict"] == "regression" and step["status"] == "fail"
    assert any("on_unmeasurable" in c for c in step["caveats"])
    cfg.write_text('[gate]\non_unmeasurable = "pass"\n')
    code, _, stderr = advisor("gate", cur, "--baseline", baseline, "--config", cfg, "-o", tmp_path / "g2")
    one_line_error(code, stderr, "gate.on_unmeasurable")


@pytest.mark.parametrize("value", ["negative", "inf"])
def test_impossible_step_times_are_bad_input_naming_the_file(baseline, tmp_path, value):
    def edit(i, row):
        row["total"] = "-" + row["total"] if value == "negative" else "inf"

    cur = _current(tmp_path, edit)
    code, _, stderr = advisor("gate", cur, "--baseline", baseline, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(cur / STEP_TRACE), "step 1", "impossible")
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("value", ["nan", ""])
def test_step_times_that_are_all_missing_are_bad_input(baseline, tmp_path, value):
    def edit(i, row):
        for col in ("total", "iteration_interval", "fp_and_bp", "tail"):
            row[col] = value

    cur = _current(tmp_path, edit)
    code, _, stderr = advisor("gate", cur, "--baseline", baseline, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(cur / STEP_TRACE))


def test_a_report_json_with_impossible_step_times_is_bad_input(baseline, tmp_path):
    """A saved report.json is checked as well (it may come from anywhere)."""
    report = json.loads(load_report(_current(tmp_path)).model_dump_json())
    report["tables"]["step_breakdown"][3]["step_ms"] = -94.8
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    code, _, stderr = advisor("gate", path, "--baseline", baseline, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(path), "step_ms is -94.8", "impossible")


def test_a_report_json_whose_step_time_is_nan_cannot_be_measured(baseline, tmp_path):
    """No per-step rows and a NaN step time: nothing to measure, so not a
    pass (findings fail only on a rule that does not fire here, so the
    budget alone decides)."""
    report = json.loads(load_report(_current(tmp_path)).model_dump_json())
    report["tables"]["step_breakdown"] = []
    report["metrics"]["step.time_ms"]["value"] = float("nan")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    cfg = tmp_path / "gate.toml"
    cfg.write_text('[gate]\nfail_on = ["slow-link"]\n')
    code, _, stderr = advisor("gate", path, "--baseline", baseline, "--config", cfg, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(path), "cannot measure", "budget step.time_ms +5%")


def test_a_relative_budget_over_a_zero_baseline_cannot_be_evaluated(baseline, tmp_path):
    """The fixed run's device queue is never empty, the data-bound run's
    always: "+5%" of zero is no budget. The step time still regressed, and
    that stays the verdict."""
    assert load_report(baseline).metrics["data.queue_empty_ratio"].value == 0
    cfg = tmp_path / "gate.toml"
    cfg.write_text('[gate.budgets]\nstep_time_ms = "+5%"\n"data.queue_empty_ratio" = "+5%"\n')
    code, _, stderr = advisor("gate", _current(tmp_path), "--baseline", baseline, "--config", cfg,
                              "-o", tmp_path / "g")
    assert code == 1, stderr
    result = json.loads((tmp_path / "g" / "gate.json").read_text())
    checks = {c["metric"]: c for c in result["checks"]}
    assert checks["step.time_ms"]["status"] == "fail" and result["verdict"] == "regression"
    queue = checks["data.queue_empty_ratio"]
    assert queue["status"] == "error" and "baseline is 0" in queue["message"]


def _truncated(src: Path, dst: Path, steps: int) -> Path:
    """A copy of a MindSpore profile with only its first ``steps`` step-trace rows."""
    shutil.copytree(src, dst)
    path = dst / "profiler" / "step_trace_raw_0_detail_time.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: steps + 1]))
    return dst


def test_an_alpha_the_rank_test_cannot_reach_is_not_a_pass(tmp_path):
    """Ten steps a side (nine after the warm-up step): the one-sided rank
    test's smallest p-value is 2e-4, so alpha = 1e-4 can never be reached
    and the budget could never fail."""
    base, cur = _truncated(VGG16, tmp_path / "b", 10), _truncated(VGG32, tmp_path / "c", 10)
    cfg = tmp_path / "gate.toml"
    # findings fail only on a rule that does not fire here, so the budget alone decides
    cfg.write_text('[gate]\nalpha = 1e-4\nfail_on = ["slow-link"]\n')
    code, _, stderr = advisor("gate", cur, "--baseline", base, "--config", cfg, "-o", tmp_path / "g")
    one_line_error(code, stderr, "cannot reach p < alpha = 0.0001", "9 vs 9 steps")
    cfg.write_text('[gate]\nalpha = 1e-3\nfail_on = ["slow-link"]\n')
    code, _, stderr = advisor("gate", cur, "--baseline", base, "--config", cfg, "-o", tmp_path / "g2")
    assert code == 1, stderr   # fp32 is ~2x slower than fp16: measurable at 1e-3, and a regression
