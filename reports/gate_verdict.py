"""Renderers for ``advisor gate`` and ``advisor history``.

* :func:`render_gate_markdown` -- the summary for a pull-request comment:
  verdict, failed checks with their statistics, what grew, then the rest;
  at most ``MAX_CHARS`` characters (GitHub's limit is 65,536).
* :func:`render_junit` -- JUnit XML, one test case per budget, per failing
  rule (or one passing "findings" case) and for the anomaly model; a check
  that could not be evaluated is an ``<error>``. Well-formed whatever the
  profile strings hold: characters XML 1.0 forbids (control characters,
  lone surrogates, U+FFFE/U+FFFF) are written as visible ``\\xNN`` /
  ``\\uNNNN`` escapes (:func:`xml_text`).
* Every verdict names the config it used (the gate's file and settings,
  and what each input report was analyzed with): the terminal, gate.md,
  junit.xml properties and gate.json.
* :func:`render_trend_svg` -- a self-contained SVG trend chart of one metric
  over the history runs (no script, no external reference).
* :func:`print_gate` / :func:`print_history` -- rich terminal output.
* :func:`write_gate` -- gate.md, junit.xml, gate.json and compare.html in a folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape as xml_escape

import pandas as pd

from advisor.i18n import DEFAULT_LANG
from advisor.regression.compare import Comparison, change_text
from advisor.regression.gate import GateResult
from advisor.reports._view import fmt_num
from advisor.reports.comparison import growth_lines, kind_text, name_text, render_compare_html
from advisor.reports.i18n import Message, say, t
from advisor.reports.markdown import code_span, escape
from advisor.reports.sanitize import clean
from advisor.runtime.files import write_text
from advisor.settings import describe, is_default

MAX_CHARS = 60_000
ICON = {"pass": "\u2705", "fail": "\u274c", "skip": "\u2796", "error": "\u26a0\ufe0f"}
VERDICT_ICON = {"pass": ICON["pass"], "regression": ICON["fail"], "unmeasurable": ICON["error"]}
#: What XML 1.0 does not allow in a document (its ``Char`` production).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
SVG_W, SVG_H, SVG_PAD = 760, 300, 48
#: After the number of a run the anomaly model flags, in the history table.
FLAG_MARK = "*"
#: Characters of a commit shown in the history table (enough to find it).
COMMIT_CHARS = 10
FILES = {"markdown": "gate.md", "junit": "junit.xml", "json": "gate.json", "html": "compare.html"}


def headline(verdict: str, lang: str = DEFAULT_LANG) -> str:
    """The summary's first line: "✅ **advisor gate: pass**"."""
    word = t(lang, "gate_cannot_measure" if verdict == "unmeasurable" else f"gate_verdict_{verdict}")
    exit_code = f" {t(lang, 'gate_exit_2')}" if verdict == "unmeasurable" else ""
    return f"{VERDICT_ICON[verdict]} **{t(lang, 'gate_title', verdict=word)}**{exit_code}"


