"""Verdicts on the measured window, on real traces (../shared/corpus, whose
README says what a careful expert concludes on each): start-up is named and
left out, toys, micro-benchmarks and cut traces get no utilisation verdict,
a GPU job whose device work was not recorded gets no device verdict -- and
real training traces keep theirs."""

from __future__ import annotations

import pytest

from advisor.model import SEVERITY_ORDER
from advisor.pipeline import analyze

#: Device-utilisation figures: not evaluated when the device record cannot support them.
DEVICE_FIGURES = ("step.free_ratio", "step.device_idle_ratio", "step.host_idle_ratio", "step.host_wait_ratio",
                  "step.kernel_gap_ratio")
#: Verdicts none of the toy, cut, start-up or host-only traces may get.
WRONG_HERE = {"host-bound", "input-bound", "h2d-copy-bound", "launch-bound"}


def _report(corpus, name):
    path = corpus / name
    if name == "mindspore-cpu":
        path = next(path.glob("*_ascend_ms"))
    return analyze(path)


def _skips(report) -> dict[str, str]:
    return {s.what.removeprefix("metric "): s.reason for s in report.skipped}


def _serious(report) -> list[tuple[str, str]]:
    return [(f.rule, f.severity) for f in report.findings if SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["medium"]]


def _assert_no_device_verdict(report, reason: str) -> None:
    """No serious finding, none of WRONG_HERE, and every device figure
    skipped with ``reason``."""
    assert _serious(report) == [], _serious(report)
    assert not WRONG_HERE & {f.rule for f in report.findings}, [f.rule for f in report.findings]
    skips = _skips(report)
    for metric in DEVICE_FIGURES:
        assert metric not in report.metrics, metric
        assert reason in skips[metric], (metric, skips[metric])


# ---------------------------------------------------------------- start-up


def test_simple_add_is_startup_named_and_left_out(corpus):
    """A PARAM AlexNet benchmark: 24.6 s of CUDA init under the first
    .to('cuda'), a 15.6 s first forward inside the first cudnn_convolution,
    pageable weight uploads, one measured forward that is mostly cudaMalloc."""
    report = _report(corpus, "hta/critical_path/simple_add")
    _assert_no_device_verdict(report, "the window is mostly start-up")
    m = report.metrics
    assert m["window.warmup_ratio"].value > 0.95
    named = {i["name"]: i for i in m["window.warmup_items"].value}
    assert named["cudaDeviceGetStreamPriorityRange"]["kind"] == "init"
    assert named["cudaDeviceGetStreamPriorityRange"]["ms"] == pytest.approx(24587, abs=1)
    assert named["aten::cudnn_convolution"]["kind"] == "first_call"
    assert named["aten::cudnn_convolution"]["ms"] == pytest.approx(15575, abs=1)
    # the one-time weight uploads are no per-step copy cost, the first forward no data wait
    skips = _skips(report)
    assert skips["ops.memcpy_h2d_ratio"].startswith("the window is mostly start-up")
    assert skips["step.data_wait_ratio"].startswith("the window is mostly start-up")
    warm = next(f for f in report.findings if f.rule == "warmup-window")
    assert warm.severity == "info" and warm.estimated_gain_ms is None
    assert "cudaDeviceGetStreamPriorityRange" in warm.message and "aten::cudnn_convolution" in warm.message
    assert "were not evaluated" in warm.message


def test_execution_trace_is_cuda_init(corpus):
    """A torch.add micro-benchmark: 19.58 of 19.85 s is CUDA init under the
    first aten::rand, then 4 kernels and 16 us of device work."""
    report = _report(corpus, "hta/execution_trace/benchmark_simple_add_trace.json.gz")
    _assert_no_device_verdict(report, "the window is mostly start-up")
    m = report.metrics
    assert m["window.warmup_ratio"].value == pytest.approx(0.987, abs=0.005)
    assert m["window.warmup_items"].value[0]["name"] == "cudaDeviceGetStreamPriorityRange"
    assert "warmup-window" in {f.rule for f in report.findings}


# ---------------------------------------------------------------- toys, micro-benchmarks, cut traces


def test_call_stack_one_kernel_in_a_cut_step(corpus):
    """7 events cut by hand: one 45 us kernel; the step's annotation is
    mostly outside what was kept."""
    report = _report(corpus, "hta/call_stack/backward_thread.json")
    _assert_no_device_verdict(report, "device activity is too sparse to describe a training step: 1 device")
    assert report.metrics["window.truncated_steps"].value == 1
    assert report.metrics["window.device_ops_per_step"].value == 1


