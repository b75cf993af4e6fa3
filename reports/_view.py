"""What every renderer shows, prepared once: ordering, number formats,
the verdict, and chart series from ``Report.tables``.

Templates only lay this out; they never compute.

Chart tables read here (rows in ``Report.tables``, all times in ms):

``step_breakdown``  one row per step, mean over ranks: ``step`` and any of
    ``computing_ms`` (device computing, overlapped part included),
    ``overlapped_ms``, ``exposed_comm_ms``, ``free_ms``, ``step_ms`` (or
    ``duration_ms``: the step time, drawn alone when no part is known).
``rank_breakdown``  one row per rank, mean over steps: ``rank`` and the same
    columns.
``top_ops``         one row per operator: ``name``, ``total_ms`` [``type``,
    ``core``, ``input_dtypes``, ``count``, ``share`` (0..1)].
``links``           one row per (src, dst, transport): ``src``, ``dst``,
    ``transport``, ``bandwidth_gbps`` [``size_mb``, ``time_ms``]; the
    slowest ``LINKS_LIMIT`` are drawn.
``step_series``     one row per step: ``step``, ``step_ms`` [``min_ms``,
    ``max_ms`` over ranks, ``outlier`` (bool, the anomaly model's call),
    ``after_gap`` (steps before it unrecorded: the line breaks there)].
``rank_heatmap``    one row per rank or rank group: ``rank`` (int or a label
    like ``"0-3"``) and component columns in ms (``step_ms``,
    ``computing_ms``, ``exposed_comm_ms``, ``free_ms``, ...). Cell colour is
    the rank's deviation from the median rank in % (see ``_heatmap_chart``).

Stacking: ``computing_ms`` includes the overlapped time, so the stack shows
``computing - overlapped`` (or ``computing_only_ms`` when a row has it),
``overlapped``, ``exposed communication``, ``data wait`` and ``free``:
disjoint parts that add up to the step time. Data wait (``data_wait_ms``,
host time fetching the next batch) is drawn inside the free time, up to it,
and ``free`` is the rest of the idle time. Without ``overlapped_ms``
computing is shown as is.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

from advisor.engine.render import ms_filter
from advisor.model import SEVERITY_ORDER, Finding, FindingScope, Report
from advisor.reports.i18n import t

SEVERITIES = ("critical", "high", "medium", "low", "info")

# (series key, message key) in stacking order, bottom first. Two schemes:
# the device view (cluster step_trace_time, Kineto) and, when a profile has
# none of it, the MindSpore step-trace view (interval + fp/bp + tail).
STACK_SERIES = (
    ("computing", "series_computing"),
    ("overlapped", "series_overlapped"),
    ("exposed_comm", "series_exposed_comm"),
    ("data_wait", "series_data_wait"),
    ("free", "series_free"),
)
TRACE_SERIES = (
    ("interval", "series_interval"),
    ("fp_bp", "series_fp_bp"),
    ("tail", "series_tail"),
)
TOP_OPS_LIMIT = 15
LINKS_LIMIT = 16
OP_VALUE_COLUMNS = ("total_ms", "duration_ms", "time_ms")
DURATION_COLUMNS = ("step_ms", "duration_ms")
# heatmap rows (component column, message key), top to bottom
HEATMAP_SERIES = (
    ("step_ms", "series_duration"),
    ("computing_ms", "series_computing_all"),
    ("exposed_comm_ms", "series_exposed_comm"),
    ("free_ms", "series_free"),
    ("iteration_interval_ms", "series_interval"),
    ("fp_bp_ms", "series_fp_bp"),
    ("tail_ms", "series_tail"),
    ("data_wait_ms", "series_data_wait"),
)


# ---------------------------------------------------------------- numbers


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def fmt_num(v: float | int | None, digits: int = 3) -> str:
    """A number for people: ints as is, floats with ``digits`` significant
    digits (at least one decimal below 100), thousands separators."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v:,}"
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a < 0.001:
        return f"{v:.2e}"
    decimals = max(1, digits - 1 - int(math.floor(math.log10(a))))
    return f"{v:.{decimals}f}"


def fmt_pct(v: float | None) -> str:
    """``v`` already in percent."""
    if v is None:
        return "-"
    return f"{fmt_num(v, 2)}%"


