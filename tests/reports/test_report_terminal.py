"""The terminal summary: ranked, short, plain when not a TTY."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from advisor.model import Report
from advisor.reports import print_summary


def test_plain_when_not_a_tty(report: Report) -> None:
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=100))
    out = buf.getvalue()
    assert "\x1b[" not in out
    lines = out.splitlines()
    assert lines[0] == "advisor: 4 finding(s), largest estimated gain first"
    assert lines[2].startswith(" 1. [HIGH] input-bound (ADV001):")
    assert "[38.5 ms / 20.8%]" in lines[2]
    # profile strings are printed as text, not read as rich markup
    assert "<script>alert(1)</script>" in out


def test_no_color_on_a_tty_is_plain(report: Report) -> None:
    buf = io.StringIO()
    print_summary(report, Console(file=buf, force_terminal=True, no_color=True, width=100))
    assert "\x1b[" not in buf.getvalue()
    assert "[HIGH]" in buf.getvalue()


def test_rich_on_a_tty(big_report: Report) -> None:
    buf = io.StringIO()
    print_summary(big_report, Console(file=buf, force_terminal=True, width=100, color_system="standard"))
    out = buf.getvalue()
    assert "\x1b[" in out
    assert "input-bound" in out and "38.5 ms / 20.8%" in out
    assert "190 more" in out
    assert all(len(Text.from_ansi(line).plain) <= 100 for line in out.splitlines())


def test_no_findings(report: Report) -> None:
    buf = io.StringIO()
    print_summary(Report(run=report.run), Console(file=buf))
    assert buf.getvalue().strip() == "advisor: no problems found"
