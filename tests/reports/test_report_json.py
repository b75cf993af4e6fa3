"""The JSON report round-trips and matches its published schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from advisor.model import Report
from advisor.reports import json_schema, render_json


def test_round_trip(report: Report) -> None:
    text = render_json(report)
    back = Report.model_validate_json(text)
    assert back == report
    assert render_json(back) == text


def test_validates_against_schema(report: Report, big_report: Report) -> None:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for r in (report, big_report, Report(run=report.run)):
        jsonschema.validate(json.loads(render_json(r)), schema, cls=jsonschema.Draft202012Validator)


def test_schema_rejects_a_bad_report(report: Report) -> None:
    data = json.loads(render_json(report))
    data["findings"][0]["severity"] = "catastrophic"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json_schema(), cls=jsonschema.Draft202012Validator)


def test_stable_and_strict(report: Report) -> None:
    text = render_json(report)
    assert text == render_json(report)
    assert text.endswith("\n") and text.startswith('{\n  "schema_version": 1,')
    nan = report.model_copy(deep=True)
    nan.metrics["step.mean_ms"].value = float("nan")
    json.loads(render_json(nan), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