def fmt_value(v: Any, limit: int = 160) -> str:
    """Any metric or evidence value as one line, cut at ``limit`` chars."""
    if v is None:
        return "-"
    if isinstance(v, (bool, int, float)):
        return fmt_num(v)
    if isinstance(v, str):
        text = v
    else:
        try:
            text = json.dumps(v, ensure_ascii=False, default=str, separators=(", ", ": "))
        except (TypeError, ValueError):
            text = str(v)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return text


def sort_key(v: Any) -> str:
    """A value for client-side sorting: numbers as numbers, the rest as text."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if is_number(v) and math.isfinite(v):
        return repr(float(v))
    return ""


def int_ranges(values: list[int], max_parts: int = 24) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``0-2, 5, 7-8``; past ``max_parts`` runs the
    rest is counted, not listed."""
    vals = sorted(set(values))
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}\u2013{vals[j]}")
        i = j + 1
    if len(parts) > max_parts:
        return ", ".join(parts[:max_parts]) + f" (+{len(parts) - max_parts})"
    return ", ".join(parts)


# ---------------------------------------------------------------- findings


def ordered_findings(report: Report) -> list[Finding]:
    """Findings in report order: the engine ranks them, renderers keep it."""
    return list(report.findings)


def severity_counts(report: Report) -> dict[str, int]:
    counts = {s: 0 for s in SEVERITIES}
    for f in report.findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    return counts


def gain_text(f: Finding, lang: str) -> str:
    if f.estimated_gain_ms is None and f.estimated_gain_pct is None:
        return t(lang, "gain_unknown")
    parts = []
    if f.estimated_gain_ms is not None:
        parts.append(f"{fmt_num(f.estimated_gain_ms)} ms")
    if f.estimated_gain_pct is not None:
        parts.append(f"{fmt_pct(f.estimated_gain_pct)}")
    return " / ".join(parts)


def stake_text(f: Finding, report: Report, lang: str) -> str | None:
    """The time at stake per step, with its share of the step when the run
    has a step time; None when the rule gives none."""
    if f.time_at_stake_ms is None:
        return None
    step = report.metrics.get("step.time_ms")
    ms = fmt_num(f.time_at_stake_ms)
    if step is not None and is_number(step.value) and step.value > 0:
        return t(lang, "stake_pct", ms=ms, pct=fmt_pct(100.0 * f.time_at_stake_ms / float(step.value)))
    return t(lang, "stake_ms", ms=ms)


def fix_label(framework: str, lang: str) -> str:
    """"for PyTorch" / "for any framework" over a fix."""
    if framework == "default":
        return t(lang, "fix_default")
    return t(lang, "fix_for", framework=framework)


def scope_parts(scope: FindingScope, lang: str, max_ops: int = 5) -> list[tuple[str, str]]:
    """(label, text) pairs; empty when the finding applies run-wide."""
    out: list[tuple[str, str]] = []
    if scope.ranks:
        out.append((t(lang, "scope_ranks"), int_ranges(scope.ranks)))
    if scope.steps:
        out.append((t(lang, "scope_steps"), int_ranges(scope.steps)))
    if scope.ops:
        ops = scope.ops[:max_ops]
        text = ", ".join(ops)
        if len(scope.ops) > max_ops:
            text += f" (+{len(scope.ops) - max_ops})"
        out.append((t(lang, "scope_ops"), text))
    return out


def scope_text(scope: FindingScope, lang: str) -> str:
    parts = scope_parts(scope, lang)
    return "; ".join(f"{k} {v}" for k, v in parts) if parts else t(lang, "scope_run")


def max_severity(report: Report) -> str | None:
    if not report.findings:
        return None
    return max(report.findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 0)).severity


# ---------------------------------------------------------------- charts


def _num(row: dict[str, Any], key: str) -> float | None:
    v = row.get(key)
    if is_number(v) and math.isfinite(v):
        return float(v)
    return None


