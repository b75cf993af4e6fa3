"""The HTML report: self-contained, escaped, complete."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

from advisor.model import Metric, Report
from advisor.reports import render_html
from advisor.reports.html import json_for_script

from xss_names import XSS_FLAG_SCRIPT, XSS_IMG, XSS_SCRIPT


class Doc(HTMLParser):
    """Every start tag with its attributes, and the text of each <script>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "script":
            self._in_script, self._buf = a, []

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._buf)))
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self._buf.append(data)


def parse(html: str) -> Doc:
    d = Doc()
    d.feed(html)
    d.close()
    return d


def test_no_external_loads(report: Report) -> None:
    html = render_html(report)
    doc = parse(html)
    for tag, attrs in doc.tags:
        for name in ("src", "href", "action", "data", "poster", "srcset"):
            value = (attrs.get(name) or "").strip().lower()
            assert not re.match(r"^(https?:)?//", value), (tag, name, value)
            assert not value.startswith(("http:", "https:", "ftp:")), (tag, name, value)
    # nothing is loaded by reference at all: scripts and styles are inline
    assert all("src" not in a for t, a in doc.tags if t == "script")
    assert not any(t == "link" and a.get("rel") == "stylesheet" for t, a in doc.tags)
    assert not any(t in ("iframe", "img", "object", "embed") for t, _ in doc.tags)
    assert "@import" not in html
    assert "url(http" not in html
    assert "sourceMappingURL" not in html


