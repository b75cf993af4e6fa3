"""A short summary for the terminal: the verdict first (problems, clean or
inconclusive, its reason, and what could not be judged, at most
``MAX_MISSING`` lines), then the ranked findings, each primary followed by
its contributing causes, then the run's notes (what was read and how: a
sample of ranks, a missing rank id, steps that could not be split), at most
``MAX_NOTES`` of them, one line each.

Coloured with rich on a terminal; plain lines (no colour, no box drawing)
when the console is not a TTY or colour is off (``NO_COLOR``,
``Console(no_color=True)``), so logs and CI output stay readable.

Every string is printed without control characters
(``advisor.reports.sanitize.clean``): a profile's strings cannot drive the
terminal (clipboard writes, title changes, cursor movement) or forge lines.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from advisor.i18n import DEFAULT_LANG
from advisor.model import Finding, Report
from advisor.reports import _view
from advisor.reports.i18n import t
from advisor.reports.sanitize import clean

MAX_ROWS = 10
MAX_NOTES = 5
MAX_MISSING = 5
PLAIN_NOTE_WIDTH = 240
MESSAGE_WIDTH = 100
SEV_STYLE = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "bold yellow",
    "low": "blue",
    "info": "dim",
}
STATUS_STYLE = {"problems": "bold red", "clean": "bold green", "inconclusive": "bold yellow"}


def _one_line(text: str, width: int = MESSAGE_WIDTH) -> str:
    s = " ".join(clean(text).split())
    return s if len(s) <= width else s[: width - 1] + "\u2026"


def _verdict_lines(report: Report, lang: str) -> list[tuple[str, str]]:
    """(text, rich style) lines of the verdict; a report without a verdict
    (written before verdicts) says only whether anything fired."""
    v = report.verdict
    if v is None:
        return [] if report.findings else [(t(lang, "term_none"), "bold green")]
    lines = [(t(lang, "term_verdict", status=t(lang, f"verdict_{v.status}").upper(), reason=clean(v.reason)),
              STATUS_STYLE.get(v.status, "bold"))]
    for text in v.missing[:MAX_MISSING]:
        lines.append((t(lang, "term_missing", text=_one_line(text, PLAIN_NOTE_WIDTH)), "dim"))
    if len(v.missing) > MAX_MISSING:
        lines.append((t(lang, "term_more_missing", n=len(v.missing) - MAX_MISSING), "dim"))
    return lines


def _rows(findings: list[Finding]) -> list[tuple[str, Finding]]:
    """(number, finding) rows: each primary, then its contributing causes
    numbered under it (1.1, 1.2, ...)."""
    rows = []
    for i, f in enumerate(findings, 1):
        rows.append((str(i), f))
        rows += [(f"{i}.{j}", c) for j, c in enumerate(f.contributing, 1)]
    return rows


def _plain(console: Console, report: Report, lang: str) -> None:
    findings = _view.ordered_findings(report)
    v = _view.verdict(report, lang)
    for text, _ in _verdict_lines(report, lang):
        console.out(text, highlight=False)
    if not findings:
        return
    console.out(t(lang, "term_title", n=len(findings)), highlight=False)
    if v["bound"]:
        console.out(f"  {clean(v['bound'])}", highlight=False)
    for num, f in _rows(findings[:MAX_ROWS]):
        sev = t(lang, f"sev_{f.severity}").upper()
        lead = f"{num:>2}. " if "." not in num else f"    {t(lang, 'term_contributing', n=num)} "
        console.out(
            f"{lead}[{sev}] {clean(f.rule)} ({clean(f.id)}): {_one_line(f.message)}  "
            f"[{_view.gain_text(f, lang)}]",
            highlight=False,
        )
    if len(findings) > MAX_ROWS:
        console.out("    " + t(lang, "term_more", n=len(findings) - MAX_ROWS), highlight=False)


def _rich(console: Console, report: Report, lang: str) -> None:
    findings = _view.ordered_findings(report)
    v = _view.verdict(report, lang)
    for text, style in _verdict_lines(report, lang):
        console.print(Text(text, style=style))
    if not findings:
        return
    title = Text(t(lang, "term_title", n=len(findings)), style="bold")
    if v["bound"]:
        title.append("  " + clean(v["bound"]), style="dim")
    console.print(title)
    shown = _rows(findings[:MAX_ROWS])
    sevs = [t(lang, f"sev_{f.severity}") for _, f in shown]
    rules = [_one_line(f.rule if "." not in num else "+ " + f.rule, 32) for num, f in shown]
    gains = [_view.gain_text(f, lang) for _, f in shown]
    heads = [t(lang, k) for k in ("md_col_severity", "md_col_rule", "md_col_gain")]
    fixed = (
        max(len(num) for num, _ in shown)
        + max(len(heads[0]), *(len(x) for x in sevs))
        + max(len(heads[1]), *(len(x) for x in rules))
        + max(len(heads[2]), *(len(x) for x in gains))
        + 4 * 2  # one space each side between five columns
        + 1
    )
    width = max(20, min(MESSAGE_WIDTH, console.width - fixed))
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 1))
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column(t(lang, "md_col_severity"), no_wrap=True)
    table.add_column(t(lang, "md_col_rule"), no_wrap=True)
    table.add_column(t(lang, "md_col_message"), no_wrap=True, overflow="ellipsis", max_width=width)
    table.add_column(t(lang, "md_col_gain"), justify="right", no_wrap=True)
    for i, (num, f) in enumerate(shown):
        sub = "." in num
        table.add_row(
            num,
            Text(sevs[i], style=SEV_STYLE.get(f.severity, "")),
            Text(rules[i], style="dim" if sub else ""),
            Text(_one_line(f.message, width), style="dim" if sub else ""),
            Text(gains[i], style="dim" if sub or not f.estimated_gain_ms else "green"),
        )
    console.print(table)
    if len(findings) > MAX_ROWS:
        console.print(Text(t(lang, "term_more", n=len(findings) - MAX_ROWS), style="dim"))


def _notes(console: Console, report: Report, lang: str, rich: bool) -> None:
    notes = list(dict.fromkeys(report.run.notes))
    lines = [t(lang, "term_note", text=" ".join(clean(n).split())) for n in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        lines.append(t(lang, "term_more_notes", n=len(notes) - MAX_NOTES))
    # a terminal's width, by display cells (CJK: two each); a log's lines may be longer
    width = max(20, console.width - 1) if rich else PLAIN_NOTE_WIDTH
    for line in lines:
        text = Text(line, style="dim" if rich else "")
        text.truncate(width, overflow="ellipsis")
        if rich:
            console.print(text)
        else:
            console.out(text.plain, highlight=False)


def print_summary(report: Report, console: Console, lang: str = DEFAULT_LANG) -> None:
    """Print the verdict, the ranked findings (at most ``MAX_ROWS`` primary
    ones, each with its contributing causes) with their gains, then the
    run's notes."""
    rich = console.is_terminal and not console.no_color and console.color_system is not None
    (_rich if rich else _plain)(console, report, lang)
    _notes(console, report, lang, rich)
