"""Kineto (PyTorch profiler) collector: synthetic traces and the real corpus."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.vocab import collective_kind, dtype_list
from advisor.errors import InputError

# ---------------------------------------------------------------- helpers


def X(cat, name, ts, dur, pid=1, tid=1, **args):
    """A complete event."""
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        ev["args"] = args
    return ev


def write(path: Path, events, gz=False, **top) -> Path:
    """Write a Kineto-shaped trace object to ``path``."""
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    raw = json.dumps(doc).encode()
    if gz:
        path.write_bytes(gzip.compress(raw))
    else:
        path.write_bytes(raw)
    return path


def gpu_events(str_ts=False):
    """Two steps; step 1 has data wait, compute, comm, memcpy, a sync call."""
    t = (lambda v: str(v)) if str_ts else (lambda v: v)
    return [
        X("user_annotation", "ProfilerStep#1", t(0), t(100)),
        X("user_annotation", "ProfilerStep#2", t(100), t(100)),
        X("user_annotation", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", t(0), t(30)),
        X("cpu_op", "aten::mm", t(31), t(10), **{"Input type": ["c10::Half", "c10::Half"],
                                                   "Input Dims": [[2, 2], [2, 2]]}),
        X("cuda_runtime", "cudaLaunchKernel", t(32), t(2), correlation=7),
        X("cpu_op", "c10d::allreduce_", t(35), t(4), **{"Input type": ["float"], "Input Dims": [[4]]}),
        X("cuda_runtime", "cudaLaunchKernel", t(36), t(1), correlation=8),
        X("cuda_runtime", "cudaStreamSynchronize", t(60), t(15)),
        X("kernel", "ampere_fp16_gemm", t(10), t(40), pid=0, tid=7, correlation=7),
        X("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", t(40), t(30),
          pid=0, tid=20, correlation=8),
        X("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t(80), t(10), pid=0, tid=7),
        X("kernel", "elementwise", t(150), t(10), pid=0, tid=7),
        {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 32, "cat": "ac2g", "name": "ac2g"},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
    ]


def step_row(profile, step):
    s = profile.steps
    return s[s["step"] == step].iloc[0]


# ---------------------------------------------------------- synthetic GPU


def test_gpu_breakdown_current_vocabulary(tmp_path):
    path = write(tmp_path / "w.pt.trace.json", gpu_events(), distributedInfo={"rank": 3, "world_size": 4})
    assert kineto.discover(path) == [path]
    p = kineto.read(path)
    assert p.meta.device == "gpu" and p.meta.ranks == [3] and p.meta.world_size == 4
    assert p.meta.source_format == "kineto"
    r = step_row(p, 1)
    assert r["duration_us"] == 100
    assert r["device_busy_us"] == pytest.approx(70)  # [10,70] + [80,90]
    assert r["computing_us"] == pytest.approx(40)
    assert r["communication_us"] == pytest.approx(30)
    assert r["overlapped_us"] == pytest.approx(10)
    assert r["exposed_comm_us"] == pytest.approx(20)
    assert r["free_us"] == pytest.approx(40)  # 100 - |[10,70]|
    assert r["data_wait_us"] == pytest.approx(30)
    assert r["sync_wait_us"] == pytest.approx(15)  # cudaStreamSynchronize [60,75]
    # idle 30 = launch gap [70,80] (10 us <= 50) + the rest of the step
    assert r["kernel_gap_us"] == pytest.approx(10)
    assert r["host_wait_us"] == pytest.approx(20)
    r2 = step_row(p, 2)
    assert r2["computing_us"] == pytest.approx(10) and r2["communication_us"] == 0
    assert set(p.steps["rank"]) == {3}


def test_gpu_ops_dtypes_via_correlation(tmp_path):
    p = kineto.read(write(tmp_path / "w.pt.trace.json", gpu_events()))
    ops = p.ops.set_index("name")
    assert ops.loc["ampere_fp16_gemm", "input_dtypes"] == "FLOAT16;FLOAT16"
    assert ops.loc["ampere_fp16_gemm", "core"] == "GPU"
    assert ops.loc["ampere_fp16_gemm", "type"] == "compute"
    assert ops.loc["elementwise", "input_dtypes"] is None  # launch not recorded
    assert ops.loc["Memcpy HtoD (Pageable -> Device)", "type"] == "memcpy_h2d"
    assert ops.loc["ampere_fp16_gemm", "short_count"] == 0
    assert ops.loc["elementwise", "short_count"] == 0  # 10 us is not shorter than 10 us
    assert ops["count"].sum() == 4 and (p.ops["rank"] == 0).all()


def test_gpu_comm_table(tmp_path):
    p = kineto.read(write(tmp_path / "w.pt.trace.json", gpu_events()))
    assert len(p.comm) == 1
    row = p.comm.iloc[0]
    assert row["kind"] == "allreduce" and row["elapse_us"] == 30 and row["step"] == 1
    assert row["start_us"] == 40


def test_string_ts_and_gz_give_same_result(tmp_path):
    a = kineto.read(write(tmp_path / "a.pt.trace.json", gpu_events()))
    b = kineto.read(write(tmp_path / "b.pt.trace.json.gz", gpu_events(str_ts=True), gz=True))
    cols = ["step", "duration_us", "computing_us", "communication_us", "free_us", "data_wait_us"]
    pd.testing.assert_frame_equal(a.steps[cols], b.steps[cols])


def test_2021_vocabulary(tmp_path):
    events = [
        X("Operator", "ProfilerStep#5", 0, 200, pid=9, tid="9"),
        X("Operator", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 80, pid=9, tid="9"),
        X("Operator", "aten::conv2d", 90, 20, pid=9, tid="9",
          **{"Input type": ["float", "float", "", "int"], "Input Dims": [[1, 3], [3, 3], [], []]}),
        X("Runtime", "cudaLaunchKernel", 95, 5, pid=9, tid="9", correlation=1),
        X("Kernel", "implicit_convolve_sgemm", 100, 50, pid=0, tid="stream 7", correlation=1),
        X("Memcpy", "Memcpy HtoD (Pageable -> Device)", 82, 4, pid=0, tid="stream 7"),
        X("Memset", "Memset (Device)", 160, 2, pid=0, tid="stream 7"),
    ]
    p = kineto.read(write(tmp_path / "old.pt.trace.json", events))
    assert "2021" in p.meta.source_version
    r = step_row(p, 5)
    assert r["computing_us"] == 50 and r["device_busy_us"] == 56
    assert r["data_wait_us"] == 80 and r["communication_us"] == 0
    assert p.ops.set_index("name").loc["implicit_convolve_sgemm", "input_dtypes"] == "FLOAT;FLOAT"


def test_no_step_markers_gives_one_window_and_note(tmp_path):
    events = [X("kernel", "k", 10, 5, pid=0, tid=7), X("cpu_op", "aten::add", 0, 20)]
    p = kineto.read(write(tmp_path / "n.pt.trace.json", events))
    assert len(p.steps) == 1 and pd.isna(p.steps["step"].iloc[0])
    assert p.steps["duration_us"].iloc[0] == 20
    assert any("no ProfilerStep" in n for n in p.meta.notes)


def test_last_step_is_kept(tmp_path):
    p = kineto.read(write(tmp_path / "w.pt.trace.json", gpu_events()))
    assert list(p.steps["step"]) == [1, 2]


# ---------------------------------------------------------- CPU-only


def test_cpu_only_breakdown(tmp_path):
    events = [
        X("user_annotation", "ProfilerStep#0", 0, 100),
        X("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 20),
        X("cpu_op", "aten::stack", 5, 10),  # collate inside the data wait
        X("cpu_op", "aten::linear", 20, 30, **{"Input type": ["float", "float"],
                                               "Input Dims": [[2, 2], [2, 2]]}),
        X("cpu_op", "aten::addmm", 22, 20),  # nested: not top-level
        X("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 55, 30),
        X("cpu_op", "c10d::allreduce_", 70, 10),  # collective nested in backward
        X("cpu_op", "gloo:all_reduce", 75, 15, tid=2),  # on gloo's thread, runs past
    ]
    p = kineto.read(write(tmp_path / "cpu.pt.trace.json", events))
    assert p.meta.device == "cpu"
    r = step_row(p, 0)
    # compute = top-level main-thread ops [5,15]+[20,50]+[55,85] minus data [0,20]
    # and minus the main thread's collective [70,80] and the rest of the op
    # around it while gloo runs the all-reduce, [80,85] -> 30 + 15 = 45
    assert r["computing_us"] == pytest.approx(45)
    assert r["communication_us"] == pytest.approx(20)  # [70,90]
    assert r["overlapped_us"] == pytest.approx(0)
    assert r["data_wait_us"] == pytest.approx(20)
    assert r["free_us"] == pytest.approx(100 - 65)
    assert "device_busy_us" not in p.steps.columns
    ops = p.ops.set_index("name")
    assert ops.loc["aten::linear", "core"] == "CPU"
    assert ops.loc["aten::linear", "input_dtypes"] == "FLOAT;FLOAT"
    assert "aten::addmm" not in ops.index
    assert set(p.comm["kind"]) == {"allreduce"} and len(p.comm) == 2


# ---------------------------------------------------------- errors, ranks, discovery


def test_truncated_gz_names_the_file(tmp_path):
    path = write(tmp_path / "t.pt.trace.json.gz", gpu_events() * 50, gz=True)
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    assert kineto.discover(tmp_path) == [path]
    with pytest.raises(InputError) as err:
        kineto.read(path)
    assert str(path) in str(err.value) and "gzip" in str(err.value)
    with pytest.raises(InputError):
        load_profile(tmp_path)


def test_truncated_json_and_non_object(tmp_path):
    path = tmp_path / "t.pt.trace.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "ts": 1')
    with pytest.raises(InputError, match="t.pt.trace.json"):
        kineto.read(path)
    arr = tmp_path / "arr.pt.trace.json"
    arr.write_text("[]")
    with pytest.raises(InputError):
        kineto.read(arr)


def test_odd_field_types_are_dropped_not_fatal(tmp_path):
    events = gpu_events() + [X("kernel", "bad", "not-a-number", 5, pid=0, tid=7),
                             {"ph": "X", "cat": "kernel", "name": 5, "ts": [1], "dur": 1}]
    p = kineto.read(write(tmp_path / "odd.pt.trace.json", events))
    assert step_row(p, 1)["computing_us"] == pytest.approx(40)
    assert p.skipped


def test_two_files_without_rank_get_distinct_ranks_and_note(tmp_path):
    """Two processes (host events of pid 1 and 2): two ranks."""
    write(tmp_path / "worker0.1.pt.trace.json", gpu_events())
    other = [{**e, "pid": 2} if e.get("pid") == 1 else e for e in gpu_events()]
    write(tmp_path / "worker0.2.pt.trace.json.gz", other, gz=True)
    before = sorted(tmp_path.iterdir())
    p = load_profile(tmp_path)
    assert p.meta.ranks == [0, 1]
    assert sorted(p.steps["rank"].unique()) == [0, 1]
    assert any("own rank" in n for n in p.meta.notes)
    assert sorted(tmp_path.iterdir()) == before  # nothing written under the input


def test_rank_from_name_and_distributed_info(tmp_path):
    write(tmp_path / "trace_rank-5.json", gpu_events())
    write(tmp_path / "other.pt.trace.json", gpu_events(), distributedInfo={"rank": 2, "world_size": 8})
    p = load_profile(tmp_path)
    assert p.meta.ranks == [2, 5] and p.meta.world_size == 8
    assert not any("own rank" in n for n in p.meta.notes)


def test_discover_skips_ascend_and_foreign_json(tmp_path):
    write(tmp_path / "trace_view.json", gpu_events())
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    (tmp_path / "array.json").write_text('[{"ph": "X"}]')
    assert kineto.discover(tmp_path) == []
    (tmp_path / "sub").mkdir()
    good = write(tmp_path / "sub" / "w.pt.trace.json", gpu_events())
    assert kineto.discover(tmp_path) == [good]
    asc = tmp_path / "x_ascend_pt"
    asc.mkdir()
    assert kineto.discover(tmp_path) == []
    out = tmp_path / "b"
    (out / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    write(out / "w.pt.trace.json", gpu_events())
    assert kineto.discover(out) == []
    assert kineto.discover(out / "w.pt.trace.json") == [out / "w.pt.trace.json"]


def test_helpers():
    assert dtype_list(["float", "c10::Half", "c10::BFloat16", "Scalar", ""]) == "FLOAT;FLOAT16;BF16"
    assert collective_kind("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL") == "reducescatter"
    assert collective_kind("_allgather_base") == "allgather"
    assert collective_kind("nccl:all_to_all") == "alltoall"
    assert collective_kind("nccl:recv 0<-1") == "receive"
    assert collective_kind("record_param_comms") == "other"


# ---------------------------------------------------------- interval math


def brute(starts, ends, grid):
    cover = np.zeros(grid.size, bool)
    for s, e in zip(starts, ends):
        cover |= (grid >= s) & (grid < e)
    return cover


def test_interval_ops_match_brute_force():
    rng = np.random.default_rng(0)
    grid = np.arange(0, 1100, 1.0)
    for _ in range(20):
        a_s = rng.integers(0, 950, 40).astype(float)
        a_e = a_s + rng.integers(0, 60, 40)
        b_s = rng.integers(0, 950, 30).astype(float)
        b_e = b_s + rng.integers(0, 60, 30)
        A, B = iv.merge(a_s, a_e), iv.merge(b_s, b_e)
        ca, cb = brute(a_s, a_e, grid), brute(b_s, b_e, grid)
        assert iv.total(A) == ca.sum()
        assert iv.total(iv.intersect(A, B)) == (ca & cb).sum()
        assert iv.total(iv.subtract(A, B)) == (ca & ~cb).sum()
        assert iv.total(iv.union(A, B)) == (ca | cb).sum()
        lo, hi = np.array([0.0, 100, 500]), np.array([100.0, 500, 1000])
        got = iv.covered_between(A, lo, hi)
        want = [ca[(grid >= l) & (grid < h)].sum() for l, h in zip(lo, hi)]
        assert list(got) == want


def test_nesting_parent_and_enclosing():
    # thread 0: A[0,100] > B[10,50] > C[20,30]; D[60,90] touching-free; thread 1: E[0,10]
    th = np.array([0, 0, 0, 0, 1])
    s = np.array([0.0, 10, 20, 60, 0])
    e = np.array([100.0, 50, 30, 90, 10])
    n = iv.Nesting(th, s, e)
    assert list(n.parent) == [-1, 0, 1, 0, -1]
    assert list(n.top_level()) == [True, False, False, False, True]
    got = n.enclosing(np.array([0, 0, 0, 1, 0]), np.array([21.0, 35, 95, 5, 200]),
                      np.array([22.0, 40, 96, 6, 201]))
    assert list(got) == [2, 1, 0, 4, -1]
    want = np.array([True, False, False, False, False])
    assert list(n.climb(np.array([2, 3]), want)) == [0, 0]


# ---------------------------------------------------------- real corpus


def _steps(folder: Path) -> list:
    return [kineto.read(u) for u in kineto.discover(folder)]


def test_corpus_input_bound_resnet(corpus):
    parts = _steps(corpus / "kineto-tb-plugin" / "resnet50_num_workers_0")
    assert len(parts) == 2
    assert sorted(r for p in parts for r in p.meta.ranks) == [0, 0]  # two captures of one process
    for p in parts:
        s = p.steps
        assert len(s) == 6 and p.meta.device == "gpu"
        share = s["data_wait_us"] / s["duration_us"]
        # measured: 0.38-0.42 (capture 1), 0.29-0.30 (capture 2)
        assert share.between(0.25, 0.47).all()
        assert 0.27 <= share.mean() <= 0.45
        assert p.ops["input_dtypes"].str.contains("FLOAT").any()


def test_corpus_healthy_control_resnet(corpus):
    for p in _steps(corpus / "kineto-tb-plugin" / "resnet50_num_workers_4"):
        share = p.steps["data_wait_us"] / p.steps["duration_us"]
        assert share.mean() < 0.05  # measured 0.009-0.011


def test_corpus_nccl_idle_and_overlap(corpus):
    (p,) = _steps(corpus / "hta" / "nccl_parser_config")
    s = p.steps
    assert list(s["step"]) == [4, 5, 6]
    idle = 1 - s["device_busy_us"].sum() / s["duration_us"].sum()
    overlap = s["overlapped_us"].sum() / s["communication_us"].sum()
    # measured 0.764 idle and 0.156 overlap (HTA-style whole-trace: 0.762 / 0.156)
    assert 0.72 <= idle <= 0.82
    assert 0.11 <= overlap <= 0.19
    assert set(p.comm["kind"]) == {"allreduce", "broadcast"}
    assert (p.comm["group"] == "0:default_pg").all()
    assert p.meta.world_size == 2 and p.meta.ranks == [0]


def test_corpus_two_ranks(corpus):
    p = load_profile(corpus / "hta" / "trace_filter")
    assert p.meta.ranks == [0, 1] and p.meta.world_size == 128
    assert p.steps.groupby("rank").size().to_dict() == {0: 2, 1: 2}
    assert (p.steps["overlapped_us"] > 0).all()
    assert {"alltoall", "allreduce", "allgather"} <= set(p.comm["kind"])
    assert not p.meta.notes  # ranks came from distributedInfo
