"""A short summary for the terminal: the verdict first (problems, clean or
inconclusive, its reason, and what could not be judged, at most
``MAX_MISSING`` lines), then the ranked findings, each primary followed by
its contributing causes, then the run's notes (what was read and how: a
sample of ranks, a missing rank id, steps that could not be split), at most
``MAX_NOTES`` of them.

Each finding is a head line (number, severity, rule, id, estimated gain)
and its whole message, wrapped to the console's width (a terminal's; in a
pipe ``$COLUMNS``, else 80 columns). The top finding's fix follows it (its
text and the first ``FIX_CODE_LINES`` lines of its code); ``verbose`` shows
every finding's fix. Headless servers often have only this screen.

Coloured with rich on a terminal; plain lines (no colour, no box drawing)
when the console is not a TTY or colour is off (``NO_COLOR``,
``Console(no_color=True)``), so logs and CI output stay readable.

Every string is printed without control characters
(``advisor.reports.sanitize.clean``): a profile's strings cannot drive the
terminal (clipboard writes, title changes, cursor movement) or forge lines.
"""

from __future__ import annotations

import re

from rich.cells import cell_len, chop_cells
from rich.console import Console
from rich.text import Text

from advisor.i18n import DEFAULT_LANG
from advisor.model import Finding, Report
from advisor.reports import _view, run_notes
from advisor.reports.i18n import t
from advisor.reports.sanitize import clean

MAX_ROWS = 10
MAX_NOTES = 5
MAX_MISSING = 5
#: Lines of a fix's code printed under it; the report holds the rest.
FIX_CODE_LINES = 8
#: Indent of a finding's message and fix under its head line (twice that
#: for a contributing cause), and of a fix's code under its text.
MESSAGE_INDENT = 4
CODE_INDENT = 4
#: The narrowest a wrapped text gets, however narrow the console.
MIN_TEXT_WIDTH = 20
SEV_STYLE = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "bold yellow",
    "low": "blue",
    "info": "dim",
}
STATUS_STYLE = {"problems": "bold red", "clean": "bold green", "inconclusive": "bold yellow"}


def _verdict_lines(report: Report, lang: str) -> list[tuple[str, str]]:
    """(text, rich style) lines of the verdict; a report without a verdict
    (written before verdicts) says only whether anything fired."""
    v = report.verdict
    if v is None:
        return [] if report.findings else [(t(lang, "term_none"), "bold green")]
    lines = [(t(lang, "term_verdict", status=t(lang, f"verdict_{v.status}").upper(), reason=clean(v.reason)),
              STATUS_STYLE.get(v.status, "bold"))]
    for text in v.missing[:MAX_MISSING]:
        lines.append((t(lang, "term_missing", text=" ".join(clean(text).split())), "dim"))
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


#: Characters of Chinese, Japanese and Korean text (ideographs, kana,
#: hangul, CJK and full-width punctuation): a line may break between two of
#: them, or between one and a Latin word, as CJK text has no spaces.
_CJK = re.compile(r"[\u2e80-\u303f\u3040-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")
#: Punctuation that never starts a line, and that never ends one.
_NO_BREAK_BEFORE = frozenset("，。、；：！？）」』】》〉…")
_NO_BREAK_AFTER = frozenset("（「『【《〈")


def _pieces(text: str) -> list[str]:
    """``text`` cut where a line may break: after spaces (a piece keeps the
    spaces that follow it), and beside CJK characters (``_CJK``), never
    before closing or after opening punctuation."""
    out = []
    for word in re.findall(r"\S+\s*", text):
        start = 0
        for i in range(1, len(word.rstrip())):
            a, b = word[i - 1], word[i]
            if (_CJK.match(a) or _CJK.match(b)) and b not in _NO_BREAK_BEFORE and a not in _NO_BREAK_AFTER:
                out.append(word[start:i])
                start = i
        out.append(word[start:])
    return out


def _fill(text: str, room: int) -> list[str]:
    """``text`` in lines of at most ``room`` cells, filled greedily from its
    ``_pieces``; a piece longer than a line is folded, never cut."""
    lines: list[str] = []
    line = ""
    for piece in _pieces(text):
        if cell_len((line + piece).rstrip()) <= room:
            line += piece
            continue
        if line.strip():
            lines.append(line.rstrip())
        while cell_len(piece.rstrip()) > room:
            head = chop_cells(piece, room)[0]
            lines.append(head)
            piece = piece[len(head):]
        line = piece
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return lines


def _wrap(text: str, indent: int, width: int, *, code: bool = False) -> list[str]:
    """``text`` wrapped to ``width`` display cells (CJK: two each) under an
    indent of ``indent`` spaces, breaking at spaces and beside CJK
    characters (``_pieces``); a word longer than a line is folded, never
    cut. ``code`` is not wrapped: each line keeps its leading spaces and
    prints whole (the terminal folds it for display), so that a line copied
    from the screen is the line of code."""
    room = max(MIN_TEXT_WIDTH, width - indent)
    pad = " " * indent
    if code:
        return [(pad + line).rstrip() for line in clean(text, multiline=True).expandtabs(4).splitlines()]
    return [pad + line for line in _fill(" ".join(clean(text).split()), room)]


