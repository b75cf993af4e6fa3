"""The Kineto reader keeps only the events its tables read, in compact
columns, and builds the tables without per-event pandas objects.

Checked on the real corpus and on small synthetic traces: the tables of the
reduced read equal those of a read that keeps every event
(``load_trace(reduce=False)``), whatever the batch size or event order; the
reduction drops most host events of a GPU trace; whole-trace facts (the
window of a trace without step markers, the training thread of a CPU-only
trace) still come from every event; the numpy helpers order and aggregate
exactly as the pandas calls they replace; large reads show a progress bar
on a terminal only.
"""

from __future__ import annotations

import gzip
import json
import os
import pty
import select
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.kineto import decode as dec
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto import stream
from advisor.collectors.kineto.calls import host_call_class
from advisor.collectors.kineto.tables import _aggregate, _sort_order, cpu_tables, gpu_tables
from advisor.collectors.kineto.window import FIRST_CALL_MIN_EXCESS_US

CORPUS_TRACES = [
    "hta/nccl_parser_config/nccl_data.json.gz",
    "hta/trace_filter/sampled_rank-0.json.gz",
    "hta/trace_filter/sampled_rank-1.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
]


def X(cat, name, ts, dur, pid=1, tid=1, **args):
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        ev["args"] = args
    return ev


def write(path: Path, events, **top) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return path


