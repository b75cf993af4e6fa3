"""The JSON report: the pydantic ``Report`` as is, and its JSON Schema.

Keys come out in the models' field order (and dict keys in the order the
analysis inserted them), so the same report always gives the same bytes.
Non-finite floats are written as ``null`` (pydantic's default), so the
output is strict JSON.
"""

from __future__ import annotations

from typing import Any

from advisor.model import Report

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def render_json(report: Report) -> str:
    """``report`` as indented JSON text, ending in a newline."""
    return report.model_dump_json(indent=2) + "\n"


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that every ``render_json`` output
    validates against."""
    schema = Report.model_json_schema()
    return {"$schema": SCHEMA_DIALECT, **schema}
