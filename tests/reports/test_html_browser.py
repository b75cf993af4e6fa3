"""The HTML report in a real browser: Debian's Chromium driven by Playwright.

Opens report.html from disk as a user would and checks that it works
offline and safely: no console error, no request but the file itself, the
verdict on the first screen, charts drawn, the metrics table sorts and
filters, and the op names that carry markup never run.

Skipped (with the reason) when the playwright package or a Chromium binary
is missing; the binary is /usr/bin/chromium (``apt-get install chromium``)
or $ADVISOR_CHROMIUM. Playwright's own browser download is never used.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _browser import VIEWPORT, Page, browser, require_chromium  # noqa: E402,F401  (fixture)

from advisor.model import Report
from advisor.reports import write_reports

require_chromium()


@pytest.fixture
def opened(browser, report: Report, tmp_path: Path):
    paths = write_reports(report, tmp_path / "out")
    page = Page(browser, paths["html"])
    yield page
    page.close()


def test_offline_and_quiet(opened: Page) -> None:
    opened.page.wait_for_timeout(300)
    assert opened.errors == []
    assert opened.requests == [opened.url]


def test_injected_markup_never_runs(opened: Page) -> None:
    page = opened.page
    page.wait_for_timeout(300)
    assert opened.dialogs == []
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 3
    # the names are shown as text
    assert page.get_by_text("<script>alert(1)</script>").first.is_visible()


def test_top_finding_on_first_screen(opened: Page, report: Report) -> None:
    page = opened.page
    title = page.locator("#verdict-title")
    assert title.inner_text() == report.findings[0].title
    box = title.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"]
    card = page.locator("#finding-1 .finding-title")
    assert card.is_visible()
    box = card.bounding_box()
    assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"]
    assert page.locator("#finding-1 > summary .badge").inner_text().lower() == "high"


def test_verdict_first_and_contributing_cause_in_its_primary(opened: Page, report: Report) -> None:
    """The verdict (status, reason, what could not be judged) opens the page;
    a contributing cause is shown inside its primary finding's card."""
    page = opened.page
    status = page.locator("#verdict-status")
    assert status.inner_text().lower() == "problems" and status.is_visible()
    reason = page.locator("#verdict-reason")
    assert reason.inner_text() == report.verdict.reason
    missing = page.locator("#verdict-missing li")
    assert missing.count() == 1 and missing.first.inner_text() == report.verdict.missing[0]  # markup as text
    for loc in (status, reason):
        box = loc.bounding_box()
        assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"]
    assert page.evaluate(
        "() => document.getElementById('verdict').compareDocumentPosition("
        "document.getElementById('findings')) & Node.DOCUMENT_POSITION_FOLLOWING") > 0
    cause = page.locator("#finding-1 #finding-1-1")
    cause.scroll_into_view_if_needed()
    assert cause.is_visible()
    c = report.findings[0].contributing[0]
    assert cause.locator(".cause-title").inner_text() == c.title
    assert cause.locator(".rule code").inner_text() == c.rule
    assert cause.locator(".message").inner_text() == c.message
    assert page.locator("details.finding").count() == len(report.findings)  # one block, not a card of its own
    page.locator("#finding-1 > summary").click()  # closing the primary hides its causes with it
    assert not cause.is_visible()


def test_charts_are_drawn_and_interactive(opened: Page) -> None:
    page = opened.page
    canvases = page.locator("canvas[data-chart]")
    assert canvases.count() == 4
    painted = page.evaluate(
        """() => Array.from(document.querySelectorAll('canvas[data-chart]')).map(c => {
            const ctx = c.getContext('2d');
            const d = ctx.getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
            return {id: c.dataset.chart, w: c.width, h: c.height, painted: n,
                    chart: !!(window.Chart && window.Chart.getChart(c))};
        })"""
    )
    for c in painted:
        assert c["chart"], c
        assert c["w"] > 100 and c["h"] > 100, c
        assert c["painted"] > 0.02 * c["w"] * c["h"], c
    # hovering the step chart activates a tooltip
    steps = page.locator("#chart-steps")
    steps.scroll_into_view_if_needed()
    box = steps.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.wait_for_timeout(100)
    active = page.evaluate("() => Chart.getChart(document.getElementById('chart-steps')).tooltip.getActiveElements().length")
    assert active >= 1


