"""The terminal summary: ranked, short, plain when not a TTY."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from advisor.model import Report, Verdict
from advisor.reports import print_summary
from advisor.reports.terminal import CODE_INDENT


def test_plain_when_not_a_tty(report: Report) -> None:
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=100))
    out = buf.getvalue()
    assert "\x1b[" not in out
    lines = out.splitlines()
    assert lines[:2] == ["advisor: verdict PROBLEMS: 3 finding(s) of medium severity or above, led by: The input pipeline",
                         "  stalls the device"]  # wrapped, not cut
    assert lines[2].startswith("  not judged: compute: ops.fp32_matrix_ratio:")
    assert lines[4] == "advisor: 4 finding(s), largest expected gain first"
    assert lines[6] == " 1. [HIGH] input-bound (ADV001) [38.5 ms / 20.8%]"
    assert lines[7].startswith("    The device is idle 22% of each step waiting for data")
    assert lines[8] == "    fix for pytorch: Load and decode batches in worker processes and pin host memory."
    assert lines[9:11] == ["        loader = torch.utils.data.DataLoader(", "            dataset,"]  # code indented as written
    sub = lines.index("    1.1 also: [MEDIUM] slow-dataset-op (ADV002) [30.0 ms / 16.2%]")
    assert lines[sub + 1].startswith("        ")  # a contributing cause's message under it
    assert lines[sub + 2] == " 2. [MEDIUM] exposed-communication (ADV004) [14.2 ms / 7.7%]"  # no fix but the top one's
    assert "(the fixes of 3 more finding(s): --verbose, or the report)" in lines
    assert all(len(x) <= 100 for x in lines)
    # profile strings are printed as text, not read as rich markup
    assert "<script>alert(1)</script>" in out


def test_verbose_prints_every_fix_and_long_code_is_shortened(report: Report) -> None:
    """Every finding's fix with ``verbose``; code beyond ``FIX_CODE_LINES``
    is counted, not printed."""
    from advisor.reports.terminal import FIX_CODE_LINES

    findings = report.findings
    long_code = "\n".join(f"line_{i} = {i}" for i in range(FIX_CODE_LINES + 3))
    findings[1].fix = findings[1].fix.model_copy(update={"code": long_code})
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=100), verbose=True)
    out = buf.getvalue()
    fixes = [f.fix for f in report.all_findings() if f.fix is not None]
    assert len(fixes) >= 3
    assert all(" ".join(fix.text.split()) in " ".join(out.split()) for fix in fixes)
    assert f"line_{FIX_CODE_LINES - 1} = " in out and f"line_{FIX_CODE_LINES} = " not in out
    assert "... 3 more line(s) in the report" in out
    assert "--verbose" not in out


def test_long_messages_are_wrapped_whole_at_any_width(report: Report) -> None:
    """A message longer than any fixed cap prints whole, on lines no wider
    than the console, on a terminal (CJK counted as two cells) and in a pipe."""
    from rich.cells import cell_len

    msg = "Each step waits for the next batch; " * 8 + "数据队列为空 " * 10 + "/very/long/path/" * 12 + " end."
    report.findings[0].message = msg
    for width in (60, 200):
        for console in (Console(file=io.StringIO(), width=width),
                        Console(file=io.StringIO(), force_terminal=True, width=width, color_system="standard")):
            print_summary(report, console)
            lines = [Text.from_ansi(x).plain for x in console.file.getvalue().splitlines()]
            code = {line.strip() for line in (report.findings[0].fix.code or "").splitlines()}
            assert max(cell_len(x) for x in lines if x.strip() not in code) <= width
            assert msg.replace(" ", "") in "".join(lines).replace(" ", "")


def test_fix_code_lines_print_whole_to_be_copied(report: Report) -> None:
    """A code line wider than the console is one line of output (the
    terminal folds it for display): copied from the screen it is still the
    line of code, not two halves."""
    long_line = "prof = torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.CPU])  # note"
    report.findings[0].fix = report.findings[0].fix.model_copy(update={"code": "import torch_npu\n" + long_line})
    for console in (Console(file=io.StringIO(), width=60),
                    Console(file=io.StringIO(), force_terminal=True, width=60, color_system="standard")):
        print_summary(report, console)
        lines = [Text.from_ansi(x).plain for x in console.file.getvalue().splitlines()]
        assert " " * (4 + CODE_INDENT) + long_line in lines


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
    print_summary(Report(run=report.run, verdict=verdict), Console(file=buf, width=100))
    lines = buf.getvalue().splitlines()
    assert lines[0] == "advisor: verdict INCONCLUSIVE: none of the 2 kinds of checks could be evaluated"
    assert lines[1:6] == [f"  not judged: input data: no steps table {i}" for i in range(5)]
    assert lines[6] == "  ... and 2 more not judged (see the report)"
    assert "no problems found" not in buf.getvalue()


def test_notes_are_wrapped_and_capped(report: Report) -> None:
    """A user who reads only the terminal learns what the numbers rest on
    (a sample of ranks, a missing rank id), each note whole, at most
    ``MAX_NOTES`` of them."""
    from rich.cells import cell_len

    run = report.run.model_copy(update={"notes": [f"note {i} " + "word " * 60 for i in range(7)] + ["note 0 " + "word " * 60]})
    for console, rich in ((Console(file=io.StringIO(), width=80), False),
                          (Console(file=io.StringIO(), force_terminal=True, width=80, color_system="standard"), True)):
        print_summary(Report(run=run), console, lang="zh")
        lines = [Text.from_ansi(x).plain for x in console.file.getvalue().splitlines()]
        assert lines[0] == "advisor：未发现问题"
        heads = [x for x in lines if not x.startswith("  ")]
        assert [x[:9] for x in heads[1:6]] == [f"备注：note {i}" for i in range(5)]  # the repeat of note 0 once
        assert heads[6] == "……另有 2 条备注（见报告）" and len(heads) == 7
        assert sum(x.count("word") for x in lines) == 5 * 60  # nothing cut
        assert all(cell_len(x) <= 80 for x in lines)



def test_chinese_lines_are_filled_and_break_beside_cjk(examples) -> None:
    """Chinese has no spaces between words: a line breaks beside a CJK
    character (never before closing punctuation such as "，" or "）"), so
    each wrapped line takes all that fits before the next one starts. On
    the messages and fixes of the real ResNet-50 example analyzed in
    Chinese; English text still breaks at spaces only."""
    from rich.cells import cell_len

    from advisor.pipeline import analyze
    from advisor.reports.terminal import _pieces, _wrap

    report = analyze(examples / "resnet50_data_bound", lang="zh", jobs=1)
    texts = [t for f in report.all_findings() for t in (f.message, f.fix.text if f.fix else "") if t]
    texts += report.verdict.missing
    assert any("\u4e00" <= c <= "\u9fff" for c in texts[0])
    console = Console(file=io.StringIO(), width=80)
    breaks = 0
    for width in (40, 60, 80):
        room = width - 4
        for text in texts:
            lines = [x[4:] for x in _wrap(text, 4, width)]
            assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing lost
            assert max(cell_len(x) for x in lines) <= room
            for line, after in zip(lines, lines[1:]):
                assert cell_len(line + " " + _pieces(after)[0].rstrip()) > room, (line, after)  # filled
                assert after[0] not in "，。、；：！？）", (line, after)
                breaks += not line.endswith(" ") and not after.startswith(" ") and text.find(line + after) >= 0
    assert breaks > 10  # lines broke inside Chinese text, where there is no space
    # English: the lines rich's own wrapping gives (breaks at spaces only)
    english = " ".join(f.message for f in analyze(examples / "resnet50_data_bound", jobs=1).all_findings())
    for width in (30, 57, 80):
        assert [x for x in _wrap(english, 0, width)] == [
            x.plain.rstrip() for x in Text(english).wrap(console, width, overflow="fold")]
