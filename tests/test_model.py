"""The report model is data: the bottom layer (advisor.model, advisor.profile,
advisor.errors) imports nothing above it, and rendering belongs to the
report an analysis returns."""

from __future__ import annotations

import ast
from pathlib import Path

import advisor
from advisor.model import Report
from advisor.analysis import AnalysisReport
from advisor.pipeline import analyze

ADVISOR = Path(advisor.__file__).parent
BOTTOM = ("model.py", "profile.py", "errors.py")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_bottom_layer_imports_only_the_bottom_layer():
    allowed = {f"advisor.{name.removesuffix('.py')}" for name in BOTTOM}
    for name in BOTTOM:
        upward = {m for m in _imports(ADVISOR / name) if m.startswith("advisor") and m not in allowed}
        assert not upward, (name, upward)


def test_a_report_read_from_json_is_data_and_an_analysis_renders(examples):
    report = analyze(examples / "vgg16_fp16", jobs=1)
    assert isinstance(report, AnalysisReport) and "<html" in report.to_html()
    loaded = Report.model_validate_json(report.model_dump_json())
    assert not hasattr(loaded, "to_html") and loaded.findings == report.findings
