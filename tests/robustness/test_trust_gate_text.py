"""What a report.json records reaches the gate's terminal lines as text.

A baseline report.json is an artifact of another job; the config it was
analyzed with (``run.config``: file path, thresholds, rule paths) and the
skip reasons of its metrics are printed by ``advisor gate`` (the config
lines, and the one-line error of a budget it cannot measure). Escapes and
line breaks in them must neither drive the terminal nor forge a line.
Reports come from a real MindSpore profile (``examples/resnet50_data_bound``)
through ``advisor.regression.compare.load_report``, changed as a tampered
artifact would be (``advisor.model.Report``).
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from advisor.regression.compare import load_report
from tests.regression.gate_helpers import advisor, one_line_error

REPO = Path(__file__).resolve().parents[2]
BOUND = REPO / "examples" / "resnet50_data_bound" / "profiler"
FIXED = REPO / "examples" / "resnet50_data_fixed"
EVIL = "x\x1b]52;c;cHduZWQ=\x07\x1b[2J\r\nforged: line"


def _controls(text: str, allowed: str = "\n") -> list[str]:
    return sorted({repr(c) for c in text if unicodedata.category(c) == "Cc" and c not in allowed})


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    return json.loads(load_report(BOUND).model_dump_json())


def test_recorded_config_is_printed_without_escapes(report, tmp_path):
    base = tmp_path / "base.json"
    base.write_text(load_report(FIXED).model_dump_json())
    report = json.loads(json.dumps(report))
    report["run"]["config"] = {"file": "cfg" + EVIL, "origin": "given", "in_working_tree": False, "strict": False,
                               "rules": ["r" + EVIL], "thresholds": {"a.b" + EVIL: 1.0}, "overrides": {}, "gate": {}}
    cur = tmp_path / "cur.json"
    cur.write_text(json.dumps(report))
    code, stdout, stderr = advisor("gate", cur, "--baseline", base, "-o", tmp_path / "g", "--no-strict-config",
                                   "--no-color")
    assert code == 1, stderr                                        # data-bound against fixed
    assert "analyzed with: cfgx]52;c;cHduZWQ=[2J" in stdout       # named, as text
    assert _controls(stdout) == []
    assert not [line for line in stdout.splitlines() if line.startswith("forged")]


def test_the_reason_a_budget_cannot_be_measured_is_one_clean_line(report, tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(report))
    report = json.loads(json.dumps(report))
    report["metrics"].pop("step.time_ms")
    report["tables"]["step_breakdown"] = []
    report["skipped"].append({"what": "step.time_ms", "reason": "no step trace" + EVIL})
    cur = tmp_path / "cur.json"
    cur.write_text(json.dumps(report))
    code, _, stderr = advisor("gate", cur, "--baseline", base, "-o", tmp_path / "g", "--no-color")
    one_line_error(code, stderr, "cannot measure", "no step trace")
    assert _controls(stderr) == []
