"""Verdicts on what the host was doing while the device idled, and on
host-to-device copies, for GPU traces written in the PyTorch profiler's
format (``bench.scenarios.kineto_trace``): each loop gets the finding
of its cause and not the others', sized by that cause's time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor import analyze
from bench.scenarios import kineto_trace as kt

IDLE_RULES = {"host-bound", "sync-stall", "dependency-stall", "h2d-copy-bound", "launch-bound"}
#: The metric holding the time each rule's finding stands on.
CAUSE_MS = {"host-bound": "step.idle_host_ops_ms", "sync-stall": "step.idle_sync_ms",
            "dependency-stall": "step.idle_dependency_ms", "h2d-copy-bound": "ops.memcpy_h2d_exposed_ms"}


def verdict(tr: kt.KinetoTrace, tmp_path: Path):
    report = analyze(tr.write(tmp_path / "node0_3727853.1712867402305.pt.trace.json"))
    found = {f.rule: f for f in report.findings}
    for rule, f in found.items():
        if rule in CAUSE_MS:  # gain <= time at stake <= the time of the cause
            cause = report.metrics[CAUSE_MS[rule]].value
            assert f.estimated_gain_ms <= f.time_at_stake_ms <= cause + 1e-3, rule
    return report, found


def test_item_every_step_is_a_sync_stall_not_host_bound(tmp_path):
    report, found = verdict(kt.sync_every_step(), tmp_path)
    assert set(found) & IDLE_RULES == {"sync-stall"}
    f = found["sync-stall"]
    assert f.severity == "high" and "aten::item" in f.message
    assert ".item()" in f.fix.text and 'set_sync_debug_mode("warn")' in f.fix.text
    assert f.time_at_stake_ms == pytest.approx(report.metrics["step.idle_sync_ms"].value, abs=1e-3)


def test_sync_stall_names_the_python_frame_with_stacks(tmp_path):
    _, found = verdict(kt.sync_every_step(with_stack=True), tmp_path)
    assert "aten::item in train.py(35): log_loss" in found["sync-stall"].message


def test_cuda_synchronize_every_step_is_a_sync_stall(tmp_path):
    _, found = verdict(kt.sync_every_step(sync="device"), tmp_path)
    assert set(found) & IDLE_RULES == {"sync-stall"}
    assert "cudaDeviceSynchronize" in found["sync-stall"].message


def test_deep_queue_while_the_host_sits_in_a_sync_copy_is_not_host_bound(tmp_path):
    """Kernels start a median 100+ ms after launch and the host sits in a
    synchronous pageable copy: the host is far ahead, so neither host-bound
    nor a sync stall; the device idles with work queued, which the trace
    cannot explain (no stream wait recorded): a low-confidence dependency."""
    report, found = verdict(kt.deep_queue_sync_copy(), tmp_path)
    assert report.metrics["step.launch_queue_ms"].value >= 100
    assert "host-bound" not in found and "sync-stall" not in found and "launch-bound" not in found
    f = found["dependency-stall"]
    assert f.confidence <= 0.3 and "inferred" in f.message and "no recorded wait" in f.message
    # each waiting stream with its time, without a second pair of parentheses after the label's own
    wait = report.metrics["step.idle_dependency_waits"].value[0]
    assert f"{wait['ms']:.2f} ms on {wait['name']}" in f.message and ") (" not in f.message


def test_host_busy_with_an_empty_queue_is_host_bound(tmp_path):
    _, found = verdict(kt.host_busy(), tmp_path)
    assert set(found) & IDLE_RULES == {"host-bound"}
    f = found["host-bound"]
    assert all(op in f.message for op in kt.CPU_OPS)
    assert "3 us after their launch (per step the median" in f.message


def test_pinned_copies_overlapped_by_compute_get_no_copy_finding(tmp_path):
    report, found = verdict(kt.copies(pinned=True, overlapped=True), tmp_path)
    assert report.metrics["ops.memcpy_h2d_exposed_ms"].value < 0.01
    assert not set(found) & IDLE_RULES


def test_exposed_pageable_copies_are_h2d_copy_bound(tmp_path):
    _, found = verdict(kt.copies(pinned=False, overlapped=False), tmp_path)
    assert set(found) & IDLE_RULES == {"h2d-copy-bound"}
    f = found["h2d-copy-bound"]
    assert f.time_at_stake_ms == pytest.approx(2.0, abs=0.01)  # the 2 ms copy the step waits on
    assert "pageable" in f.message and "pin_memory=True" in f.fix.text


def test_exposed_pinned_copies_get_the_overlap_fix_not_pinning(tmp_path):
    _, found = verdict(kt.copies(pinned=True, overlapped=False), tmp_path)
    f = found["h2d-copy-bound"]
    assert "comes from pinned memory, and these copies still run alone" in f.message
    assert "pageable" not in f.message and "pin_memory=True)" not in f.fix.text
    assert "non_blocking=True" in f.fix.text


def test_a_kernel_waiting_on_another_streams_event_is_a_dependency_stall(tmp_path):
    _, found = verdict(kt.stream_wait(), tmp_path)
    assert set(found) & IDLE_RULES == {"dependency-stall"}
    f = found["dependency-stall"]
    assert f.confidence == 0.6 and "stream 7 (waits on stream 20)" in f.message
    assert f.time_at_stake_ms == pytest.approx(3.0, abs=0.01)
