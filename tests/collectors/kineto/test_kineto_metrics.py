"""Device metrics on Kineto traces (idle split, copies, short kernels, tensor
cores, collective straggler) and the streaming decoder: the real corpus,
real CPU traces written by the PyTorch profiler, and small synthetic
traces for the edge cases."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.kineto import stream
from advisor.collectors.kineto.decode import load_trace
from advisor.collectors.kineto.tables import memcpy_type
from advisor.engine.evaluation import compile_rule, evaluate_rule
from advisor.engine.loader import load_rules
from advisor.errors import InputError
from advisor.metrics import evaluate
from advisor.metrics.cluster import collective_straggler
from advisor.metrics.ops import fp32_no_tensor_core_ratio
from advisor.metrics.registry import NotEvaluated
from advisor.profile import Profile, RunMeta


def X(cat, name, ts, dur, pid=1, tid=1, **args):
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        ev["args"] = args
    return ev


def write(path: Path, events, gz=False, first=None, **top) -> Path:
    doc = {**(first or {}), "schemaVersion": 1, "traceEvents": events, **top}
    raw = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def metrics_of(profile):
    values, skipped = evaluate(profile)
    reasons = {s.what.removeprefix("metric "): s.reason for s in skipped}
    return values, reasons


def fires(rule_name: str, values: dict) -> bool:
    rule = next(r for r in load_rules() if r.name == rule_name)
    finding, _ = evaluate_rule(compile_rule(rule), {k: m.value for k, m in values.items()},
                               framework="pytorch", device="gpu")
    return finding is not None


# ---------------------------------------------------------------- real corpus

RESNET_NW0 = "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NCCL = "hta/nccl_parser_config/nccl_data.json.gz"


def test_corpus_resnet_v100_fp32(corpus):
    p = kineto.read(corpus / RESNET_NW0)
    m, _ = metrics_of(p)
    # Verified from the raw JSON with the json module: 5467 of 8772 kernels
    # shorter than 10 us; HtoD copies 11492 us of 603558 us device-op time.
    assert m["ops.short_kernel_ratio"].value == pytest.approx(5467 / 8772, abs=1e-6)
    assert m["ops.memcpy_h2d_ratio"].value == pytest.approx(11492 / 603558, abs=1e-6)
    assert m["ops.memcpy_h2d_ratio"].evidence["pageable_share"] == 1.0
    # idle 0.429 = host wait 0.383 + launch gaps 0.046 (steady steps 6..10)
    idle = m["step.device_idle_ratio"].value
    assert idle == pytest.approx(0.4292, abs=1e-3)
    assert m["step.host_wait_ratio"].value + m["step.kernel_gap_ratio"].value == pytest.approx(idle, abs=1e-6)
    assert m["step.host_wait_ratio"].value == pytest.approx(0.3829, abs=1e-3)
    # V100, float32: sgemm / implicit-GEMM / cuDNN float engines (volta_scudnn_*), no tensor cores;
    # not the batch-norm kernels
    tc = m["ops.fp32_no_tensor_core_ratio"]
    assert 0.63 <= tc.value <= 0.70  # measured 0.666
    assert any("implicit_convolve_sgemm" in k for k in tc.evidence["kernels"])
    assert fires("no-tensor-cores", m)
    assert not fires("launch-bound", m) and not fires("h2d-copy-bound", m)
    assert set(p.ops["type"]) >= {"compute", "memcpy_h2d", "memset"}


def test_corpus_nccl_a100_idle_is_host_wait(corpus):
    p = kineto.read(corpus / NCCL)
    m, reasons = metrics_of(p)
    # README: ~78% idle; nearly all of it in stretches > 50 us
    assert m["step.device_idle_ratio"].value == pytest.approx(0.7639, abs=1e-3)
    assert m["step.host_wait_ratio"].value == pytest.approx(0.7264, abs=1e-3)
    assert m["step.kernel_gap_ratio"].value == pytest.approx(0.0375, abs=1e-3)
    assert m["step.host_wait_ratio"].evidence["sync_wait_ratio"] < 0.001
    # A100 with TF32: cutlass tensorop_s1688gemm kernels are not counted; the float32 SIMT cuDNN
    # engines (cudnn_ampere_scudnn_*) and a cutlass simt_sgemm are
    assert 0.015 < m["ops.fp32_no_tensor_core_ratio"].value < 0.03  # measured 0.0225
    assert m["ops.memcpy_h2d_ratio"].value == 0.0  # only DtoD copies
    assert set(p.ops.loc[p.ops["type"].str.startswith("memcpy"), "type"]) == {"memcpy_d2d"}
    assert m["ops.short_kernel_ratio"].value == pytest.approx(0.4293, abs=1e-3)
    assert "single rank" in reasons["cluster.collective_straggler"]
    for rule in ("no-tensor-cores", "launch-bound", "h2d-copy-bound"):
        assert not fires(rule, m)


def test_corpus_two_ranks_collective_straggler(corpus):
    p = load_profile(corpus / "hta" / "trace_filter", jobs=1)
    m, _ = metrics_of(p)
    s = m["cluster.collective_straggler"]
    # per-step collective time, median over the 2 steps: rank 0 198.1 ms,
    # rank 1 189.5 ms -> rank 1 is the one rank 0 waits for
    assert s.value == 1
    assert s.evidence["per_rank_ms"] == {"0": pytest.approx(198.1, abs=0.1), "1": pytest.approx(189.526, abs=0.1)}
    assert s.evidence["wait_ms"] == pytest.approx(4.2865, abs=0.01)


# ---------------------------------------------------------------- real CPU traces

TRAIN = textwrap.dedent("""
    import sys, torch
    from torch.profiler import profile, ProfilerActivity, schedule
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(256, 32), torch.randint(0, 4, (256,)))
    loader = DataLoader(data, batch_size=32)
    def ready(p):
        p.export_chrome_trace(sys.argv[1])
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=4, repeat=1), on_trace_ready=ready) as prof:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
""")


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory) -> Path:
    """A real trace written by torch.profiler on CPU (subprocess, once)."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("torch") / "mlp.pt.trace.json"
    proc = subprocess.run([sys.executable, "-c", TRAIN, str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_real_cpu_trace_device_metrics_not_evaluated(cpu_trace):
    p = kineto.read(cpu_trace)
    assert p.meta.device == "cpu"
    assert list(p.steps["step"]) == [2, 3, 4, 5]
    m, reasons = metrics_of(p)
    assert m["step.data_wait_ratio"].value > 0
    # no device: the device metrics say why instead of inventing zeros
    assert "host_wait_us" in reasons["step.host_wait_ratio"]
    assert "kernel_gap_us" in reasons["step.kernel_gap_ratio"]
    assert "short_count" in reasons["ops.short_kernel_ratio"]
    assert "no device operators" in reasons["ops.memcpy_h2d_ratio"]
    assert "no device operators" in reasons["ops.fp32_no_tensor_core_ratio"]
    assert "short_count" not in p.ops.columns
    assert "aten::linear" in set(p.ops["name"])


def _frames(p: Profile):
    return p.steps.reset_index(drop=True), p.ops.sort_values(["name", "type"]).reset_index(drop=True)


def test_real_cpu_trace_streams_in_tiny_chunks(cpu_trace, tmp_path, monkeypatch):
    whole = kineto.read(cpu_trace)
    gz = tmp_path / "mlp.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(cpu_trace.read_bytes()))
    monkeypatch.setattr(stream, "CHUNK", 997)  # event boundaries fall everywhere
    for path in (cpu_trace, gz):
        small = kineto.read(path)
        for a, b in zip(_frames(whole), _frames(small)):
            pd.testing.assert_frame_equal(a, b)


# ---------------------------------------------------------------- synthetic: idle split, copies, short kernels


def gpu_trace(tmp_path: Path) -> Path:
    """One 200 us step; kernels [0,5] [55,65] [116,126] [126,180] on a
    stream, an H2D copy [180,190] and a D2H copy [190,195]: gaps 50 us
    (launch gap, at the bound) and 51 us (host wait)."""
    events = [
        X("user_annotation", "ProfilerStep#1", 0, 200),
        X("kernel", "k_tiny", 0, 5, pid=0, tid=7),
        X("kernel", "k_tiny", 55, 10, pid=0, tid=7),
        X("kernel", "volta_sgemm_128x64_nn", 116, 10, pid=0, tid=7),
        X("kernel", "volta_h884gemm_64x64", 126, 54, pid=0, tid=7),
        X("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 180, 10, pid=0, tid=7),
        X("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 190, 5, pid=0, tid=7),
    ]
    return write(tmp_path / "g.pt.trace.json", events)


def test_gap_split_and_ops_columns(tmp_path):
    p = kineto.read(gpu_trace(tmp_path))
    r = p.steps.iloc[0]
    assert r["device_busy_us"] == 5 + 10 + 64 + 15
    assert r["kernel_gap_us"] == 50  # [5,55]: exactly the bound
    assert r["host_wait_us"] == 51 + 5  # [65,116] + the tail [195,200]
    ops = p.ops.set_index("name")
    assert ops.loc["k_tiny", "short_count"] == 1 and ops.loc["k_tiny", "count"] == 2
    assert ops.loc["Memcpy HtoD (Pageable -> Device)", "type"] == "memcpy_h2d"
    assert ops.loc["Memcpy DtoH (Device -> Pinned)", "type"] == "memcpy_d2h"
    # six device operations, none with its launch: too sparse a record for utilisation figures
    assert (r["device_ops"], r["device_ops_launched"]) == (6, 0)
    _, reasons = metrics_of(p)
    assert "too sparse" in reasons["step.kernel_gap_ms"] and "too sparse" in reasons["ops.memcpy_h2d_ratio"]
    # the arithmetic, on the same steps without the device-record counts
    p = Profile(meta=p.meta, steps=p.steps.drop(columns=["device_ops", "device_ops_launched"]), ops=p.ops)
    m, _ = metrics_of(p)
    assert m["ops.short_kernel_ratio"].value == pytest.approx(1 / 4)  # copies not counted
    assert m["ops.memcpy_h2d_ratio"].value == pytest.approx(10 / 94, abs=1e-6)
    assert m["ops.memcpy_h2d_ms"].value == pytest.approx(0.010)
    # sgemm is float32 without tensor cores (name heuristic: no dtypes recorded)
    assert m["ops.fp32_no_tensor_core_ratio"].value == pytest.approx(10 / 79, abs=1e-6)
    assert m["step.kernel_gap_ms"].value == pytest.approx(0.050)


def test_memcpy_type_names():
    assert memcpy_type("Memcpy HtoD (Pinned -> Device)") == "memcpy_h2d"
    assert memcpy_type("Memcpy DtoD (Device -> Device)") == "memcpy_d2d"
    assert memcpy_type("Memcpy PtoP (Device -> Device)") == "memcpy_p2p"
    assert memcpy_type("Memcpy") == "memcpy"


def _ops_profile(rows, ranks=(0,)) -> Profile:
    ops = pd.DataFrame(rows)
    return Profile(meta=RunMeta(ranks=list(ranks)), ops=ops)


def test_tensor_core_heuristic_uses_dtypes_then_names():
    rows = [
        # name, input dtypes, total
        ("volta_sgemm_64x64_nt", "FLOAT;FLOAT", 30.0),  # fp32, no TC
        ("cutlass_80_tensorop_s1688gemm_256x64", "FLOAT;FLOAT", 20.0),  # TF32 on TC
        ("volta_h884gemm_64x64_nt", "FLOAT16;FLOAT16", 10.0),  # fp16 on TC
        ("implicit_convolve_sgemm<float, float, 128>", None, 15.0),  # no dtypes: name says fp32
        ("ampere_sgemm_32x32_sliced1x4_tn", "BF16;BF16", 5.0),  # dtype wins over name
        ("void fbgemm_gpu::permute<float>", "FLOAT", 10.0),  # not matrix work
        ("cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "FLOAT", 10.0),  # not matrix
    ]
    p = _ops_profile([{"rank": 0, "name": n, "type": "compute", "core": "GPU", "input_dtypes": d,
                       "count": 1, "total_us": t} for n, d, t in rows])
    v = fp32_no_tensor_core_ratio(p)
    assert v.value == pytest.approx(45 / 100)
    assert v.evidence["kernels"] == ["volta_sgemm_64x64_nt", "implicit_convolve_sgemm<float, float, 128>"]


# ---------------------------------------------------------------- straggler


def _comm_profile(per_rank_ms: dict, inferred=False, steps=(1, 2, 3)) -> Profile:
    rows = [{"rank": r, "name": "ncclKernel_AllReduce", "kind": "allreduce", "group": None,
             "elapse_us": ms * 1000 / 2, "step": s}
            for r, ms in per_rank_ms.items() for s in steps for _ in range(2)]
    comm = pd.DataFrame(rows)
    comm["step"] = comm["step"].astype("Int64")
    return Profile(meta=RunMeta(ranks=sorted(per_rank_ms), ranks_inferred=inferred), comm=comm)


def test_straggler_is_the_rank_that_waits_least():
    v = collective_straggler(_comm_profile({0: 50.0, 1: 52.0, 2: 10.0, 3: 51.0}))
    assert v.value == 2
    assert v.evidence["wait_ms"] == pytest.approx(40.5)  # median 50.5 - 10
    assert v.evidence["zscore"] > 3.5
    assert v.evidence["per_rank_ms"][2] == pytest.approx(10.0)


def test_straggler_not_evaluated_for_one_or_inferred_ranks():
    with pytest.raises(NotEvaluated, match="single rank"):
        collective_straggler(_comm_profile({0: 50.0}))
    with pytest.raises(NotEvaluated, match="captures of one worker"):
        collective_straggler(_comm_profile({0: 50.0, 1: 10.0}, inferred=True))


def test_straggler_from_two_trace_files(tmp_path):
    for rank, dur in ((0, 900), (1, 100)):
        events = [X("user_annotation", "ProfilerStep#1", 0, 1000),
                  X("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, dur, pid=0, tid=9)]
        write(tmp_path / f"rank{rank}.pt.trace.json", events,
              distributedInfo={"rank": rank, "world_size": 2})
    m, _ = metrics_of(load_profile(tmp_path, jobs=1))
    assert m["cluster.collective_straggler"].value == 1
    assert m["cluster.collective_straggler"].evidence["wait_ms"] == pytest.approx(0.4)


# ---------------------------------------------------------------- streaming decoder edge cases


def tricky_events():
    """Names with escaped quotes, backslashes and event-boundary look-alikes."""
    return [
        X("user_annotation", "ProfilerStep#1", 0, 100),
        X("cpu_op", 'weird "}, {" name \\ with \\"quotes\\"', 1, 10),
        X("cpu_op", "path\\\\to\\\\file }]", 12, 10, **{"Input type": ["float"], "Input Dims": [[2]]}),
        X("kernel", "k{[", 20, 30, pid=0, tid=7),
    ] * 3


def test_stream_tricky_strings_and_members_after_events(tmp_path, monkeypatch):
    path = write(tmp_path / "t.pt.trace.json", tricky_events(),
                 first={"note": '"traceEvents": [ is not here', "nested": {"traceEvents": [1]}},
                 deviceProperties=[{"id": 0}, {"id": 1}],
                 distributedInfo={"rank": 3, "world_size": 4})
    whole = kineto.read(path)
    assert whole.meta.ranks == [3] and whole.meta.world_size == 4
    assert set(whole.ops["name"]) == {"k{["} and len(whole.steps) == 1
    names = set(load_trace(path).events.names)
    assert {'weird "}, {" name \\ with \\"quotes\\"', "path\\\\to\\\\file }]"} <= names
    for chunk in (7, 64, 300):
        monkeypatch.setattr(stream, "CHUNK", chunk)
        small = kineto.read(path)
        assert small.meta.ranks == [3] and small.meta.world_size == 4
        for a, b in zip(_frames(whole), _frames(small)):
            pd.testing.assert_frame_equal(a, b)


def test_stream_structure_ignores_braces_in_strings():
    buf = b'{"a": "x}]\\"{", "b": [1, {"c": "\\\\"}]}'
    _, braces, depth = stream.structure(buf)
    assert [buf[i:i + 1] for i in braces] == [b"{", b"[", b"{", b"}", b"]", b"}"]
    assert list(depth) == [1, 2, 3, 2, 1, 0]


def test_stream_truncated_and_malformed_name_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "CHUNK", 50)
    events = tricky_events() * 5
    good = json.dumps({"schemaVersion": 1, "traceEvents": events})
    cut = tmp_path / "cut.pt.trace.json"
    cut.write_text(good[: len(good) * 2 // 3])
    with pytest.raises(InputError, match="cut.pt.trace.json.*truncated"):
        kineto.read(cut)
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text(good.replace('"dur": 30}', '"dur": 30 x}', 1))
    with pytest.raises(InputError, match="bad.pt.trace.json.*malformed"):
        kineto.read(bad)


def test_stream_odd_field_in_a_later_batch_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "CHUNK", 64)
    events = tricky_events() + [X("kernel", "bad", [1], 5, pid=0, tid=7)]
    p = kineto.read(write(tmp_path / "odd.pt.trace.json", events))
    assert p.skipped and p.steps["device_busy_us"].iloc[0] == 30


def test_not_streamable_documents_fall_back(tmp_path):
    none = tmp_path / "none.pt.trace.json"
    none.write_text('{"schemaVersion": 1, "traceEvents": null}')
    with pytest.raises(InputError, match="none.pt.trace.json"):
        kineto.read(none)
    late = write(tmp_path / "late.pt.trace.json", tricky_events(), first={"pad": "x" * 100})
    assert kineto.read(late).meta.device == "gpu"
