"""Acceptance of the shareable report, in headless Chromium.

1. A cluster profile (the 8-rank ResNet50 example through the real pipeline,
   and a synthetic cluster with stalls, a slow rank and a slow link, in
   Chinese) loads
   with no console error and no request but the file, shows the top finding
   on the first screen, and draws every chart (checked in the DOM, by
   painted pixels and by screenshot).
2. The injection profile shows markup in names as text and runs no script.
3. The Markdown of the largest profile stays under 60,000 characters, and
   the HTML of a 1024-rank cluster stays small.
(4, zh: tests/i18n; 5, user rules: test_user_rules_and_api.py.)

Screenshots go to $ADVISOR_SCREENSHOTS (default /tmp/advisor_screenshots).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _browser import VIEWPORT, Page, browser  # noqa: F401  (fixture)
from _cluster_profile import SLOW_RANK, cluster_profile

from advisor.collectors import load_profile
from advisor.pipeline import analyze_profile
from advisor.profile import Profile, RunMeta
from advisor.reports import write_reports
from advisor.reports.markdown import MAX_CHARS

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_EXAMPLE = ROOT / "examples" / "resnet50_8p_allreduce_tail"
XSS = "<script>window.__pwned=1</script>"
XSS_IMG = '"><img src=x onerror="window.__pwned=2">'
MAX_HTML_BYTES = 3_000_000


@pytest.fixture(scope="module")
def example_profile() -> Profile:
    return load_profile(CLUSTER_EXAMPLE, jobs=1)


@pytest.fixture(scope="module")
def cluster_1024():
    return analyze_profile(cluster_profile(ranks=1024, steps=24, period=8))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    report = analyze_profile(cluster_profile(ranks=16, steps=40), lang="zh")
    return report, write_reports(report, tmp_path_factory.mktemp("synthetic"), lang="zh")["html"]


def _first_screen(page: Page, title: str) -> None:
    verdict = page.page.locator("#verdict-title")
    assert verdict.inner_text() == title
    for loc in (verdict, page.page.locator("#finding-1 .finding-title")):
        box = loc.bounding_box()
        assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= VIEWPORT["height"]


def _all_drawn(page: Page) -> dict[str, dict]:
    charts = page.charts()
    for c in charts.values():
        assert c["chart"], c
        assert c["w"] > 100 and c["h"] > 60, c
        assert c["painted"] > 0.02 * c["w"] * c["h"], c
    return charts


def test_cluster_example_report(browser, example_profile, tmp_path: Path, lang: str = "en") -> None:
    report = analyze_profile(example_profile, lang=lang)
    assert len(report.run.ranks) == 8 and report.findings
    html = write_reports(report, tmp_path / "out", lang=lang)["html"]
    page = Page(browser, html)
    try:
        _first_screen(page, report.findings[0].title)
        page.screenshot(f"cluster_example_{lang}_first_screen.png")
        charts = _all_drawn(page)
        assert {"steps", "series", "ranks", "heatmap", "ops"} <= set(charts)
        shot = page.screenshot(f"cluster_example_{lang}_full.png", full_page=True)
        assert shot.stat().st_size > 50_000
        page.page.wait_for_timeout(200)
        assert page.errors == []
        assert page.requests == [page.url]
    finally:
        page.close()


def test_verdicts_of_the_guide_cases(browser, tmp_path: Path) -> None:
    """The data-bound guide case: the verdict, then one finding holding both
    causes of the same data wait; the fixed case, whose step trace has no
    operators or device-idle times: inconclusive, with what is missing."""
    report = analyze_profile(load_profile(ROOT / "examples" / "resnet50_data_bound", jobs=1))
    page = Page(browser, write_reports(report, tmp_path / "bound")["html"])
    try:
        assert page.page.locator("#verdict-status").inner_text().lower() == "problems"
        _first_screen(page, "Training waits for input data")
        cause = page.page.locator("#finding-1 #finding-1-1")
        assert cause.locator(".rule code").inner_text() == "slow-dataset-op"
        assert "MapOp_3" in cause.locator(".message").inner_text()
        assert page.page.locator("details.finding").count() == 1
        cause.scroll_into_view_if_needed()
        assert cause.is_visible()
        page.screenshot("data_bound_contributing.png")
        assert page.errors == [] and page.requests == [page.url]
    finally:
        page.close()
    report = analyze_profile(load_profile(ROOT / "examples" / "resnet50_data_fixed", jobs=1))
    page = Page(browser, write_reports(report, tmp_path / "fixed")["html"])
    try:
        assert page.page.locator("#verdict-status").inner_text().lower() == "inconclusive"
        items = page.page.locator("#verdict-missing li")
        assert items.count() == len(report.verdict.missing) == 2 and items.first.is_visible()
        assert page.page.locator("#verdict-title").inner_text().startswith("Inconclusive")
        page.screenshot("data_fixed_inconclusive.png")
        assert page.errors == [] and page.requests == [page.url]
    finally:
        page.close()


def test_synthetic_cluster_charts_and_zoom(browser, synthetic) -> None:
    report, html = synthetic
    page = Page(browser, html)
    try:
        charts = _all_drawn(page)
        assert {"steps", "series", "ranks", "heatmap", "ops", "links"} <= set(charts)
        # the anomaly model's stalls (every 10th step) are marked on the series
        series = page.page.evaluate(
            """() => Chart.getChart(document.getElementById('chart-series')).data.datasets
                 .filter(d => d.pointStyle === 'triangle')
                 .map(d => d.data.map((v, i) => v === null ? null : i).filter(i => i !== null))"""
        )
        flagged = [r["step"] for r in report.tables["step_series"] if r["outlier"]]
        assert flagged == [10, 20, 30, 40]
        labels = [str(r["step"]) for r in report.tables["step_series"]]
        assert [labels[i] for i in series[0]] == [str(s) for s in flagged]
        # heatmap: 16 ranks x components, the slow rank darkest in free time
        heat = page.page.evaluate(
            """() => { const c = Chart.getChart(document.getElementById('chart-heatmap'));
                       return c.data.datasets[0].data.map(d => [d.x, d.y, d.n]); }"""
        )
        assert len({x for x, _, _ in heat}) == 16
        free = [(x, n) for x, y, n in heat if y.startswith("空闲")]
        assert max(free, key=lambda t: t[1])[0] == str(SLOW_RANK)
        # hover: a tooltip on the heatmap cell of the slow rank
        canvas = page.page.locator("#chart-heatmap")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        area = page.page.evaluate("() => Chart.getChart(document.getElementById('chart-heatmap')).chartArea")
        x = box["x"] + area["left"] + (SLOW_RANK + 0.5) * (area["right"] - area["left"]) / 16
        y = box["y"] + area["top"] + 0.5 * (area["bottom"] - area["top"]) / len({r[1] for r in heat})
        page.page.mouse.move(x, y)
        page.page.wait_for_timeout(100)
        assert page.page.evaluate(
            "() => Chart.getChart(document.getElementById('chart-heatmap')).tooltip.getActiveElements().length"
        ) == 1
        # zoom: drag across the series chart, then reset
        canvas = page.page.locator("#chart-series")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        y = box["y"] + box["height"] * 0.4
        page.page.mouse.move(box["x"] + box["width"] * 0.3, y)
        page.page.mouse.down()
        page.page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=6)
        page.page.mouse.up()
        zoom = "() => Chart.getChart(document.getElementById('chart-series')).getZoomLevel()"
        assert page.page.evaluate(zoom) > 1.5
        reset = page.page.locator("button.zoom-reset[data-reset='series']")
        assert reset.is_visible()
        page.screenshot("synthetic_cluster_zh_zoomed.png")
        reset.click()
        assert page.page.evaluate(zoom) == 1 and not reset.is_visible()
        # time at stake on the top card
        assert page.page.locator("#finding-1 .stake-line").inner_text().startswith("每步 ")
        page.page.evaluate("window.scrollTo(0, 0)")
        page.screenshot("synthetic_cluster_zh_first_screen.png")
        assert page.errors == [] and page.requests == [page.url]
    finally:
        page.close()


def _injection_profile() -> Profile:
    p = cluster_profile(ranks=4, steps=12)
    p.meta = RunMeta(**{**p.meta.model_dump(), "source_path": f"/data/{XSS}/run", "notes": [f"note {XSS_IMG}"]})
    ops = p.ops.copy()
    ops.loc[ops["name"] == "MatMulV2", "name"] = XSS
    ops.loc[ops["name"] == "Conv2D", "name"] = XSS_IMG
    p.ops = ops
    p.links = p.links.assign(transport=[XSS if i == 0 else t for i, t in enumerate(p.links["transport"])])
    p.skip(f"rank 9: {XSS}", f"unreadable {XSS_IMG}")
    return p


def test_injection_profile_renders_text_and_runs_nothing(browser, tmp_path: Path) -> None:
    report = analyze_profile(_injection_profile())
    html_path = write_reports(report, tmp_path / "out")["html"]
    text = html_path.read_text(encoding="utf-8")
    assert XSS not in text and XSS_IMG not in text
    page = Page(browser, html_path)
    try:
        page.page.wait_for_timeout(300)
        assert page.dialogs == []
        assert page.page.evaluate("window.__pwned") is None
        assert page.page.locator("img").count() == 0
        assert page.page.locator("script").count() == 3
        body = page.page.inner_text("body")
        assert XSS in body and XSS_IMG in body  # shown as text
        assert page.page.get_by_text(f"/data/{XSS}/run").is_visible()
        # names reach the charts' data as plain strings
        labels = page.page.evaluate("() => Chart.getChart(document.getElementById('chart-ops')).data.labels")
        assert XSS in labels and XSS_IMG in labels
        _all_drawn(page)
        assert page.errors == [] and page.requests == [page.url]
    finally:
        page.close()


def test_1024_rank_cluster_stays_small(browser, cluster_1024, tmp_path: Path) -> None:
    report = cluster_1024
    paths = write_reports(report, tmp_path / "out")
    size = paths["html"].stat().st_size
    assert size < MAX_HTML_BYTES, size
    assert len(paths["markdown"].read_text(encoding="utf-8")) < MAX_CHARS
    heat = report.tables["rank_heatmap"]
    assert len(heat) == 256 and heat[0]["rank"] == "0-3" and sum(r["ranks"] for r in heat) == 1024
    # the slow rank's group keeps its free time (max per group)
    group = next(r for r in heat if r["rank_first"] <= SLOW_RANK <= r["rank_last"])
    assert group["free_ms"] == max(r["free_ms"] for r in heat)
    page = Page(browser, paths["html"])
    try:
        charts = _all_drawn(page)
        assert charts["heatmap"]["points"] == 256 * 4
        page.screenshot("cluster_1024_first_screen.png")
        assert page.errors == [] and page.requests == [page.url]
    finally:
        page.close()


def test_markdown_of_largest_profile_under_limit(cluster_1024, big_report, tmp_path: Path) -> None:
    """The largest profiles the tests have: the 1024-rank cluster, and the
    synthetic report with 200 findings and 5,000 metrics."""
    for lang in ("en", "zh"):
        for name, r in (("cluster", cluster_1024), ("big", big_report)):
            md = write_reports(r, tmp_path / f"{lang}-{name}", lang=lang)["markdown"]
            text = md.read_text(encoding="utf-8")
            assert len(text) < MAX_CHARS
            assert r.findings[0].title in text