def _stack_values(row: dict[str, Any]) -> dict[str, float | None]:
    computing = _num(row, "computing_ms")
    overlapped = _num(row, "overlapped_ms")
    only = _num(row, "computing_only_ms")
    if only is None and computing is not None:
        only = max(computing - overlapped, 0.0) if overlapped is not None else computing
    free = _num(row, "free_ms")
    data_wait = _num(row, "data_wait_ms")
    if free is not None and data_wait is not None:
        data_wait = min(data_wait, free)
        free -= data_wait
    else:
        data_wait = None
    return {
        "computing": only,
        "overlapped": overlapped,
        "exposed_comm": _num(row, "exposed_comm_ms"),
        "data_wait": data_wait,
        "free": free,
        "interval": _num(row, "iteration_interval_ms"),
        "fp_bp": _num(row, "fp_bp_ms"),
        "tail": _num(row, "tail_ms"),
    }


def _scheme(values: list[dict[str, float | None]]) -> tuple[tuple[str, str], ...]:
    """The device scheme when any row has a device part, else the step-trace
    scheme when any row has one of its parts, else none."""
    for scheme in (STACK_SERIES, TRACE_SERIES):
        if any(v[k] is not None for v in values for k, _ in scheme):
            return scheme
    return ()


def _breakdown_chart(
    rows: list[dict[str, Any]], key: str, axis_key: str, lang: str
) -> dict[str, Any] | None:
    """Stacked series over ``rows`` keyed by ``key`` (step or rank); None when
    no row has any breakdown value."""
    rows = [r for r in rows if isinstance(r, dict)]
    if not rows:
        return None
    values = [_stack_values(r) for r in rows]
    series = []
    for skey, mkey in _scheme(values):
        data = [v[skey] for v in values]
        if any(d is not None for d in data):
            series.append({"key": skey, "label": t(lang, mkey), "data": data})
    if not series:
        durations = [next((_num(r, c) for c in DURATION_COLUMNS if _num(r, c) is not None), None) for r in rows]
        if not any(d is not None for d in durations):
            return None
        series.append({"key": "duration", "label": t(lang, "series_duration"), "data": durations})
    labels = [str(r.get(key)) if r.get(key) is not None else str(i) for i, r in enumerate(rows)]
    return {"labels": labels, "axis": t(lang, axis_key), "series": series, "stacked": True, "zoom": len(labels) > 12}


def _series_chart(rows: list[dict[str, Any]], lang: str) -> dict[str, Any] | None:
    """Step time per step (line), the rank spread (band) and the steps the
    anomaly model flagged (points). Where steps were not recorded
    (``after_gap``: a second capture window) the line breaks: an empty
    point labelled with the unrecorded step ids."""
    rows = [r for r in rows if isinstance(r, dict) and _num(r, "step_ms") is not None]
    if len(rows) < 2:
        return None
    shown: list[dict[str, Any] | None] = []
    labels: list[str] = []
    for i, r in enumerate(rows):
        if i and r.get("after_gap") is True:
            shown.append(None)
            labels.append(_gap_label(rows[i - 1].get("step"), r.get("step")))
        shown.append(r)
        labels.append(str(r.get("step")))

    def data(column: str) -> list[float | None]:
        return [_num(r, column) if r is not None else None for r in shown]

    series = [{"key": "duration", "label": t(lang, "series_duration"), "data": data("step_ms")}]
    if any(_num(r, "max_ms") is not None for r in rows):
        series.append({"key": "max", "label": t(lang, "series_max_rank"), "data": data("max_ms")})
        series.append({"key": "min", "label": t(lang, "series_min_rank"), "data": data("min_ms")})
    outliers = [i for i, r in enumerate(shown) if r is not None and r.get("outlier") is True]
    return {
        "kind": "line",
        "labels": labels,
        "axis": t(lang, "axis_step"),
        "series": series,
        "outliers": outliers,
        "outlier_label": t(lang, "series_outlier"),
        "zoom": True,
    }


def _gap_label(before: Any, after: Any) -> str:
    """The x label of a break in the step line: the steps not recorded."""
    try:
        first, last = int(before) + 1, int(after) - 1
    except (TypeError, ValueError):
        return "…"
    return f"({first}…{last})" if last > first else f"({first})"


