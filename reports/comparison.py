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

from advisor.regression.compare import Comparison, Contributor, change_text, percent_change
from advisor.reports._view import fmt_num
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


def sections(c: Comparison) -> list[tuple[str, list[Contributor]]]:
    """("grew", rows) and ("shrank", rows), the one with the largest
    absolute change first; each ordered by absolute ms per step."""
    out = [("grew", c.growth), ("shrank", c.shrink)]
    return sorted(out, key=lambda s: -max((abs(g.change_ms) for g in s[1]), default=0.0))


def runs_rows(c: Comparison) -> list[tuple[str, str, str]]:
    """(what, baseline, current) rows describing the two runs."""
    b, cur = c.baseline, c.current
    return [
        ("framework", b.framework, cur.framework),
        ("device", b.device_model or b.device, cur.device_model or cur.device),
        ("world size", str(b.world_size or "-"), str(cur.world_size or "-")),
        ("ranks analyzed", str(b.ranks), str(cur.ranks)),
        ("steps", str(b.steps), str(cur.steps)),
        ("runs", str(b.runs), str(cur.runs)),
    ]


def key_metrics(c: Comparison) -> list:
    """Metrics shown first: the step metrics, then any beyond noise."""
    first = [m for mid in MD_METRICS for m in c.metrics if m.id == mid]
    rest = [m for m in c.metrics if m.beyond_noise and m not in first]
    return first + rest


def view(c: Comparison) -> dict[str, Any]:
    """Everything the HTML template shows, formatted (templates never compute)."""
    scale = bar_scale(c)

    def row(g: Contributor) -> dict[str, str]:
        return {"kind": g.kind, "name": g.name, "type": g.type, "before": _num(g.baseline_ms),
                "after": _num(g.current_ms), "change": f"{'+' if g.change_ms > 0 else ''}{fmt_num(g.change_ms)}",
                "pct": _pct(percent_change(g.baseline_ms, g.current_ms)),
                "frac": f"{min(1.0, abs(g.change_ms) / scale):.3f}"}

    metrics = [{
        "id": m.id, "unit": m.unit, "baseline": _num(m.baseline), "current": _num(m.current),
        "change": change_text_of(m), "dir": "up" if (m.change or 0) > 0 else "down" if (m.change or 0) < 0 else "",
        "noise": "-" if m.beyond_noise is None else ("yes" if m.beyond_noise else "no"),
        "p": "-" if m.test is None else f"{m.test.p_value:.2g}",
        "key": m in key_metrics(c),
    } for m in c.metrics]
    metrics.sort(key=lambda m: not m["key"])
    return {
        "c": c,
        "metrics": metrics,
        "findings": [{"rule": f.rule, "status": f.status, "title": f.title, "message": f.message,
                      "before": f.baseline_severity or "-", "after": f.current_severity or "-"} for f in c.findings],
        "step_line": c.step_line(),
        "runs": runs_rows(c),
        "sections": [(name, [row(g) for g in rows[:MD_GROWTH if name == "shrank" else None]])
                     for name, rows in sections(c)],
    }


@lru_cache(maxsize=1)
def _env() -> Environment:
    return Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "j2"]),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_compare_html(c: Comparison) -> str:
    digest = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
    csp = f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    return _env().get_template("compare.html.j2").render(css=CSS, csp=csp, **view(c))


def render_compare_json(c: Comparison) -> str:
    return c.model_dump_json(indent=2)


def change_lines(rows: list[Contributor], limit: int = MD_GROWTH) -> list[str]:
    """Markdown table rows of the largest changes in ``rows``."""
    lines = ["| | what | baseline ms/step | current ms/step | change |", "|---|---|--:|--:|--:|"]
    for i, g in enumerate(rows[:limit], 1):
        typ = f" ({escape(g.type, 40)})" if g.type else ""
        pct = percent_change(g.baseline_ms, g.current_ms)  # none on a near-zero baseline
        sign = "+" if g.change_ms > 0 else ""
        lines.append(f"| {i} | {escape(g.kind)}: {escape(g.name, 120)}{typ} | {_num(g.baseline_ms)} | "
                     f"{_num(g.current_ms)} | {sign}{fmt_num(g.change_ms)}{'' if pct is None else f' ({pct:+.1f}%)'} |")
    return lines


def growth_lines(c: Comparison, limit: int = MD_GROWTH) -> list[str]:
    """Markdown table rows of the largest growth."""
    return change_lines(c.growth, limit)


_MD_HEADINGS = {"grew": "Where the time grew", "shrank": "Where the time shrank"}


def render_compare_markdown(c: Comparison) -> str:
    out = [f"## advisor compare: {escape(c.current.label)} vs {escape(c.baseline.label)}", "",
           f"**{c.step_line()}**", ""]  # numbers and fixed words only
    out += ["| | baseline | current |", "|---|---|---|"]
    out += [f"| {what} | {escape(b, 80)} | {escape(cur, 80)} |" for what, b, cur in runs_rows(c)]
    out.append("")
    out += ["| metric | baseline | current | change | beyond noise | p |", "|---|--:|--:|--:|:-:|--:|"]
    for m in key_metrics(c):
        noise = "-" if m.beyond_noise is None else ("**yes**" if m.beyond_noise else "no")
        p = "-" if m.test is None else f"{m.test.p_value:.2g}"
        out.append(f"| {code_span(m.id)} ({escape(m.unit)}) | {_num(m.baseline)} | {_num(m.current)} | "
                   f"{escape(change_text_of(m))} | {noise} | {p} |")
    out += ["", f"*Beyond noise: two-sided Mann-Whitney U on per-step samples, p < {c.alpha:g}, and a "
            f"median change of at least {c.min_effect:.0%}.*", ""]
    for name, rows in sections(c):
        if rows:
            out += [f"### {_MD_HEADINGS[name]}", ""] + change_lines(rows) + [""]
    changed = [f for f in c.findings if f.status != "same"]
    if changed:
        out += ["### Findings", "", "| status | rule | baseline | current | message |", "|---|---|---|---|---|"]
        for f in changed:
            out.append(f"| {f.status} | {code_span(f.rule)} | {f.baseline_severity or '-'} | "
                       f"{f.current_severity or '-'} | {escape(f.message, 300)} |")
        out.append("")
    for note in c.notes:  # a blank line between notes keeps each its own quote
        out += [f"> {escape(note, None)}", ""]
    return "\n".join(out).rstrip() + "\n"


def change_text_of(m) -> str:
    """A metric change as :func:`advisor.regression.compare.change_text` gives it."""
    return change_text(m.baseline, m.current, m.unit)


def write_compare(c: Comparison, out_dir: Path) -> dict[str, Path]:
    """compare.html, compare.md and compare.json in ``out_dir``."""
    texts = {"html": render_compare_html(c), "markdown": render_compare_markdown(c), "json": render_compare_json(c)}
    paths = write_set(out_dir, {FILES[k]: t for k, t in texts.items()})
    return {k: paths[FILES[k]] for k in texts}