def render_gate_markdown(result: GateResult, comparison: Comparison | None = None, lang: str = DEFAULT_LANG) -> str:
    """The PR-comment summary (see module doc), in ``lang``."""
    failed = result.failed

    def items(checks) -> list[str]:
        return [f"- {escape(say(lang, c.message), 600)}" for c in checks] + [""]

    out = [f"### {headline(result.verdict, lang)}", "",
           t(lang, "gate_md_versus", current=code_span(result.current, 200), baseline=code_span(result.baseline, 200)),
           ""]
    if result.unmeasured:
        out.append(f"**{t(lang, 'gate_md_unmeasured')}** {t(lang, 'gate_md_never_pass')}")
        out += items(result.unmeasured)
    if failed:
        out.append(f"**{t(lang, 'gate_md_slower')}**")
        out += items(failed)
    if result.growth and (failed or comparison is not None):
        out += [f"**{t(lang, 'cmp_grew_heading')}**", ""]
        out += growth_lines(comparison, 5, lang) if comparison is not None else [
            "- " + t(lang, "gate_grew_item", kind=escape(kind_text(lang, g.kind)), name=escape(name_text(lang, g), 120),
                     ms=fmt_num(g.change_ms)) for g in result.growth]
        out.append("")
    cols = [t(lang, k) for k in ("gate_col_check", "gate_col_result", "cmp_baseline", "cmp_current", "cmp_col_change",
                                 "gate_col_limit")]
    out += ["| {} | {} | {} | {} | {} | {} | p |".format(*cols), "|---|:-:|--:|--:|--:|--:|--:|"]
    for c in result.checks:
        limit = "-"
        if c.limit is not None:
            limit = f"{c.limit:+.1%}" if c.relative else f"{fmt_num(c.limit)}"
        p = "-" if c.p_value is None else f"{c.p_value:.2g}"
        change = "-" if c.baseline is None or c.current is None else change_text(c.baseline, c.current)
        out.append(f"| {escape(say(lang, c.name), 120)} | {ICON[c.status]} {t(lang, f'gate_status_{c.status}')} | "
                   f"{fmt_num(c.baseline) if c.baseline is not None else '-'} | "
                   f"{fmt_num(c.current) if c.current is not None else '-'} | {change} | {limit} | {p} |")
    out.append("")
    reported = [c for c in result.checks if c.status == "pass" and c.kind in ("finding", "anomaly")
                and c.name != "findings"]
    if reported:
        out.append(f"**{t(lang, 'gate_md_reported')}**")
        out += items(reported)
    caveats = [cv for c in result.checks for cv in c.caveats]
    for text in dict.fromkeys(say(lang, x) for x in caveats + result.notes):  # a blank line after each, or
        out += [f"> {escape(text, None)}", ""]  # they merge into one quote
    out += [f"**{t(lang, 'gate_md_config')}**", ""]
    out += [f"- {escape(say(lang, line), None)}" for line in config_lines(result)]
    out += ["", f"<sub>{t(lang, 'gate_md_test', method=escape(say(lang, result.method), None))}</sub>"]
    text = "\n".join(out) + "\n"
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 40] + f"\n\n\u2026 {t(lang, 'gate_md_cut')}\n"


def config_lines(result: GateResult) -> list[Message]:
    """What the verdict rests on besides the runs: the gate's config, and
    the config each input report records where it applied anything or was
    not recorded (``advisor.settings.describe``)."""
    gate = result.config.model_dump() if result.config is not None else (
        None if result.config_source == "defaults" else {"file": result.config_source})
    lines = [Message("gate_config_line", what=describe(gate) if gate else Message("cfg_defaults"))]
    for i in result.inputs:
        used = None if i.config is None else i.config.model_dump()
        if not is_default(used):
            runs = Message("gate_config_runs", runs=str(i.runs)) if i.runs > 1 else ""
            lines.append(Message("gate_config_input", side=Message(f"cmp_{i.side}"), input=i.input, runs=runs,
                                 what=describe(used, strict=False)))
    return lines


