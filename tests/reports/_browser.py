"""Headless Chromium (Debian's /usr/bin/chromium) driven by Playwright, for
the browser tests: a module-level skip when either is missing, and a Page
that records console errors, requests and dialogs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)

CHROMIUM = os.environ.get("ADVISOR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1280, "height": 800}
SHOTS = Path(os.environ.get("ADVISOR_SCREENSHOTS", "/tmp/advisor_screenshots"))

# pixels of a canvas that are painted, per chart (the DOM check of "drawn")
PAINTED_JS = """() => Array.from(document.querySelectorAll('canvas[data-chart]')).map(c => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
    const chart = window.Chart && window.Chart.getChart(c);
    return {id: c.dataset.chart, w: c.width, h: c.height, painted: n, chart: !!chart,
            points: chart ? chart.data.datasets.reduce((s, ds) => s + ds.data.filter(v => v !== null).length, 0) : 0};
})"""


def require_chromium() -> None:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set ADVISOR_CHROMIUM)",
                    allow_module_level=True)


def launch(p):
    require_chromium()
    try:
        return p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    except sync_api.Error as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"Chromium at {CHROMIUM} does not start: {str(e).splitlines()[0]}")


class Page:
    """A page opened on a report file, recording what a user would not see."""

    def __init__(self, browser, path: Path, viewport: dict | None = None) -> None:
        self.url = Path(path).resolve().as_uri()
        self.context = browser.new_context(viewport=viewport or VIEWPORT, service_workers="block")
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", self._dialog)
        self.page.goto(self.url, wait_until="load")
        self.page.wait_for_selector("html[data-advisor-ready='1']", timeout=15_000)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def charts(self) -> dict[str, dict]:
        return {c["id"]: c for c in self.page.evaluate(PAINTED_JS)}

    def screenshot(self, name: str, full_page: bool = False) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / name
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test module (import this fixture by name)."""
    with sync_api.sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()
