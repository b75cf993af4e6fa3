"""``advisor history show`` at 80 columns, on runs of the real examples:
one line per time, rule names whole, every column labelled, the value's
unit named, and a chart only when asked for."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from gate_helpers import advisor
from rich.console import Console

from advisor.regression.compare import load_report
from advisor.regression.history import History
from advisor.reports.gate_verdict import print_history

REPO = Path(__file__).resolve().parents[2]
RULES = ("input-bound", "slow-dataset-op", "fp32-compute")


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """Three runs of the data-bound example, then one of vgg16_fp32."""
    root = tmp_path_factory.mktemp("hist")
    bound, vgg = root / "bound.json", root / "vgg.json"
    bound.write_text(load_report(REPO / "examples" / "resnet50_data_bound").model_dump_json(), encoding="utf-8")
    vgg.write_text(load_report(REPO / "examples" / "vgg16_fp32").model_dump_json(), encoding="utf-8")
    path = root / "db" / "h.db"
    for i, src in enumerate((bound, bound, bound, vgg), 1):
        code, _, err = advisor("history", "add", src, "--db", path, "--commit", f"{i}a5c9e0d4f1b2c3d4e5f6",
                               "--time", f"2026-01-0{i}T10:00:00+00:00")
        assert code == 0, err
    return path


def test_at_80_columns_times_and_rule_names_stay_whole(db, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(tmp_path)
    code, out, err = advisor("history", "show", "--db", db, "--no-color")
    assert code == 0, err
    lines = out.splitlines()
    assert all(len(x) <= 80 for x in lines)
    assert lines[0].strip() == "history: 4 run(s) of step.time_ms"
    header = next(x for x in lines if "recorded" in x)
    assert header.split() == ["#", "recorded", "commit", "value", "(ms)", "vs", "median", "findings"]
    for i in range(1, 5):
        assert re.search(rf"^\s*{i}\s+2026-01-0{i} 10:00\s+{i}a5c9e0d4f\s", out, flags=re.M)
    words = set(re.findall(r"[\w-]+", out))
    assert set(RULES) <= words  # no rule name broken over two lines
    assert not [w for w in words if w.endswith("-") or w.startswith("-") and not w[1:].replace(".", "").isdigit()]


def test_no_chart_is_written_unless_asked(db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert advisor("history", "show", "--db", db)[0] == 0
    assert os.listdir(tmp_path) == []
    code, out, err = advisor("history", "show", "--db", db, "-o", "trend.svg")
    assert code == 0, err
    assert os.listdir(tmp_path) == ["trend.svg"] and "trend chart: trend.svg" in out
    svg = (tmp_path / "trend.svg").read_text()
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "step.time_ms (ms) over the last 4 run(s)" in texts  # the unit, from the runs themselves
    assert "ms" in texts  # over the value axis


def test_a_metric_without_its_unit_in_its_name_is_labelled_with_it(db, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = advisor("history", "show", "--db", db, "--metric", "data.suggested_workers", "--no-color")
    assert code == 0, err
    assert "history: 4 run(s) of data.suggested_workers (count)" in out
    assert "value (count)" in out


def test_flagged_runs_are_marked_and_their_reason_follows(db):
    with History(db) as hist:
        runs = hist.runs("main")
    flagged = int(runs["id"].iloc[0])  # the run whose findings include slow-dataset-op
    buf = io.StringIO()
    print_history(runs, "step.time_ms", Console(file=buf, width=80), {flagged: "anomaly: step time outside "
                  "what the last 3 runs have seen " * 2}, "ms")
    out = buf.getvalue()
    lines = out.splitlines()
    header = next(x for x in lines if "recorded" in x)
    assert header.split()[-1] == "findings"  # no column without a label
    assert re.search(rf"^\s*{flagged}\*\s+2026", out, flags=re.M)
    assert "* flagged by the anomaly model" in out
    assert any(x.startswith(f"run {flagged}: anomaly: step time outside") for x in lines)
    assert set(RULES) <= set(re.findall(r"[\w-]+", out))  # rule names still whole
    assert all(len(x) <= 80 for x in lines)


def test_in_chinese_the_table_the_flags_and_the_chart_are_chinese(db, tmp_path, monkeypatch):
    from advisor.reports.i18n import EN

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(tmp_path)
    code, out, err = advisor("history", "show", "--db", db, "--no-color", "--lang", "zh", "-o", "trend.svg")
    assert code == 0, err
    assert out.splitlines()[0].strip() == "历史：step.time_ms 的 4 次运行"
    assert "记录时间" in out and "相对中位数" in out and "趋势图：trend.svg" in out
    svg = (tmp_path / "trend.svg").read_text()
    texts = [t.text for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]
    assert "step.time_ms (ms)：最近 4 次运行" in texts
    english = [EN[k] for k in ("hist_col_recorded", "hist_col_vs_median", "hist_col_findings")]
    assert not [w for w in english if w in out] and "over the last" not in svg and "median " not in svg
