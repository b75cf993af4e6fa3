"""The ``cp_edges`` table of a Kineto trace and the critical_path.* metrics on it.

Fixture traces are written in the PyTorch profiler's Chrome-trace format as
the corpus's ``hta/critical_path/cuda_event_sync`` trace shows it (A100,
PyTorch with CUDA sync events, pytorch/pytorch#105187): ``ProfilerStep#N``
user annotations, ``cpu_op`` operators and ``cuda_runtime`` calls on the
host thread, ``kernel`` / ``gpu_memcpy`` events on the device row (``pid``
the device, ``tid`` the stream) linked to their launch call by the
``correlation`` arg, and ``cuda_sync`` records (``Stream Sync`` on the
stream's row; ``Stream Wait Event`` on the waiting stream's row naming
``wait_on_stream``) with the correlation id of the runtime call they belong
to. The expected figures are the fixtures' own durations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from advisor.collectors.kineto import collector as kineto
from advisor.collectors.kineto import critical_path as kcp
from advisor.metrics import REGISTRY, NotEvaluated
from advisor.metrics.critical_path import HOST_ONLY, longest_path

PID = TID = 948300
DEV = 0
STEP_US = 20_000.0
T0 = 1_000_000.0


class _Trace:
    def __init__(self):
        self.events: list[dict] = []
        self.corr = 100

    def host(self, cat: str, name: str, ts: float, dur: float, **args) -> int:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur,
                            "args": args})
        return len(self.events) - 1

    def launch(self, name: str, ts: float, dur: float, dev_cat: str, dev_name: str, dev_ts: float, dev_dur: float,
               stream: int = 7, correlation: bool = True) -> int:
        self.corr += 1
        args = {"correlation": self.corr} if correlation else {}
        self.host("cuda_runtime", name, ts, dur, **args)
        self.events.append({"ph": "X", "cat": dev_cat, "name": dev_name, "pid": DEV, "tid": stream, "ts": dev_ts,
                            "dur": dev_dur, "args": {**args, "stream": stream, "device": DEV}})
        return self.corr

    def sync(self, name: str, ts: float, dur: float, record: str, stream: int = 7, **wait) -> None:
        self.corr += 1
        self.host("cuda_runtime", name, ts, dur, correlation=self.corr)
        self.events.append({"ph": "X", "cat": "cuda_sync", "name": record, "pid": DEV, "tid": stream, "ts": ts + 1,
                            "dur": max(dur - 2, 0), "args": {"correlation": self.corr, "stream": stream, **wait}})

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA A100"}],
                                    "traceEvents": self.events}))
        return path


def _steps(tr: _Trace, body, steps: int = 4) -> _Trace:
    for i in range(steps):
        t0 = T0 + i * STEP_US
        tr.host("user_annotation", f"ProfilerStep#{i + 1}", t0, STEP_US)
        body(tr, t0)
    return tr


def _device_bound(tr: _Trace, t0: float) -> None:
    """An 18 ms kernel the host waits for in cudaStreamSynchronize."""
    tr.host("cpu_op", "aten::mm", t0 + 100, 50)
    tr.launch("cudaLaunchKernel", t0 + 110, 10, "kernel", "ampere_sgemm_128x64_nn", t0 + 130, 18_000)
    tr.host("cpu_op", "aten::item", t0 + 200, 17_950)
    tr.sync("cudaStreamSynchronize", t0 + 210, 17_930, "Stream Sync")
    tr.host("cpu_op", "aten::add", t0 + 18_200, 1_700)


def _host_bound(tr: _Trace, t0: float) -> None:
    """A 50 us kernel and 19 ms of host operators."""
    tr.host("cpu_op", "aten::mm", t0 + 100, 50)
    tr.launch("cudaLaunchKernel", t0 + 110, 10, "kernel", "ampere_sgemm_128x64_nn", t0 + 130, 50)
    tr.host("cpu_op", "aten::index", t0 + 200, 19_000)


def _values(profile) -> tuple[dict, dict]:
    """The critical_path.* values and the reasons of those not evaluated."""
    values, skipped = {}, {}
    for spec in REGISTRY.values():
        if spec.id.startswith("critical_path."):
            reason = spec.missing(profile)
            try:
                out = spec.func(profile) if reason is None else None
            except NotEvaluated as exc:
                reason = str(exc)
            if reason is None:
                values[spec.id] = out.value
            else:
                skipped[spec.id] = reason
    return values, skipped


def test_a_step_waiting_on_a_long_kernel_is_device_bound(tmp_path):
    profile = kineto.read(_steps(_Trace(), _device_bound).write(tmp_path / "a.pt.trace.json"))
    profile.check()
    v, _ = _values(profile)
    assert v["critical_path.bound"] == "device"
    # host to the launch (110 us), launch delay (20), the kernel (18 ms), the sync's return (10),
    # then the host to the step's end (1860): the whole 20 ms step
    assert v["critical_path.length_ms"] == pytest.approx(STEP_US / 1000)
    assert v["critical_path.device_ratio"] == pytest.approx(18_000 / STEP_US)
    assert v["critical_path.sync_ratio"] == pytest.approx(10 / STEP_US)
    assert v["critical_path.launch_ratio"] == pytest.approx(20 / STEP_US)
    assert v["critical_path.host_ratio"] == pytest.approx((110 + 1_860) / STEP_US)


def test_a_step_of_host_work_is_host_bound(tmp_path):
    profile = kineto.read(_steps(_Trace(), _host_bound).write(tmp_path / "a.pt.trace.json"))
    v, _ = _values(profile)
    assert v["critical_path.bound"] == "host"
    assert v["critical_path.host_ratio"] == pytest.approx(1.0)
    assert v["critical_path.device_ratio"] == pytest.approx(0.0)
    assert v["critical_path.length_ms"] == pytest.approx(STEP_US / 1000)


def _copies(tr: _Trace, t0: float) -> None:
    """A pageable copy the host waits in (the copy ends inside the call) and
    an asynchronous one that returns at once (the copy ends after it)."""
    tr.launch("cudaMemcpyAsync", t0 + 100, 5_000, "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)",
              t0 + 120, 4_970)
    tr.launch("cudaMemcpyAsync", t0 + 6_000, 10, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)",
              t0 + 6_020, 4_000)
    tr.host("cpu_op", "aten::relu", t0 + 6_100, 13_800)


def test_an_async_copy_that_blocks_puts_the_copy_on_the_path(tmp_path):
    profile = kineto.read(_steps(_Trace(), _copies).write(tmp_path / "a.pt.trace.json"))
    edges = profile.cp_edges
    assert set(edges["kind"]) >= {"host", "launch", "device", "sync"}
    v, _ = _values(profile)
    # the first copy (4970 us) is on the path; the second overlaps host work and is not
    assert v["critical_path.device_ratio"] == pytest.approx(4_970 / STEP_US, abs=1e-3)
    assert v["critical_path.bound"] == "host"


def _two_streams(tr: _Trace, t0: float) -> None:
    """Stream 8's kernel waits (cudaStreamWaitEvent) for stream 7's 9 ms one;
    the host then synchronizes stream 8."""
    tr.launch("cudaLaunchKernel", t0 + 100, 10, "kernel", "producer", t0 + 120, 9_000, stream=7)
    tr.host("cuda_runtime", "cudaEventRecord", t0 + 120, 3, correlation=99_000)
    tr.sync("cudaStreamWaitEvent", t0 + 130, 3, "Stream Wait Event", stream=8, wait_on_stream=7,
            wait_on_cuda_event_record_corr_id=99_000)
    tr.launch("cudaLaunchKernel", t0 + 140, 10, "kernel", "consumer", t0 + 9_130, 6_000, stream=8)
    tr.sync("cudaStreamSynchronize", t0 + 200, 14_940, "Stream Sync", stream=8)
    tr.host("cpu_op", "aten::add", t0 + 15_200, 4_700)


def test_a_stream_waiting_on_another_chains_their_kernels(tmp_path):
    profile = kineto.read(_steps(_Trace(), _two_streams).write(tmp_path / "a.pt.trace.json"))
    assert (profile.cp_edges["kind"] == "dependency").sum() == 4  # one per step
    v, _ = _values(profile)
    assert v["critical_path.bound"] == "device"
    assert v["critical_path.device_ratio"] == pytest.approx((9_000 + 6_000) / STEP_US)


def test_without_launch_links_the_path_is_not_evaluated(tmp_path):
    def body(tr: _Trace, t0: float) -> None:
        tr.launch("cudaLaunchKernel", t0 + 110, 10, "kernel", "k", t0 + 130, 18_000, correlation=False)

    profile = kineto.read(_steps(_Trace(), body).write(tmp_path / "a.pt.trace.json"))
    assert profile.cp_edges is None
    assert any(kcp.NO_LAUNCH_LINKS in n for n in profile.meta.notes)
    v, skipped = _values(profile)
    assert "critical_path.length_ms" not in v
    assert "cp_edges" in skipped["critical_path.length_ms"]


def test_a_cpu_only_trace_has_a_host_only_path(tmp_path):
    def body(tr: _Trace, t0: float) -> None:
        tr.host("cpu_op", "aten::mm", t0 + 100, 15_000)
        tr.host("cpu_op", "aten::add", t0 + 15_200, 4_000)

    tr = _steps(_Trace(), body)
    path = tmp_path / "a.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": tr.events}))
    profile = kineto.read(path)
    assert profile.meta.device == "cpu"
    v, skipped = _values(profile)
    assert v["critical_path.host_ratio"] == 1.0 and v["critical_path.bound"] == "host"
    assert v["critical_path.length_ms"] == pytest.approx(STEP_US / 1000)
    assert skipped["critical_path.device_ratio"] == HOST_ONLY


def test_longest_path_follows_the_heaviest_chain_and_refuses_cycles():
    src, dst = np.array([0, 0, 1, 2, 3]), np.array([1, 2, 3, 3, 4])
    length, on = longest_path(src, dst, np.array([1.0, 5.0, 1.0, 1.0, 2.0]))
    assert length == 8.0 and on.tolist() == [1, 3, 4]
    assert longest_path(np.array([0, 1]), np.array([1, 0]), np.array([1.0, 1.0])) is None


# ---------------------------------------------------------------- real traces


def _corpus_values(path: Path) -> tuple[dict, dict, object]:
    from advisor.collectors import load_profile

    profile = load_profile(path)
    v, skipped = _values(profile)
    return v, skipped, profile


def test_event_sync_corpus_step_links_the_waits_and_is_host_bound(corpus):
    v, _, profile = _corpus_values(corpus / "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz")
    step_ms = float(profile.steps["duration_us"].iloc[0]) / 1000
    # the training thread spans the step; the 36 us spin_kernel the cudaEventSynchronize waits for is on it
    assert v["critical_path.length_ms"] == pytest.approx(step_ms)
    assert v["critical_path.device_ratio"] * step_ms >= 0.036
    assert v["critical_path.bound"] == "host"  # the 2.2 ms aten::empty dominates
    assert (profile.cp_edges["kind"] == "sync").any()


def test_multi_stream_corpus_trace_has_cross_stream_edges_but_no_steps(corpus):
    v, skipped, profile = _corpus_values(corpus / "hta/critical_path/cuda_event_sync_multi_stream/"
                                                  "event_sync_trace.json.gz")
    assert (profile.cp_edges["kind"] == "dependency").sum() >= 1
    assert "critical_path.length_ms" not in v and "step markers" in skipped["critical_path.length_ms"]


def test_ddp_corpus_trace_is_host_bound(corpus):
    # 78% device idle with the host busy (README): the path runs on the host
    v, _, _ = _corpus_values(corpus / "hta/nccl_parser_config/nccl_data.json.gz")
    assert v["critical_path.bound"] == "host" and v["critical_path.host_ratio"] > 0.9


def test_a_real_cpu_run_has_a_host_only_path_as_long_as_its_steps(tmp_path, examples):
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1", ADVISOR_STRICT="1")
    proc = subprocess.run([sys.executable, "-m", "advisor", "run", "--steps", "3", "-o", str(out), "--no-color",
                           "--", sys.executable, str(examples / "train_mlp.py")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    m = {k: v["value"] for k, v in report["metrics"].items()}
    skipped = {s["what"]: s["reason"] for s in report["skipped"]}
    assert m["critical_path.host_ratio"] == 1.0 and m["critical_path.bound"] == "host"
    assert report["metrics"]["critical_path.length_ms"]["evidence"]["host_only"] is True
    # the training thread runs the whole step (ProfilerStep#N is one of its ranges)
    assert m["critical_path.length_ms"] == pytest.approx(m["step.time_ms"], rel=0.01)
    assert skipped["metric critical_path.device_ratio"] == HOST_ONLY
