"""The Markdown report: short, escaped, complete when small."""

from __future__ import annotations

import re

from advisor.model import Report
from advisor.reports import render_markdown
from advisor.reports.markdown import MAX_CHARS, code_span, escape, fence


def _table_rows(md: str, heading: str) -> list[str]:
    part = md.split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0]
    return [line for line in part.splitlines() if line.startswith("|")]


def _cells(row: str) -> list[str]:
    """Split a GFM table row on pipes that are not escaped."""
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


def test_verdict_first(report: Report) -> None:
    md = render_markdown(report)
    head = md.split("### Findings", 1)[0]
    lines = [line for line in head.splitlines() if line]
    assert lines[1] == ("\u274c **Verdict: Problems**: 3 finding(s) of medium severity or above, led by: "
                        "The input pipeline stalls the device")
    assert lines[2] == "Could not be judged:"
    assert lines[3].startswith("- compute: ops.fp32\\_matrix\\_ratio:") and "&lt;img" in lines[3]


def test_inconclusive_has_no_finding_title(report: Report) -> None:
    verdict = report.verdict.model_copy(update={"status": "inconclusive", "reason": "only 1 of 3 kinds"})
    md = render_markdown(report.model_copy(update={"verdict": verdict, "findings": []}))
    assert "\u2754 **Verdict: Inconclusive**: only 1 of 3 kinds" in md
    assert "No problems found" not in md and "### Findings" not in md


def test_contents(report: Report) -> None:
    md = render_markdown(report)
    assert md.startswith("## advisor: performance report")
    assert "**The input pipeline stalls the device**" in md
    rows = _table_rows(md, "Findings")
    assert len(rows) == 2 + len(report.all_findings())
    assert all(len(_cells(r)) == 5 for r in rows)
    assert "38.5 ms / 20.8%" in rows[2]
    # the contributing cause right under its primary, numbered under it, its gain not added
    assert _cells(rows[3])[0].strip() == "1.1" and "`slow-dataset-op`" in rows[3]
    assert "Contributing: **One dataset operation starves the input pipeline**" in rows[3]
    assert "30.0 ms / 16.2%" in rows[3] and _cells(rows[4])[0].strip() == "2"
    assert "**1.1. One dataset operation starves the input pipeline**" in md  # its fix too
    assert "```python\nloader = torch.utils.data.DataLoader(" in md
    assert "<summary><b>Key metrics</b> (" in md and "`step.free_ratio`" in md
    assert "memory\\_record.csv not found" in md
    assert "not shown" not in md


def test_profile_strings_are_escaped(report: Report) -> None:
    md = render_markdown(report)
    assert "<script>" not in md and "<img" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    # the pipe and backticks in the aicpu message cannot break the table
    row = next(r for r in _table_rows(md, "Findings") if "aicpu-ops" in r)
    assert len(_cells(row)) == 5
    assert "\\|" in row and "\\`" in row


def test_escape_helpers() -> None:
    assert escape("a|b`c*d_e[f]") == "a\\|b\\`c\\*d\\_e\\[f\\]"
    assert escape("<b>&") == "&lt;b&gt;&amp;"
    assert escape("line\nbreak") == "line break"
    assert len(escape("x" * 1000, 50)) == 50
    assert escape("First one. Second sentence that goes on and on.", 20) == "First one. \u2026"
    assert escape("no sentence end in these many words here", 30) == "no sentence end in these\u2026"
    assert code_span("a`b|c") == "`a'b\\|c`"
    block = fence("print('```')")
    assert block.startswith("````\n") and block.endswith("\n````")


def test_capped_for_a_huge_report(big_report: Report) -> None:
    md = render_markdown(big_report)
    assert len(md) < MAX_CHARS
    assert "more findings not shown" in md
    assert "more fixes not shown" in md
    # every section still shows something, the top finding first
    for heading in ("Findings", "Fixes"):
        assert f"### {heading}" in md
    for heading in ("Key metrics", "Skipped / not evaluated"):  # folded
        assert f"<summary><b>{heading}</b> (" in md
    rows = _table_rows(md, "Findings")
    assert "input-bound" in rows[2]
    # code fences stay balanced after truncation
    fences = re.findall(r"^(`{3,})", md, flags=re.M)
    assert len(fences) % 2 == 0


def test_custom_cap(report: Report) -> None:
    md = render_markdown(report, max_chars=2500)
    assert len(md) <= 2500
    assert "not shown" in md
