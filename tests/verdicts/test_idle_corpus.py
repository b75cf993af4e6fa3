"""Idle-cause and copy verdicts on the real traces of the corpus (what
``../shared/corpus/README.md`` says a careful expert concludes)."""

from __future__ import annotations

import pytest

from advisor import analyze
from advisor.pipeline import analyze_profile, load_profile

SEVERE = {"medium", "high", "critical"}
CAUSE_MS = {"host-bound": "step.idle_host_ops_ms", "sync-stall": "step.idle_sync_ms",
            "dependency-stall": "step.idle_dependency_ms", "h2d-copy-bound": "ops.memcpy_h2d_exposed_ms"}
GPU_TRACES = [
    "kineto-tb-plugin/resnet50_num_workers_0", "kineto-tb-plugin/resnet50_num_workers_4",
    "hta/trace_filter/sampled_rank-0.json.gz", "hta/nccl_parser_config/nccl_data.json.gz",
    "hta/trace_compare/base", "hta/critical_path/cuda_event_sync",
    "hta/critical_path/cuda_event_sync_multi_stream", "hta/critical_path/simple_add",
    "hta/call_stack/backward_thread.json", "hta/execution_trace/benchmark_simple_add_trace.json.gz",
]


@pytest.mark.parametrize("name", GPU_TRACES)
def test_idle_findings_claim_no_more_than_their_cause(corpus, name):
    report = analyze(corpus / name)
    for f in report.findings:
        if f.rule in CAUSE_MS:
            assert f.estimated_gain_ms <= f.time_at_stake_ms <= report.metrics[CAUSE_MS[f.rule]].value + 1e-3


def test_event_sync_trace_links_its_waits_but_judges_no_toy(corpus):
    """One 3.15 ms step of a toy script: its syncs (about 0.1 ms) are each
    linked to the stream they wait on, but a device record this sparse gets
    no idle figures and no sync verdict."""
    profile = load_profile(corpus / "hta/critical_path/cuda_event_sync", jobs=1)
    causes = profile.table("idle_causes")
    assert "cudaEventSynchronize (waits on stream 7)" in set(causes.loc[causes["cause"] == "sync", "name"])
    report = analyze_profile(profile)
    assert "step.idle_sync_ratio" not in report.metrics
    assert not [f for f in report.findings if f.rule == "sync-stall"]


def test_nccl_trace_is_host_bound_on_named_host_ops(corpus):
    """The device idles about 76% of each step, kernels start 2 us after
    launch: the host is the bottleneck, and the finding names its ops."""
    report = analyze(corpus / "hta/nccl_parser_config/nccl_data.json.gz")
    f = report.findings[0]
    assert f.rule == "host-bound" and f.severity == "critical"
    assert 0.65 <= report.metrics["step.idle_host_ops_ratio"].value <= 0.8
    assert "aten::batch_norm" in f.message and "aten::unflatten_dense_tensors" in f.message
    assert {r.rule for r in report.findings} & {"sync-stall", "dependency-stall", "h2d-copy-bound"} == set()


def test_one_pinned_copy_is_not_called_pageable(corpus):
    """trace_compare/base copies once, from pinned memory: no copy finding
    and no claim of pageable memory."""
    profile = load_profile(corpus / "hta/trace_compare/base", jobs=1)
    ops = profile.table("ops")
    copies = set(ops.loc[ops["name"].str.startswith("Memcpy HtoD"), "name"])
    assert copies and not any("Pageable" in c for c in copies), copies
    report = analyze_profile(profile)
    assert "h2d-copy-bound" not in {f.rule for f in report.findings}
    assert not any("pageable" in f.message.lower() for f in report.findings)


def test_resnet_pageable_copies_are_too_small_to_matter(corpus):
    """ResNet50 copies each batch from pageable memory (num_workers=0), about
    1% of the step: no copy finding; the data wait stays the verdict."""
    report = analyze(corpus / "kineto-tb-plugin/resnet50_num_workers_0")
    assert report.metrics["ops.memcpy_h2d_pageable_share"].value == 1.0
    assert report.metrics["ops.memcpy_h2d_exposed_ratio"].value < 0.02
    found = {f.rule for f in report.findings}
    assert "h2d-copy-bound" not in found and "input-bound" in found and "host-bound" not in found


def test_cpu_only_trace_of_a_gpu_job_gets_no_device_idle_verdict(corpus):
    report = analyze(corpus / "hta/distributed_info_unavailable")
    assert not {f.rule for f in report.findings} & set(CAUSE_MS)


def test_unrecorded_stream_waits_make_an_inferred_dependency_stall(corpus):
    """The DLRM ranks' queued kernels wait while the device idles, and the
    trace records no stream wait for them: the finding is marked inferred
    (title, direct evidence, confidence) and says what would confirm it."""
    report = analyze(corpus / "hta/trace_filter")
    found = {f.rule: f for f in report.findings}["dependency-stall"]
    assert report.metrics["step.idle_dependency_recorded_share"].value < 0.5
    assert found.direct_evidence is False and found.title.endswith("(inferred)") and found.confidence == 0.3
    assert "inferred from launch and start times alone" in found.message
    assert "(inferred)" in report.verdict.reason
