"""Renderers for ``advisor compare``: compare.html, compare.md, compare.json.

They lay out a :class:`advisor.regression.compare.Comparison`; numbers are formatted
with the report renderers' helpers (``_view.fmt_num``) and profile strings
escaped with ``markdown.escape`` / Jinja2 autoescaping. The HTML is one
self-contained file: inline CSS (allowed by hash in its Content-Security-
Policy), bars drawn as ``<meter>`` elements, no script, nothing fetched.

Both lead with the step time before -> after. Growth and reduction are
shown in two sections, the one holding the largest absolute change first;
a bar is the change's share of the step time (the larger of the two
sides'), red for growth (``<meter>`` in its worst region) and green for
reduction, so a 0.02 ms change on a 90 ms step draws an empty bar.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape as html_escape

from advisor.i18n import DEFAULT_LANG
from advisor.regression.compare import COMPONENTS, Comparison, Contributor, change_text, percent_change
from advisor.reports._view import fmt_num
from advisor.reports.i18n import EN, say, t
from advisor.reports.markdown import code_span, escape
from advisor.runtime.files import write_set

TEMPLATES = Path(__file__).resolve().parent / "templates"
FILES = {"html": "compare.html", "markdown": "compare.md", "json": "compare.json"}
MD_METRICS = ("step.time_ms", "step.computing_ms", "step.data_wait_ms", "step.iteration_interval_ms",
              "step.fp_bp_ms", "step.tail_ms", "step.free_ms", "step.exposed_comm_ms", "step.data_wait_ratio",
              "step.iteration_interval_ratio", "step.free_ratio", "step.computing_ratio")
MD_GROWTH = 8
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;margin:.5rem 0}td,th{padding:.25rem .5rem;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}.up{color:#b00020}.down{color:#1b7f3b}
.tag{display:inline-block;padding:0 .4rem;border-radius:.6rem;font-size:.8rem;background:#eee}
.new,.worse,.yes{background:#fde2e1}.resolved,.better{background:#dff3e4}
td.bar,th.bar{width:22%}meter{width:100%}.name{word-break:break-all}
.muted{color:#666;font-size:.9rem}.lead{font-size:1.2rem;font-weight:600}
meter.worse::-webkit-meter-optimum-value,meter.worse::-webkit-meter-suboptimum-value,meter.worse::-webkit-meter-even-less-good-value{background:#b00020}
meter.better::-webkit-meter-optimum-value{background:#1b7f3b}meter.worse::-moz-meter-bar{background:#b00020}meter.better::-moz-meter-bar{background:#1b7f3b}
"""


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def _num(v: float | None) -> str:
    return fmt_num(v) if v is not None else "-"


def bar_scale(c: Comparison) -> float:
    """The ms a full bar stands for: the larger step time of the two sides
    (the largest change when no step time is known)."""
    step = c.step
    if step is not None and max(step.baseline, step.current) > 0:
        return max(step.baseline, step.current)
    return max((abs(g.change_ms) for g in c.changes), default=0.0) or 1.0


_COMPONENT_KEYS = {EN[key]: key for key in COMPONENTS.values()}


def kind_text(lang: str, kind: str) -> str:
    """A contributor's kind (step component, operator, ...) in ``lang``."""
    key = "cmp_kind_" + kind.replace(" ", "_")
    return t(lang, key) if key in EN else kind


def name_text(lang: str, g: Contributor) -> str:
    """A contributor's name in ``lang``: a step component's label translated,
    an operator's name as the profile gives it."""
    key = _COMPONENT_KEYS.get(g.name) if g.kind == "step component" else None
    return t(lang, key) if key else g.name


def severity_text(lang: str, severity: str | None) -> str:
    """A severity in ``lang`` ("-" for none)."""
    return t(lang, f"sev_{severity}") if severity else "-"


def sections(c: Comparison) -> list[tuple[str, list[Contributor]]]:
    """("grew", rows) and ("shrank", rows), the one with the largest
    absolute change first; each ordered by absolute ms per step."""
    out = [("grew", c.growth), ("shrank", c.shrink)]
    return sorted(out, key=lambda s: -max((abs(g.change_ms) for g in s[1]), default=0.0))