#: The heatmap's colour scale spans at least +-this % deviation from the
#: median rank, so ranks within a fraction of a percent of each other look
#: alike; a wider spread widens it to the next of ``HEATMAP_SCALE_STEPS``.
HEATMAP_MIN_SCALE_PCT = 5.0
HEATMAP_SCALE_STEPS = (5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


def _deviation_pct(v: float, med: float, fallback: float | None) -> float:
    """``v``'s deviation from the component's median in % of that median;
    of ``fallback`` (the median step time) when the median is 0."""
    base = med if med > 0 else fallback
    return 100.0 * (v - med) / base if base else 0.0


def _heatmap_chart(rows: list[dict[str, Any]], lang: str) -> dict[str, Any] | None:
    """Ranks (x) by component (y). A cell's colour is the rank's deviation
    from the median rank of its component, in % of that median, on one
    symmetric scale for the whole map (at least ``HEATMAP_MIN_SCALE_PCT``):
    a uniform cluster looks uniform, a straggler stands out in the component
    where it differs. Cells carry [x, y, ms, colour in -1..1, ms from the
    median, % from the median]."""
    rows = [r for r in rows if isinstance(r, dict)]
    if len(rows) < 2:
        return None
    comps = [(c, k) for c, k in HEATMAP_SERIES if any(_num(r, c) is not None for r in rows)]
    if not comps:
        return None
    steps = [v for v in (_num(r, "step_ms") for r in rows) if v is not None]
    step_med = statistics.median(steps) if steps else None
    raw = []
    for yi, (col, _) in enumerate(comps):
        vals = [_num(r, col) for r in rows]
        known = [v for v in vals if v is not None]
        med = statistics.median(known)
        for xi, v in enumerate(vals):
            if v is not None:
                raw.append((xi, yi, v, v - med, _deviation_pct(v, med, step_med)))
    widest = max((abs(d) for *_, d in raw), default=0.0)
    scale = next((s for s in HEATMAP_SCALE_STEPS if s >= max(widest, HEATMAP_MIN_SCALE_PCT)), HEATMAP_SCALE_STEPS[-1])
    cells = [[xi, yi, round(v, 3), round(max(-1.0, min(1.0, d / scale)), 3), round(dm, 3), round(d, 2)]
             for xi, yi, v, dm, d in raw]
    grouped = any(r.get("ranks") not in (None, 1) for r in rows)
    return {
        "kind": "heatmap",
        "x": [str(r.get("rank")) for r in rows],
        "y": [t(lang, k) for _, k in comps],
        "cells": cells,
        "axis": t(lang, "axis_rank_group" if grouped else "axis_rank"),
        "delta_label": t(lang, "heatmap_vs_median"),
        "legend": {
            "low": f"\u2212{scale:g}%",
            "mid": t(lang, "heatmap_median"),
            "high": f"+{scale:g}%",
            "label": t(lang, "heatmap_legend", widest=fmt_pct(widest)),
        },
    }


def _ops_chart(rows: list[dict[str, Any]], lang: str) -> dict[str, Any] | None:
    rows = [r for r in rows if isinstance(r, dict)]
    col = next((c for c in OP_VALUE_COLUMNS if any(_num(r, c) is not None for r in rows)), None)
    if col is None:
        return None
    ranked = sorted(
        (r for r in rows if _num(r, col) is not None), key=lambda r: -(_num(r, col) or 0.0)
    )[:TOP_OPS_LIMIT]
    labels = [str(r.get("name", "?")) for r in ranked]
    details = []
    for r in ranked:
        bits = [str(r[c]) for c in ("type", "core", "input_dtypes") if r.get(c) not in (None, "")]
        if is_number(r.get("count")):
            bits.append(f"\u00d7{fmt_num(r['count'])}")
        if is_number(r.get("share")):
            bits.append(fmt_pct(100.0 * r["share"]))
        details.append(" \u00b7 ".join(bits))
    return {
        "labels": labels,
        "details": details,
        "series": [{"key": "total", "label": t(lang, "series_total"), "data": [_num(r, col) for r in ranked]}],
        "stacked": False,
        "horizontal": True,
    }


def _links_chart(rows: list[dict[str, Any]], lang: str) -> dict[str, Any] | None:
    rows = [r for r in rows if isinstance(r, dict) and _num(r, "bandwidth_gbps") is not None]
    if not rows:
        return None
    ranked = sorted(rows, key=lambda r: _num(r, "bandwidth_gbps") or 0.0)[:LINKS_LIMIT]
    labels = [
        f"{r.get('src', '?')} \u2192 {r.get('dst', '?')}" + (f" {r['transport']}" if r.get("transport") else "")
        for r in ranked
    ]
    details = []
    for r in ranked:
        bits = []
        if is_number(r.get("size_mb")):
            bits.append(f"{fmt_num(r['size_mb'])} MB")
        if is_number(r.get("time_ms")):
            bits.append(f"{fmt_num(r['time_ms'])} ms")
        details.append(" \u00b7 ".join(bits))
    return {
        "labels": labels,
        "details": details,
        "unit": "GB/s",
        "series": [{"key": "bandwidth", "label": t(lang, "series_bandwidth"), "data": [_num(r, "bandwidth_gbps") for r in ranked]}],
        "stacked": False,
        "horizontal": True,
    }


def charts(report: Report, lang: str) -> list[dict[str, Any]]:
    """The charts to draw, in order; a chart without data carries a ``note``
    and no ``data`` so the page says why it is missing."""
    tables = report.tables or {}
    out: list[dict[str, Any]] = []

    steps = _breakdown_chart(tables.get("step_breakdown") or [], "step", "axis_step", lang)
    if steps and report.run.device == "cpu":
        for s in steps["series"]:
            if s["key"] == "free":
                s["label"] = t(lang, HOST_FREE["series_free"])
    out.append(
        {
            "id": "steps",
            "title": t(lang, "chart_steps"),
            "caption": t(lang, "chart_steps_note"),
            "data": steps,
            "note": None if steps else t(lang, "chart_missing_steps"),
            "wide": True,
        }
    )

    series = _series_chart(tables.get("step_series") or [], lang)
    if series:
        n_out = len(series["outliers"])
        out.append(
            {
                "id": "series",
                "title": t(lang, "chart_series"),
                "caption": t(lang, "chart_series_note", n=n_out),
                "data": series,
                "note": None,
                "wide": True,
            }
        )

    heat = _heatmap_chart(tables.get("rank_heatmap") or [], lang)
    if heat and report.run.device == "cpu":
        heat["y"] = [t(lang, HOST_FREE["series_free"]) if y == t(lang, "series_free") else y for y in heat["y"]]
    if heat:
        grouped = heat["axis"] == t(lang, "axis_rank_group")
        out.append(
            {
                "id": "heatmap",
                "title": t(lang, "chart_heatmap"),
                "caption": t(lang, "chart_heatmap_note_grouped" if grouped else "chart_heatmap_note"),
                "data": heat,
                "note": None,
                "wide": True,
            }
        )

    rank_rows = tables.get("rank_breakdown") or []
    ranks = _breakdown_chart(rank_rows, "rank", "axis_rank", lang) if len(rank_rows) > 1 else None
    if ranks:
        note = None
    elif len(report.run.ranks) <= 1 and len(rank_rows) <= 1:
        note = t(lang, "chart_missing_ranks")
    else:
        note = t(lang, "chart_missing_ranks_data")
    out.append(
        {
            "id": "ranks",
            "title": t(lang, "chart_ranks"),
            "caption": t(lang, "chart_ranks_note"),
            "data": ranks,
            "note": note,
            "wide": False,
        }
    )

    ops = _ops_chart(tables.get("top_ops") or [], lang)
    out.append(
        {
            "id": "ops",
            "title": t(lang, "chart_ops"),
            "caption": t(lang, "chart_ops_note"),
            "data": ops,
            "note": None if ops else t(lang, "chart_missing_ops"),
            "wide": False,
        }
    )

    links = _links_chart(tables.get("links") or [], lang)
    if links or len(report.run.ranks) > 1:
        out.append(
            {
                "id": "links",
                "title": t(lang, "chart_links"),
                "caption": t(lang, "chart_links_note"),
                "data": links,
                "note": None if links else t(lang, "chart_missing_links"),
                "wide": True,
            }
        )
    return out


# ---------------------------------------------------------------- verdict


#: Where the verdict's share bar reads each part: (part, step metric in ms).
#: Device view first; the MindSpore step-trace view when the run has no
#: device part. ``computing`` is shown without its overlapped part, and
#: ``data_wait`` inside the free time (up to it): the device idles while
#: the loop fetches the next batch; ``free`` is then the rest of the idle time.
SHARE_METRICS = {
    "computing": "step.computing_ms",
    "overlapped": "step.overlapped_ms",
    "exposed_comm": "step.exposed_comm_ms",
    "data_wait": "step.data_wait_ms",
    "free": "step.free_ms",
    "interval": "step.iteration_interval_ms",
    "fp_bp": "step.fp_bp_ms",
    "tail": "step.tail_ms",
}

#: The part of the step a finding's time pool (its rule's ``claims``) is,
#: per scheme, so the verdict's subtitle names the cause its headline names.
CAUSE_PARTS = {
    "data_wait": ("data_wait", "interval"),
    "host_idle": ("free", None),
    "exposed_comm_allreduce": ("exposed_comm", "tail"),
    "fp32_matrix": ("computing", "fp_bp"),
}


def _metric_ms(report: Report, metric_id: str) -> float | None:
    m = report.metrics.get(metric_id)
    if m is None or not is_number(m.value) or not math.isfinite(m.value):
        return None
    return float(m.value)


def _part_ms(report: Report) -> dict[str, float]:
    """The step's disjoint parts in ms per step, from the run's step
    metrics (see ``SHARE_METRICS``); empty when none is known."""
    ms = {k: _metric_ms(report, mid) for k, mid in SHARE_METRICS.items()}
    device = [k for k, _ in STACK_SERIES if k != "data_wait"]
    if any(ms[k] is not None for k in device):
        if ms["computing"] is not None and ms["overlapped"] is not None:
            ms["computing"] = max(ms["computing"] - ms["overlapped"], 0.0)
        if ms["free"] is not None and ms["data_wait"] is not None:
            ms["data_wait"] = min(ms["data_wait"], ms["free"])
            ms["free"] -= ms["data_wait"]
        else:
            ms["data_wait"] = None
        keys = [k for k, _ in STACK_SERIES]
    else:
        keys = [k for k, _ in TRACE_SERIES]
    return {k: ms[k] for k in keys if ms[k] is not None and ms[k] > 0}


#: Message keys of the free part on a CPU run, where no device idles: the
#: free time is the host's own outside operators.
HOST_FREE = {"series_free": "series_free_host", "cause_free": "cause_free_host", "bound_free": "bound_free_host"}


def _key(shares: list[dict[str, Any]], part: str, key: str) -> str:
    """``key``, or its CPU-run form when ``part`` is the host's free time."""
    host = any(s["key"] == part and s.get("host") for s in shares)
    return HOST_FREE.get(key, key) if host else key


def step_shares(report: Report, lang: str) -> list[dict[str, Any]]:
    """Where the step time goes: the disjoint parts of the step as % of the
    run's step time (``step.time_ms``), the same statistic the findings'
    shares use (mean over ranks of each rank's mean over steady steps), so
    one quantity prints one number; empty when the run has no breakdown."""
    step = _metric_ms(report, "step.time_ms")
    parts = _part_ms(report)
    if not step or step <= 0 or not parts:
        return []
    labels = dict(STACK_SERIES + TRACE_SERIES)
    if report.run.device == "cpu":  # no device: the free part is the host's time outside operators
        labels["free"] = HOST_FREE["series_free"]
    return [
        {"key": k, "label": t(lang, labels[k]), "pct": 100.0 * v / step, "text": fmt_pct(100.0 * v / step),
         **({"host": True} if k == "free" and report.run.device == "cpu" else {})}
        for k, v in parts.items()
    ]


BOUND_KEYS = {
    "computing": "bound_compute",
    "exposed_comm": "bound_comm",
    "data_wait": "bound_data_wait",
    "free": "bound_free",
    "interval": "bound_interval",
    "fp_bp": "bound_fp_bp",
    "tail": "bound_tail",
}


def bound(shares: list[dict[str, Any]], lang: str, top: Finding | None = None) -> str | None:
    """The verdict's subtitle. With a leading finding whose cause is a part
    of the step (``CAUSE_PARTS``), that part and its share, so the subtitle
    agrees with the headline; with a leading finding of another kind, the
    largest part, named as such (not as what bounds the job); without one,
    what bounds the job: the largest part, computing counted with its
    overlapped part (device scheme), or the largest of iteration interval,
    forward + backward and tail (step-trace scheme)."""
    if not shares:
        return None
    pct = {s["key"]: s["pct"] for s in shares}
    if top is not None:
        for part in CAUSE_PARTS.get(top.claims or top.rule, ()):
            if part in pct:
                return t(lang, _key(shares, part, f"cause_{part}"), pct=fmt_pct(pct[part]))
    if "overlapped" in pct or "computing" in pct:
        pct["computing"] = pct.get("computing", 0.0) + pct.pop("overlapped", 0.0)
    kind = max(pct, key=lambda k: pct[k])
    if top is not None:
        label = next(s["label"] for s in shares if s["key"] == kind) if kind != "computing" \
            else t(lang, "series_computing_all")
        return t(lang, "bound_largest", part=label, pct=fmt_pct(pct[kind]))
    return t(lang, _key(shares, kind, BOUND_KEYS[kind]), pct=fmt_pct(pct[kind]))


#: ``critical_path.*`` share metrics -> the UI label of each part of the path.
PATH_PARTS = (("host", "path_host"), ("launch", "path_launch"), ("device", "path_device"), ("sync", "path_sync"))


def critical_path(report: Report, lang: str) -> str | None:
    """The step's critical path, when it was evaluated (``critical_path.*``):
    its length per step and its parts. None without a critical path."""
    length = report.metrics.get("critical_path.length_ms")
    if length is None:
        return None
    if length.evidence.get("host_only"):
        return t(lang, "path_split_host_only", ms=ms_filter(length.value))
    shares = {k: report.metrics[f"critical_path.{k}_ratio"].value for k, _ in PATH_PARTS
              if f"critical_path.{k}_ratio" in report.metrics}
    if not shares:
        return None
    parts = " \u00b7 ".join(f"{t(lang, label)} {fmt_pct(100.0 * shares[k])}" for k, label in PATH_PARTS if k in shares)
    return t(lang, "path_split", ms=ms_filter(length.value), parts=parts)


#: Class of the verdict box for a status without a leading finding.
STATUS_STYLE = {"clean": "ok", "inconclusive": "inconclusive"}


def verdict(report: Report, lang: str) -> dict[str, Any]:
    """The verdict box: the run's status (``report.verdict``; a report
    written before verdicts had none), its one-line reason and what could
    not be judged, the leading finding's title, what bounds the step, the
    finding count, the mean step time (printed as the rule messages print
    it; every "% of step" is of it) and the largest gain."""
    findings = ordered_findings(report)
    n = len(findings)
    counts = t(lang, "findings_count_one") if n == 1 else t(lang, "findings_count", n=n)
    gain = None
    gains_ms = [f.estimated_gain_ms for f in findings if f.estimated_gain_ms is not None]
    if gains_ms:
        best = max(findings, key=lambda f: f.estimated_gain_ms or -1.0)
        if best.estimated_gain_pct is not None:
            gain = t(
                lang,
                "gain_up_to",
                ms=fmt_num(best.estimated_gain_ms),
                pct=fmt_pct(best.estimated_gain_pct),
            )
        else:
            gain = t(lang, "gain_up_to_ms", ms=fmt_num(best.estimated_gain_ms))
    top = findings[0] if findings else None
    shares = step_shares(report, lang)
    path = critical_path(report, lang)
    step_ms = _metric_ms(report, "step.time_ms")
    v = report.verdict
    status = v.status if v is not None else ("problems" if top else "clean")
    if status == "problems" and top is not None:
        title, style = top.title, top.severity
    else:
        title, style = t(lang, f"verdict_{status}_title"), STATUS_STYLE.get(status, "ok")
    return {
        "top": top,
        "status": status,
        "status_label": t(lang, f"verdict_{status}"),
        "reason": v.reason if v is not None else None,
        "missing": list(v.missing) if v is not None else [],
        "title": title,
        "severity": top.severity if top else None,
        "style": style,
        "bound": bound(shares, lang, top if status == "problems" else None),
        "path": path,
        "shares": shares,
        "counts": counts,
        "step": t(lang, "step_mean", ms=ms_filter(step_ms)) if step_ms else None,
        "step_def": t(lang, "step_mean_def"),
        "gain": gain,
    }
