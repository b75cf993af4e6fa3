"""Regression tests for the robustness fixes (registry, engine filters,
CSV truncation, MindInsight unreadable anchors)."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from advisor.collectors.io.csv_files import read_columns
from advisor.collectors.mindinsight import collector as mindinsight
from advisor.engine.render import SANDBOX as _JINJA
from advisor.errors import InputError
from advisor.metrics import registry
from advisor.profile import Profile, RunMeta


@pytest.fixture
def broken_metric():
    """A temporary metric whose function fails on any data."""
    @registry.metric("test.broken_metric", unit="ratio", needs=("steps",))
    def broken(p):
        """A metric that divides by an empty selection (for tests)."""
        return p.steps["duration_us"].iloc[10**6]

    yield "test.broken_metric"
    registry.REGISTRY.pop("test.broken_metric")


def _profile() -> Profile:
    steps = pd.DataFrame({"rank": [0, 0], "step": pd.array([1, 2], dtype="Int64"),
                          "duration_us": [float("inf"), float("inf")]})
    return Profile(meta=RunMeta(ranks=[0]), steps=steps)


def test_failing_metric_becomes_a_skip(broken_metric, monkeypatch):
    monkeypatch.delenv("ADVISOR_STRICT", raising=False)
    metrics, skipped = registry.evaluate(_profile())
    reasons = {s.what: s.reason for s in skipped}
    assert reasons[f"metric {broken_metric}"].startswith(f"metric {broken_metric} failed on this input: IndexError")
    assert "\n" not in reasons[f"metric {broken_metric}"]
    assert broken_metric not in metrics
    # a non-finite value is "no value", never inf in the report
    assert all(m.value not in (float("inf"), float("-inf")) for m in metrics.values())


def test_strict_mode_reraises(broken_metric, monkeypatch):
    monkeypatch.setenv("ADVISOR_STRICT", "1")
    with pytest.raises(IndexError):
        registry.evaluate(_profile())


def test_message_filters_tolerate_missing_and_weird_values():
    tmpl = _JINJA.from_string("{{ step.time_ms | ms }} {{ step.ratio | pct }} {{ x | ms }} {{ y | pct }}")
    assert tmpl.render(step={}, x=float("nan"), y="abc") == "n/a n/a n/a n/a"
    assert _JINJA.from_string("{{ v | ms }} {{ r | pct }}").render(v=12.345, r=0.5) == "12.35 ms 50.0%"


@pytest.mark.parametrize("rows", [1, 2000])  # read in memory (small file) / by pyarrow from disk (large)
def test_csv_cut_inside_a_quoted_field_is_an_error(tmp_path, rows):
    path = tmp_path / "framework_raw_0.csv"
    body = 'a,Conv,"{""input_0"": 1}"\n' * rows
    path.write_text('full_op_name,op_type,op_info\n' + body + 'b,Add,"{""inp')
    with pytest.raises(InputError, match="ends inside a quoted field"):
        read_columns(path, {"name": ("full_op_name",), "info": ("op_info",)})
    path.write_text('full_op_name,op_type,op_info\n' + body.rstrip("\n"))  # no final newline: fine
    assert list(read_columns(path, {"name": ("full_op_name",)})["name"]) == ["a"] * rows


@pytest.mark.parametrize("kind", ["dangling", "folder"])
def test_unreadable_mindinsight_anchor_is_named(tmp_path, examples, kind):
    import shutil
    folder = shutil.copytree(examples / "resnet50_8p_allreduce_tail" / "profiler", tmp_path / "p")
    target = folder / "step_trace_raw_6_detail_time.csv"
    target.unlink()
    if kind == "dangling":
        os.symlink(tmp_path / "missing.csv", target)
    else:
        target.mkdir()
    units = mindinsight.discover(folder)
    assert target in units
    with pytest.raises(InputError) as err:
        mindinsight.read(target)
    assert err.value.path == str(target)
    assert ("dangling" if kind == "dangling" else "folder") in err.value.problem
