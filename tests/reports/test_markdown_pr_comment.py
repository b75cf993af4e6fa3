"""report.md as a pull-request comment, on the real examples: the findings
and fixes open, the long metrics and skipped tables folded, and no message
cut mid-sentence."""

from __future__ import annotations

import re

import pytest

from advisor.pipeline import analyze
from advisor.reports import render_markdown
from advisor.reports.markdown import escape

EXAMPLES = ("resnet50_data_bound", "resnet50_8p_allreduce_tail", "vgg16_fp32")


@pytest.fixture(scope="module", params=EXAMPLES)
def example(request, examples):
    report = analyze(examples / request.param)
    return report, render_markdown(report)


def _visible(md: str) -> list[str]:
    """The lines a reader sees before opening anything."""
    out, inside = [], False
    for line in md.splitlines():
        inside = inside or line.startswith("<details>")
        if not inside:
            out.append(line)
        if line.startswith("</details>"):
            inside = False
    return out


def test_long_tables_are_folded_and_render(example):
    report, md = example
    assert report.skipped and report.metrics
    for heading, n in (("Key metrics", None), ("Skipped / not evaluated", len(report.skipped))):
        start = md.index(f"<details>\n<summary><b>{heading}</b> (")
        block = md[start: md.index("</details>", start)]
        # GitHub renders the table inside only with a blank line after </summary> and after the table
        # (before </details>, or before the note on rows left out: "_N more metrics in report.html_")
        assert "</summary>\n\n|" in block and "|\n\n" in block and block.endswith("\n\n")
        if n is not None:
            assert f"({n:,})</summary>" in block
    visible = _visible(md)
    assert "### Findings" in "\n".join(visible) and "### Fixes" in "\n".join(visible)
    assert not any("memory" in line and line.startswith("| ") and "not found" in line for line in visible)
    assert len(visible) <= 60 < len(md.splitlines())


def test_messages_and_fixes_are_whole(example):
    report, md = example
    for f in report.all_findings():
        assert escape(f.message, None) in md
        if f.fix is not None:
            assert escape(f.fix.text, None) in md
    findings = md.split("### Findings", 1)[1].split("### Fixes", 1)[0]
    assert "\u2026" not in findings  # no message cut


def test_a_message_too_long_for_a_cell_is_cut_after_a_sentence(example):
    report, _ = example
    report = report.model_copy(deep=True)
    report.findings[0].message = "".join(f"Sentence {i} of the message is here. " for i in range(100))
    md = render_markdown(report)
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    cell = re.split(r"(?<!\\)\|", row)[4].strip()
    assert cell.endswith("is here. \u2026") and "Sentence 0 of" in cell
