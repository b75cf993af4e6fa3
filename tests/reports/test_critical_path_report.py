"""The critical path in the report's verdict box (HTML and markdown): its
length and split per step, beside the step's own shares (the path is a
measurement shown as such; which part bounds the step is left to the rules).

The traces are the Kineto fixtures of tests/collectors/kineto/test_critical_path.py
(written to the PyTorch profiler's format, with the sources cited there)."""

from __future__ import annotations

import advisor
from advisor.reports.html import render_html
from advisor.reports.markdown import render_markdown
from tests.collectors.kineto.test_critical_path import STEP_US, _device_bound, _steps, _Trace


def test_a_device_paced_step_shows_its_critical_path(tmp_path):
    trace = _steps(_Trace(), _device_bound, steps=5).write(tmp_path / "a.pt.trace.json")
    report = advisor.analyze(trace, jobs=1, use_config=False)
    assert report.metrics["critical_path.bound"].value == "device"
    md = render_markdown(report, "en")
    # the 18 ms kernel of each 20 ms step, as % of the path
    assert f"critical path {STEP_US / 1000:.2f} ms per step: host 9.8% · launch 0.10% · device 90.0%" in md
    assert "paces the step" not in md
    html = render_html(report, "en")
    assert 'class="verdict-path"' in html and "critical path 20.00 ms per step" in html
    assert "关键路径每步 20.00 ms" in render_markdown(report, "zh")


def test_without_a_critical_path_the_report_shows_none(examples):
    report = advisor.analyze(examples / "resnet50_data_bound", jobs=1, use_config=False)
    assert "critical_path.length_ms" not in report.metrics
    assert "critical path" not in render_markdown(report, "en")
    assert 'class="verdict-path"' not in render_html(report, "en")
