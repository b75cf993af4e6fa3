"""Property: no profile string, whatever it holds, adds markup to a report."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.model import Report
from advisor.reports import render_html, render_markdown

NASTY = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "</script><script>alert(1)</script>",
            "<!--",
            "]]></style><svg onload=alert(1)>",
            "'\"><iframe src=//x>",
            "javascript:alert(1)",
            "\u2028\u2029</SCRIPT >",
            "&lt;&amp;{{ 7*7 }}{% raw %}",
        ]
    ),
)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        self.attrs.update(name for name, _ in attrs)


def _shape(html: str) -> tuple[Counter[str], set[str]]:
    p = Tags()
    p.feed(html)
    p.close()
    return p.tags, p.attrs


def _inject(report: Report, s: str) -> Report:
    r = report.model_copy(deep=True)
    f = r.findings[0]
    f.title, f.message, f.rule = s, s, s
    f.scope.ops = [s]
    f.evidence[s] = s
    r.skipped[0].what = s
    r.run.source_path = s
    r.tables["top_ops"][0]["name"] = s
    r.metrics["step.mean_ms"].value = s
    return r


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=NASTY)
def test_html_shape_does_not_depend_on_strings(report: Report, s: str) -> None:
    base_tags, base_attrs = _shape(render_html(_inject(report, "x")))
    tags, attrs = _shape(render_html(_inject(report, s)))
    assert tags == base_tags
    assert attrs == base_attrs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=NASTY)
def test_markdown_keeps_strings_inert(report: Report, s: str) -> None:
    md = render_markdown(_inject(report, s))
    table = md.split("### Findings\n", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("|")]
    # every row still has five cells: no pipe or newline from the string split it
    assert all(len(re.split(r"(?<!\\)\|", r.strip())) == 7 for r in rows)
    # outside code (where markup is literal) no raw HTML but our own <br>, <sub> and folded sections
    prose = re.sub(r"^(`{3,}).*?^\1$", "", md, flags=re.M | re.S)
    prose = re.sub(r"(?<!\\)`[^`]*`", "", prose)
    assert "<" not in re.sub(r"</?(br|sub|details|summary|b)>", "", prose)
