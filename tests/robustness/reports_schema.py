"""The published report schema (docs/report.schema.json), loaded once."""

from __future__ import annotations

import functools
import json
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


@functools.lru_cache(maxsize=1)
def report_schema() -> dict:
    return json.loads((DOCS / "report.schema.json").read_text())
