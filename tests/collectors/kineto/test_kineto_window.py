"""The measured window of a Kineto trace (``kineto_window``, ``kineto_presence``):
steps cut by the recorded span, one-time start-up, the device record, and
whether there is a device at all. Traces are written in the Kineto format,
with the event categories and call names a real profiler writes."""

from __future__ import annotations

import pytest
from test_kineto_reduce import X, write

from advisor.collectors.kineto import collector as kineto
from advisor.collectors.kineto import window as kw
from advisor.collectors.kineto.calls import ALLOC_CALLS, GROW_CALLS, INIT_CALLS
from advisor.pipeline import analyze

MS = 1000.0


class Trace:
    """Builds the events of a GPU training loop: each step an ``aten::mm``
    that launches ``kernels`` kernels (``cudaLaunchKernel`` -> ``kernel`` by
    correlation id) back to back, 100 us each, then host time."""

    def __init__(self):
        self.events: list[dict] = []
        self.corr = 0

    def launches(self, t0: float, kernels: int, op: str = "aten::mm", op_us: float | None = None) -> float:
        """``op`` at ``t0`` launching ``kernels`` kernels; returns its end."""
        span = op_us if op_us is not None else 10.0 * kernels + 5
        self.events.append(X("cpu_op", op, t0, span))
        for k in range(kernels):
            self.corr += 1
            self.events.append(X("cuda_runtime", "cudaLaunchKernel", t0 + 1 + 10 * k, 5, correlation=self.corr))
            self.events.append(X("kernel", "ampere_sgemm_128x64_nn", t0 + 20 + 100 * k, 100, pid=0, tid=7,
                                 correlation=self.corr))
        return t0 + span

    def step(self, n: int, t0: float, dur: float, kernels: int = 30) -> None:
        self.events.append(X("user_annotation", f"ProfilerStep#{n}", t0, dur))
        self.launches(t0 + 10, kernels)

    def add(self, *events: dict) -> None:
        self.events.extend(events)


def _steps(tmp_path, trace: Trace, **top):
    return kineto.read(write(tmp_path / "t.pt.trace.json", trace.events, **top))


# ---------------------------------------------------------------- truncated steps


def test_a_step_running_far_past_the_recording_is_truncated_clipped_and_left_out(tmp_path):
    t = Trace()
    t.step(1, 0, 10 * MS)
    t.step(2, 10 * MS, 10 * MS)
    t.step(3, 20 * MS, 13_000 * MS)  # closed at exit: its recorded work fits in ~3 ms
    p = _steps(tmp_path, t)
    s = p.steps.set_index("step")
    assert s["truncated"].tolist() == [False, False, True]
    last_end = max(e["ts"] + e["dur"] for e in t.events if not e["name"].startswith("ProfilerStep"))
    assert s.loc[3, "duration_us"] == pytest.approx(last_end - 20 * MS)
    report = analyze(tmp_path / "t.pt.trace.json")
    assert report.metrics["window.truncated_steps"].value == 1
    assert report.metrics["step.time_ms"].value == pytest.approx(10.0)  # steps 1 and 2


def test_unrecorded_python_at_a_step_start_is_kept(tmp_path):
    t = Trace()
    t.add(X("user_annotation", "ProfilerStep#1", 0, 10 * MS))
    t.launches(1 * MS, 30)  # 1 ms of Python before the first op: a tenth of the step
    t.add(X("cpu_op", "Optimizer.step#SGD.step", 5 * MS, 4.9 * MS))
    p = _steps(tmp_path, t)
    assert not p.steps["truncated"].iloc[0]
    assert p.steps["duration_us"].iloc[0] == 10 * MS


# ---------------------------------------------------------------- one-time start-up


def _startup_trace() -> Trace:
    """Step 1: the first .to('cuda') creates the context (3 s in
    cudaDeviceGetStreamPriorityRange), the first convolution autotunes
    (800 ms) and the allocator grows; steps 2 and 3 are steady."""
    t = Trace()
    t.add(X("user_annotation", "ProfilerStep#1", 0, 4_000 * MS),
          X("cpu_op", "aten::to", 10, 3_001 * MS),
          X("cuda_runtime", "cudaDeviceGetStreamPriorityRange", 20, 3_000 * MS),
          X("cuda_runtime", "cudaMalloc", 3_001.5 * MS, 2 * MS),
          X("cpu_op", "aten::cudnn_convolution", 3_010 * MS, 800 * MS),
          X("cuda_runtime", "cudaStreamCreateWithFlags", 3_100 * MS, 5 * MS))
    t.launches(3_900 * MS, 30)
    for n, t0 in ((2, 4_000 * MS), (3, 4_010 * MS)):
        t.step(n, t0, 10 * MS)
        t.add(X("cpu_op", "aten::to", t0 + 4 * MS, 0.2 * MS),
              X("cpu_op", "aten::cudnn_convolution", t0 + 5 * MS, 1 * MS))
    return t