def runs_rows(c: Comparison, lang: str = DEFAULT_LANG) -> list[tuple[str, str, str]]:
    """(what, baseline, current) rows describing the two runs."""
    b, cur = c.baseline, c.current
    return [(t(lang, f"cmp_row_{key}"), bv, cv) for key, bv, cv in (
        ("framework", b.framework, cur.framework),
        ("device", b.device_model or b.device, cur.device_model or cur.device),
        ("world_size", str(b.world_size or "-"), str(cur.world_size or "-")),
        ("ranks", str(b.ranks), str(cur.ranks)),
        ("steps", str(b.steps), str(cur.steps)),
        ("runs", str(b.runs), str(cur.runs)),
    )]


def key_metrics(c: Comparison) -> list:
    """Metrics shown first: the step metrics, then any beyond noise."""
    first = [m for mid in MD_METRICS for m in c.metrics if m.id == mid]
    rest = [m for m in c.metrics if m.beyond_noise and m not in first]
    return first + rest


def view(c: Comparison, lang: str = DEFAULT_LANG) -> dict[str, Any]:
    """Everything the HTML template shows, formatted (templates never compute)."""
    scale = bar_scale(c)

    def row(g: Contributor) -> dict[str, str]:
        return {"kind": kind_text(lang, g.kind), "name": name_text(lang, g), "type": g.type,
                "before": _num(g.baseline_ms),
                "after": _num(g.current_ms), "change": f"{'+' if g.change_ms > 0 else ''}{fmt_num(g.change_ms)}",
                "pct": _pct(percent_change(g.baseline_ms, g.current_ms)),
                "frac": f"{min(1.0, abs(g.change_ms) / scale):.3f}"}

    metrics = [{
        "id": m.id, "unit": m.unit, "baseline": _num(m.baseline), "current": _num(m.current),
        "change": change_text_of(m), "dir": "up" if (m.change or 0) > 0 else "down" if (m.change or 0) < 0 else "",
        "noise": "-" if m.beyond_noise is None else ("yes" if m.beyond_noise else "no"),
        "noise_text": "-" if m.beyond_noise is None else t(lang, "cmp_yes" if m.beyond_noise else "cmp_no"),
        "p": "-" if m.test is None else f"{m.test.p_value:.2g}",
        "key": m in key_metrics(c),
    } for m in c.metrics]
    metrics.sort(key=lambda m: not m["key"])
    return {
        "c": c,
        "lang": lang,
        "_": lambda key, **values: _element_text(t(lang, key, **values)),
        "metrics": metrics,
        "findings": [{"rule": f.rule, "status": f.status, "status_text": t(lang, f"cmp_status_{f.status}"),
                      "title": f.title, "message": f.message, "before": severity_text(lang, f.baseline_severity),
                      "after": severity_text(lang, f.current_severity)} for f in c.findings],
        "step_line": say(lang, c.step_line()),
        "title": t(lang, "cmp_title", current=c.current.label, baseline=c.baseline.label),
        "sides": [(t(lang, "cmp_baseline"), c.baseline), (t(lang, "cmp_current"), c.current)],
        "notes": [say(lang, n) for n in c.notes],
        "runs": runs_rows(c, lang),
        "sections": [(name, [row(g) for g in rows[:MD_GROWTH if name == "shrank" else None]])
                     for name, rows in sections(c)],
        "noise_def": _element_text(t(lang, "cmp_html_noise_def", alpha=str(c.alpha),
                                     effect=str(round(c.min_effect * 100, 1)))),
    }


def _element_text(text: str) -> Markup:
    """A UI text as element content: escaped, its quotes kept as typed
    (only attribute values need them escaped)."""
    return Markup(str(html_escape(text)).replace("&#34;", '"').replace("&#39;", "'"))


@lru_cache(maxsize=1)
def _env() -> Environment:
    return Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "j2"]),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_compare_html(c: Comparison, lang: str = DEFAULT_LANG) -> str:
    digest = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
    csp = f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    return _env().get_template("compare.html.j2").render(css=CSS, csp=csp, **view(c, lang))


def render_compare_json(c: Comparison) -> str:
    return c.model_dump_json(indent=2)


