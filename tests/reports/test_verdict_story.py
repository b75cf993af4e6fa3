"""The verdict tells one story on real inputs: its subtitle names the cause
the headline names, the share bar shows that cause, and one quantity prints
one number in the verdict, the findings and the gate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _browser import Page, browser, require_chromium  # noqa: F401  (fixture)
from advisor.collectors import load_profile
from advisor.reports import _view, render_markdown, write_reports

from advisor.model import Report
from advisor.pipeline import analyze_profile
from advisor.regression.budgets import GateConfig
from advisor.regression.compare import side_from_reports
from advisor.regression.gate import run_gate

ROOT = Path(__file__).resolve().parents[2]


def _analyze(path: Path) -> Report:
    return analyze_profile(load_profile(path, jobs=1))


@pytest.fixture(scope="module")
def kineto_data_bound(corpus) -> Report:
    return _analyze(corpus / "kineto-tb-plugin" / "resnet50_num_workers_0")


@pytest.fixture(scope="module")
def data_bound() -> Report:
    return _analyze(ROOT / "examples" / "resnet50_data_bound")


def _verdict_block(md: str) -> str:
    return md.split("### Findings", 1)[0]


def test_kineto_input_bound_subtitle_and_bar_name_the_data_wait(kineto_data_bound: Report) -> None:
    report = kineto_data_bound
    top = report.findings[0]
    assert top.rule == "input-bound"
    v = _view.verdict(report, "en")
    shares = {s["key"]: s["text"] for s in v["shares"]}
    # the bar has a data-wait part, of the size the finding gives the cause
    assert "data_wait" in shares
    share = _view.fmt_pct(100.0 * top.time_at_stake_ms / report.metrics["step.time_ms"].value)
    assert shares["data_wait"] == share
    # the corpus README: the DataLoader takes roughly 30-45% of each step
    assert 30.0 <= float(share.rstrip("%")) <= 45.0
    # the subtitle names it, not what else is largest
    assert v["bound"] == f"training waits for the next batch {share} of step time"
    md = _verdict_block(render_markdown(report))
    assert "compute-bound" not in md
    assert f"**Training waits for input data**: training waits for the next batch {share} of step time" in md
    assert re.search(rf"Where step time goes: .*data wait {re.escape(share)}", md)
    # the finding says the same share
    assert f"({share}) waiting for the next batch" in render_markdown(report)


def test_step_trace_input_bound_share_is_the_findings_share(data_bound: Report) -> None:
    """resnet50_data_bound: the verdict's interval share and the input-bound
    finding's share are one number (both of the mean steady step)."""
    md = render_markdown(data_bound)
    finding = re.search(r"Each 91\.19 ms step spends 74\.03 ms \((\d+\.\d)%\)", md)
    assert finding is not None and finding.group(1) == "81.2"
    head = _verdict_block(md)
    assert "takes 81.2% of step time" in head and "80.9%" not in md
    assert "iteration interval (host / data wait) 81.2%" in head
    # the step figure says which statistic it is, printed as the messages print it
    assert "mean step 91.19 ms" in head


def test_cluster_tail_finding_subtitle_names_the_tail() -> None:
    report = _analyze(ROOT / "examples" / "resnet50_8p_allreduce_tail")
    assert report.findings[0].rule == "exposed-allreduce"
    head = _verdict_block(render_markdown(report))
    assert "compute-bound" not in head
    assert "the step tail after backward (gradient all-reduce and optimizer) takes 26.2% of step time" in head
    assert "(26.2%) is the step tail" in render_markdown(report)


def test_a_share_is_its_time_over_the_step_on_ranks_whose_steps_differ(corpus) -> None:
    """The corpus's 8-rank cluster summary: its ranks' steps differ in length
    (1.71 s on average), so a mean of per-rank shares is not the mean free
    time over the mean step. The verdict, the device-idle finding and the
    metrics give the free time one share and one time: free over step."""
    profile = load_profile(corpus / "mstt/test/resource/advisor/cluster_analysis_output", jobs=1)
    steps = profile.steps.groupby("rank")["duration_us"].mean()
    assert steps.max() - steps.min() > 0.001 * steps.mean()
    report = analyze_profile(profile)
    m = report.metrics
    share = m["step.free_ms"].value / m["step.time_ms"].value
    assert m["step.free_ratio"].value == pytest.approx(share, rel=1e-4)
    assert m["step.host_idle_ratio"].value == pytest.approx(share, rel=1e-4)
    text = f"{100 * share:.1f}%"
    idle = next(f for f in report.findings if f.rule == "device-idle")
    assert f"for {text} of each step ({m['step.free_ms'].value:.2f} ms)" in idle.message
    md = render_markdown(report)
    assert f"the device is idle {text} of step time" in _verdict_block(md)


