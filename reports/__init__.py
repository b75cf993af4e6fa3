"""Renderers: a Report -> HTML, Markdown, JSON and a terminal summary.

Renderers only lay out what the report holds; they never analyse. UI texts
come from :mod:`advisor.reports.i18n`.
"""

from __future__ import annotations

from pathlib import Path

from advisor.i18n import DEFAULT_LANG
from advisor.model import Report
from advisor.reports.html import render_html
from advisor.reports.json_report import json_schema, render_json
from advisor.reports.markdown import render_markdown
from advisor.reports.terminal import print_summary
from advisor.runtime.files import write_set

__all__ = [
    "json_schema",
    "print_summary",
    "render_html",
    "render_json",
    "render_markdown",
    "write_reports",
]

FILES = {"html": "report.html", "markdown": "report.md", "json": "report.json"}


def write_reports(report: Report, out_dir: Path, lang: str = DEFAULT_LANG) -> dict[str, Path]:
    """Write report.html, report.md and report.json into ``out_dir``
    (created if needed) as one set (``advisor.runtime.files.write_set``: a
    reader sees the previous set or the new one, never a mix); returns
    ``{"html": path, "markdown": path, "json": path}``.

    Raises AdvisorError with a one-line message when the folder or a file
    cannot be written.
    """
    texts = {
        FILES["html"]: render_html(report, lang),
        FILES["markdown"]: render_markdown(report, lang),
        FILES["json"]: render_json(report),
    }
    paths = write_set(out_dir, texts)
    return {kind: paths[name] for kind, name in FILES.items()}
