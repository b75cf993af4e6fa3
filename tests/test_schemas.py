"""The published JSON Schemas in docs/ are the ones the code generates."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from advisor.cli import cli
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args,path", [([], "docs/report.schema.json"), (["--rules"], "docs/rule.schema.json")])
def test_published_schema_is_current(args, path):
    out = CliRunner().invoke(cli, ["schema", *args])
    assert out.exit_code == 0
    published = json.loads((REPO / path).read_text())
    assert json.loads(out.output) == published, f"regenerate {path} with `advisor schema {' '.join(args)}`"
