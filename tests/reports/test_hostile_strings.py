"""Profile strings that would drive a terminal or notify people from a
pull-request comment, through the real renderers (the command-line attacks
on real traces: tests/robustness/test_hostile_text.py)."""

from __future__ import annotations

import io
import re
import unicodedata

import pytest
from rich.console import Console

from advisor.model import Report
from advisor.reports import print_summary, render_markdown
from advisor.reports.sanitize import clean, inert_markdown

EVIL = ("op\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\x1b[1A\u202e\r\nforged @octocat @org/team "
        "#123 !45 GH-6 https://evil.example www.evil.example")
LIVE = ["@octocat", "@org", "#123", "!45", "GH-6", "https://", "www.evil"]
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _controls(text: str, allowed: str = "\n") -> set[str]:
    return {c for c in text if (unicodedata.category(c) == "Cc" or c == "\u202e") and c not in allowed}


def _hostile(report: Report) -> Report:
    r = report.model_copy(deep=True)
    f = r.findings[0]
    f.title, f.message, f.rule = EVIL, EVIL, EVIL
    r.skipped[0].what = EVIL
    r.run.notes = [EVIL]
    r.tables["top_ops"][0]["name"] = EVIL
    return r


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "tty"])
def test_summary_prints_no_control_characters(report: Report, terminal: bool) -> None:
    buf = io.StringIO()
    print_summary(_hostile(report), Console(file=buf, width=200, force_terminal=terminal,
                                            color_system="standard" if terminal else None))
    out = buf.getvalue()
    assert "forged @octocat" in out                     # the text is shown ...
    assert _controls(_SGR.sub("", out)) == set()        # ... without what would drive the terminal
    assert not [line for line in out.splitlines() if line.lstrip().startswith("forged")]


def test_markdown_notifies_and_links_nothing(report: Report) -> None:
    md = render_markdown(_hostile(report))
    assert _controls(md) == set()
    prose = re.sub(r"(?<!\\)`[^`]*`", "", md)  # code spans link and mention nothing
    for live in LIVE:
        assert live not in prose, live
    assert "@\u200doctocat" in md


def test_inert_text_reads_the_same() -> None:
    assert inert_markdown(EVIL).replace("\u200d", "") == clean(EVIL)
    assert clean("a\tb\nc", multiline=True) == "a\tb\nc" and clean("a\tb\nc") == "a b c"
