"""Why a file was skipped reads in the report's language.

* every problem a collector states (the text of each ``InputError`` it
  raises, and of each part it skips) has an entry in every language's
  catalogue;
* a real example with a damaged file, and a real trace without
  collectives, list their skipped files with the problem in Chinese in the
  HTML and the Markdown report, and in English in an English report.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from advisor.collectors.parallel import kernel_sample
from advisor.pipeline import analyze
from advisor.reports import skip_problems
from advisor.reports.html import render_html
from advisor.reports.markdown import render_markdown
from tests._catalogue_keys import OTHER_LANGS, places_every_value_once, texts_written

COLLECTORS = Path(kernel_sample.__file__).parents[1]


def _problem_expressions(node: ast.AST, src: str, path: Path) -> list[ast.expr]:
    """The problem an ``InputError(path, problem)`` or ``skip(what, problem)`` states."""
    if isinstance(node, ast.Call) and len(node.args) >= 2:
        name = getattr(node.func, "id", getattr(node.func, "attr", ""))
        if name in ("InputError", "skip"):
            return [node.args[1]]
    return []


def _stated_problems() -> dict[str, str]:
    return texts_written(COLLECTORS.rglob("*.py"), _problem_expressions)


def test_the_scan_finds_the_problems_collectors_state():
    found = _stated_problems()
    assert len(found) > 90
    assert "not a UTF-8 text CSV file" in found and "malformed or truncated CSV: {}" in found


@pytest.mark.parametrize("lang", OTHER_LANGS)
def test_every_problem_has_a_translation(lang):
    catalogue = skip_problems.SKIP_PROBLEMS.catalogues[lang]
    missing = {key: where for key, where in _stated_problems().items() if key not in catalogue.entries}
    assert not missing, missing
    for key, text in catalogue.entries.items():
        assert places_every_value_once(key, text), (key, text)


def _file_skips(report) -> list:
    return [s for s in report.skipped if not s.what.startswith(("metric ", "rule ", "指标", "规则"))]


def _shown_in_chinese(report) -> None:
    skips = _file_skips(report)
    assert skips
    html, markdown = render_html(report, lang="zh"), render_markdown(report, lang="zh")
    for s in skips:
        chinese = skip_problems.localized(s.reason, "zh")
        assert chinese != s.reason
        assert str(escape(chinese)) in html and str(escape(s.reason)) not in html
        assert any("\u4e00" <= c <= "\u9fff" for c in chinese)
    assert "UTF-8" in markdown or "集合通信" in markdown


def test_a_damaged_file_of_a_real_example_is_skipped_in_chinese(examples, tmp_path):
    run = shutil.copytree(examples / "resnet50_8p_allreduce_tail", tmp_path / "run")
    (run / "profiler" / "aicore_intermediate_0_detail.csv").write_bytes(b"garbage\x00\xff")
    zh = analyze(run, lang="zh", jobs=1)
    assert [s.reason for s in _file_skips(zh)] == ["not a UTF-8 text CSV file"]
    _shown_in_chinese(zh)
    en = analyze(run, lang="en", jobs=1)
    assert "not a UTF-8 text CSV file" in render_html(en)


def test_a_trace_without_collectives_is_skipped_in_chinese(corpus):
    _shown_in_chinese(analyze(corpus / "kineto-tb-plugin" / "resnet50_num_workers_0", lang="zh", jobs=1))