def test_startup_is_found_named_and_left_out_of_the_steady_steps(tmp_path):
    p = _steps(tmp_path, _startup_trace())
    s = p.steps.set_index("step")
    assert s.loc[1, "warmup_us"] >= 0.95 * s.loc[1, "duration_us"]
    assert s.loc[2, "warmup_us"] == s.loc[3, "warmup_us"] == 0
    listed = p.warmup.set_index("name")
    assert listed.loc["cudaDeviceGetStreamPriorityRange", "kind"] == "init"
    assert listed.loc["aten::cudnn_convolution", "kind"] == "first_call"
    assert listed.loc["cudaMalloc", "kind"] == "alloc"
    assert listed.loc["cudaStreamCreateWithFlags", "kind"] == "init"
    # the first .to() is the context creation it holds, listed as that
    assert "aten::to" not in listed.index
    assert set(listed["step"]) == {1}
    report = analyze(tmp_path / "t.pt.trace.json")
    m = report.metrics
    assert m["step.time_ms"].value == pytest.approx(10.0)  # steps 2 and 3
    assert m["window.warmup_steps"].value == [1]
    assert m["window.warmup_ratio"].value > 0.9 and m["window.steady_warmup_ratio"].value == 0
    assert m["window.warmup_items"].value[0]["name"] == "cudaDeviceGetStreamPriorityRange"
    finding = next(f for f in report.findings if f.rule == "warmup-window")
    assert finding.severity == "info" and finding.estimated_gain_ms is None
    assert "cudaDeviceGetStreamPriorityRange" in finding.message and "left out: step 1" in finding.message


def test_a_window_that_is_all_startup_gets_no_device_figures(tmp_path):
    t = _startup_trace()
    t.events = [e for e in t.events if not e["name"].startswith("ProfilerStep")]
    report = analyze(write(tmp_path / "t.pt.trace.json", t.events))
    skipped = {s.what.removeprefix("metric "): s.reason for s in report.skipped}
    for metric in ("step.free_ratio", "step.device_idle_ratio", "step.host_idle_ratio", "step.host_wait_ratio",
                   "step.kernel_gap_ms", "step.data_wait_ratio"):
        assert skipped[metric].startswith("the window is mostly start-up"), metric
        assert "cudaDeviceGetStreamPriorityRange" in skipped[metric]
    rules = {f.rule for f in report.findings}
    assert "host-bound" not in rules and "warmup-window" in rules
    finding = next(f for f in report.findings if f.rule == "warmup-window")
    assert "were not evaluated" in finding.message


def test_growth_every_step_is_churn_not_startup(tmp_path):
    t = Trace()
    for n in range(1, 5):
        t.step(n, (n - 1) * 10 * MS, 10 * MS)
        t.add(X("cuda_runtime", "cudaMalloc", (n - 1) * 10 * MS + 6 * MS, 1 * MS),
              X("cuda_runtime", "cudaFree", (n - 1) * 10 * MS + 8 * MS, 1 * MS))
    p = _steps(tmp_path, t)
    assert p.steps["warmup_us"].sum() == 0 and p.warmup is None


def test_a_first_call_blocked_behind_queued_device_work_is_not_startup(tmp_path):
    t = Trace()
    for n in range(1, 4):
        t.step(n, (n - 1) * 100 * MS, 100 * MS)
    # the capture begins while a long kernel queued before it runs: the first copy waits for it
    t.add(X("kernel", "long_kernel", 0, 60 * MS, pid=0, tid=8),
          X("cpu_op", "aten::copy_", 4 * MS, 50 * MS),
          X("cpu_op", "aten::copy_", 104 * MS, 0.05 * MS),
          X("cpu_op", "aten::copy_", 204 * MS, 0.05 * MS))
    p = _steps(tmp_path, t)
    assert p.steps["warmup_us"].sum() == 0


def test_nested_compile_ops_are_listed_once(tmp_path):
    t = Trace()
    t.add(X("user_annotation", "ProfilerStep#1", 0, 2_000 * MS),
          X("cpu_op", "dynamo", 10, 1_900 * MS),
          X("cpu_op", "entire_frame_compile", 20, 1_890 * MS),
          X("cpu_op", "backend_compile", 500 * MS, 1_000 * MS),
          X("cpu_op", "compile_fx.<locals>.fw_compiler_base (dynamo_timed)", 600 * MS, 500 * MS))
    t.launches(1_950 * MS, 30)
    t.step(2, 2_000 * MS, 10 * MS)
    p = _steps(tmp_path, t)
    assert p.warmup["name"].tolist() == ["dynamo"]
    assert p.steps.set_index("step").loc[1, "warmup_us"] == pytest.approx(1_900 * MS)


