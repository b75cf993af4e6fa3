"""The terminal summary: ranked, short, plain when not a TTY."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from advisor.model import Report, Verdict
from advisor.reports import print_summary


def test_plain_when_not_a_tty(report: Report) -> None:
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=100))
    out = buf.getvalue()
    assert "\x1b[" not in out
    lines = out.splitlines()
    assert lines[0] == ("advisor: verdict PROBLEMS: 3 finding(s) of medium severity or above, led by: "
                        "The input pipeline stalls the device")
    assert lines[1].startswith("  not judged: compute: ops.fp32_matrix_ratio:")
    assert lines[2] == "advisor: 4 finding(s), largest estimated gain first"
    assert lines[4].startswith(" 1. [HIGH] input-bound (ADV001):")
    assert "[38.5 ms / 20.8%]" in lines[4]
    assert lines[5].startswith("    1.1 also: [MEDIUM] slow-dataset-op (ADV002):") and "[30.0 ms / 16.2%]" in lines[5]
    assert lines[6].startswith(" 2. [MEDIUM] exposed-communication")
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
    """A report written before verdicts says only that nothing fired; one
    with a verdict says which, and why."""
    buf = io.StringIO()
    print_summary(Report(run=report.run), Console(file=buf))
    assert buf.getvalue().splitlines() == ["advisor: no problems found", "note: rank 3 has no memory table",
                                           "note: times converted from us to ms"]
    buf = io.StringIO()
    verdict = Verdict(status="inconclusive", reason="none of the 2 kinds of checks could be evaluated",
                      missing=[f"input data: no steps table {i}" for i in range(7)])
    print_summary(Report(run=report.run, verdict=verdict), Console(file=buf))
    lines = buf.getvalue().splitlines()
    assert lines[0] == "advisor: verdict INCONCLUSIVE: none of the 2 kinds of checks could be evaluated"
    assert lines[1:6] == [f"  not judged: input data: no steps table {i}" for i in range(5)]
    assert lines[6] == "  ... and 2 more not judged (see the report)"
    assert "no problems found" not in buf.getvalue()


def test_notes_are_one_line_each_and_capped(report: Report) -> None:
    """A user who reads only the terminal learns what the numbers rest on
    (a sample of ranks, a missing rank id), without a wall of text."""
    run = report.run.model_copy(update={"notes": [f"note {i} " + "word " * 60 for i in range(7)] + ["note 0 " + "word " * 60]})
    for console, rich in ((Console(file=io.StringIO(), width=80), False),
                          (Console(file=io.StringIO(), force_terminal=True, width=80, color_system="standard"), True)):
        print_summary(Report(run=run), console, lang="zh")
        lines = [Text.from_ansi(x).plain for x in console.file.getvalue().splitlines()]
        assert lines[0] == "advisor：未发现问题"
        assert [x[:9] for x in lines[1:6]] == [f"备注：note {i}" for i in range(5)]  # the repeat of note 0 once
        assert lines[6] == "……另有 2 条备注（见报告）" and len(lines) == 7
        assert all(len(x) <= (80 if rich else 240) for x in lines)