def _values(page) -> list[str]:
    return page.eval_on_selector_all(
        "#metrics-table tbody tr:not(.hidden) td:nth-child(2)", "tds => tds.map(t => t.dataset.sort)"
    )


def test_metrics_table_sorts_and_filters(opened: Page, report: Report) -> None:
    page = opened.page
    button = page.locator("#metrics-table thead button[data-col='1']")
    button.click()
    keys = _values(page)
    nums = [float(k) for k in keys if k]
    assert nums == sorted(nums) and len(nums) > 5
    assert all(k == "" for k in keys[len(nums) :])  # text values sort last
    assert page.locator("#metrics-table thead th").nth(1).get_attribute("aria-sort") == "ascending"
    button.click()
    nums = [float(k) for k in _values(page) if k]
    assert nums == sorted(nums, reverse=True)

    id_button = page.locator("#metrics-table thead button[data-col='0']")
    for expected in (sorted(report.metrics), sorted(report.metrics, reverse=True)):
        id_button.click()
        ids = page.eval_on_selector_all("#metrics-table tbody tr td:first-child", "tds => tds.map(t => t.textContent)")
        assert ids == expected

    page.fill("#metric-filter", "comm.")
    visible = page.locator("#metrics-table tbody tr:not(.hidden)")
    assert visible.count() == sum(1 for m in report.metrics if "comm." in m)
    assert "Showing 3 of" in page.locator("#metric-count").inner_text()
    page.fill("#metric-filter", "")
    page.select_option("#metric-scope", "op")
    assert visible.count() == sum(1 for m in report.metrics.values() if m.scope == "op")


def test_copy_button(opened: Page) -> None:
    page = opened.page
    buttons = page.locator("#finding-1 button.copy")
    assert buttons.count() == 2  # the primary's fix and its contributing cause's
    for i in range(2):
        button = buttons.nth(i)
        button.scroll_into_view_if_needed()
        button.click()
        page.wait_for_function("b => b.textContent !== 'Copy'", arg=button.element_handle(), timeout=2000)
        assert button.inner_text() in ("Copied", "Select and copy")
    assert opened.errors == []


def test_big_report_opens(browser, big_report: Report, tmp_path: Path) -> None:
    paths = write_reports(big_report, tmp_path / "big")
    page = Page(browser, paths["html"])
    try:
        assert page.page.locator("#metrics-table tbody tr").count() == len(big_report.metrics)
        page.page.locator("#metrics-table thead button[data-col='1']").click()
        nums = [float(k) for k in _values(page.page) if k]
        assert nums == sorted(nums)
        assert page.errors == []
        assert page.requests == [page.url]
    finally:
        page.close()


def test_operators_table_sorts_and_filters(browser, examples: Path, tmp_path: Path) -> None:
    """The operators of a real profile (the VGG16 fp32 tuning case) in a
    sortable, filterable table."""
    from advisor.pipeline import analyze

    report = analyze(examples / "vgg16_fp32")
    ops = report.tables["ops"]
    page = Page(browser, write_reports(report, tmp_path / "out")["html"])
    try:
        p = page.page
        rows = p.locator("#ops-table tbody tr")
        assert rows.count() == len(ops)
        total_col = p.locator("#ops-table thead button", has_text="total ms")
        total_col.click()
        total_col.click()  # descending
        col = int(total_col.get_attribute("data-col"))
        keys = p.eval_on_selector_all(
            f"#ops-table tbody tr td:nth-child({col + 1})", "tds => tds.map(t => parseFloat(t.dataset.sort))")
        assert keys == sorted(keys, reverse=True)
        assert keys[0] == max(o["total_ms"] for o in ops)
        p.fill("#op-filter", "matmul")
        shown = p.locator("#ops-table tbody tr:not(.hidden)").count()
        assert shown == sum(1 for o in ops if "matmul" in " ".join(str(v) for v in o.values()).lower()) > 0
        assert page.errors == [] and page.requests == [page.url]
    finally:
        page.close()
