"""Metric cases as data: every ``cases/*.yaml`` entry is a small Profile,
given as tables, and the metric values it must give (or why a metric is not
evaluated); one test runs them all, in strict mode. Adding a case adds no
test code.

A case::

    name: what it shows
    meta: {ranks: [0, 1], parallel: {pp: 2}}     # RunMeta fields (optional)
    tables:                                       # table -> column -> values
      steps: {rank: [0, 0], step: [1, 2], duration_us: [100, 120]}
    expect: {step.time_ms: 0.11}                  # metric -> value
    evidence: {metric: {key: value}}              # evidence entries (optional)
    not_evaluated: {metric: reason fragment}      # (optional)

Columns take their dtype from the Profile schema (``null`` is a missing
value). Numbers match within 1e-6 (relative or absolute), everything else
exactly. The expected values are worked out by hand from each metric's
definition; a comment in the case shows the arithmetic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from advisor.metrics import REGISTRY, evaluate
from advisor.profile import SCHEMA, Profile, RunMeta

CASES_DIR = Path(__file__).parent / "cases"
TOLERANCE = 1e-6


def _load() -> list[tuple[str, dict]]:
    cases = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]:
            cases.append((f"{path.stem}: {case['name']}", case))
    return cases


CASES = _load()


def _column(table: str, column: str, values: list) -> pd.api.extensions.ExtensionArray | np.ndarray:
    kind = SCHEMA[table][column].kind
    if kind == "bool":
        return np.array(values, dtype=bool)
    if kind == "int":
        return pd.array(values, dtype="Int64") if None in values else np.array(values, dtype="int64")
    if kind == "float":
        return np.array([np.nan if v is None else v for v in values], dtype="float64")
    return pd.array(values, dtype="str")


def profile_of(case: dict) -> Profile:
    tables = {name: pd.DataFrame({col: _column(name, col, values) for col, values in columns.items()})
              for name, columns in case["tables"].items()}
    return Profile(meta=RunMeta(**case.get("meta", {})), **tables)


def _matches(got, want) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return got == pytest.approx(want, rel=TOLERANCE, abs=TOLERANCE)
    if isinstance(want, dict) and isinstance(got, dict):
        return set(got) == set(want) and all(_matches(got[k], want[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_matches(g, w) for g, w in zip(got, want))
    return got == want


def test_cases_name_known_metrics():
    assert CASES
    for name, case in CASES:
        named = set(case.get("expect", {})) | set(case.get("evidence", {})) | set(case.get("not_evaluated", {}))
        assert named and named <= set(REGISTRY), (name, named - set(REGISTRY))


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_metric_case(case, monkeypatch):
    monkeypatch.setenv("ADVISOR_STRICT", "1")  # a metric that raises fails the case
    metrics, skipped = evaluate(profile_of(case))
    reasons = {s.what.removeprefix("metric "): s.reason for s in skipped}
    for mid, want in case.get("expect", {}).items():
        assert mid in metrics, f"{mid} not evaluated: {reasons.get(mid)}"
        assert _matches(metrics[mid].value, want), f"{mid}: got {metrics[mid].value!r}, expected {want!r}"
    for mid, entries in case.get("evidence", {}).items():
        evidence = metrics[mid].evidence
        for key, want in entries.items():
            assert _matches(evidence.get(key), want), f"{mid} evidence {key}: got {evidence.get(key)!r}"
    for mid, fragment in case.get("not_evaluated", {}).items():
        assert mid not in metrics, f"{mid} evaluated: {metrics[mid].value!r}"
        assert fragment in reasons[mid], f"{mid}: {reasons[mid]!r}"