def _fix_lines(f: Finding, indent: int, width: int, lang: str) -> list[str]:
    """The fix: its text whole, then the first ``FIX_CODE_LINES`` lines of
    its code and how many more the report holds."""
    if f.fix is None:
        return []
    head = t(lang, "term_fix", label=_view.fix_label(f.fix.framework, lang), text=f.fix.text)
    lines = _wrap(head, indent, width)
    code = clean(f.fix.code or "", multiline=True).strip("\n").splitlines()
    if code:
        lines += _wrap("\n".join(code[:FIX_CODE_LINES]), indent + CODE_INDENT, width, code=True)
        if len(code) > FIX_CODE_LINES:
            lines.append(" " * (indent + CODE_INDENT) + t(lang, "term_fix_more", n=len(code) - FIX_CODE_LINES))
    return lines


def _finding_lines(console: Console, findings: list[Finding], lang: str, verbose: bool) -> list[tuple[str, str]]:
    """(text, rich style) lines of the ranked findings: a head line (number,
    severity, rule, id, gain), the whole message wrapped to the console's
    width, then the fix (the top finding's; every one's with ``verbose``)."""
    width = max(MIN_TEXT_WIDTH, console.width - 1)
    out: list[tuple[str, str]] = []
    rows = _rows(findings[:MAX_ROWS])
    unshown = 0
    for k, (num, f) in enumerate(rows):
        sub = "." in num
        sev = t(lang, f"sev_{f.severity}").upper()
        lead = f"{num:>2}. " if not sub else f"    {t(lang, 'term_contributing', n=num)} "
        head = f"{lead}[{sev}] {clean(f.rule)} ({clean(f.id)})  [{_view.gain_text(f, lang)}]"
        out += [(line, "dim" if sub else SEV_STYLE.get(f.severity, "")) for line in _hang(head, width)]
        indent = MESSAGE_INDENT * (2 if sub else 1)
        out += [(line, "dim" if sub else "") for line in _wrap(f.message, indent, width)]
        if verbose or k == 0:
            out += [(line, "cyan") for line in _fix_lines(f, indent, width, lang)]
        elif f.fix is not None:
            unshown += 1
    if len(findings) > MAX_ROWS:
        out.append(("    " + t(lang, "term_more", n=len(findings) - MAX_ROWS), "dim"))
    if unshown:
        out.append((t(lang, "term_fix_hint", n=unshown), "dim"))
    return out


def _print_findings(console: Console, report: Report, lang: str, rich: bool, verbose: bool) -> None:
    findings = _view.ordered_findings(report)
    v = _view.verdict(report, lang)
    width = max(MIN_TEXT_WIDTH, console.width - 1)
    for text, style in _verdict_lines(report, lang):
        _hanging(console, text, style, rich, width)
    if not findings:
        return
    _line(console, t(lang, "term_title", n=len(findings)), "bold", rich)
    if v["bound"]:
        for line in _wrap(v["bound"], 2, width):
            _line(console, line, "dim", rich)
    for text, style in _finding_lines(console, findings, lang, verbose):
        _line(console, text, style, rich)


def _hanging(console: Console, text: str, style: str, rich: bool, width: int) -> None:
    """Print ``text`` wrapped with a hanging indent (:func:`_hang`)."""
    for line in _hang(text, width):
        _line(console, line, style, rich)


def _hang(text: str, width: int) -> list[str]:
    """``text`` wrapped to ``width``, its lines after the first indented two
    spaces more than the first (which keeps its own leading spaces)."""
    lead = len(text) - len(text.lstrip(" "))
    return [" " * lead + line[lead + 2:] if j == 0 else line
            for j, line in enumerate(_wrap(text, lead + 2, width))]


def _line(console: Console, text: str, style: str, rich: bool) -> None:
    """One line, already fitted to the width: styled on a terminal, plain
    otherwise; never wrapped again."""
    if rich:
        console.print(Text(text, style=style), soft_wrap=True)
    else:
        console.out(text, highlight=False)


def _notes(console: Console, report: Report, lang: str, rich: bool) -> None:
    notes = list(dict.fromkeys(report.run.notes))
    lines = [t(lang, "term_note", text=" ".join(clean(run_notes.localized(n, lang)).split()))
             for n in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        lines.append(t(lang, "term_more_notes", n=len(notes) - MAX_NOTES))
    width = max(MIN_TEXT_WIDTH, console.width - 1)
    for line in lines:
        _hanging(console, line, "dim", rich, width)


def print_summary(report: Report, console: Console, lang: str = DEFAULT_LANG, verbose: bool = False) -> None:
    """Print the verdict, the ranked findings (at most ``MAX_ROWS`` primary
    ones, each with its contributing causes) with their gains and whole
    messages, the top finding's fix (every finding's when ``verbose``), then
    the run's notes."""
    rich = console.is_terminal and not console.no_color and console.color_system is not None
    _print_findings(console, report, lang, rich, verbose)
    _notes(console, report, lang, rich)