def xml_text(text: object) -> str:
    """``text`` with what XML 1.0 forbids written as a visible escape."""
    def visible(m: re.Match) -> str:
        code = ord(m.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return _NOT_XML.sub(visible, str(text))


def render_junit(result: GateResult) -> str:
    """JUnit XML (see module doc)."""
    suite = ET.Element("testsuite", name="advisor gate", tests=str(len(result.checks)),
                       failures=str(len(result.failed)), errors=str(len(result.unmeasured)),
                       skipped=str(sum(c.status == "skip" for c in result.checks)))
    props = ET.SubElement(suite, "properties")
    config = [(f"config.{i}", line) for i, line in enumerate(config_lines(result))]
    for k, v in (("verdict", result.verdict), ("baseline", result.baseline), ("current", result.current),
                 ("method", result.method), *config):
        ET.SubElement(props, "property", name=k, value=xml_text(v))
    for c in result.checks:
        case = ET.SubElement(suite, "testcase", classname=f"advisor.regression.gate.{c.kind}", name=xml_text(c.name))
        detail = xml_text("\n".join([c.message, *c.caveats]))
        if c.status in ("fail", "error"):
            el = ET.SubElement(case, "failure" if c.status == "fail" else "error", message=xml_text(c.message),
                               type=c.kind)
            el.text = detail
        elif c.status == "skip":
            ET.SubElement(case, "skipped", message=xml_text(c.message))
        else:
            ET.SubElement(case, "system-out").text = detail
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def print_gate(result: GateResult, console, lang: str = DEFAULT_LANG) -> None:
    from rich.table import Table
    from rich.text import Text

    style = {"pass": "green", "fail": "bold red", "skip": "yellow", "error": "bold yellow"}
    title = {"pass": "pass", "regression": "fail", "unmeasurable": "error"}[result.verdict]
    table = Table(title=t(lang, "gate_title", verdict=t(lang, f"gate_verdict_{result.verdict}")),
                  title_style=style[title])
    for col in ("gate_col_check", "gate_col_result", "gate_col_detail"):
        table.add_column(t(lang, col), overflow="fold")
    for c in result.checks:
        table.add_row(Text(clean(say(lang, c.name))), Text(t(lang, f"gate_status_{c.status}"), style=style[c.status]),
                      Text(clean(say(lang, c.message))))
    console.print(table)
    for g in result.growth[:3]:
        item = t(lang, "gate_grew_item", kind=clean(kind_text(lang, g.kind)), name=clean(name_text(lang, g)),
                 ms=fmt_num(g.change_ms))
        console.print("  " + t(lang, "gate_term_grew", item=item), markup=False)
    for line in config_lines(result):  # paths and thresholds an input report records: its text
        console.print(clean(say(lang, line)), markup=False, soft_wrap=True)


def write_gate(result: GateResult, comparison: Comparison, out_dir: Path, lang: str = DEFAULT_LANG) -> dict[str, Path]:
    """The gate's files in ``out_dir``: the summary (in ``lang``), JUnit XML
    and the result as JSON (English: machine formats), and the comparison it
    used as HTML (in ``lang``)."""
    texts = {"markdown": render_gate_markdown(result, comparison, lang), "junit": render_junit(result),
             "json": result.model_dump_json(indent=2), "html": render_compare_html(comparison, lang)}
    return {k: write_text(Path(out_dir) / FILES[k], t) for k, t in texts.items()}


# ---------------------------------------------------------------- history


def metric_label(metric: str, unit: str = "") -> str:
    """``metric`` with its unit, unless its id already ends in it
    (``step.time_ms``)."""
    if not unit or metric.endswith("_" + unit):
        return metric
    return f"{metric} ({unit})"


def print_history(runs: pd.DataFrame, metric: str, console, flags: dict[int, str] | None = None,
                  unit: str = "", lang: str = DEFAULT_LANG) -> None:
    """The trend table: one row per run, oldest first, laid out for an
    80-column terminal (times to the minute, short commits, rule names whole);
    runs the anomaly model flags have ``FLAG_MARK`` after their number, and
    the model's reasons follow the table under a line saying what the mark
    means. Texts in ``lang``; a flag's reason said in it where it is a
    message of the tables (``i18n.say``)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    flags = flags or {}
    unit = clean(unit)  # the history file's text: as plain text (Text, never markup), without controls
    table = Table(title=Text(t(lang, "hist_title", n=str(len(runs)), metric=metric_label(clean(metric), unit))),
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column(t(lang, "hist_col_recorded"), no_wrap=True)
    table.add_column(t(lang, "hist_col_commit"), no_wrap=True)
    table.add_column(Text(t(lang, "hist_col_value_unit", unit=unit) if unit else t(lang, "hist_col_value")),
                     justify="right", no_wrap=True)
    table.add_column(t(lang, "hist_col_vs_median"), justify="right", no_wrap=True)
    table.add_column(t(lang, "hist_col_findings"), overflow="fold", ratio=1, min_width=12)
    values = runs[metric] if metric in runs.columns else pd.Series([None] * len(runs))
    median = values.dropna().median() if values.notna().any() else None
    for i, (_, row) in enumerate(runs.iterrows()):
        v = values.iloc[i]
        vs = "-" if v is None or pd.isna(v) or not median else f"{100 * (v - median) / median:+.1f}%"
        rules = ", ".join(dict.fromkeys(str(f).rpartition(":")[0] or str(f) for f in row["findings"]))
        flagged = int(row["id"]) in flags
        table.add_row(Text(f"{row['id']}{FLAG_MARK if flagged else ''}", style="red" if flagged else ""),
                      Text(clean(str(row["recorded_at"])[:16].replace("T", " "))),  # to the minute
                      Text(clean(str(row["commit"] or "-")[:COMMIT_CHARS])),
                      "-" if v is None or pd.isna(v) else fmt_num(float(v)), vs, Text(clean(rules) or "-"))
    console.print(table)
    if flags:
        console.print(t(lang, "hist_flag_legend", mark=FLAG_MARK), markup=False)
    for run_id, reason in flags.items():
        console.print(Text(t(lang, "hist_flag_run", run=str(run_id), reason=clean(say(lang, reason))), style="red"))


def _svg(text: object) -> str:
    """Text of the history file (commits, units) for the SVG: escaped, and
    what XML 1.0 forbids written visibly (:func:`xml_text`), so the chart
    stays well-formed."""
    return xml_escape(xml_text(text))


def render_trend_svg(runs: pd.DataFrame, metric: str, unit: str = "", flags: dict[int, str] | None = None,
                     lang: str = DEFAULT_LANG) -> str:
    """A line chart of ``metric`` over the runs with the median drawn dashed;
    flagged runs (id -> reason) are red. The ``unit`` is named in the title
    and over the value axis; texts in ``lang``."""
    flags = flags or {}
    pts = [(int(r["id"]), str(r["commit"] or r["id"])[:8], float(r[metric]))
           for _, r in runs.iterrows() if metric in runs.columns and pd.notna(r.get(metric))]
    w, h, pad = SVG_W, SVG_H, SVG_PAD
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
             'font-family="sans-serif" font-size="11">',
             f'<title>{_svg(t(lang, "hist_svg_title", metric=metric, n=str(len(pts))))}</title>',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{pad}" y="20" font-size="14">'
             f'{_svg(t(lang, "hist_svg_heading", metric=f"{metric} ({unit})" if unit else metric, n=str(len(pts))))}'
             '</text>']
    if pts:
        vals = [p[2] for p in pts]
        lo, hi = min(vals + [0.0]), max(vals) * 1.1 or 1.0
        x = (lambda i: pad + (w - 2 * pad) * (i / max(len(pts) - 1, 1)))
        y = (lambda v: h - pad - (h - 2 * pad) * ((v - lo) / ((hi - lo) or 1.0)))
        med = float(pd.Series(vals).median())
        for frac in (0.0, 0.5, 1.0):
            v = lo + frac * (hi - lo)
            parts.append(f'<line x1="{pad}" x2="{w - pad}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
                         f'<text x="{pad - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{fmt_num(v)}</text>')
        if unit:  # the axis's unit, over its labels
            parts.append(f'<text x="{pad - 6}" y="{pad - 10}" text-anchor="end" fill="#555">{_svg(unit)}</text>')
        parts.append(f'<line x1="{pad}" x2="{w - pad}" y1="{y(med):.1f}" y2="{y(med):.1f}" stroke="#888" '
                     f'stroke-dasharray="4 3"/><text x="{pad + 4}" y="{y(med) - 4:.1f}" '
                     f'fill="#555">{_svg(t(lang, "hist_svg_median", value=fmt_num(med)))}</text>')
        line = " ".join(f"{x(i):.1f},{y(p[2]):.1f}" for i, p in enumerate(pts))
        parts.append(f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
        for i, (run_id, label, v) in enumerate(pts):
            flag = flags.get(run_id)
            colour = "#d62728" if flag else "#1f77b4"
            tip = t(lang, "hist_svg_point", run=str(run_id), commit=label, value=fmt_num(v)) + (
                f" -- {say(lang, flag)}" if flag else "")
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="{5 if flag else 3.5}" fill="{colour}">'
                         f'<title>{_svg(tip)}</title></circle>')
            if len(pts) <= 30:
                parts.append(f'<text x="{x(i):.1f}" y="{h - pad + 16}" text-anchor="middle" fill="#555">'
                             f'{_svg(label)}</text>')
    else:
        parts.append(f'<text x="{pad}" y="{h / 2}">{_svg(t(lang, "hist_svg_none", metric=metric))}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
