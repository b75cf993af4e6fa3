"""PyTorch memory timelines (``export_memory_timeline`` raw events), read and
judged: the corpus timeline (HTA's ResNet-50 run) against what a careful
expert reads in it, and timelines of real CPU training runs written by
torch.profiler here, one of them with a leak.

The corpus figures (corpus README): 5 iterations, each peaking at 2.87 GiB
with activations 84% of it, falling back to the same trough (no leak);
3,345 allocations of 60.9 GiB in all, about 12 GiB per iteration.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.collectors import load_profile
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.memory import collector as memory
from advisor.errors import InputError
from advisor.pipeline import analyze
from _strict import strict

TIMELINE = Path("hta") / "memory_analysis" / "memory_timeline.raw.gz"
SCRIPT = Path(__file__).with_name("_train_timeline.py")
STEPS = 6


def _rules(report) -> set[str]:
    return {f.rule for f in report.all_findings()}


def test_the_corpus_timeline_peaks_on_activations_and_does_not_leak(corpus):
    path = corpus / TIMELINE
    assert memory.discover(path) == [path] and kineto.discover(path) == []
    profile = load_profile(path)
    assert profile.meta.source_format == "memory_timeline" and profile.steps is None
    mem = profile.memory
    assert len(mem) == 16845 and (mem["action"] == "create").sum() == 3345

    report = analyze(path, jobs=1)
    m = {k: v.value for k, v in report.metrics.items()}
    assert m["memory.peak_gib"] == pytest.approx(2.87, abs=0.01)
    composition = m["memory.peak_composition"]
    assert next(iter(composition)) == "activation" and composition["activation"] == pytest.approx(0.84, abs=0.01)
    gib = report.metrics["memory.peak_composition"].evidence["gib"]
    for kept in ("parameter", "optimizer_state"):  # about 98 MiB each
        assert gib[kept] * 1024 == pytest.approx(98, abs=3)
    assert m["memory.iterations"] == 5
    assert m["memory.iteration_peaks_gib"] == pytest.approx([2.87] * 5, abs=0.01)
    troughs = m["memory.iteration_troughs_gib"]
    assert troughs[:4] == pytest.approx([0.21] * 4, abs=0.01)  # the last ends with the recording
    assert m["memory.trough_growth_ratio"] == pytest.approx(0.0, abs=0.005)
    assert m["memory.allocated_gib_per_iteration"] == pytest.approx(12.2, abs=0.2)
    churn = report.metrics["memory.allocated_gib_per_iteration"].evidence
    assert churn["timeline_total_gib"] == pytest.approx(60.9, abs=0.1)
    assert churn["peak_ratio"] == pytest.approx(4.2, abs=0.1)
    assert report.metrics["memory.allocations_per_iteration"].evidence["timeline_total"] == 3345

    assert "memory-growth" not in _rules(report)
    # no timing verdict from memory: inconclusive, saying why
    assert report.verdict.status == "inconclusive"
    assert "memory timeline" in report.verdict.reason and "2.87 GiB" in report.verdict.reason
    assert report.verdict.checks == []


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Raw timelines (and the Kineto trace of the steady run) of a small CNN
    trained on CPU under torch.profiler: steady, and keeping each step's output
    with its graph (a leak)."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("timelines")
    out = {"steady": folder / "steady.raw.json.gz", "leak": folder / "leak.raw.json.gz",
           "trace": folder / "steady.pt.trace.json"}
    for name, extra in (("steady", ["--trace", str(out["trace"])]), ("leak", ["--leak"])):
        subprocess.run([sys.executable, str(SCRIPT), str(out[name]), "--steps", str(STEPS), *extra],
                       check=True, capture_output=True, timeout=300)
    return out


def test_a_steady_cpu_run_finds_its_steps_and_no_growth(runs):
    with strict():
        report = analyze(runs["steady"], jobs=1)
    m = {k: v.value for k, v in report.metrics.items()}
    # each profiled step is one iteration (the last may end before its last frees)
    assert m["memory.iterations"] == STEPS
    peaks = m["memory.iteration_peaks_gib"]
    assert max(peaks) - min(peaks) <= 0.01 * max(peaks)
    assert m["memory.trough_growth_ratio"] < 0.01
    assert m["memory.allocated_gib_per_iteration"] > 0 and m["memory.allocations_per_iteration"] > 0
    # each share is rounded to 6 places, so their sum is 1 within a few millionths
    assert sum(m["memory.peak_composition"].values()) == pytest.approx(1.0, abs=1e-5)
    assert "memory-growth" not in _rules(report)
    assert report.verdict.status == "inconclusive" and "memory timeline" in report.verdict.reason


def test_a_leaking_cpu_run_fires_memory_growth(runs):
    with strict():
        report = analyze(runs["leak"], jobs=1)
    m = {k: v.value for k, v in report.metrics.items()}
    assert m["memory.iterations"] == STEPS
    troughs = m["memory.iteration_troughs_gib"]
    assert all(b > a for a, b in zip(troughs, troughs[1:]))
    assert m["memory.trough_rise_share"] == 1.0 and m["memory.trough_growth_ratio"] > 0.2
    finding = next(f for f in report.findings if f.rule == "memory-growth")
    assert finding.severity == "high"
    assert report.verdict.status == "problems" and "no timing check" in report.verdict.reason


def test_traces_and_timelines_are_told_apart(runs):
    trace, timeline = runs["trace"], runs["steady"]
    assert memory.discover(trace) == [] and kineto.discover(trace) == [trace]
    assert kineto.discover(timeline) == [] and memory.discover(timeline) == [timeline]
    # a folder holding both is read as the trace; the timeline is noted, not read
    with strict():
        profile = load_profile(trace.parent, jobs=1)
    assert profile.meta.source_format == "kineto"
    # its memory table is the trace's own [memory] events (no categories), not the timeline's
    assert profile.memory is not None and set(profile.memory["category"]) == {"unknown"}
    assert any("memory timeline" in s.reason for s in profile.skipped)


def test_bad_timelines_are_one_line_errors_naming_the_file(runs, tmp_path):
    cut = tmp_path / "cut.raw.json.gz"
    cut.write_bytes(runs["steady"].read_bytes()[:2000])
    plot = tmp_path / "plot.json"  # the timeline's plot export: [times, sizes], not events
    plot.write_text("[[1, 2, 3], [[0, 0, 0, 0, 0, 0, 0, 0, 0]]]")
    wrong = tmp_path / "wrong.json"
    wrong.write_text("[[5, 2, 100, 4], [6, 9, 100, 4]]")  # action 9 does not exist
    with gzip.open(runs["steady"], "rb") as fh:
        assert memory.timeline.head_is_timeline(fh.read(4096).decode())
    assert memory.discover(plot) == []
    for path, words in ((cut, "gzip"), (plot, "memory timeline"), (wrong, "action 9")):
        with pytest.raises(InputError) as err:
            memory.read(path)
        text = str(err.value)
        assert str(path) in text and words in text and "\n" not in text
