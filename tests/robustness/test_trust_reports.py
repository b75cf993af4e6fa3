"""A baseline report.json is another job's artifact: values no real run can
have are bad input, not a pass.

Reports come from the real MindSpore examples (``resnet50_data_bound`` as
the current run, ``resnet50_data_fixed`` as the baseline) through
``advisor.regression.compare.load_report`` and are changed as a tampered
artifact would be (fields of ``advisor.model.Report``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.regression.compare import load_report
from tests.regression.gate_helpers import advisor, one_line_error

REPO = Path(__file__).resolve().parents[2]
BOUND = REPO / "examples" / "resnet50_data_bound" / "profiler"
FIXED = REPO / "examples" / "resnet50_data_fixed"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("runs")
    current = root / "bound.json"
    current.write_text(load_report(BOUND).model_dump_json(), encoding="utf-8")
    return current, json.loads(load_report(FIXED).model_dump_json())


def _baseline(tmp_path: Path, report: dict) -> Path:
    path = tmp_path / "base" / "report.json"
    path.parent.mkdir()
    path.write_text(json.dumps(report))
    return path


def test_the_untouched_baseline_fails_the_regression(runs, tmp_path):
    current, base = runs
    code, _, stderr = advisor("gate", current, "--baseline", _baseline(tmp_path, base), "-o", tmp_path / "g")
    assert code == 1, stderr


def test_step_times_of_days_in_a_baseline_are_bad_input(runs, tmp_path):
    """1e300 ms steps made the data-bound run pass as 100% faster."""
    current, base = runs
    base = json.loads(json.dumps(base))
    base["metrics"]["step.time_ms"]["value"] = 1e300
    for row in base["tables"]["step_breakdown"]:
        row["step_ms"] = 1e300
    path = _baseline(tmp_path, base)
    code, _, stderr = advisor("gate", current, "--baseline", path, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(path), "step.time_ms", "day-long")


def test_a_report_of_another_schema_version_is_bad_input(runs, tmp_path):
    current, base = runs
    base = dict(base, schema_version=2)
    path = _baseline(tmp_path, base)
    code, _, stderr = advisor("gate", current, "--baseline", path, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(path), "schema version 2")
