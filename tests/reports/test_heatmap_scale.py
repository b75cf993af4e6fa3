"""The per-rank heatmap has a scale: colour is the deviation from the median
rank in %, on one symmetric scale with a legend, and a cell's value shows
on hover. A uniform cluster looks uniform; a straggler stands out.

Checked on real inputs: the 8-rank example (ranks within 0.1% of each
other) and the msprof-analyze cluster of the corpus (rank 1 has the most
free time), in the chart spec and in headless Chromium.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _browser import Page, browser, require_chromium  # noqa: F401  (fixture)
from advisor.collectors import load_profile
from advisor.reports import _view, write_reports

from advisor.model import Report
from advisor.pipeline import analyze_profile

ROOT = Path(__file__).resolve().parents[2]


def _heatmap(report: Report) -> dict:
    return next(c for c in _view.charts(report, "en") if c["id"] == "heatmap")["data"]


@pytest.fixture(scope="module")
def uniform() -> Report:
    return analyze_profile(load_profile(ROOT / "examples" / "resnet50_8p_allreduce_tail", jobs=1))


@pytest.fixture(scope="module")
def straggler(corpus) -> Report:
    return analyze_profile(load_profile(corpus / "mstt" / "test" / "resource" / "advisor" / "cluster_analysis_output",
                                        jobs=1))


def test_uniform_cluster_is_uniform_on_the_minimum_scale(uniform: Report) -> None:
    heat = _heatmap(uniform)
    assert len(heat["x"]) == 8
    # every cell within a fraction of a percent of its median: near white, on the +-5% scale
    assert max(abs(c[5]) for c in heat["cells"]) < 0.5
    assert max(abs(c[3]) for c in heat["cells"]) < 0.1
    assert heat["legend"]["low"] == "\u22125%" and heat["legend"]["high"] == "+5%"
    assert "median rank" in heat["legend"]["mid"]


def test_straggler_stands_out_in_its_component(straggler: Report) -> None:
    heat = _heatmap(straggler)
    free = heat["y"].index("free (device idle)")
    cells = [c for c in heat["cells"] if c[1] == free]
    worst = max(cells, key=lambda c: c[3])
    assert heat["x"][worst[0]] == "1"
    # the deviation is the rank's own, in % of the median rank's free time
    values = sorted(c[2] for c in cells)
    median = (values[3] + values[4]) / 2
    assert worst[5] == pytest.approx(100.0 * (worst[2] - median) / median, abs=0.05)
    assert worst[3] > 0.3  # visibly coloured on the map's scale
    scale = float(heat["legend"]["high"].strip("+%"))
    assert scale >= max(abs(c[5]) for c in heat["cells"])


def _open(browser, report: Report, out: Path) -> Page:
    require_chromium()
    return Page(browser, write_reports(report, out)["html"])


def _cell_rgb(page: Page, x: int, y: int, nx: int, ny: int) -> list[int]:
    """The painted colour at the centre of heatmap cell (x, y)."""
    return page.page.evaluate(
        """([x, y, nx, ny]) => {
             const c = document.getElementById('chart-heatmap'), ch = Chart.getChart(c), a = ch.chartArea;
             const r = window.devicePixelRatio || 1;
             const px = (a.left + (x + 0.5) * (a.right - a.left) / nx) * r;
             const py = (a.top + (y + 0.5) * (a.bottom - a.top) / ny) * r;
             return Array.from(c.getContext('2d').getImageData(px, py, 1, 1).data.slice(0, 3));
           }""",
        [x, y, nx, ny],
    )


def test_browser_uniform_cluster_paints_near_white_with_a_legend(browser, uniform: Report, tmp_path: Path) -> None:
    page = _open(browser, uniform, tmp_path / "u")
    try:
        canvas = page.page.locator("#chart-heatmap")
        canvas.scroll_into_view_if_needed()
        legend = page.page.locator("#legend-heatmap")
        assert legend.is_visible()
        assert "\u22125%" in legend.inner_text() and "+5%" in legend.inner_text()
        heat = _heatmap(uniform)
        nx, ny = len(heat["x"]), len(heat["y"])
        for y in range(ny):
            for x in range(nx):
                assert min(_cell_rgb(page, x, y, nx, ny)) >= 235  # no dark cell
        # hover: the cell's value in ms and its deviation in %
        box = canvas.bounding_box()
        area = page.page.evaluate("() => Chart.getChart(document.getElementById('chart-heatmap')).chartArea")
        page.page.mouse.move(box["x"] + area["left"] + 0.5 * (area["right"] - area["left"]) / nx,
                             box["y"] + area["top"] + 0.5 * (area["bottom"] - area["top"]) / ny)
        page.page.wait_for_timeout(100)
        body = page.page.evaluate(
            "() => Chart.getChart(document.getElementById('chart-heatmap')).tooltip.body"
            ".map(b => b.lines.join(' ')).join(' ')")
        assert body.startswith(" step time: ") and " ms (" in body and "% vs. median rank)" in body
        assert page.errors == [] and page.requests == [page.url]
        page.screenshot("heatmap_uniform.png")
    finally:
        page.close()


def test_browser_straggler_cell_is_red(browser, straggler: Report, tmp_path: Path) -> None:
    page = _open(browser, straggler, tmp_path / "s")
    try:
        page.page.locator("#chart-heatmap").scroll_into_view_if_needed()
        heat = _heatmap(straggler)
        nx, ny = len(heat["x"]), len(heat["y"])
        r, g, b = _cell_rgb(page, heat["x"].index("1"), heat["y"].index("free (device idle)"), nx, ny)
        assert r > g + 40 and r > b + 40  # red: more free time than the median rank
        assert page.errors == []
        page.screenshot("heatmap_straggler.png")
    finally:
        page.close()
