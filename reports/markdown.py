"""The Markdown report: the findings, short enough for a pull-request comment.

GitHub/GitLab-flavoured: a title, the verdict (problems, clean or
inconclusive, its reason and what could not be judged), a findings table
(each primary finding followed by its contributing causes, numbered 1.1,
1.2, ...), each finding's fix in a fenced code block, key metrics, skipped
items and the run's notes (what was read and how, e.g. a sample of ranks).
The key metrics and skipped items are long tables a reviewer rarely needs:
they are folded (``<details>``, closed) so the comment opens on the
findings and fixes. Text is cut only at ``MESSAGE_LIMIT`` / ``CELL_LIMIT``
characters, after a sentence or a word (:func:`shorten`). The
whole text stays under ``MAX_CHARS`` (GitHub rejects comments over 65,536
characters): when it would not, lower-priority sections are cut first and
each cut section ends with a note saying how much was left out.

Strings from a profile are escaped for Markdown (``|``, backticks and the
other inline markup characters) and for HTML (``<``, ``>``, ``&``), since
both GitHub and GitLab render raw HTML in comments; control characters
are removed and mentions, issue references and bare links made inert
(``advisor.reports.sanitize``), so a profile cannot notify anyone or link
anywhere from a pull-request comment. Code snippets are fenced with a fence
longer than any backtick run inside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from advisor.i18n import DEFAULT_LANG, LANGS
from advisor.model import Finding, Report
from advisor.reports import _view, run_notes
from advisor.reports.i18n import scope_name, skip_texts, t, unit_text
from advisor.reports.sanitize import clean, inert_markdown

MAX_CHARS = 60_000
CELL_LIMIT = 240  # characters of one table cell, before escaping
#: Characters of a finding's message in the findings table: more than any
#: rule's message with its figures filled in, so a message is cut only when
#: a profile string in it is very long (then after a sentence, see
#: :func:`shorten`).
MESSAGE_LIMIT = 1200
KEY_METRICS_LIMIT = 40
#: Sentence ends :func:`shorten` cuts after (English and Chinese).
_SENTENCE_END = re.compile(r"[.!?;:](?=\s)|[。；！？]")

# inline markup that can start anywhere in a line; line-start markup (#, +,
# -, >) cannot occur because every escaped text is inside a line
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_STATUS_ICON = {
    "problems": "\u274c",  # cross mark
    "clean": "\u2705",  # check mark
    "inconclusive": "\u2754",  # white question mark
}
_SEV_ICON = {
    "critical": "\U0001f7e5",  # red square
    "high": "\U0001f534",  # red circle
    "medium": "\U0001f7e0",  # orange circle
    "low": "\U0001f535",  # blue circle
    "info": "\u26aa",  # white circle
}


def shorten(s: str, limit: int) -> str:
    """``s`` in at most ``limit`` characters: whole when it fits, else cut
    after its last sentence that ends in the second half of the limit, else
    after its last whole word, else at the limit; an ellipsis marks the cut."""
    if len(s) <= limit:
        return s
    head = s[: limit - 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= limit // 2:
        return head[: ends[-1]].rstrip() + " \u2026"
    space = head.rfind(" ")
    if space >= limit // 2:
        return head[:space].rstrip() + "\u2026"
    return head + "\u2026"


def escape(text: object, limit: int | None = CELL_LIMIT) -> str:
    """One line of profile text made inert in a Markdown table cell, cut
    (:func:`shorten`) when longer than ``limit``."""
    s = " ".join(clean(text).split())
    if limit is not None:
        s = shorten(s, limit)
    s = inert_markdown(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def code_span(text: object, limit: int = 120) -> str:
    """Profile text as an inline code span in a table cell: no backtick can
    end it early and no ``|`` can split the cell (GFM reads ``\\|`` as ``|``
    even inside code; nothing in a code span is linked or mentions anyone)."""
    s = " ".join(clean(text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    s = s.replace("`", "'").replace("|", "\\|")
    return f"`{s}`" if s else ""


def fence(code: str, lang: str = "") -> str:
    """``code`` in a fenced block whose fence no backtick run inside can close
    (control characters removed; nothing in a fence is linked)."""
    code = clean(code, multiline=True)
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{lang}\n{code.rstrip()}\n{bar}"


def _code_lang(framework: str) -> str:
    return "python" if framework.lower() in {"pytorch", "torch_npu", "mindspore", "torch", "python"} else ""


@dataclass
class _Section:
    """A heading, its items (each a block of text) and what to say when some
    are cut."""

    heading: str
    items: list[str] = field(default_factory=list)
    head: str = ""  # text between the heading and the items (e.g. a table header)
    tail: str = ""  # text after the items when nothing is cut
    noun: str = ""
    folded: bool = False  # in <details>, closed: a long table a reader opens when needed

    def full(self) -> str:
        return self.render(len(self.items))

    def render(self, n: int, note: str = "") -> str:
        if self.folded:  # a blank line after <summary> and before </details>, or GitHub shows raw Markdown
            parts = [f"<details>\n<summary><b>{self.heading}</b> ({len(self.items):,})</summary>\n\n"]
        else:
            parts = [f"### {self.heading}\n\n"]
        if self.head:
            parts.append(self.head)
        parts.extend(self.items[:n])
        if note:
            parts.append(f"\n_{note}_\n")
        elif self.tail:
            parts.append(self.tail)
        parts.append("\n</details>\n" if self.folded else "\n")
        return "".join(parts)

    def fit(self, budget: int, lang: str, cap: int) -> str:
        """As many items as fit in ``budget`` characters, plus a note."""
        text = self.full()
        if len(text) <= budget:
            return text
        total = len(self.items)
        note_for = lambda k: t(lang, "md_truncated", n=f"{total - k:,}", noun=self.noun, cap=f"{cap:,}")  # noqa: E731
        base = len(self.render(0, note_for(0)))
        if base > budget:
            return ""
        used, n = base, 0
        for item in self.items:
            if used + len(item) > budget:
                break
            used += len(item)
            n += 1
        return self.render(n, note_for(n))


def _numbered(findings: list[Finding]) -> list[tuple[str, Finding]]:
    """(number, finding): each primary, then its contributing causes (1.1, ...)."""
    rows = []
    for i, f in enumerate(findings, 1):
        rows.append((str(i), f))
        rows += [(f"{i}.{j}", c) for j, c in enumerate(f.contributing, 1)]
    return rows


def _findings_section(findings: list[Finding], lang: str) -> _Section:
    head = (
        f"| | {t(lang, 'md_col_severity')} | {t(lang, 'md_col_rule')} | "
        f"{t(lang, 'md_col_message')} | {t(lang, 'md_col_gain')} |\n"
        "|---|---|---|---|---:|\n"
    )
    rows = []
    for num, f in _numbered(findings):
        sev = t(lang, f"sev_{f.severity}")
        sub = f"{escape(t(lang, 'md_contributing'), 40)}: " if "." in num else ""
        rows.append(
            f"| {num} | {_SEV_ICON.get(f.severity, '')} {sev} | {code_span(f.rule, 80)} "
            f"{escape(f.id, 20)} | {sub}**{escape(f.title, 160)}**<br>{escape(f.message, MESSAGE_LIMIT)} | "
            f"{escape(_view.gain_text(f, lang), 60)} |\n"
        )
    return _Section(t(lang, "md_findings_heading"), rows, head=head, noun=t(lang, "md_noun_findings"))


def _fixes_section(findings: list[Finding], lang: str) -> _Section:
    blocks = []
    for num, f in _numbered(findings):
        if f.fix is None:
            continue
        text = f"**{num}. {escape(f.title, 160)}** ({escape(_view.fix_label(f.fix.framework, lang), 60)}): "
        text += escape(f.fix.text, 600) + "\n"
        if f.fix.code:
            text += "\n" + fence(f.fix.code, _code_lang(f.fix.framework)) + "\n"
        blocks.append(text + "\n")
    return _Section(t(lang, "md_fixes_heading"), blocks, noun=t(lang, "md_noun_fixes"))


def _key_metric_ids(report: Report) -> list[str]:
    """Metrics named in the findings' evidence first, then run-scoped ones,
    then the rest, in id order within each group."""
    cited = []
    for f in report.all_findings():
        for k in f.evidence:
            if k in report.metrics and k not in cited:
                cited.append(k)
    rest = sorted(set(report.metrics) - set(cited), key=lambda i: (report.metrics[i].scope != "run", i))
    return cited + rest


def _metrics_section(report: Report, lang: str) -> _Section:
    ids = _key_metric_ids(report)
    head = (
        f"| {t(lang, 'col_id')} | {t(lang, 'col_value')} | {t(lang, 'col_unit')} | "
        f"{t(lang, 'col_scope')} |\n|---|---:|---|---|\n"
    )
    rows = []
    for mid in ids[:KEY_METRICS_LIMIT]:
        m = report.metrics[mid]
        rows.append(
            f"| {code_span(m.id)} | {escape(_view.fmt_value(m.value, 120))} | "
            f"{escape(unit_text(lang, m.unit), 30)} | {escape(scope_name(lang, m.scope), 10)} |\n"
        )
    more = len(ids) - KEY_METRICS_LIMIT
    tail = f"\n_{t(lang, 'md_metrics_more', n=f'{more:,}')}_\n" if more > 0 else ""
    return _Section(t(lang, "md_metrics_heading"), rows, head=head, tail=tail, noun=t(lang, "md_noun_metrics"),
                    folded=True)


def _skipped_section(report: Report, lang: str) -> _Section:
    head = f"| {t(lang, 'col_what')} | {t(lang, 'col_reason')} |\n|---|---|\n"
    rows = [f"| {escape(what, 120)} | {escape(reason, 300)} |\n"
            for what, reason in (skip_texts(lang, s.what, s.reason) for s in report.skipped)]
    return _Section(t(lang, "md_skipped_heading"), rows, head=head, noun=t(lang, "md_noun_skipped"), folded=True)


def _notes_section(report: Report, lang: str) -> _Section:
    rows = [f"- {escape(run_notes.localized(n, lang), 400)}\n" for n in report.run.notes]
    return _Section(t(lang, "meta_notes"), rows, noun=t(lang, "md_noun_notes"))


def _header(report: Report, lang: str) -> str:
    run = report.run
    v = _view.verdict(report, lang)
    lines = [f"## {t(lang, 'md_title')}", ""]
    if v["reason"]:
        lines.append(f"{_STATUS_ICON.get(v['status'], '')} **{escape(t(lang, 'verdict_label'), 40)}: "
                     f"{escape(v['status_label'], 40)}**: {escape(v['reason'], 400)}")
        lines.append("")
        if v["missing"]:
            lines.append(f"{escape(t(lang, 'verdict_missing'), 60)}:")
            lines.append("")
            lines += [f"- {escape(m, 400)}" for m in v["missing"]]
            lines.append("")
    if v["status"] == "problems" or not v["reason"]:
        verdict = f"{_SEV_ICON.get(v['severity'] or '', chr(0x2705))} **{escape(v['title'], 300)}**"
        if v["bound"]:
            verdict += f": {escape(v['bound'], 200)}"
        lines += [verdict, ""]
    elif v["bound"]:
        lines += [escape(v["bound"], 200), ""]
    if v["shares"]:
        parts = " \u00b7 ".join(f"{s['label']} {s['text']}" for s in v["shares"])
        lines += [escape(f"{t(lang, 'step_share')}: {parts}", 400), ""]
    if v["path"]:
        lines += [escape(v["path"], 400), ""]
    facts = [v["counts"]]
    if v["step"]:
        facts.append(v["step"])
    if v["gain"]:
        facts.append(v["gain"])
    lines.append(escape(" \u00b7 ".join(facts), 400))
    lines.append("")
    runline = t(
        lang,
        "md_run_line",
        framework=run.framework,
        device=run.device,
        format=run.source_format,
        ranks=len(run.ranks),
        steps=run.steps_found,
    )
    lines.append(f"<sub>{escape(runline, 300)} \u00b7 advisor {escape(run.advisor_version, 40)} \u00b7 {escape(run.generated_at, 40)}</sub>")
    lines.append("")
    return "\n".join(lines) + "\n"


def _allocate(needs: list[int], shares: list[float], budget: int) -> list[int]:
    """Split ``budget`` over sections: each gets at most what it needs; the
    rest is shared by ``shares`` (water-filling), earlier sections first on
    ties."""
    alloc = [0] * len(needs)
    open_ = [i for i, n in enumerate(needs) if n > 0]
    left = budget
    while open_ and left > 0:
        weight = sum(shares[i] for i in open_)
        done = [i for i in open_ if needs[i] - alloc[i] <= left * shares[i] / weight]
        if done:
            for i in done:
                left -= needs[i] - alloc[i]
                alloc[i] = needs[i]
                open_.remove(i)
            continue
        for i in open_:
            alloc[i] += int(left * shares[i] / weight)
        break
    return alloc


def render_markdown(report: Report, lang: str = DEFAULT_LANG, max_chars: int = MAX_CHARS) -> str:
    """The report as Markdown for a pull-request comment, at most
    ``max_chars`` characters."""
    lang = lang if lang in LANGS else DEFAULT_LANG
    findings = _view.ordered_findings(report)
    header = _header(report, lang)
    sections: list[_Section] = []
    if findings:
        sections.append(_findings_section(findings, lang))
        fixes = _fixes_section(findings, lang)
        if fixes.items:
            sections.append(fixes)
    if report.metrics:
        sections.append(_metrics_section(report, lang))
    if report.skipped:
        sections.append(_skipped_section(report, lang))
    if report.run.notes:
        sections.append(_notes_section(report, lang))

    fulls = [s.full() for s in sections]
    if len(header) + sum(len(x) + 1 for x in fulls) <= max_chars:
        return header + "\n" + "\n".join(fulls)

    # Too long: share the budget, findings first, then fixes, metrics, skipped.
    share_of = {
        t(lang, "md_findings_heading"): 0.45,
        t(lang, "md_fixes_heading"): 0.35,
        t(lang, "md_metrics_heading"): 0.12,
        t(lang, "md_skipped_heading"): 0.08,
        t(lang, "meta_notes"): 0.05,
    }
    budget = max_chars - len(header) - 1 - len(sections) - 64
    alloc = _allocate([len(x) for x in fulls], [share_of.get(s.heading, 0.1) for s in sections], budget)
    parts = [s.fit(a, lang, max_chars) for s, a in zip(sections, alloc)]
    out = header + "\n" + "\n".join(p for p in parts if p)
    if len(out) > max_chars:  # pragma: no cover - the budget above leaves room
        out = out[: max_chars - 1] + "\u2026"
    return out