def change_lines(rows: list[Contributor], limit: int = MD_GROWTH, lang: str = DEFAULT_LANG) -> list[str]:
    """Markdown table rows of the largest changes in ``rows``."""
    cols = (t(lang, k) for k in ("cmp_col_what", "cmp_col_baseline_ms", "cmp_col_current_ms", "cmp_col_change"))
    lines = ["| | {} | {} | {} | {} |".format(*cols), "|---|---|--:|--:|--:|"]
    for i, g in enumerate(rows[:limit], 1):
        typ = f" ({escape(g.type, 40)})" if g.type else ""
        pct = percent_change(g.baseline_ms, g.current_ms)  # none on a near-zero baseline
        sign = "+" if g.change_ms > 0 else ""
        lines.append(f"| {i} | {escape(kind_text(lang, g.kind))}: {escape(name_text(lang, g), 120)}{typ} | "
                     f"{_num(g.baseline_ms)} | {_num(g.current_ms)} | "
                     f"{sign}{fmt_num(g.change_ms)}{'' if pct is None else f' ({pct:+.1f}%)'} |")
    return lines


def growth_lines(c: Comparison, limit: int = MD_GROWTH, lang: str = DEFAULT_LANG) -> list[str]:
    """Markdown table rows of the largest growth."""
    return change_lines(c.growth, limit, lang)


def render_compare_markdown(c: Comparison, lang: str = DEFAULT_LANG) -> str:
    out = [f"## {t(lang, 'cmp_title', current=escape(c.current.label), baseline=escape(c.baseline.label))}", "",
           f"**{say(lang, c.step_line())}**", ""]  # numbers and fixed words only
    base, cur_ = t(lang, "cmp_baseline"), t(lang, "cmp_current")
    out += [f"| | {base} | {cur_} |", "|---|---|---|"]
    out += [f"| {what} | {escape(b, 80)} | {escape(cur, 80)} |" for what, b, cur in runs_rows(c, lang)]
    out.append("")
    out += [f"| {t(lang, 'cmp_col_metric')} | {base} | {cur_} | {t(lang, 'cmp_col_change')} | "
            f"{t(lang, 'cmp_col_beyond_noise')} | p |", "|---|--:|--:|--:|:-:|--:|"]
    for m in key_metrics(c):
        noise = "-" if m.beyond_noise is None else (f"**{t(lang, 'cmp_yes')}**" if m.beyond_noise else
                                                     t(lang, "cmp_no"))
        p = "-" if m.test is None else f"{m.test.p_value:.2g}"
        out.append(f"| {code_span(m.id)} ({escape(m.unit)}) | {_num(m.baseline)} | {_num(m.current)} | "
                   f"{escape(change_text_of(m))} | {noise} | {p} |")
    out += ["", f"*{t(lang, 'cmp_md_noise_def', alpha=f'{c.alpha:g}', effect=f'{c.min_effect:.0%}')}*", ""]
    for name, rows in sections(c):
        if rows:
            out += [f"### {t(lang, f'cmp_{name}_heading')}", ""] + change_lines(rows, lang=lang) + [""]
    changed = [f for f in c.findings if f.status != "same"]
    if changed:
        cols = (t(lang, k) for k in ("cmp_col_status", "md_col_rule", "cmp_baseline", "cmp_current", "md_col_message"))
        out += [f"### {t(lang, 'findings_heading')}", "", "| {} | {} | {} | {} | {} |".format(*cols),
                "|---|---|---|---|---|"]
        for f in changed:
            out.append(f"| {t(lang, f'cmp_status_{f.status}')} | {code_span(f.rule)} | "
                       f"{severity_text(lang, f.baseline_severity)} | {severity_text(lang, f.current_severity)} | "
                       f"{escape(f.message, 300)} |")
        out.append("")
    for note in c.notes:  # a blank line between notes keeps each its own quote
        out += [f"> {escape(say(lang, note), None)}", ""]
    return "\n".join(out).rstrip() + "\n"


def change_text_of(m) -> str:
    """A metric change as :func:`advisor.regression.compare.change_text` gives it."""
    return change_text(m.baseline, m.current, m.unit)


def write_compare(c: Comparison, out_dir: Path, lang: str = DEFAULT_LANG) -> dict[str, Path]:
    """compare.html and compare.md (in ``lang``) and compare.json in ``out_dir``."""
    texts = {"html": render_compare_html(c, lang), "markdown": render_compare_markdown(c, lang),
             "json": render_compare_json(c)}
    paths = write_set(out_dir, {FILES[k]: t for k, t in texts.items()})
    return {k: paths[FILES[k]] for k in texts}