def gpu_events():
    """Two steps with nested host ops (dtypes on the outer one), launches,
    a collective, a sync call and device work."""
    fp16 = {"Input type": ["c10::Half", "c10::Half"], "Input Dims": [[2, 2], [2, 2]]}
    return [
        X("user_annotation", "ProfilerStep#1", 0, 100),
        X("user_annotation", "ProfilerStep#2", 100, 100),
        X("user_annotation", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 20),
        X("cpu_op", "aten::linear", 21, 30, **fp16),
        X("cpu_op", "aten::addmm", 22, 20),
        X("cuda_runtime", "cudaLaunchKernel", 23, 2, correlation=7),
        X("cuda_runtime", "cudaEventRecord", 26, 1, correlation=9),
        X("cpu_op", "c10d::allreduce_", 55, 10),
        X("cpu_op", "record_param_comms", 56, 8, **{"Collective name": "allreduce"}),
        X("cuda_runtime", "cudaLaunchKernel", 57, 1, correlation=8),
        X("cuda_runtime", "cudaStreamSynchronize", 70, 15),
        X("cpu_op", "aten::add", 120, 10),
        X("cuda_runtime", "cudaLaunchKernel", 121, 2, correlation=10),
        X("kernel", "ampere_fp16_gemm", 30, 40, pid=0, tid=7, correlation=7),
        X("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", 60, 30, pid=0, tid=20, correlation=8),
        X("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 92, 5, pid=0, tid=7),
        X("kernel", "elementwise_kernel", 125, 10, pid=0, tid=7, correlation=10),
    ]


def tables(trace: dec.Trace):
    """(steps, ops, comm) of a decoded trace."""
    ev = trace.events
    t = gpu_tables(ev, 0) if (ev.kind >= dec.KERNEL).any() else cpu_tables(ev, 0)
    return t.steps, t.ops, t.comm


def assert_same_tables(path: Path) -> None:
    """The reduced read gives the tables of the read that keeps everything."""
    for a, b in zip(tables(dec.load_trace(path)), tables(dec.load_trace(path, reduce=False))):
        if a is None or b is None:
            assert a is None and b is None
        else:
            pd.testing.assert_frame_equal(a, b, check_exact=True)


# ---------------------------------------------------------------- reduced == full


@pytest.mark.parametrize("name", CORPUS_TRACES)
def test_corpus_reduced_read_equals_full_read(corpus, name):
    assert_same_tables(corpus / name)


def test_corpus_reduction_drops_most_host_events(corpus):
    path = corpus / CORPUS_TRACES[0]
    small, full = dec.load_trace(path), dec.load_trace(path, reduce=False)
    assert small.analysed == full.analysed == len(full.events)
    assert len(small.events) < 0.5 * len(full.events)  # measured: 0.44
    assert (small.events.kind >= dec.KERNEL).sum() == (full.events.kind >= dec.KERNEL).sum()
    ev = small.events
    # the host events kept: the named ones (those the host_calls table counts
    # too), the top-level ops (what the launching thread was doing), long
    # ops (they may be slow first calls) and record_function ranges (the
    # annotations table)
    named = ("ProfilerStep#", "enumerate(DataLoader)#", "nccl:", "c10d::", "record_param_comms")
    short = (ev.kind == dec.HOST) & (ev.dur < FIRST_CALL_MIN_EXCESS_US) & ~ev.cat_is("user_annotation")
    kept_short = {(ev.threads[t], s, n) for t, s, n in zip(ev.thread[short], ev.ts[short], ev.names[ev.name[short]])}
    top = _host_ops(full.events, dec.HOST, top_level=True)
    assert top and top <= _host_ops(ev, dec.HOST)
    assert all(k[2].startswith(named) or host_call_class(k[2]) for k in kept_short - top)
    # codes are stored in small integer types
    assert ev.name.dtype.itemsize <= 2 and ev.thread.dtype.itemsize == 1


def _host_ops(ev: dec.Events, kind: int, top_level: bool = False) -> set[tuple]:
    """(thread label, start, name) of the host events of ``kind``; with
    ``top_level`` only the ops (cpu_op) no other op encloses."""
    idx = np.flatnonzero(ev.kind == kind)
    if top_level:
        idx = idx[ev.cat_is("cpu_op")[idx]]
        idx = idx[iv.Nesting(ev.thread[idx], ev.ts[idx], ev.end_at(idx)).top_level()]
    return {(ev.threads[t], s, n) for t, s, n in zip(ev.thread[idx], ev.ts[idx], ev.names[ev.name[idx]])}


@pytest.mark.parametrize("chunk", [None, 64, 700])
def test_synthetic_gpu_in_any_batches_and_order(tmp_path, monkeypatch, chunk):
    if chunk:
        monkeypatch.setattr(stream, "CHUNK", chunk)
    events = gpu_events()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write(tmp_path / "a" / "host_first.pt.trace.json", events)
    last = write(tmp_path / "b" / "device_first.pt.trace.json", events[13:] + events[:13])
    assert_same_tables(first)
    assert_same_tables(last)
    a, b = kineto.read(first), kineto.read(last)
    for x, y in ((a.steps, b.steps), (a.ops, b.ops), (a.comm, b.comm)):
        pd.testing.assert_frame_equal(x, y)
    ops = a.ops.set_index("name")
    # the kernel launched inside aten::addmm gets the dtypes of aten::linear
    assert ops.loc["ampere_fp16_gemm", "input_dtypes"] == "FLOAT16;FLOAT16"
    assert a.steps["sync_wait_us"].iloc[0] == 15
    assert a.comm["kind"].tolist() == ["allreduce"]


def test_cpu_only_whole_trace_facts_come_from_every_event(tmp_path, monkeypatch):
    """No step markers: the window spans every event (a dropped annotation
    too) and the training thread is the one with the most op time, nested
    ops included (thread 1: 100 + 80 + 60 us; thread 2: one 200 us op)."""
    events = [
        X("user_annotation", "## setup ##", -50, 10),
        X("cpu_op", "aten::a", 0, 100, tid=1),
        X("cpu_op", "aten::b", 10, 80, tid=1),
        X("cpu_op", "aten::c", 20, 60, tid=1),
        X("cpu_op", "aten::d", 0, 200, tid=2),
    ]
    path = write(tmp_path / "cpu.pt.trace.json", events)
    # aten::b and aten::c are not kept; the record_function range is (the annotations table)
    assert len(dec.load_trace(path).events) == 3
    for chunk in (None, 64):  # one batch; one event per batch (every op kept)
        if chunk:
            monkeypatch.setattr(stream, "CHUNK", chunk)
        assert_same_tables(path)
        p = kineto.read(path)
        assert p.meta.device == "cpu"
        row = p.steps.iloc[0]
        assert row["start_us"] == -50 and row["duration_us"] == 250
        assert row["computing_us"] == 100  # thread 1's top-level op
        assert set(p.ops["name"]) == {"aten::a", "aten::d"}


def test_trace_with_only_unused_events_is_one_empty_window(tmp_path):
    path = write(tmp_path / "ann.pt.trace.json", [X("user_annotation", "## setup ##", 5, 10)])
    trace = dec.load_trace(path)
    assert trace.analysed == 1 and len(trace.events) == 1  # kept for the annotations table only
    p = kineto.read(path)
    assert p.steps["duration_us"].tolist() == [10] and p.ops is None
    assert p.annotations["name"].tolist() == ["## setup ##"]


# ---------------------------------------------------------------- numpy helpers == pandas


def test_sort_order_is_pandas_sort_values():
    rng = np.random.default_rng(1)
    for n in (1, 5, 17, 40, 300):
        x = rng.integers(0, 6, n).astype(float)  # many ties
        frame = pd.DataFrame({"x": x})
        assert list(_sort_order(x)) == list(frame.sort_values("x").index)
        assert list(_sort_order(x, descending=True)) == list(frame.sort_values("x", ascending=False).index)


def _pandas_aggregate(keys: dict, core: str, dur, short) -> pd.DataFrame:
    """The pandas groupby the numpy version replaced (reference)."""
    cols = {k: np.array([*values, None], dtype=object)[codes] for k, (codes, values) in keys.items()}
    df = pd.DataFrame({"name": cols["name"], "type": cols["type"], "core": core,
                       "input_dtypes": cols["input_dtypes"], "dur": dur, "short": short})
    groups = df.groupby(["name", "type", "core", "input_dtypes"], dropna=False, sort=False)
    out = groups["dur"].agg(count="size", total_us="sum", max_us="max", min_us="min")
    out["short_count"] = groups["short"].sum().astype("int64")
    out = out.reset_index().sort_values("total_us", ascending=False, ignore_index=True)
    out["count"] = out["count"].astype("int64")
    if out["input_dtypes"].isna().all():
        return out.drop(columns="input_dtypes")
    out["input_dtypes"] = out["input_dtypes"].astype(object).where(out["input_dtypes"].notna(), None)
    return out


@pytest.mark.parametrize("with_dtypes", [True, False])
def test_aggregate_is_the_pandas_groupby(with_dtypes):
    rng = np.random.default_rng(2)
    n = 2000
    keys = {"name": (rng.integers(0, 30, n), [f"k{i}" for i in range(30)]),
            "type": (rng.integers(0, 3, n), ["compute", "communication", "memset"]),
            "input_dtypes": (rng.integers(-1, 3, n) if with_dtypes else np.full(n, -1),
                             ["FLOAT", "BF16;BF16", "INT64"])}
    dur = np.round(rng.exponential(20, n), 3)
    dur[::7] = 5.0  # ties in the totals' inputs
    short = dur < 10
    pd.testing.assert_frame_equal(_aggregate(keys, "GPU", dur, short),
                                  _pandas_aggregate(keys, "GPU", dur, short), check_exact=True)


def test_depth_is_the_nesting_depth_and_never_drops_with_more_ops():
    rng = np.random.default_rng(3)
    th = rng.integers(0, 3, 400)
    start = np.round(rng.uniform(0, 1000, 400), 1)
    end = start + np.round(rng.exponential(30, 400), 1) * (rng.random(400) > 0.1)
    full = iv.depth(th, start, end)
    assert list(full) == list(iv.Nesting(th, start, end).depth)
    sub = np.flatnonzero(rng.random(400) < 0.4)
    assert (iv.depth(th[sub], start[sub], end[sub]) <= full[sub]).all()


# ---------------------------------------------------------------- folder, progress bar


def test_read_folder_is_the_cluster_read(tmp_path):
    write(tmp_path / "a_rank-0.pt.trace.json", gpu_events())
    write(tmp_path / "b_rank-1.pt.trace.json", gpu_events())
    a, b = kineto.read(tmp_path), load_profile(tmp_path, jobs=1)
    assert a.meta.ranks == b.meta.ranks == [0, 1] and a.meta.source_path == str(tmp_path)
    for x, y in ((a.steps, b.steps), (a.ops, b.ops), (a.comm, b.comm)):
        pd.testing.assert_frame_equal(x, y)


def _stderr_on_terminal(args: list[str]) -> str:
    """Run ``args`` with stderr on a pseudo-terminal; what it printed there."""
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm", COLUMNS="100")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its side
                break
            if not data:
                break
            out += data
        elif proc.poll() is not None:
            break
    proc.wait(timeout=120)
    os.close(master)
    return out.decode(errors="replace")


READ = textwrap.dedent("""
    import sys
    from pathlib import Path
    from advisor.collectors import load_profile
    from advisor.collectors.kineto import decode
    decode.PROGRESS_BYTES = 0
    load_profile(Path(sys.argv[1]), jobs=1)
""")


def test_progress_bar_for_a_large_trace_on_a_terminal_only(tmp_path):
    one = tmp_path / "one"
    one.mkdir()
    path = write(one / "w.pt.trace.json", gpu_events() * 50)
    gz = one.parent / "gz"
    gz.mkdir()
    (gz / "w.pt.trace.json.gz").write_bytes(gzip.compress(path.read_bytes()))
    for folder, name in ((one, "w.pt.trace.json"), (gz, "w.pt.trace.json.gz")):
        shown = _stderr_on_terminal([sys.executable, "-c", READ, str(folder)])
        assert f"reading {name}" in shown
    piped = subprocess.run([sys.executable, "-c", READ, str(one)], capture_output=True, text=True, check=False)
    assert piped.returncode == 0 and "reading" not in piped.stderr
    # several traces: the per-rank bar only, never a second bar inside it
    write(one / "v.pt.trace.json", gpu_events())
    shown = _stderr_on_terminal([sys.executable, "-c", READ, str(one)])
    assert "reading ranks" in shown and "reading w.pt.trace.json" not in shown
