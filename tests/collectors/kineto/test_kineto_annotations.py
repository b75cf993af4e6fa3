"""The ``annotations`` table of Kineto traces and ``annotations.time_by_name``.

Format: a ``record_function`` range is a ``user_annotation`` X event on the
host thread; where the range launched device work, the PyTorch profiler
also writes a ``gpu_user_annotation`` X event on the device row spanning it
(HTA reads these: hta/analyzers/breakdown_analysis.py,
``get_gpu_user_annotation_breakdown``). Kernels link to their launching
runtime call by the ``correlation`` arg. The corpus trace (HTA's
nccl_parser_config, a real A100 DDP run) carries ``gpu_user_annotation``
events; on CPU there are none, and the real run below gives host time.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from advisor.collectors.kineto import collector as kineto
from advisor.metrics import evaluate

NCCL = "hta/nccl_parser_config/nccl_data.json.gz"


def _metrics(p):
    values, skipped = evaluate(p)
    return values, {s.what.removeprefix("metric "): s.reason for s in skipped}


# ---------------------------------------------------------------- real CPU run

TRAIN = textwrap.dedent("""
    import sys, torch
    from torch.profiler import profile, ProfilerActivity, schedule, record_function
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(128, 64), torch.randint(0, 4, (128,))
    def ready(p):
        p.export_chrome_trace(sys.argv[1])
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=4, repeat=1), on_trace_ready=ready) as prof:
        for _ in range(6):
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with record_function("backward"):
                opt.zero_grad()
                loss.backward()
            opt.step()
            prof.step()
""")


@pytest.fixture(scope="module")
def annotated_cpu_trace(tmp_path_factory) -> Path:
    """A real trace written by torch.profiler on CPU with record_function ranges."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("torch") / "annotated.pt.trace.json"
    proc = subprocess.run([sys.executable, "-c", TRAIN, str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_real_cpu_run_gives_host_time_per_range(annotated_cpu_trace):
    p = kineto.read(annotated_cpu_trace)
    assert p.meta.device == "cpu"
    ann = p.annotations
    assert set(ann["source"]) == {"host"}  # no device, no gpu_user_annotation
    steps = set(p.steps["step"])
    per_name = ann[ann["step"].isin(steps)].groupby("name")["count"].sum()
    assert per_name["forward"] == len(steps) and per_name["backward"] == len(steps)
    assert "Optimizer.step#SGD.step" in per_name  # torch's own annotation
    assert not any(n.startswith("ProfilerStep#") for n in ann["name"])
    values, _ = _metrics(p)
    rows = {r["name"]: r for r in values["annotations.time_by_name"].value}
    assert 0 < rows["forward"]["share"] < 1 and 0 < rows["backward"]["share"] < 1
    assert rows["forward"]["source"] == "host"


# ---------------------------------------------------------------- device spans (corpus)


def test_gpu_user_annotation_spans_of_a_real_ddp_trace(corpus):
    path = corpus / NCCL
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = [e for e in raw if e.get("cat") == "gpu_user_annotation" and e.get("ph") == "X"
             and not e["name"].startswith("ProfilerStep#")]
    p = kineto.read(path)
    ann = p.annotations
    assert set(ann["source"]) == {"device"}
    assert ann.groupby("name")["count"].sum().to_dict() == dict(Counter(e["name"] for e in spans))
    assert ann["total_us"].sum() == pytest.approx(sum(e["dur"] for e in spans), rel=1e-9)
    values, _ = _metrics(p)
    rows = {r["name"]: r for r in values["annotations.time_by_name"].value}
    assert rows["DistributedDataParallel.forward"]["source"] == "device"
    assert 0 < rows["DistributedDataParallel.forward"]["share"] <= 1


# ---------------------------------------------------------------- launches (no device spans)

PID, TID, STREAM = 10, 11, 7


def _x(cat, name, ts, dur, pid=PID, tid=TID, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _launch(ts: float, corr: int, kernel_dur: float) -> list[dict]:
    return [_x("cuda_runtime", "cudaLaunchKernel", ts, 5.0, correlation=corr),
            _x("kernel", "volta_sgemm_128x64_nn", ts + 20, kernel_dur, pid=0, tid=STREAM, correlation=corr,
               stream=STREAM, device=0)]


def launch_trace(path: Path, steps: int = 3) -> Path:
    ev, corr = [], 1
    for i in range(steps):
        t0 = 1_000_000.0 + i * 10_000
        ev.append(_x("user_annotation", f"ProfilerStep#{i + 1}", t0, 10_000.0))
        ev.append(_x("user_annotation", "model", t0 + 10, 6000.0))
        ev.append(_x("user_annotation", "attention", t0 + 100, 2000.0))  # nested in "model"
        ev.append(_x("cpu_op", "aten::mm", t0 + 150, 100.0))
        ev += _launch(t0 + 160, corr, 300.0)
        ev += _launch(t0 + 3000, corr + 1, 500.0)  # in "model", outside "attention"
        ev += _launch(t0 + 7000, corr + 2, 200.0)  # in no range
        corr += 3
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Tesla V100"}],
                                "traceEvents": ev}))
    return path


def test_without_device_spans_kernels_go_to_the_innermost_range_of_their_launch(tmp_path):
    p = kineto.read(launch_trace(tmp_path / "t.pt.trace.json"))
    per = p.annotations.groupby("name")["total_us"].sum().to_dict()
    assert per == {"attention": pytest.approx(3 * 300.0), "model": pytest.approx(3 * 500.0)}
    assert set(p.annotations["source"]) == {"device"}


def test_a_trace_without_ranges_is_not_evaluated(tmp_path):
    path = tmp_path / "plain.pt.trace.json"
    ev = [_x("user_annotation", "ProfilerStep#1", 1_000_000.0, 10_000.0),
          _x("cpu_op", "aten::mm", 1_000_100.0, 100.0)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    p = kineto.read(path)
    assert p.annotations is None
    values, reasons = _metrics(p)
    assert "annotations.time_by_name" not in values
    assert "annotations" in reasons["annotations.time_by_name"]
