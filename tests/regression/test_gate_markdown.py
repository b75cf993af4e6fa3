"""gate.md as a pull-request comment, on the real examples: code spans
show paths as written, notes stay separate quotes, and a change over a
near-zero baseline is given as the absolute change, not "+29019.9%"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gate_helpers import advisor

from advisor.regression.compare import PERCENT_FLOOR, change_text, percent_change

REPO = Path(__file__).resolve().parents[2]
BOUND, FIXED = REPO / "examples" / "resnet50_data_bound", REPO / "examples" / "resnet50_data_fixed"


@pytest.fixture(scope="module")
def gate_md(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("gate")
    code, _, stderr = advisor("gate", BOUND, "--baseline", FIXED, "-o", out)
    assert code == 1, stderr  # the data-bound run is a regression
    return (out / "gate.md").read_text(encoding="utf-8")


def test_code_spans_show_the_paths_as_written(gate_md):
    assert f"`{BOUND}` vs baseline `{FIXED}`" in gate_md
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", gate_md)
    assert spans and not [s for s in spans if "\\_" in s or "\\[" in s]


def test_notes_are_separate_quotes(gate_md):
    lines = gate_md.splitlines()
    quotes = [i for i, line in enumerate(lines) if line.startswith(">")]
    assert len(quotes) >= 2
    assert all(lines[i + 1] == "" for i in quotes)  # GitHub would join adjacent quote lines into one


def test_a_near_zero_baseline_gets_the_absolute_change(gate_md):
    """The data wait was 0.254 ms per step and is 74.0: a percentage of the
    baseline (+29019.9%) says nothing a reader can use."""
    row = next(line for line in gate_md.splitlines() if "iteration interval" in line and line.startswith("|"))
    assert row.rstrip().endswith("| +73.8 |")
    assert not re.search(r"[+-]\d{4,}(\.\d)?%", gate_md)
    step = next(line for line in gate_md.splitlines() if line.startswith("| budget step.time"))
    assert "+425.7%" in step  # a real baseline keeps its percentage


def test_percent_floor():
    assert change_text(18.03, 94.79, "ms") == "+425.7%"
    assert change_text(0.254, 74.03, "ms") == "+73.78 ms"
    assert change_text(0.0, 0.5, "ratio") == "+0.5 ratio"
    assert change_text(None, 1.0) == "n/a"
    assert change_text(10.0, 2.0) == "-80.0%"  # a drop is always within 100%
    edge = 1.0 / PERCENT_FLOOR
    assert percent_change(1.0, edge) is not None and percent_change(1.0, edge * 1.01) is None
