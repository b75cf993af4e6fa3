"""A short ranked summary of the findings for the terminal, then the run's
notes (what was read and how: a sample of ranks, a missing rank id, steps
that could not be split), at most ``MAX_NOTES`` of them, one line each.

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
from advisor.model import Report
from advisor.reports import _view
from advisor.reports.i18n import t
from advisor.reports.sanitize import clean

MAX_ROWS = 10
MAX_NOTES = 5
PLAIN_NOTE_WIDTH = 240
MESSAGE_WIDTH = 100
SEV_STYLE = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "bold yellow",
    "low": "blue",
    "info": "dim",
}


def _one_line(text: str, width: int = MESSAGE_WIDTH) -> str:
    s = " ".join(clean(text).split())
    return s if len(s) <= width else s[: width - 1] + "\u2026"


def _plain(console: Console, report: Report, lang: str) -> None:
    findings = _view.ordered_findings(report)
    v = _view.verdict(report, lang)
    if not findings:
        console.out(t(lang, "term_none"), highlight=False)
        return
    console.out(t(lang, "term_title", n=len(findings)), highlight=False)
    if v["bound"]:
        console.out(f"  {clean(v['bound'])}", highlight=False)
    for i, f in enumerate(findings[:MAX_ROWS], 1):
        sev = t(lang, f"sev_{f.severity}").upper()
        console.out(
            f"{i:>2}. [{sev}] {clean(f.rule)} ({clean(f.id)}): {_one_line(f.message)}  "
            f"[{_view.gain_text(f, lang)}]",
            highlight=False,
        )
    if len(findings) > MAX_ROWS:
        console.out("    " + t(lang, "term_more", n=len(findings) - MAX_ROWS), highlight=False)


def _rich(console: Console, report: Report, lang: str) -> None:
    findings = _view.ordered_findings(report)
    v = _view.verdict(report, lang)
    if not findings:
        console.print(Text(t(lang, "term_none"), style="bold green"))
        return
    title = Text(t(lang, "term_title", n=len(findings)), style="bold")
    if v["bound"]:
        title.append("  " + clean(v["bound"]), style="dim")
    console.print(title)
    shown = findings[:MAX_ROWS]
    sevs = [t(lang, f"sev_{f.severity}") for f in shown]
    rules = [_one_line(f.rule, 32) for f in shown]
    gains = [_view.gain_text(f, lang) for f in shown]
    heads = [t(lang, k) for k in ("md_col_severity", "md_col_rule", "md_col_gain")]
    fixed = (
        len(str(len(shown)))
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
    for i, f in enumerate(shown):
        table.add_row(
            str(i + 1),
            Text(sevs[i], style=SEV_STYLE.get(f.severity, "")),
            Text(rules[i]),
            Text(_one_line(f.message, width)),
            Text(gains[i], style="green" if f.estimated_gain_ms else "dim"),
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
    """Print the ranked findings (at most ``MAX_ROWS``) with their gains,
    then the run's notes."""
    rich = console.is_terminal and not console.no_color and console.color_system is not None
    (_rich if rich else _plain)(console, report, lang)
    _notes(console, report, lang, rich)
