"""Gains hold and evidence is complete, on real inputs and random metrics.

For every report: no finding's estimated gain exceeds its time at stake;
the primary findings' gains together never exceed the step time (causes of
the same time are one finding, and the engine clamps the total); a
contributing cause claims the same pool as its primary, whose gain is at
most the pool's time; and every finding's evidence holds every metric its
rule read: the rule evaluated on the evidence alone gives the same finding
as on all the metrics.

Inputs: the bundled examples, every corpus input advisor reads, generated
runs of every scenario kind in every layout (bench/scenarios), and random
metric sets made from the rules' own firing examples, rescaled (hypothesis).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.engine.evaluation import compile_rule, evaluate_rule, evaluate_run, metric_refs
from advisor.engine.loader import load_rules
from advisor.model import Finding, Metric, Report
from advisor.pipeline import analyze
from bench.scenarios import FAULTS, FORMATS, Spec, generate

EXAMPLES_PER_TEST = int(os.environ.get("ADVISOR_HYPOTHESIS_EXAMPLES", "40"))
#: float slack of the sums (gains are rounded to 1 us)
SLACK_MS = 1e-6
EXAMPLE_DIRS = ("resnet50_8p_allreduce_tail", "resnet50_8p_overlapped", "resnet50_data_bound",
                "resnet50_data_fixed", "vgg16_fp16", "vgg16_fp32")
CORPUS_INPUTS = (
    "kineto-tb-plugin/resnet50_num_workers_0", "kineto-tb-plugin/resnet50_num_workers_4",
    "hta/trace_filter", "hta/nccl_parser_config", "hta/trace_compare/base", "hta/trace_compare/test",
    "hta/critical_path/cuda_event_sync", "hta/critical_path/cuda_event_sync_multi_stream",
    "hta/critical_path/simple_add", "hta/call_stack/backward_thread.json",
    "hta/execution_trace/benchmark_simple_add_trace.json.gz", "hta/distributed_info_unavailable",
    "mstt/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv",
    "mstt/test/ut/advisor/compute_advice/data/kernel_details.csv",
    "mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json",
    "mstt/test/resource/advisor/cluster_analysis_output", "mindspore-cpu",
    *(f"mindinsight-minddata/minddata_pipeline_raw_{i}.csv" for i in range(4)),
    "hta/memory_analysis/memory_timeline.raw.gz",
)

_COMPILED: dict[str, object] = {}


def _compiled() -> dict:
    if not _COMPILED:
        _COMPILED.update({r.name: compile_rule(r) for r in load_rules([])})
    return _COMPILED


def _same(a: Finding, b: Finding) -> None:
    """``a`` (evaluated on its evidence alone) is the finding ``b``
    (evaluated on every metric), before merging and clamping."""
    keys = ("rule", "severity", "message", "estimated_gain_ms", "time_at_stake_ms", "confidence",
            "scope", "fix", "direct_evidence", "evidence")
    assert a.model_dump(include=set(keys)) == b.model_dump(include=set(keys)), a.rule


def check_report(findings: list[Finding], values: dict, framework: str, device: str) -> None:
    """The invariants of the module doc over one run's merged findings and
    its metric values."""
    compiled = _compiled()
    step = values.get("step.time_ms")
    gains = [f.estimated_gain_ms for f in findings if f.estimated_gain_ms is not None]
    if isinstance(step, (int, float)) and step > 0:
        assert sum(gains) <= step + SLACK_MS, [(f.rule, f.estimated_gain_ms) for f in findings]
    for primary in findings:
        members = [primary, *primary.contributing]
        assert all(c.claims == primary.claims for c in primary.contributing)
        assert all(not c.contributing for c in primary.contributing)
        stakes = [f.time_at_stake_ms for f in members if f.time_at_stake_ms is not None]
        if primary.estimated_gain_ms is not None and stakes:
            assert primary.estimated_gain_ms <= max(stakes) + SLACK_MS
        for f in members:
            if f.estimated_gain_ms is not None:
                assert f.estimated_gain_ms >= 0
                if f.time_at_stake_ms is not None:
                    assert f.estimated_gain_ms <= f.time_at_stake_ms + SLACK_MS, f.rule
            rule = compiled[f.rule]
            read = {m for m in metric_refs(rule.rule) if values.get(m) is not None}
            assert read <= set(f.evidence), (f.rule, read - set(f.evidence))
            full, _ = evaluate_rule(rule, values, framework=framework, device=device)
            alone, _ = evaluate_rule(rule, {k: values[k] for k in f.evidence}, framework=framework, device=device)
            assert full is not None and alone is not None, f.rule
            _same(alone, full)


def check(report: Report) -> None:
    values = {mid: m.value for mid, m in report.metrics.items()}
    check_report(report.findings, values, report.run.framework, report.run.device)


# ------------------------------------------------------------ real inputs


@pytest.mark.parametrize("name", EXAMPLE_DIRS)
def test_examples(examples: Path, name: str) -> None:
    check(analyze(examples / name, jobs=1))


@pytest.mark.parametrize("name", CORPUS_INPUTS)
def test_corpus(corpus: Path, name: str) -> None:
    check(analyze(corpus / name, jobs=1))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fault", FAULTS)
def test_generated_runs(tmp_path: Path, fault: str, fmt: str) -> None:
    data, _ = generate(Spec(ranks=4, steps=8, fault=fault, seed=11, kernels_per_step=6), tmp_path / "run", fmt)
    check(analyze(data, jobs=1))


# ------------------------------------------------------------ random metrics


def _fire_examples() -> list[dict]:
    return [dict(e.metrics) for c in _compiled().values() for e in c.rule.examples if e.expect == "fire"]


@st.composite
def metric_sets(draw) -> dict:
    """Several rules' firing examples merged into one run, every time in ms
    rescaled at random, and a step time that may be shorter than the gains
    the rules would claim together."""
    examples = _fire_examples()
    picked = draw(st.lists(st.sampled_from(range(len(examples))), min_size=1, max_size=6, unique=True))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = random.Random(seed)
    values: dict = {}
    for i in picked:
        values.update(examples[i])
    for key, v in list(values.items()):
        if key.endswith("_ms") and isinstance(v, (int, float)) and not isinstance(v, bool):
            values[key] = v * rng.uniform(0.2, 5.0)
    values["step.time_ms"] = draw(st.floats(1.0, 400.0))
    return values


@settings(max_examples=EXAMPLES_PER_TEST, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(metric_sets(), st.sampled_from(["pytorch", "mindspore", "torch_npu"]), st.sampled_from(["gpu", "ascend"]))
def test_random_metric_sets(values: dict, framework: str, device: str) -> None:
    metrics = {k: Metric(id=k, value=v, unit="-") for k, v in values.items()}
    run = evaluate_run(list(_compiled().values()), metrics, framework=framework, device=device)
    check_report(run.findings, values, framework, device)


def test_the_clamp_is_exercised() -> None:
    """The random sets reach the case the clamp is for: rules that together
    claim more than the step (else the total check above proves little)."""
    values = {}
    for example in _fire_examples():
        values.update(example)
    values["step.time_ms"] = 20.0
    metrics = {k: Metric(id=k, value=v, unit="-") for k, v in values.items()}
    run = evaluate_run(list(_compiled().values()), metrics, framework="pytorch", device="gpu")
    assert len(run.findings) >= 3
    assert sum(f.estimated_gain_ms or 0.0 for f in run.findings) == pytest.approx(20.0, abs=0.01)
    lowered = [f for f in run.findings if any("lowered" in c for c in f.caveats)]
    assert lowered
    check_report(run.findings, values, "pytorch", "gpu")
