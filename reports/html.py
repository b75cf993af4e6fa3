"""The self-contained HTML report.

One file, no network: the CSS, the report's script and Chart.js (with its
matrix and zoom plugins) are inlined once, and a Content-Security-Policy in the page allows nothing to be fetched
and no script to run but those two (by hash), so even a string that slipped
past escaping could not execute or phone home. Every string from a profile
goes through Jinja2 autoescaping; chart data is embedded as JSON in a
``<script type="application/json">`` block with ``<``, ``>`` and ``&``
written as ``\\u003c`` etc.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from jinja2 import (
    BytecodeCache,
    Environment,
    FileSystemLoader,
    StrictUndefined,
    select_autoescape,
)
from markupsafe import Markup

from advisor.i18n import DEFAULT_LANG, LANGS
from advisor.model import Report
from advisor.reports import _view, run_notes
from advisor.reports.i18n import messages, scope_name, skip_texts, t, unit_text
from advisor.runtime import cache

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
# inlined as one script, in this order (the plugins register with Chart.js)
VENDOR_SCRIPTS = ("chart.umd.js", "chartjs-chart-matrix.min.js", "chartjs-plugin-zoom.min.js")

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_ESCAPE_RE = re.compile("[<>&\u2028\u2029]")


def json_for_script(data: Any) -> Markup:
    """``data`` as JSON safe to place inside a ``<script>`` element: no
    ``</script>``, ``<!--`` or ``&`` can appear in the output."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str, separators=(",", ":"))
    return Markup(_JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text))


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


@lru_cache(maxsize=1)
def _assets() -> dict[str, str]:
    """The inlined CSS and scripts, read once per process."""
    parts = []
    for name in VENDOR_SCRIPTS:
        text = (STATIC / name).read_text(encoding="utf-8")
        text = re.sub(r"\n?//# sourceMappingURL=\S*\s*$", "\n", text)
        if "</script" in text.lower():  # pragma: no cover - guards a library update
            raise RuntimeError(f"{name} contains '</script' and cannot be inlined")
        parts.append(text)
    chart = "\n;\n".join(parts)
    css = (STATIC / "report.css").read_text(encoding="utf-8")
    app = (STATIC / "report.js").read_text(encoding="utf-8")
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_csp_hash(chart)} {_csp_hash(app)}",
            f"style-src {_csp_hash(css)}",
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    return {"chart": chart, "css": css, "app": app, "csp": csp}


class _TemplateCache(BytecodeCache):
    """Compiled templates in advisor's cache (:mod:`advisor.runtime.cache`):
    compiling the report template takes longer than rendering it. Jinja
    checks each entry against the template's source; the entry's name also
    carries the Jinja version and this module (which configures the
    environment the code was compiled for)."""

    def __init__(self) -> None:
        import jinja2

        self.salt = cache.key(jinja2.__version__, Path(__file__).read_bytes())

    def _name(self, bucket) -> str:
        return f"jinja-{cache.key(self.salt, bucket.key)}.bytecode"

    def load_bytecode(self, bucket) -> None:
        data = cache.read(self._name(bucket))
        if data is not None:
            try:
                bucket.bytecode_from_string(data)
            except Exception:  # noqa: BLE001 -- a damaged entry: compile again
                bucket.reset()

    def dump_bytecode(self, bucket) -> None:
        cache.write(self._name(bucket), bucket.bytecode_to_string())


def _template_cache() -> BytecodeCache | None:
    try:
        return _TemplateCache()
    except OSError:
        return None


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        bytecode_cache=_template_cache(),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = _view.fmt_num
    env.filters["pct"] = _view.fmt_pct
    env.filters["value"] = _view.fmt_value
    env.filters["sortkey"] = _view.sort_key
    return env


def _finding_view(f: Any, report: Report, lang: str, index: int = 0) -> dict[str, Any]:
    """What the template shows of one finding (and, nested, of each of its
    contributing causes); ``index`` numbers primary findings from 1."""
    return {
        "f": f,
        "index": index,
        "contributing": [_finding_view(c, report, lang) for c in f.contributing],
        "gain": _view.gain_text(f, lang),
        "stake": _view.stake_text(f, report, lang),
        "fix_label": _view.fix_label(f.fix.framework, lang) if f.fix else "",
        "scope": _view.scope_parts(f.scope, lang),
        "evidence": [(k, _view.fmt_value(v, 240)) for k, v in f.evidence.items()],
        "confidence": None if f.confidence is None else f"{round(100 * f.confidence)}%",
    }


#: Columns of the operators table (Report.tables["ops"]) and how they sort.
OP_COLUMNS = (
    ("name", "text"), ("type", "text"), ("core", "text"), ("input_dtypes", "text"),
    ("count", "num"), ("total_ms", "num"), ("per_step_ms", "num"),
)


def render_html(report: Report, lang: str = DEFAULT_LANG) -> str:
    """The whole report as one HTML document (a str) that opens offline."""
    lang = lang if lang in LANGS else DEFAULT_LANG
    assets = _assets()
    charts = _view.charts(report, lang)
    chart_data = {
        "charts": {c["id"]: c["data"] for c in charts if c["data"]},
        "axis": {"ms": t(lang, "axis_ms")},
        "i18n": {k: t(lang, k) for k in ("copy", "copied", "copy_failed", "showing", "zoom_reset", "heatmap_vs_median")},
    }
    metrics = sorted(report.metrics.values(), key=lambda m: m.id)
    scopes = sorted({m.scope for m in metrics})
    ops = (report.tables or {}).get("ops") or []
    op_columns = [(k, kind) for k, kind in OP_COLUMNS if any(row.get(k) is not None for row in ops)]
    template = _env().get_template("report.html.j2")
    return template.render(
        lang=lang,
        _=partial(t, lang),
        msg=messages(lang),
        report=report,
        run=report.run,
        notes=[run_notes.localized(n, lang) for n in report.run.notes],
        verdict=_view.verdict(report, lang),
        findings=[_finding_view(f, report, lang, i) for i, f in enumerate(_view.ordered_findings(report), 1)],
        open_findings=5,
        counts=_view.severity_counts(report),
        charts=charts,
        metrics=metrics,
        scopes=scopes,
        ops=ops,
        op_columns=op_columns,
        skipped=[dict(zip(("what", "reason"), skip_texts(lang, sk.what, sk.reason), strict=True))
                 for sk in report.skipped],
        unit_of=partial(unit_text, lang),
        scope_of=partial(scope_name, lang),
        data_json=json_for_script(chart_data),
        css=Markup(assets["css"]),
        chart_js=Markup(assets["chart"]),
        app_js=Markup(assets["app"]),
        csp=assets["csp"],
    )
