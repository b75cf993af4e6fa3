"""``advisor compare`` on the shipped examples and the corpus's trace pair:
what a user reads first (the terminal lines, compare.md, compare.html)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from advisor.regression.compare import compare, load_report, operator_key, side_from_reports
from advisor.reports.comparison import render_compare_html, render_compare_markdown

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BOUND, FIXED = EXAMPLES / "resnet50_data_bound", EXAMPLES / "resnet50_data_fixed"
EIGHT = EXAMPLES / "resnet50_8p_overlapped"


@pytest.fixture(scope="module")
def sides():
    return {p.name: side_from_reports([load_report(p, jobs=1)], p.name) for p in (BOUND, FIXED, EIGHT)}


@pytest.fixture(scope="module")
def fixed_vs_bound(sides):
    return compare(sides[BOUND.name], sides[FIXED.name])


def test_cli_leads_with_the_speed_up_and_the_largest_changes_both_ways(run_cli, tmp_path: Path) -> None:
    done = run_cli("compare", str(BOUND), str(FIXED), "-o", str(tmp_path / "cmp"))
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert re.match(r"step time 91\.\d+ -> 18\.\d+ ms \(-80\.\d%, 5\.\d+x faster, beyond noise\)", lines[0]), lines[0]
    changes = [ln for ln in lines if ln.startswith(("grew:", "shrank:"))]
    assert changes[0].startswith("shrank: step component iteration interval"), changes  # -74 ms before +0.02 ms
    assert any(ln.startswith("grew: step component tail") for ln in changes)
    assert any(ln.startswith("baseline: mindspore on ascend, 1 rank, 60 steps") for ln in lines)


def test_changes_are_ordered_by_absolute_ms(fixed_vs_bound) -> None:
    sizes = [abs(g.change_ms) for g in fixed_vs_bound.changes]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 70
    assert fixed_vs_bound.changes[0].change_ms < 0


def test_markdown_has_both_sections_the_step_line_and_clean_code_spans(fixed_vs_bound) -> None:
    md = render_compare_markdown(fixed_vs_bound)
    assert "**step time 91.19 -> 18.03 ms (-80.2%, 5.06x faster, beyond noise)**" in md
    shrank, grew = md.index("### Where the time shrank"), md.index("### Where the time grew")
    assert shrank < grew  # the -74 ms section first
    assert "| world size | 1 | 1 |" in md and "| device | ascend | ascend |" in md
    for span in re.findall(r"`[^`]*`", md):
        assert "\\_" not in span, span
    assert "`step.iteration_interval_ms`" in md


def test_markdown_notes_are_separate_quotes(sides) -> None:
    md = render_compare_markdown(compare(sides[BOUND.name], sides[EIGHT.name]))
    lines = md.splitlines()
    quotes = [i for i, ln in enumerate(lines) if ln.startswith("> ")]
    assert len(quotes) >= 2
    assert all(lines[i + 1] == "" for i in quotes[:-1])


def test_runs_of_different_size_are_named_as_such(sides) -> None:
    c = compare(sides[BOUND.name], sides[EIGHT.name])
    assert (c.baseline.world_size, c.current.world_size) == (1, 8)
    assert any("baseline ascend, 1 rank, current ascend, 8 ranks" in n for n in c.notes)
    assert "| world size | 1 | 8 |" in render_compare_markdown(c)


def test_html_bars_are_shares_of_the_step_and_growth_is_red(fixed_vs_bound) -> None:
    html = render_compare_html(fixed_vs_bound)
    bars = re.findall(r'<meter class="(worse|better)"[^>]*value="([\d.]+)"', html)
    grew = [float(v) for k, v in bars if k == "worse"]
    shrank = [float(v) for k, v in bars if k == "better"]
    assert grew == [0.0]  # +0.0195 ms of a 91 ms step: an empty bar, not a full one
    assert 0.75 < shrank[0] < 0.85  # -73.8 ms of 91.2 ms
    assert html.index("Where the time shrank") < html.index("Where the time grew")
    assert 'optimum="0"' in html.split('class="worse"')[1].split(">")[0]


def test_template_variants_of_a_kernel_are_one_operator(corpus) -> None:
    trace = corpus / "hta" / "trace_compare" / "base" / "base.json.gz"
    with gzip.open(trace) as fh:
        names = {e["name"] for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel"}
    keys = {operator_key(n) for n in names}
    assert len(names) == 3 and len(keys) == 2  # add<int> and add<float> are one elementwise kernel
    assert "void at::native::vectorized_elementwise_kernel<>(int, at::native::CUDAFunctor_add<>, " \
           "at::detail::Array<>)" in keys
    assert operator_key("operator<<(std::ostream&)") == "operator<<(std::ostream&)"  # unbalanced: kept


def test_too_few_steps_says_so(corpus, run_cli, tmp_path: Path) -> None:
    pair = corpus / "hta" / "trace_compare"
    done = run_cli("compare", str(pair / "base"), str(pair / "test"), "-o", str(tmp_path / "cmp"))
    assert done.returncode == 0
    assert "note: too few steps to test against noise: baseline 2, current 2" in " ".join(done.stdout.split())
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert all(m["beyond_noise"] is None for m in data["metrics"])
