"""Renderers: a Report -> HTML, Markdown, JSON and a terminal summary.

Renderers only lay out what the report holds; they never analyse. UI texts
come from :mod:`advisor.reports.i18n`, which loads without the renderers:
they (and the report model, pandas under it) are imported when first used
(SPEC 1 lazy loading), so the terminal can say what it is doing before
they are.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.i18n import DEFAULT_LANG

if TYPE_CHECKING:  # pragma: no cover
    from advisor.model import Report
    from advisor.reports.html import render_html as render_html
    from advisor.reports.json_report import json_schema as json_schema
    from advisor.reports.json_report import render_json as render_json
    from advisor.reports.markdown import render_markdown as render_markdown
    from advisor.reports.terminal import print_summary as print_summary

#: The renderers this package exports, by the module that defines each.
_RENDERERS = {
    "json_schema": "json_report",
    "print_summary": "terminal",
    "render_html": "html",
    "render_json": "json_report",
    "render_markdown": "markdown",
}

__all__ = [*sorted(_RENDERERS), "write_reports"]

FILES = {"html": "report.html", "markdown": "report.md", "json": "report.json"}


def __getattr__(name: str):
    """A renderer, its module imported on first use."""
    if name not in _RENDERERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_RENDERERS[name]}"), name)
    globals()[name] = value
    return value


def write_reports(report: Report, out_dir: Path, lang: str = DEFAULT_LANG) -> dict[str, Path]:
    """Write report.html, report.md and report.json into ``out_dir``
    (created if needed) as one set (``advisor.runtime.files.write_set``: a
    reader sees the previous set or the new one, never a mix); returns
    ``{"html": path, "markdown": path, "json": path}``.

    Raises AdvisorError with a one-line message when the folder or a file
    cannot be written.
    """
    from advisor.reports.html import render_html
    from advisor.reports.json_report import render_json
    from advisor.reports.markdown import render_markdown
    from advisor.runtime.files import write_set

    texts = {
        FILES["html"]: render_html(report, lang),
        FILES["markdown"]: render_markdown(report, lang),
        FILES["json"]: render_json(report),
    }
    paths = write_set(out_dir, texts)
    return {kind: paths[name] for kind, name in FILES.items()}