def test_cuda_event_sync_toy_step(corpus):
    """One 3.15 ms step of a toy: 5 device operations, GPU busy 1.6%."""
    report = _report(corpus, "hta/critical_path/cuda_event_sync")
    _assert_no_device_verdict(report, "too sparse to describe a training step: 5 device operations per step")
    assert report.metrics["window.truncated_steps"].value == 0  # its 0.6 ms of Python before the first op stays
    assert report.metrics["step.time_ms"].value == pytest.approx(3.154)


def test_cuda_event_sync_multi_stream_three_sgemms_no_steps(corpus):
    """Three SGEMMs on three streams, no step markers: nothing significant;
    the SGEMMs without tensor cores are a valid but tiny hint."""
    report = _report(corpus, "hta/critical_path/cuda_event_sync_multi_stream")
    _assert_no_device_verdict(report, "too sparse to describe a training step")
    assert any("no ProfilerStep#N step markers" in n for n in report.run.notes)
    assert {f.rule for f in report.findings} <= {"no-tensor-cores"}


@pytest.mark.parametrize("side", ["base", "test"])
def test_trace_compare_hand_picked_events(corpus, side):
    """33-34 events hand-picked from one trace: 17-18 device events, 2 of
    them with their launch, in 745 ms: no utilisation figure."""
    report = _report(corpus, f"hta/trace_compare/{side}")
    _assert_no_device_verdict(report, "too sparse to describe a training step: 7.5 device operations per step")
    assert report.metrics["window.launch_match_ratio"].value < 0.2
    assert report.findings == []


# ---------------------------------------------------------------- no device record


def test_distributed_info_unavailable_is_a_gpu_job_without_device_record(corpus):
    """deviceProperties lists 8 A100s, but the 2,467 events are CPU
    operators and annotations only: no idle, overlap or kernel verdict."""
    report = _report(corpus, "hta/distributed_info_unavailable")
    assert report.run.device == "gpu"
    assert report.findings == [], [f.rule for f in report.findings]
    note = next(n for n in report.run.notes if "no kernel, memcpy or memset events" in n)
    assert "deviceProperties lists 8 GPUs" in note and "ProfilerActivity.CUDA" in note
    skips = _skips(report)
    for metric in DEVICE_FIGURES:
        assert metric not in report.metrics
    assert "no free_us values" in skips["step.free_ratio"]
    assert "no ops table" in skips["ops.matrix_ratio"]
    assert report.metrics["step.time_ms"].value == pytest.approx(75.473)  # the host view stays


def test_mindspore_cpu_run_has_no_verdict(corpus):
    report = _report(corpus, "mindspore-cpu")
    assert report.findings == []
    assert "host-bound" not in {f.rule for f in report.findings}


# ---------------------------------------------------------------- real training traces keep their verdicts


def test_resnet50_num_workers_0_stays_input_bound(corpus):
    report = _report(corpus, "kineto-tb-plugin/resnet50_num_workers_0")
    m = report.metrics
    assert "input-bound" in {f.rule for f in report.findings}
    assert m["window.device_ops_per_step"].value > 1000 and m["window.launch_match_ratio"].value == 1.0
    assert m["window.warmup_ratio"].value == 0 and m["window.truncated_steps"].value == 0
    assert 0.3 <= m["step.device_idle_ratio"].value <= 0.45
    assert "warmup-window" not in {f.rule for f in report.findings}


def test_nccl_parser_config_keeps_its_idle_figures(corpus):
    """A CNN under DDP on an A100, about 78% device idle: a whole record
    (1,258 device operations per step, every launch recorded, no start-up),
    so the idle figure and the host-bound verdict stand."""
    report = _report(corpus, "hta/nccl_parser_config/nccl_data.json.gz")
    m = report.metrics
    assert m["window.device_ops_per_step"].value == 1258 and m["window.launch_match_ratio"].value == 1.0
    assert m["window.warmup_ratio"].value == 0
    assert 0.72 <= m["step.device_idle_ratio"].value <= 0.82
    assert "host-bound" in {f.rule for f in report.findings}


def test_trace_filter_sampled_ranks_keep_their_figures(corpus):
    """Two DLRM ranks sampled down to about 600 device operations per step,
    each with its launch: real steps, whose utilisation figures stand."""
    report = _report(corpus, "hta/trace_filter")
    m = report.metrics
    assert m["window.device_ops_per_step"].value > 500 and m["window.launch_match_ratio"].value == 1.0
    assert "step.device_idle_ratio" in m and "step.host_idle_ratio" in m