def test_start_up_calls_shorter_than_the_bound_are_steady(tmp_path):
    t = Trace()
    t.step(1, 0, 10 * MS)
    t.add(X("cuda_runtime", "cudaStreamCreateWithFlags", 5 * MS, kw.INIT_CALL_MIN_US / 2),
          X("cuda_runtime", "cudaGetDeviceProperties", 6 * MS, kw.INIT_CALL_MIN_US / 2))
    assert _steps(tmp_path, t).steps["warmup_us"].iloc[0] == 0


def test_call_classes():
    assert GROW_CALLS <= ALLOC_CALLS and not GROW_CALLS & INIT_CALLS
    assert "cudaFree" not in GROW_CALLS and "cudaMallocAsync" not in GROW_CALLS  # releases, pool reuse


# ---------------------------------------------------------------- the device record


def test_device_operations_and_their_launches_are_counted(tmp_path):
    t = Trace()
    t.step(1, 0, 10 * MS, kernels=30)
    t.step(2, 10 * MS, 10 * MS, kernels=25)
    for e in t.events:  # the trace was cut: step 2's launches are gone
        if e["cat"] == "cuda_runtime" and e["ts"] > 10 * MS:
            e["cat"] = "python_function"
    p = _steps(tmp_path, t)
    assert p.steps["device_ops"].tolist() == [30, 25]
    assert p.steps["device_ops_launched"].tolist() == [30, 0]


# ---------------------------------------------------------------- is there a device?


def _host_only() -> Trace:
    t = Trace()
    t.add(X("user_annotation", "ProfilerStep#7", 0, 80 * MS),
          X("cpu_op", "aten::linear", 1 * MS, 30 * MS),
          X("user_annotation", "nccl:all_to_all", 40 * MS, 5 * MS),
          X("cpu_op", "aten::item", 50 * MS, 5 * MS))
    return t


def _assert_gpu_without_device_record(tmp_path, path, fragment):
    p = kineto.read(path)
    assert p.meta.device == "gpu"
    assert p.ops is None and p.comm is None
    assert set(p.steps.columns) <= {"rank", "step", "start_us", "duration_us", "data_wait_us", "truncated",
                                    "warmup_us", "recompile_us"}
    note = next(n for n in p.meta.notes if "no kernel, memcpy or memset events" in n)
    assert fragment in note and "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]" in note
    report = analyze(path)
    assert report.findings == [], [f.rule for f in report.findings]
    assert "step.free_ratio" not in report.metrics and "step.host_idle_ratio" not in report.metrics


def test_cpu_operators_of_a_gpu_job_are_not_a_cpu_job(tmp_path):
    props = [{"id": i, "name": "NVIDIA A100-PG509-200", "totalGlobalMem": 85899345920} for i in range(8)]
    path = write(tmp_path / "t.pt.trace.json", _host_only().events, deviceProperties=props)
    _assert_gpu_without_device_record(tmp_path, path, "deviceProperties lists 8 GPUs")


def test_runtime_calls_without_kernels_show_a_gpu_job(tmp_path):
    t = _host_only()
    t.add(X("cuda_runtime", "cudaLaunchKernel", 2 * MS, 0.01 * MS, correlation=1))
    path = write(tmp_path / "t.pt.trace.json", t.events)
    _assert_gpu_without_device_record(tmp_path, path, "CUDA host events are recorded (cuda_runtime)")


def test_cupti_profiler_ranges_are_device_work_in_another_form(tmp_path):
    t = _host_only()
    # profiler_metrics: per-kernel counters recorded as ranges instead of timed kernels
    t.add(X("cuda_profiler_range", "void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int)",
            2 * MS, 0.1 * MS, pid=0, tid=7,
            **{"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 86114304}),
          {"ph": "C", "name": "GPU utilization", "pid": 0, "ts": 2000, "args": {"value": 0.4}})
    path = write(tmp_path / "t.pt.trace.json", t.events)
    _assert_gpu_without_device_record(tmp_path, path, "CUPTI profiler ranges")


def test_a_cpu_job_stays_a_cpu_job(tmp_path):
    # a CPU-only PyTorch run writes an empty deviceProperties
    p = kineto.read(write(tmp_path / "t.pt.trace.json", _host_only().events, deviceProperties=[]))
    assert p.meta.device == "cpu"
    assert "computing_us" in p.steps.columns and p.ops is not None
    assert not any("no kernel, memcpy or memset" in n for n in p.meta.notes)