def test_csp_blocks_everything_but_its_own_scripts(report: Report) -> None:
    doc = parse(render_html(report))
    csp = next(a["content"] for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    code = [text for attrs, text in doc.scripts if attrs.get("type") != "application/json"]
    assert len(code) == 2  # Chart.js and the report's own script, nothing else
    for text in code:
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp


def test_profile_strings_are_escaped(report: Report) -> None:
    html = render_html(report)
    assert "<script>alert" not in html
    assert "<script>window.__pwned" not in html
    assert "<img" not in html
    assert "onerror=alert(1)>" not in html.replace("&gt;", "")  # only as escaped text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    doc = parse(html)
    # the parser sees no element an attacker could have made
    assert not any(t == "img" or "onerror" in a for t, a in doc.tags)
    assert sum(1 for t, _ in doc.tags if t == "script") == 3
    # and the source path with quotes and ampersand stays text
    assert "llama7b_dp4_&lt;run&gt;&amp;&#34;q&#34;" in html


def test_chart_data_is_json_in_a_data_block(report: Report) -> None:
    doc = parse(render_html(report))
    blocks = [text for attrs, text in doc.scripts if attrs.get("type") == "application/json"]
    assert len(blocks) == 1
    raw = blocks[0]
    assert "<" not in raw and ">" not in raw and "&" not in raw
    data = json.loads(raw)
    ops = data["charts"]["ops"]["labels"]
    assert XSS_SCRIPT in ops and XSS_IMG in ops and XSS_FLAG_SCRIPT in ops
    steps = data["charts"]["steps"]
    assert len(steps["labels"]) == 20
    assert [s["key"] for s in steps["series"]] == ["computing", "overlapped", "exposed_comm", "free"]
    # the four disjoint parts add up to the step time
    row = report.tables["step_breakdown"][0]
    total = sum(s["data"][0] for s in steps["series"])
    assert abs(total - row["duration_ms"]) < 1e-6
    assert len(data["charts"]["ranks"]["labels"]) == 4
    links = data["charts"]["links"]
    assert len(links["labels"]) == 12 and links["labels"][0].startswith(("2 \u2192", "0 \u2192 2", "1 \u2192 2", "3 \u2192 2"))
    assert links["series"][0]["data"] == sorted(links["series"][0]["data"])


def test_json_for_script_escapes_closing_tags() -> None:
    out = str(json_for_script({"a": "</script><!-- & \u2028"}))
    assert "</" not in out and "<!--" not in out and "&" not in out
    assert json.loads(out) == {"a": "</script><!-- & \u2028"}


def test_layout_order_and_contents(report: Report) -> None:
    html = render_html(report)
    top = report.findings[0]
    order = [html.index(x) for x in ('id="verdict"', 'id="findings"', 'id="charts"', 'id="metrics"', 'id="skipped"', 'id="run"')]
    assert order == sorted(order)
    verdict = html[html.index('id="verdict"') : html.index('id="findings"')]
    assert top.title in verdict
    # the subtitle names the headline's cause (input-bound claims the data wait), with the share
    # the bar shows: 36.9 of 185.2 ms
    assert "training waits for the next batch 19.9% of step time" in verdict
    assert verdict.count('class="seg-data_wait"') == 1 and "data wait <strong>19.9%</strong>" in verdict
    assert '<span class="status status-problems" id="verdict-status">Problems</span>' in verdict
    assert report.verdict.reason in verdict
    assert "Could not be judged" in verdict and "&lt;img src=x" in verdict  # escaped
    findings = html[html.index('id="findings"'):html.index('id="charts"')]
    assert "Largest expected gain first" in findings  # a HIGH may stand above a CRITICAL
    assert "Largest expected gain first" not in render_html(report.model_copy(update={"findings": [top]}))
    for f in report.all_findings():
        assert f.rule in html and f.id in html
    assert "38.5 ms" in html and "20.8%" in html
    assert html.count('class="copy"') == 4  # the contributing cause's fix too
    # the contributing cause inside its primary's card, after the primary's own fix
    card = findings[findings.index('id="finding-1"'):findings.index('id="finding-2"')]
    assert card.index("num_workers=8") < card.index('id="finding-1-1"') < card.index("slow-dataset-op")
    assert "Contributing causes" in card and "30.0 ms / 16.2%" in card
    assert "num_workers=8" in html
    for m in report.metrics:
        assert m in html
    assert "memory_record.csv not found" in html
    for label in ("torch_npu", "ascend_pt", "CANN 8.0.RC2", "2025-11-22T21:10:00Z", "0.1.0"):
        assert label in html
    assert html.count("<canvas") == 4


def test_charts_omitted_with_a_note(single_rank_report: Report) -> None:
    html = render_html(single_rank_report)
    assert html.count("<canvas") == 2
    assert "Per-rank chart omitted: the profile has one rank only." in html

    bare = single_rank_report.model_copy(update={"tables": {}})
    html = render_html(bare)
    assert "<canvas" not in html
    assert "Step breakdown chart omitted" in html
    assert "Top operators chart omitted" in html
    assert "Links chart omitted" not in html  # one rank: no links to expect

    multi = render_html(bare.model_copy(update={"run": bare.run.model_copy(update={"ranks": [0, 1]})}))
    assert "Links chart omitted: the profile has no communication matrix." in multi


def test_empty_report(report: Report) -> None:
    html = render_html(Report(run=report.run))
    assert "No problems found" in html
    assert "No metrics were computed." in html
    assert "Nothing was skipped." in html


def test_size_and_determinism(report: Report) -> None:
    a, b = render_html(report), render_html(report)
    assert a == b
    assert a.count("Chart.js v4") == 1  # the library is inlined once
    assert len(a.encode()) < 400_000


def test_unknown_language_falls_back_to_english(report: Report) -> None:
    html = render_html(report, lang="xx")
    assert '<html lang="en">' in html
    assert "Findings" in html


def test_step_trace_scheme_and_plain_step_time(report: Report) -> None:
    """A MindSpore step trace has interval / fp+bp / tail instead of the
    device view; a bare profile has only the step time."""
    trace = [
        {"step": s, "step_ms": 91.2, "iteration_interval_ms": 74.0, "fp_bp_ms": 15.6, "tail_ms": 1.6}
        for s in range(1, 11)
    ]
    metrics = {k: m for k, m in report.metrics.items() if not k.endswith("_ms")}
    for mid, v in (("step.time_ms", 91.2), ("step.iteration_interval_ms", 74.0),
                   ("step.fp_bp_ms", 15.6), ("step.tail_ms", 1.6)):
        metrics[mid] = Metric(id=mid, value=v, unit="ms")
    r = report.model_copy(update={"tables": {"step_breakdown": trace}, "metrics": metrics})
    html = render_html(r)
    data = json.loads([t for a, t in parse(html).scripts if a.get("type") == "application/json"][0])
    assert [s["key"] for s in data["charts"]["steps"]["series"]] == ["interval", "fp_bp", "tail"]
    # the top finding (input-bound) claims the data wait: in a step trace, the iteration interval
    assert "the iteration interval between steps (host / input wait) takes 81.1% of step time" in html
    # without a finding, what bounds the run: the largest part
    clean = r.model_copy(update={"findings": [], "verdict": None})
    assert "host/input wait: the iteration interval between steps takes 81.1% of step time" in render_html(clean)

    bare = report.model_copy(update={"tables": {"step_breakdown": [{"step": 1, "step_ms": 10.0}, {"step": 2, "step_ms": 12.5}]}})
    data = json.loads([t for a, t in parse(render_html(bare)).scripts if a.get("type") == "application/json"][0])
    assert data["charts"]["steps"]["series"] == [{"key": "duration", "label": "step time", "data": [10.0, 12.5]}]
