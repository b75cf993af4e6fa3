"""A Chinese report of the input-bound ResNet-50 example: the fixed texts
(metric units and scopes, the skipped items of the metric registry's
templates) are in Chinese, and the page's font list names the CJK fonts a
Linux machine has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import advisor
from advisor.metrics.registry import REGISTRY
from advisor.reports.html import render_html
from advisor.reports.i18n import EN
from advisor.reports.markdown import render_markdown

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet50_data_bound"


@pytest.fixture(scope="module")
def report():
    return advisor.analyze(EXAMPLE, jobs=1, lang="zh", use_config=False)


def _table_rows(md: str, heading: str) -> list[list[str]]:
    part = md[md.index(heading):]
    part = part[: part.index("</details>")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in part.splitlines()
            if ln.startswith("| ") and not ln.startswith("| id") and not ln.startswith("|---")]


def test_units_and_scopes_are_chinese_in_markdown(report) -> None:
    md = render_markdown(report, "zh")
    rows = _table_rows(md, "关键指标")
    assert rows
    units = {r[2] for r in rows}
    scopes = {r[3] for r in rows}
    assert not units & {"ms", "ratio", "count", "text", "list", "map"}, units
    assert "毫秒" in units and "比例" in units
    assert scopes <= {"整个运行", "迭代", "每个 rank", "算子", "链路"} and "整个运行" in scopes


def test_skipped_registry_reasons_are_chinese(report) -> None:
    md = render_markdown(report, "zh")
    rows = [r for r in _table_rows(md, "跳过") if len(r) == 2][1:]  # the column heads first
    assert len(rows) > 50
    english = [r for r in rows if re.search(r"table in this profile|table has no .* values|nothing to compare|"
                                            r"^metric ", r[0] + " " + r[1])]
    assert english == []
    assert any(r[1] == "此 profile 中没有 comm 表" for r in rows)
    assert all(r[0].startswith("指标 ") or r[0].startswith("规则 ") or not r[0].startswith("metric") for r in rows)


def test_english_report_keeps_the_registry_texts(report) -> None:
    md = render_markdown(report, "en")
    assert "| metric comm.exposed\\_allreduce\\_ms | no comm table in this profile |" in md
    assert "| ms | run |" in md


def test_html_metrics_and_skipped_in_chinese(report) -> None:
    html = render_html(report, "zh")
    assert "<td>毫秒</td>" in html and "<td>整个运行</td>" in html
    assert '<option value="run">整个运行</option>' in html  # the filter keeps the raw scope as its value
    assert 'data-scope="run"' in html
    assert "no comm table in this profile" not in html and "此 profile 中没有 comm 表" in html


def test_every_registry_unit_and_scope_has_a_text() -> None:
    assert {s.unit for s in REGISTRY.values()} - {"GB/s", "GiB", "MB", "MiB"} <= {
        k.removeprefix("unit_") for k in EN if k.startswith("unit_")}
    assert {s.scope for s in REGISTRY.values()} <= {k.removeprefix("scope_name_") for k in EN
                                                    if k.startswith("scope_name_")}


def test_css_names_linux_cjk_fonts() -> None:
    css = (Path(advisor.__file__).resolve().parents[1] / "reports" / "static" / "report.css").read_text()
    font = next(ln for ln in css.splitlines() if "--font:" in ln)
    for name in ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Source Han Sans SC"):
        assert f'"{name}"' in font
    assert font.index("WenQuanYi") < font.index("sans-serif;")