def test_gate_names_its_statistics_and_prints_the_reports_mean(data_bound: Report) -> None:
    """The gate's figure is the per-step median (its rank test's); beside it,
    the report's mean step, the same number the report prints."""
    fixed = _analyze(ROOT / "examples" / "resnet50_data_fixed")
    result, _ = run_gate(side_from_reports([fixed], "fixed"), side_from_reports([data_bound], "bound"), GateConfig())
    step = next(c for c in result.checks if c.metric == "step.time_ms")
    assert step.status == "fail"
    assert "per-step median 18.03 ms -> 94.79 ms" in step.message
    assert "report mean" in step.message and "-> 91.19 ms" in step.message


def test_browser_verdict_bar_shows_the_data_wait(browser, kineto_data_bound: Report, tmp_path: Path) -> None:
    """In Chromium: the verdict's bar has a data-wait part of the finding's
    share, the subtitle names it, and the per-step chart stacks it."""
    require_chromium()
    page = Page(browser, write_reports(kineto_data_bound, tmp_path / "out")["html"])
    try:
        p = page.page
        top = kineto_data_bound.findings[0]
        ratio = top.time_at_stake_ms / kineto_data_bound.metrics["step.time_ms"].value
        share = _view.fmt_pct(100.0 * ratio)
        assert p.locator("#verdict .verdict-bound").inner_text() == (
            f"training waits for the next batch {share} of step time")
        seg = p.locator("#verdict .share-bar rect.seg-data_wait")
        assert seg.count() == 1 and float(seg.get_attribute("width")) == pytest.approx(1000 * ratio, abs=1)
        assert p.locator("#verdict .share-legend li", has_text="data wait").inner_text().endswith(share)
        box = p.locator("#verdict .share-bar").bounding_box()
        assert box is not None and box["y"] + box["height"] <= 800  # on the first screen
        step_ms = kineto_data_bound.metrics["step.time_ms"].value
        assert p.locator("#verdict .fact-step").inner_text() == f"mean step {step_ms:.2f} ms"
        labels = p.evaluate("() => Chart.getChart(document.getElementById('chart-steps')).data.datasets"
                            ".map(d => d.label)")
        assert "data wait" in labels
        assert page.errors == [] and page.requests == [page.url]
        page.screenshot("verdict_data_wait.png")
    finally:
        page.close()


def _cpu_trace(path: Path) -> Path:
    """Five 10 ms steps of a CPU run as torch's profiler writes them (Chrome
    trace, ``ProfilerStep#N`` user annotations, ``cpu_op`` events, no device
    events): 4 ms of operators, then 6 ms in which none runs."""
    import json

    def x(cat: str, name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": 7, "ts": ts, "dur": dur, "args": {}}

    events = []
    for i in range(5):
        t0 = 1_000_000.0 + i * 10_000.0
        events += [x("user_annotation", f"ProfilerStep#{i + 1}", t0, 10_000.0),
                   x("cpu_op", "aten::addmm", t0 + 10, 2_000.0), x("cpu_op", "aten::relu", t0 + 2_020, 1_980.0)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_a_cpu_run_names_its_free_time_as_the_hosts_not_a_device_idling(tmp_path) -> None:
    report = _analyze(_cpu_trace(tmp_path / "cpu.pt.trace.json"))
    assert report.run.device == "cpu"
    for lang, label in (("en", "free (no operator running)"), ("zh", "空闲（无算子运行）")):
        shares = {s["key"]: s for s in _view.step_shares(report, lang)}
        assert shares["free"]["label"] == label
        subtitle = _view.bound(list(shares.values()), lang)
        assert "device" not in subtitle and "设备" not in subtitle, subtitle
    md = render_markdown(report)
    assert "device idle" not in md and "the device" not in _verdict_block(md)
    steps = next(c for c in _view.charts(report, "en") if c["id"] == "steps")["data"]
    assert "free (no operator running)" in [s["label"] for s in steps["series"]]
