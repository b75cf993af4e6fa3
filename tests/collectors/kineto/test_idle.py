"""What the host was doing while the device idled (``kineto_idle``), read
from GPU traces written in the PyTorch profiler's format
(``bench.scenarios.kineto_trace``: host ops, launches, kernels, copies,
syncs with their cuda_sync records, stream waits) and from the corpus.

Every trace: the idle causes are disjoint and add up to the device idle
time of each step; the reduced read gives what a read of every event gives.
Each loop gets the cause it was built with, named by the calls or ops
that hold the time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.collectors.kineto import calls
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.kineto import decode as dec
from advisor.collectors.kineto import idle
from advisor.collectors.kineto.tables import gpu_tables
from bench.scenarios import kineto_trace as kt

CAUSE_COLUMNS = [f"idle_{c}_us" for c in idle.CAUSES]


def read(tr: kt.KinetoTrace, tmp_path: Path, name: str = "t.pt.trace.json"):
    path = tr.write(tmp_path / name)
    profile = kineto.read(path)
    profile.check()
    return profile, path


def steady(profile) -> pd.DataFrame:
    """Steps after the first (the loops' first step starts on an empty device)."""
    return profile.steps.iloc[1:]


def names(profile, cause: str) -> set[str]:
    t = profile.idle_causes
    return set(t.loc[t["cause"] == cause, "name"])


def assert_causes_add_up(steps: pd.DataFrame) -> None:
    idle_us = steps["duration_us"] - steps["device_busy_us"]
    assert (steps[CAUSE_COLUMNS] >= 0).all().all()
    np.testing.assert_allclose(steps[CAUSE_COLUMNS].sum(axis=1), idle_us, atol=1e-6)


LOOPS = {
    "sync_item": lambda: kt.sync_every_step(),
    "sync_device": lambda: kt.sync_every_step(sync="device"),
    "sync_with_stack": lambda: kt.sync_every_step(with_stack=True),
    "deep_queue": lambda: kt.deep_queue_sync_copy(),
    "host_busy": lambda: kt.host_busy(),
    "copies_overlapped": lambda: kt.copies(),
    "copies_pageable": lambda: kt.copies(pinned=False, overlapped=False),
    "stream_wait": lambda: kt.stream_wait(),
}


@pytest.mark.parametrize("loop", LOOPS)
def test_causes_are_disjoint_and_add_up_to_device_idle(tmp_path, loop):
    profile, path = read(LOOPS[loop](), tmp_path)
    assert_causes_add_up(profile.steps)
    # the reduced read (what the collector keeps) gives the tables of a read of every event
    for reduced, full in zip(_tables(dec.load_trace(path)), _tables(dec.load_trace(path, reduce=False))):
        pd.testing.assert_frame_equal(reduced, full, check_exact=True)


def _tables(trace: dec.Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    t = gpu_tables(trace.events, 0)
    return t.steps, t.idle_causes


def test_item_every_step_is_a_sync_stall(tmp_path):
    """60 kernels of 200 us queued in 2.4 ms, loss.item() waits for them,
    then 6 ms of CPU bookkeeping (20 ops of 280 us, 20 us apart) with the
    queue empty: that idle follows a sync that drained the queue and is
    shorter than the time the host sat blocked, so it is the sync's."""
    profile, _ = read(kt.sync_every_step(), tmp_path)
    s = steady(profile)
    assert (s["idle_sync_us"] >= 6000).all() and (s["idle_sync_us"] <= 6100).all()
    assert (s["idle_host_ops_us"] < 100).all() and (s["idle_dependency_us"] == 0).all()
    assert (s["idle_data_us"] == 150).all()  # the DataLoader's 150 us before the first launch
    assert names(profile, "sync") == {"aten::item"}
    assert (s["launch_queue_us"] > 4000).all()  # the host ran far ahead until it blocked


def test_device_synchronize_is_named(tmp_path):
    profile, _ = read(kt.sync_every_step(sync="device"), tmp_path)
    assert (steady(profile)["idle_sync_us"] >= 6000).all()
    assert names(profile, "sync") == {"cudaDeviceSynchronize"}


def test_python_frames_name_where_the_sync_is(tmp_path):
    """With Python stacks, each name gets the innermost frame of the
    program it ran in (not the built-in ``item`` or ``torch/`` frames)."""
    profile, _ = read(kt.sync_every_step(with_stack=True), tmp_path)
    t = profile.idle_causes
    assert set(t.loc[t["cause"] == "sync", "frame"]) == {"train.py(35): log_loss"}
    assert set(t.loc[t["cause"] == "data", "frame"]) == {"train.py(22): train_step"}
    # without stacks there is no frame column
    assert "frame" not in read(kt.sync_every_step(), tmp_path, "plain.pt.trace.json")[0].idle_causes


def test_deep_queue_idle_is_dependency_not_the_host(tmp_path):
    """Kernels start 100+ ms after launch; the device idles 150 us between
    kernels with the queue full while the host sits in a synchronous
    pageable copy: held-back work, not a host or sync cause."""
    profile, _ = read(kt.deep_queue_sync_copy(), tmp_path)
    s = steady(profile)
    idle_us = s["duration_us"] - s["device_busy_us"]
    assert (s["idle_dependency_us"] >= 0.99 * idle_us).all()
    assert (s["idle_sync_us"] + s["idle_host_ops_us"] < 0.01 * idle_us).all()
    assert (s["launch_queue_us"] >= 100_000).all()
    assert (s["dependency_recorded_us"] == 0).all()
    assert names(profile, "dependency") == {"stream 7 (no recorded wait)"}


def test_host_busy_with_an_empty_queue_is_host_ops(tmp_path):
    profile, _ = read(kt.host_busy(), tmp_path)
    s = steady(profile)
    idle_us = s["duration_us"] - s["device_busy_us"]
    assert (s["idle_host_ops_us"] >= 0.99 * idle_us).all()
    assert (s["launch_queue_us"] < 10).all()
    t = profile.idle_causes[profile.idle_causes["cause"] == "host_ops"]
    top = t[t["step"] == 2].nlargest(5, "idle_us")["name"]
    assert set(top) == set(kt.CPU_OPS)  # 2 x 500 us each; the 40 launches are shorter


def test_cross_stream_wait_is_dependency_linked_to_its_event(tmp_path):
    tr = kt.stream_wait()
    profile, _ = read(tr, tmp_path)
    s = steady(profile)
    assert (s["idle_dependency_us"] == 3000).all()
    assert (s["dependency_recorded_us"] == 3000).all()
    rows = profile.idle_causes[profile.idle_causes["cause"] == "dependency"]
    assert set(rows["name"]) == {"stream 7 (waits on stream 20)"}
    records = {corr for corr, (stream, _) in tr.records.items() if stream == 20}
    assert set(rows["event_record"]) == records


def test_event_query_is_not_a_blocking_wait(tmp_path):
    """A host polling ``event.query()`` while the device idles is busy on
    the host (the Event Sync records CUPTI writes for it notwithstanding);
    ``event.synchronize()`` blocks, and its record names the stream and the
    event record it waits on."""
    tr = kt.KinetoTrace()
    t = tr.kernel("aten::mm", 0.0, 1000.0)
    polled = tr.record_event(t + 5.0, stream=7)
    for _ in range(100):  # 2.3 ms of polling; the kernel ends after 1 ms
        t = tr.query_event(t + 20.0, polled)
    t = tr.kernel("aten::mm", t + 10.0, 50.0)
    awaited = tr.record_event(t + 5.0, stream=7)
    t = tr.event_synchronize(t + 10.0, awaited)
    tr.step(1, -20.0, t + 20.0)
    profile, _ = read(tr, tmp_path)
    row = profile.steps.iloc[0]
    assert row["idle_host_ops_us"] > 1200  # the polling after the kernel ended
    assert row["idle_sync_us"] < 50  # the event sync's wake-up and what its drain left of the step
    sync = profile.idle_causes[profile.idle_causes["cause"] == "sync"]
    assert sync["name"].tolist() == ["cudaEventSynchronize (waits on stream 7)"]
    assert sync["event_record"].tolist() == [awaited]
    host = profile.idle_causes[profile.idle_causes["cause"] == "host_ops"]
    assert "cudaEventQuery" in set(host["name"]) and host["event_record"].isna().all()


@pytest.mark.parametrize("pinned,overlapped,exposed,pageable", [
    (True, True, 0.0, 0.0),        # prefetched on a side stream while kernels run
    (False, False, 2000.0, 2000.0),  # pageable, on the compute stream before the kernels
    (True, False, 2000.0, 0.0),    # pinned but issued where the kernels wait for it
])
def test_copies_exposed_and_pageable(tmp_path, pinned, overlapped, exposed, pageable):
    profile, _ = read(kt.copies(pinned=pinned, overlapped=overlapped), tmp_path)
    s = steady(profile)
    assert (s["copy_h2d_us"] == 2000).all()
    np.testing.assert_allclose(s["copy_h2d_exposed_us"], exposed, atol=10)  # a launch's start-up at most
    assert (s["copy_h2d_pageable_us"] == pageable).all()



# ---------------------------------------------------------------- a real trace with Python stacks

STACK_SCRIPT = textwrap.dedent("""
    import sys, torch
    from torch.profiler import profile, ProfilerActivity
    model = torch.nn.Linear(64, 64)
    def train_step(x):
        loss = model(x).sum()
        loss.backward()
        return loss.item()
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(3):
            train_step(torch.randn(32, 64))
    prof.export_chrome_trace(sys.argv[1])
""")


def test_real_trace_keeps_only_the_programs_frames(tmp_path):
    """torch.profiler on CPU with ``with_stack=True`` writes frames of the
    script, of torch, of the standard library and built-ins; the read keeps
    the script's frames only (``calls.program_frame``)."""
    pytest.importorskip("torch")
    script, out = tmp_path / "train.py", tmp_path / "stack.pt.trace.json"
    script.write_text(STACK_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    raw = json.loads(out.read_text())["traceEvents"]
    written = {e["name"] for e in raw if e.get("cat") == "python_function"}
    ours = {n for n in written if n.startswith("train.py(")}  # written relative to sys.path
    assert {n.split(": ", 1)[1] for n in ours} == {"train_step", "<module>"}
    assert any(n.startswith("torch/") for n in written) and any(n.startswith("<built-in") for n in written)
    ev = dec.load_trace(out).events
    kept = set(ev.names[ev.name[ev.kind == dec.PYTHON]])
    assert kept == ours


@pytest.mark.parametrize("name, ours", [
    ("train.py(35): log_loss", True),
    ("/home/user/project/train.py(9): main", True),
    ("mypkg/model.py(40): forward", True),
    ("test.py(12): main", True),               # the standard library's test is a package: test/...
    ("enum.py(1230): __hash__", False),        # a standard single-file module
    ("logging/__init__.py(1720): getEffectiveLevel", False),
    ("torch/nn/modules/module.py(1782): _call_impl", False),
    ("/usr/lib/python3.12/threading.py(1010): run", False),
    ("/opt/venv/lib/python3.11/site-packages/numpy/core/numeric.py(8): f", False),
    ("<built-in method item of Tensor object at 0x7f3a2c1d9e40>", False),
    ("nn.Module: Linear_0", False),
])
def test_program_frames(name, ours):
    assert calls.program_frame(name) is ours


# ---------------------------------------------------------------- the corpus


def test_corpus_event_sync_waits_are_linked_and_small(corpus):
    """hta cuda_event_sync: ``.item()`` (inside ``is_nonzero``), an event
    sync on the 36 us spin kernel and a device sync cost about 0.1 ms of the
    3.15 ms step; the 2.2 ms ``aten::empty`` inside ``aten::ones`` holds the
    device's idle time. The event sync is linked to stream 7 and to the
    ``cudaEventRecord`` of correlation 1533, as its cuda_sync record says."""
    profile = kineto.read(corpus / "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz")
    row = profile.steps.iloc[0]
    assert_causes_add_up(profile.steps)
    assert row["idle_sync_us"] < 0.05 * row["duration_us"]
    assert row["idle_host_ops_us"] > 0.7 * row["duration_us"]
    t = profile.idle_causes
    sync = t[t["cause"] == "sync"].set_index("name")
    assert sync.loc["cudaEventSynchronize (waits on stream 7)", "event_record"] == 1533
    assert {"aten::is_nonzero", "cudaDeviceSynchronize"} <= set(sync.index)
    host = t[t["cause"] == "host_ops"]
    assert host.nlargest(1, "idle_us")["name"].item() == "aten::ones"


def test_corpus_multi_stream_first_use_allocation(corpus):
    """hta cuda_event_sync_multi_stream: the device idles in each stream's
    first cudaMalloc (200-284 us) more than in anything else the host does."""
    profile = kineto.read(corpus / "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz")
    assert_causes_add_up(profile.steps)
    row = profile.steps.iloc[0]
    assert row["idle_alloc_us"] > max(row["idle_sync_us"], row["idle_host_ops_us"])
    assert names(profile, "alloc") == {"aten::matmul > cudaMalloc"}


def test_corpus_nccl_idle_is_host_work_with_an_empty_queue(corpus):
    """hta nccl_parser_config: the device idles about 76% of each step; the
    host was running CPU work with nothing queued (kernels start a median
    2 us after launch)."""
    profile = kineto.read(corpus / "hta/nccl_parser_config/nccl_data.json.gz")
    s = profile.steps
    assert_causes_add_up(s)
    idle_us = s["duration_us"] - s["device_busy_us"]
    assert (s["idle_host_ops_us"] > 0.9 * idle_us).all()
    assert (s["launch_queue_us"] < 10).all()
    assert "aten::batch_norm" in names(profile, "host_ops")
