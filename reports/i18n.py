"""UI texts of the reports, one message table per language.

Every heading, label and fixed phrase a renderer shows comes from here; texts
that come from the profile or from rules (titles, messages, fixes) do not.
To add a language, add a dict under its code (e.g. ``"zh"``) with the same
keys; a key it lacks falls back to English, so a partial table still works.
Placeholders use ``str.format`` syntax (``{n}``); numbers are formatted by
the caller, never here.
"""

from __future__ import annotations

EN: dict[str, str] = {
    # document
    "doc_title": "advisor report",
    "doc_subtitle": "Training performance report",
    "nav_findings": "Findings",
    "nav_charts": "Charts",
    "nav_metrics": "Metrics",
    "nav_skipped": "Skipped",
    "nav_run": "Run",
    # verdict
    "verdict_label": "Verdict",
    "verdict_none": "No problems found",
    "verdict_none_detail": "No rule fired on this run.",
    "bound_compute": "compute-bound: the device computes {pct} of step time",
    "bound_comm": "communication-bound: exposed communication takes {pct} of step time",
    "bound_free": "device idle: the device is free {pct} of step time (host, input or launch)",
    "bound_interval": "host/input wait: the iteration interval between steps takes {pct} of step time",
    "bound_fp_bp": "compute-bound: forward and backward take {pct} of step time",
    "bound_tail": "tail-bound: gradient all-reduce and optimizer take {pct} of step time",
    "findings_count_one": "1 finding",
    "findings_count": "{n} findings",
    "gain_up_to": "up to {ms} ms per step to gain ({pct} of step)",
    "gain_up_to_ms": "up to {ms} ms per step to gain",
    # findings
    "findings_heading": "Findings",
    "findings_none": "No rule fired on this run.",
    "sev_critical": "critical",
    "sev_high": "high",
    "sev_medium": "medium",
    "sev_low": "low",
    "sev_info": "info",
    "gain": "Estimated gain",
    "gain_unknown": "gain unknown",
    "per_step": "per step",
    "of_step": "of step",
    "confidence": "Confidence",
    "evidence": "Evidence",
    "scope": "Scope",
    "scope_run": "whole run",
    "n_ranks": "{n} ranks",
    "n_ranks_one": "1 rank",
    "n_steps": "{n} steps",
    "n_steps_one": "1 step",
    "scope_ranks": "ranks",
    "scope_steps": "steps",
    "scope_ops": "ops",
    "fix": "Fix",
    "fix_for": "for {framework}",
    "no_fix": "No fix is suggested for this finding.",
    "caveats": "Caveats",
    "copy": "Copy",
    "copied": "Copied",
    "copy_failed": "Select and copy",
    "more_findings": "{n} more findings",
    # charts
    "charts_heading": "Charts",
    "chart_steps": "Step time breakdown per step",
    "chart_steps_note": "Mean over ranks, ms.",
    "chart_ranks": "Step time breakdown per rank",
    "chart_ranks_note": "Mean over steps, ms.",
    "chart_ops": "Top operators by total time",
    "chart_ops_note": "Total device time, ms.",
    "chart_links": "Slowest links by bandwidth",
    "chart_links_note": "Point-to-point links, GB/s, slowest first.",
    "chart_missing_links": "Links chart omitted: the profile has no communication matrix.",
    "series_bandwidth": "bandwidth",
    "chart_missing_steps": "Step breakdown chart omitted: the profile has no per-step breakdown.",
    "chart_missing_ranks": "Per-rank chart omitted: the profile has one rank only.",
    "chart_missing_ranks_data": "Per-rank chart omitted: the profile has no per-rank breakdown.",
    "chart_missing_ops": "Top operators chart omitted: the profile has no operator table.",
    "series_computing": "computing (not overlapped)",
    "series_overlapped": "overlapped compute + comm.",
    "series_exposed_comm": "exposed communication",
    "series_free": "free (device idle)",
    "series_duration": "step time",
    "series_interval": "iteration interval (host / data wait)",
    "series_fp_bp": "forward + backward",
    "series_tail": "tail (all-reduce + optimizer)",
    "series_total": "total time",
    "axis_ms": "ms",
    "axis_step": "step",
    "axis_rank": "rank",
    "step_share": "Where step time goes",
    # metrics
    "metrics_heading": "Metrics",
    "metrics_none": "No metrics were computed.",
    "filter_placeholder": "Filter metrics by id, value or unit",
    "filter_label": "Filter",
    "scope_all": "all scopes",
    "showing": "Showing {shown} of {total}",
    "col_id": "id",
    "col_value": "value",
    "col_unit": "unit",
    "col_scope": "scope",
    "sort_hint": "Sort by this column",
    # skipped
    "skipped_heading": "Skipped / not evaluated",
    "skipped_none": "Nothing was skipped.",
    "col_what": "what",
    "col_reason": "why",
    # run
    "run_heading": "Run",
    "meta_framework": "Framework",
    "meta_device": "Device",
    "meta_format": "Source format",
    "meta_source": "Source",
    "meta_ranks": "Ranks",
    "meta_steps": "Steps",
    "meta_version": "advisor version",
    "meta_generated": "Generated",
    "meta_schema": "Report schema",
    "meta_notes": "Notes",
    "footer": "Generated by advisor {version}. Charts: Chart.js (MIT licence), inlined.",
    # markdown only
    "md_title": "advisor: performance report",
    "md_findings_heading": "Findings",
    "md_fixes_heading": "Fixes",
    "md_metrics_heading": "Key metrics",
    "md_skipped_heading": "Skipped / not evaluated",
    "md_col_severity": "severity",
    "md_col_rule": "rule",
    "md_col_message": "message",
    "md_col_gain": "est. gain",
    "md_run_line": "{framework} on {device}, {format}, {ranks} rank(s), {steps} step(s)",
    "md_truncated": "{n} more {noun} not shown: a comment is capped at {cap} characters; see report.html or report.json.",
    "md_noun_findings": "findings",
    "md_noun_fixes": "fixes",
    "md_noun_metrics": "metrics",
    "md_noun_skipped": "skipped items",
    "md_metrics_more": "{n} more metrics in report.html and report.json.",
    # terminal
    "term_title": "advisor: {n} finding(s)",
    "term_none": "advisor: no problems found",
    "term_more": "... and {n} more (see the report)",
}

MESSAGES: dict[str, dict[str, str]] = {"en": EN}
DEFAULT_LANG = "en"


def messages(lang: str = DEFAULT_LANG) -> dict[str, str]:
    """The full message table for ``lang``: its own texts over English."""
    table = MESSAGES.get(lang)
    if table is None or table is EN:
        return EN
    return {**EN, **table}


def t(lang: str, key: str, **kwargs: object) -> str:
    """One UI text in ``lang`` with ``{placeholders}`` filled in."""
    text = messages(lang)[key]
    return text.format(**kwargs) if kwargs else text
