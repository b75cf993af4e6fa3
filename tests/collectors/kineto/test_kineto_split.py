"""One large Kineto trace read in parts on several processes
(``kineto_split``) gives exactly what a one-process read gives: the same
tables, trace facts and report (for a GPU trace the same decoded events,
codes and threads too), on
real corpus traces (GPU with collectives, sampled, 2021 vocabulary, and
the CPU-only view of one), split 2-4 ways, with small and default batches;
a file it cannot split safely is read in one process."""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.collectors.kineto import decode as dec
from advisor.collectors.kineto import split as kineto_split
from advisor.collectors.kineto import stream
from advisor.collectors.kineto.tables import cpu_tables, gpu_tables

CORPUS_TRACES = [
    "hta/nccl_parser_config/nccl_data.json.gz",
    "hta/trace_filter/sampled_rank-0.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
]
DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "cuda_runtime", "Runtime"}


def _plain(corpus: Path, name: str, out: Path, cpu_only: bool = False) -> Path:
    """The corpus trace uncompressed (only plain files are split)."""
    doc = json.loads(gzip.decompress((corpus / name).read_bytes()))
    if cpu_only:
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in DEVICE_CATS]
    path = out / (Path(name).name.removesuffix(".gz").removesuffix(".json") + ".pt.trace.json")
    path.write_text(json.dumps(doc))
    return path


def _assert_same(a: dec.Trace, b: dec.Trace) -> None:
    """Same trace facts and tables; for a GPU trace the same events too (a
    CPU-only read keeps, besides what its tables read, the ops at the top of
    each batch, so its kept events depend on where batches end)."""
    for f in ("rank", "world_size", "backend", "schema_version", "old_vocabulary", "analysed", "dropped"):
        assert getattr(a, f) == getattr(b, f), f
    gpu = bool((a.events.kind >= dec.KERNEL).any())
    if gpu:
        _assert_same_events(a, b)
    build = gpu_tables if gpu else cpu_tables
    for x, y in zip(dataclasses.astuple(build(a.events, 0)), dataclasses.astuple(build(b.events, 0))):
        if isinstance(x, pd.DataFrame) or isinstance(y, pd.DataFrame):
            pd.testing.assert_frame_equal(x, y, check_exact=True)
        else:
            assert x == y


def _assert_same_events(a: dec.Trace, b: dec.Trace) -> None:
    for f in dataclasses.fields(a.events):
        x, y = getattr(a.events, f.name), getattr(b.events, f.name)
        if isinstance(x, dec.OpStats):  # sums of the same durations, added in another order
            assert np.array_equal(x.count, y.count) and np.array_equal(x.first, y.first), f.name
            assert np.allclose(x.total, y.total, rtol=1e-12, atol=0), f.name
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, f.name
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        else:
            assert np.array_equal(np.asarray(x, dtype=object), np.asarray(y, dtype=object)) if f.name == "span" \
                else x == y, f.name


@pytest.fixture
def split_small(monkeypatch):
    """Split files of any size (the corpus traces are a few MB)."""
    monkeypatch.setattr(kineto_split, "SPLIT_BYTES", 1)


@pytest.mark.parametrize("name", CORPUS_TRACES)
@pytest.mark.parametrize("cpu_only", [False, True])
def test_split_read_equals_one_process_read(corpus, tmp_path, split_small, name, cpu_only):
    path = _plain(corpus, name, tmp_path, cpu_only)
    whole = dec.load_trace(path)
    for helpers in (1, 2, 3):
        ranges = kineto_split.split_points(path, helpers + 1)
        assert ranges is not None and len(ranges) == helpers + 1
        _assert_same(whole, dec.load_trace(path, helpers=helpers))


def test_split_read_with_small_batches(corpus, tmp_path, split_small, monkeypatch):
    path = _plain(corpus, CORPUS_TRACES[0], tmp_path)
    monkeypatch.setattr(stream, "CHUNK", 1 << 16)
    _assert_same(dec.load_trace(path), dec.load_trace(path, helpers=2))


def test_files_not_split(tmp_path, corpus, split_small, monkeypatch):
    """Gzipped, below the size threshold, or without a boundary after a cut:
    read in one process, same result."""
    gz = tmp_path / "t.pt.trace.json.gz"
    gz.write_bytes((corpus / CORPUS_TRACES[1]).read_bytes())
    assert kineto_split.split_points(gz, 2) is None
    plain = _plain(corpus, CORPUS_TRACES[1], tmp_path)
    monkeypatch.setattr(kineto_split, "SPLIT_BYTES", plain.stat().st_size + 1)
    assert kineto_split.split_points(plain, 2) is None
    one_event = tmp_path / "one.pt.trace.json"
    one_event.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1,
                                                      "tid": 1, "ts": 0, "dur": 5}]}))
    monkeypatch.setattr(kineto_split, "SPLIT_BYTES", 1)
    assert kineto_split.split_points(one_event, 2) is None
    assert len(dec.load_trace(one_event, helpers=1).events) == 1


def test_a_cut_inside_a_string_falls_back_to_one_process(tmp_path, split_small, monkeypatch):
    """An event name holding the ``}, {`` look-alike right where the file
    is cut: the part that starts inside the string does not decode, and
    the trace is read whole (same events as a one-process read)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "x}, {" + "y" * 64 if i == 50 else f"op{i}", "pid": 1,
               "tid": 1, "ts": i * 10, "dur": 5} for i in range(100)]
    path = tmp_path / "trap.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    text = path.read_bytes()
    first, at = text.index(b"[") + 1, text.index(b"x}, {")
    share = (at - first) / (len(text) - first)
    monkeypatch.setattr(kineto_split, "OWN_SHARE", share / (1 - share))  # the nominal cut falls on the trap
    ranges = kineto_split.split_points(path, 2)
    assert ranges is not None and ranges[1][0] == at + 4  # the "{" inside the name
    assert kineto_split.load_parts(path, 1, True) is None
    _assert_same(dec.load_trace(path), dec.load_trace(path, helpers=1))
    assert len(dec.load_trace(path, helpers=1).events) == 100


def test_cli_report_on_a_split_trace_equals_the_one_process_report(corpus, tmp_path):
    """End to end, a real subprocess per run: ``-j 2`` (split, threshold
    lowered through the module) and ``-j 1`` write the same report."""
    path = _plain(corpus, CORPUS_TRACES[0], tmp_path)
    code = ("import sys; from advisor.collectors.kineto import split as k; k.SPLIT_BYTES = 1; "
            "from advisor.cli import main; main(sys.argv[1:])")
    outs = []
    for jobs in ("2", "1"):
        out = tmp_path / f"out{jobs}"
        subprocess.run([sys.executable, "-c", code, "report", str(path), "-o", str(out), "-j", jobs,
                        "--no-color"], check=True, capture_output=True, cwd=tmp_path)
        report = json.loads((out / "report.json").read_text())
        report["run"].pop("generated_at")
        outs.append(report)
    assert outs[0] == outs[1]
