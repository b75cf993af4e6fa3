"""Gate, compare and history without torch: bad input and config give
exit 2 with one line; configs, budgets and renderers on real profiles
(the MindSpore VGG16 fp32 / fp16 examples)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from gate_helpers import advisor, one_line_error

from advisor.errors import ConfigError
from advisor.regression.budgets import GateConfig, load_gate_config, parse_budget
from advisor.regression.compare import MIN_SAMPLES, load_report, side_from_reports
from advisor.regression.gate import run_gate
from advisor.reports.gate_verdict import render_gate_markdown, render_junit

REPO = Path(__file__).resolve().parents[2]
FP32 = REPO / "examples" / "vgg16_fp32"
FP16 = REPO / "examples" / "vgg16_fp16"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """report.json of the two VGG16 runs (analyzed once)."""
    root = tmp_path_factory.mktemp("vgg")
    out = {}
    for name, path in (("fp32", FP32), ("fp16", FP16)):
        target = root / f"{name}.json"
        target.write_text(load_report(path).model_dump_json(), encoding="utf-8")
        out[name] = target
    return out


# ---------------------------------------------------------------- bad input / config (exit 2)


@pytest.mark.parametrize("text, needles", [
    ('[gate]\nbudgets = { step_time_ms = "five percent" }\n', ["advisor.toml", "gate.budgets.step_time_ms", "not a budget"]),
    ('[gate]\nfail_on = ["no-such-rule"]\n', ["advisor.toml", "gate.fail_on", "no-such-rule"]),
    ('[gate]\nalpha = 2\n', ["advisor.toml", "gate.alpha"]),
    ('[gate]\nthreshold = 3\n', ["advisor.toml", "gate.threshold", "Extra inputs"]),
    ('[gate]\nbudgets = { "step.nope_ms" = "+5%" }\n', ["advisor.toml", "step.nope_ms", "unknown metric"]),
    ('[gate\nbudgets = 1\n', ["advisor.toml", "not valid TOML"]),
])
def test_malformed_config(reports, tmp_path, text, needles):
    cfg = tmp_path / "advisor.toml"
    cfg.write_text(text)
    code, _, stderr = advisor("gate", reports["fp16"], "--baseline", reports["fp32"], "--config", cfg,
                              "-o", tmp_path / "out")
    one_line_error(code, stderr, *needles)
    assert not (tmp_path / "out").exists()


def test_config_is_found_in_the_repo(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    (repo / "pyproject.toml").write_text('[tool.advisor.gate]\nfail_on = ["input-bound", "critical"]\n'
                                         'ignore = ["step-outlier"]\n[tool.advisor.gate.budgets]\n'
                                         'step_time_ms = "+10%"\n"step.data_wait_ms" = "+2ms"\n')
    config = load_gate_config(start=repo / "sub")
    assert config.source.endswith("pyproject.toml")
    assert config.fail_rules == {"input-bound"} and config.fail_severity == "critical"
    assert [b.metric for b in config.parsed_budgets()] == ["step.time_ms", "step.data_wait_ms"]
    assert load_gate_config(start=tmp_path).source == "defaults"   # no config above: defaults
    defaults = GateConfig()
    assert defaults.budgets == {"step_time_ms": "+5%"} and defaults.fail_severity == "high"


def test_budget_syntax():
    assert parse_budget("step_time_ms", "+5%").amount == pytest.approx(0.05)
    b = parse_budget("step.computing_ratio", "-0.05")
    assert (b.direction, b.relative, b.amount) == (-1, False, 0.05)
    assert parse_budget("step.data_wait_ms", "2ms").relative is False
    with pytest.raises(ValueError):
        parse_budget("x", "5 percent")
    with pytest.raises(ConfigError, match="no such config file"):
        load_gate_config(Path("/nonexistent/advisor.toml"))


def test_missing_baseline(reports, tmp_path):
    code, _, stderr = advisor("gate", reports["fp16"], "--baseline", tmp_path / "nope.json", "-o", tmp_path / "o")
    one_line_error(code, stderr, "nope.json", "no such file")
    code, _, stderr = advisor("gate", reports["fp16"], "-o", tmp_path / "o")
    one_line_error(code, stderr, "--baseline")
    code, _, stderr = advisor("gate", reports["fp16"], "--history", tmp_path / "none.db", "-o", tmp_path / "o")
    one_line_error(code, stderr, "none.db", "no such history file")


def test_bad_report_and_history_files(reports, tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text('{"schema_version": 1, "run": {}}')
    code, _, stderr = advisor("compare", bad, reports["fp16"], "-o", tmp_path / "o")
    one_line_error(code, stderr, "report.json", "not an advisor report.json")
    junk = tmp_path / "history.db"
    junk.write_text("not a database" * 100)
    code, _, stderr = advisor("history", "show", "--db", junk)
    one_line_error(code, stderr, "history.db", "not an advisor history")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE runs (x)")
        con.execute("PRAGMA user_version = 7")
    code, _, stderr = advisor("gate", reports["fp16"], "--history", other, "-o", tmp_path / "o")
    one_line_error(code, stderr, "schema version 1", "found version 7")
    empty = tmp_path / "empty.db"
    assert advisor("history", "add", reports["fp32"], "--db", empty, "--branch", "dev")[0] == 0
    code, _, stderr = advisor("gate", reports["fp16"], "--history", empty, "--branch", "main", "-o", tmp_path / "o")
    one_line_error(code, stderr, "no runs recorded on branch 'main'")


# ---------------------------------------------------------------- real profiles


def test_compare_fp32_vs_fp16(reports, tmp_path):
    out = tmp_path / "cmp"
    code, stdout, stderr = advisor("compare", reports["fp32"], FP16, "-o", out)
    assert code == 0, stderr
    data = json.loads((out / "compare.json").read_text())
    assert data["common_ops"] >= 4
    status = {f["rule"]: f["status"] for f in data["findings"]}
    assert status.get("fp32-compute") == "resolved"
    assert data["shrink"] and data["shrink"][0]["kind"] == "operator"
    assert {"compare.html", "compare.md", "compare.json"} <= {p.name for p in out.iterdir()}
    assert not list(FP16.rglob("compare.*"))  # nothing written into the input


def test_gate_rules_config_and_fallback(reports, tmp_path):
    """fp16 gated against fp32 passes (faster); reversed it fails on the
    step time and, when listed, on fp32-compute; ignoring the rule drops it."""
    fp32, fp16 = (side_from_reports([load_report(reports[k])], k) for k in ("fp32", "fp16"))
    result, comparison = run_gate(fp32, fp16, GateConfig())
    assert result.exit_code == 0, [c.message for c in result.failed]
    config = GateConfig(fail_on=["fp32-compute"])
    result, comparison = run_gate(fp16, fp32, config)
    names = {c.name for c in result.failed}
    assert "finding fp32-compute" in names and result.exit_code == 1
    step = next(c for c in result.checks if c.metric == "step.time_ms")
    n = min(len(fp16.samples.get("step.time_ms", [])), len(fp32.samples.get("step.time_ms", [])))
    if n >= MIN_SAMPLES:
        assert step.test.startswith("Mann-Whitney") and step.p_value is not None
    else:
        assert step.test == "effect size only" and "not applicable" in " ".join(step.caveats)
    result, _ = run_gate(fp16, fp32, GateConfig(fail_on=["fp32-compute"], ignore=["fp32-compute"]))
    assert "finding fp32-compute" not in {c.name for c in result.failed}
    # renderers: junit has one case per budget and failing rule; markdown is PR-sized
    result, comparison = run_gate(fp16, fp32, config)
    suite = ET.fromstring(render_junit(result).split("\n", 1)[1])
    cases = [c.get("name") for c in suite.iter("testcase")]
    assert "budget step.time_ms +5%" in cases and "finding fp32-compute" in cases
    assert int(suite.get("failures")) == len(result.failed)
    md = render_gate_markdown(result, comparison)
    assert md.startswith("### \u274c") and len(md) < 60_000 and "fp32-compute" in md


def test_absolute_and_drop_budgets(reports):
    fp32, fp16 = (side_from_reports([load_report(reports[k])], k) for k in ("fp32", "fp16"))
    config = GateConfig(budgets={"step_time_ms": "+1000ms", "step.fp_bp_ratio": "-0.01"})
    # fp16 -> fp32: the step is ~100 ms slower (under the +1000 ms budget) and
    # the fp/bp share drops by 0.22 (a "-" budget: the drop is the regression)
    result, _ = run_gate(fp16, fp32, config)
    by_metric = {c.metric: c for c in result.checks if c.kind == "budget"}
    step = by_metric["step.time_ms"]
    assert step.status == "pass" and step.relative is False and step.test.startswith("Mann-Whitney")
    ratio = by_metric["step.fp_bp_ratio"]
    assert ratio.status == "fail" and ratio.test == "effect size only"
    assert any("not applicable" in c for c in ratio.caveats)
    # the other way round the share rises: no regression
    result, _ = run_gate(fp32, fp16, config)
    assert {c.metric: c.status for c in result.checks if c.kind == "budget"}["step.fp_bp_ratio"] == "pass"


def test_several_baselines_measure_run_to_run_noise(reports, tmp_path):
    """``--baseline`` repeated pools the runs like a history; with three of
    them the run-to-run floor is measured and named in the check."""
    code, stdout, stderr = advisor("gate", reports["fp16"], "--baseline", reports["fp32"], "--baseline",
                                   reports["fp32"], "--baseline", reports["fp16"], "-o", tmp_path / "g")
    assert code in (0, 1), stderr
    result = json.loads((tmp_path / "g" / "gate.json").read_text())
    assert " + " in result["baseline"]
    assert not any("run-to-run noise" in n for n in result["notes"]), result["notes"]
    step = next(c for c in result["checks"] if c["metric"] == "step.time_ms")
    single = json.loads(json.dumps(run_gate(*(side_from_reports([load_report(reports[k])], k)
                                               for k in ("fp32", "fp16")), GateConfig())[0].model_dump()))
    one = next(c for c in single["checks"] if c["metric"] == "step.time_ms")
    # fp32 twice and fp16 once: the runs differ by ~2x, so the limit is far wider than one run's
    assert step["noise_floor"] > 2 * max(one["noise_floor"], 0.05), (step, one)
    assert any("standard deviations of 3 runs" in c for c in step["caveats"]), step["caveats"]
    # two runs cannot measure it yet, and the notes say so
    code, _, stderr = advisor("gate", reports["fp16"], "--baseline", reports["fp32"], "--baseline",
                              reports["fp32"], "-o", tmp_path / "g2")
    notes = json.loads((tmp_path / "g2" / "gate.json").read_text())["notes"]
    assert any(n.startswith("2 baseline runs:") and "from 3 runs on" in n for n in notes), notes


def test_small_baselines_do_not_read_two_agreeing_runs_as_quiet(reports):
    """Two identical fast runs and a slow one: the MAD of the three is 0,
    yet the runner is clearly noisy; below ROBUST_RUNS runs the plain
    standard deviation bounds the floor from below. From ROBUST_RUNS runs
    on, one slow run among steady ones is an outlier and does not widen it."""
    from advisor.regression.gate import noise_floor

    fp32 = load_report(reports["fp32"])
    step = fp32.metrics["step.time_ms"].value

    def side(*factors):
        s = side_from_reports([fp32] * len(factors), "runs")
        s.run_values["step.time_ms#median"] = [step * f for f in factors]
        return s

    assert noise_floor(side(1.0, 1.0), "step.time_ms") is None          # too few runs to say
    assert noise_floor(side(1.0, 1.0, 1.6), "step.time_ms") > 0.6        # 3 SDs of (0, 0, log 1.6)
    assert noise_floor(side(1.0, 1.0, 1.0, 1.0, 1.6), "step.time_ms") == pytest.approx(0.0)
