"""A finding's fix is the one for the platform the profile shows: the GPU
model a Kineto trace records (float16 advice where the GPU has no bfloat16
tensor cores), the framework an Ascend layout's files name, and both Ascend
frameworks' fixes, each under its condition, where none names it. Its
caveats are those true on that platform: one written for some frameworks or
devices only is left off a run known to be on another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors import load_profile
from advisor.engine.evaluation import compile_rule, evaluate_rule, run_context
from advisor.engine.loader import load_rules

V100_RUN = Path("kineto-tb-plugin/resnet50_num_workers_0")
ASCEND_CLUSTER = Path("mstt/test/resource/advisor")
STEP_TRACE = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
    "Bubble,Communication(Not Overlapped and Exclude Receive)\n"
    "1,20,0,0,0,5,25,0,0\n2,15,0,0,0,10,25,0,0\n"
)
#: What a GPU-only fix says that is wrong on an NPU.
GPU_ONLY = ("torch.compile", "ProfilerActivity.CUDA", "device_type=\"cuda\"", "torch.cuda")


def _rule(name: str):
    return compile_rule(next(r for r in load_rules([]) if r.name == name))


def _fired(rule: str, example: str, **run):
    compiled = _rule(rule)
    metrics = next(e for e in compiled.rule.examples if e.name.startswith(example)).metrics
    finding, skip = evaluate_rule(compiled, metrics, framework=run.get("framework", "unknown"),
                                  device=run.get("device", "unknown"), run=run_context(**run))
    assert skip is None and finding is not None
    return finding


def test_v100_trace_records_the_gpu_and_fp32_compute_advises_float16_with_grad_scaler(corpus):
    profile = load_profile(corpus / V100_RUN)
    assert profile.meta.device_model == "Tesla V100-DGXS-32GB"
    assert profile.meta.compute_capability == "7.0" and profile.meta.bf16_tensor_cores is False
    report = advisor.analyze(corpus / V100_RUN)
    finding = next(f for f in report.findings if f.rule == "fp32-compute")
    # the message names what this GPU has: float16 tensor cores, no bfloat16 ones and no Ascend cube units
    assert "In float16 they run on the tensor cores" in finding.message and "cube" not in finding.message
    fix = finding.fix
    assert fix.framework == "pytorch"
    assert "float16 autocast with a GradScaler" in fix.text and "Tesla V100-DGXS-32GB" in fix.text
    assert "torch.float16" in fix.code and "GradScaler" in fix.code
    assert "bfloat16" not in fix.code
    # no TF32 before Ampere: the tensor-core fix is float16 alone
    cores = next(f for f in report.all_findings() if f.rule == "no-tensor-cores").fix
    assert "no TF32" in cores.text and "Tesla V100-DGXS-32GB" in cores.text
    assert "allow_tf32" not in cores.code and "GradScaler" in cores.code


def test_fp32_compute_keeps_bfloat16_on_a_gpu_with_bf16_tensor_cores():
    ampere = _fired("fp32-compute", "MindSpore VGG16", framework="pytorch", device="gpu",
                    device_model="NVIDIA A100-SXM4-40GB", compute_capability="8.0", bf16_tensor_cores=True)
    assert "torch.bfloat16" in ampere.fix.code and "GradScaler" not in ampere.fix.code
    assert "In float16/bfloat16 they run on the tensor cores" in ampere.message
    npu = _fired("fp32-compute", "MindSpore VGG16", framework="mindspore", device="ascend")
    assert "they run on the cube units" in npu.message and "tensor cores" not in npu.message
    unknown = _fired("fp32-compute", "MindSpore VGG16", framework="pytorch", device="gpu")
    assert "bfloat16 where the GPU has bfloat16 tensor cores" in unknown.fix.text


def test_input_bound_pins_memory_only_where_a_device_receives_the_batch():
    # pin_memory speeds the host-to-device copy; a CPU run copies nothing
    cpu = _fired("input-bound", "PyTorch DataLoader", framework="pytorch", device="cpu")
    assert "num_workers=" in cpu.fix.code
    assert "pin_memory" not in cpu.fix.code + cpu.fix.text and "host-to-device" not in cpu.fix.text
    gpu = _fired("input-bound", "PyTorch DataLoader", framework="pytorch", device="gpu")
    assert "pin_memory=True" in gpu.fix.code and "host-to-device" in gpu.fix.text


def _caveats(finding) -> str:
    return " ".join(finding.caveats)


def test_gpu_trace_findings_carry_no_ascend_or_mindspore_caveat(corpus):
    report = advisor.analyze(corpus / V100_RUN)
    assert report.run.framework == "pytorch" and report.run.device == "gpu"
    found = {f.rule: f for f in report.findings}
    assert {"input-bound", "fp32-compute"} <= set(found), list(found)
    assert "MindSpore iteration interval" not in _caveats(found["input-bound"])
    assert "The gain assumes the pipeline" in _caveats(found["input-bound"])  # the caveat for every platform
    assert "HF32" not in _caveats(found["fp32-compute"])
    assert "Check accuracy after the change" in _caveats(found["fp32-compute"])


def test_mindspore_run_keeps_the_iteration_interval_caveat(examples):
    report = advisor.analyze(examples / "resnet50_data_bound")
    assert report.run.framework == "mindspore"
    bound = next(f for f in report.findings if f.rule == "input-bound")
    assert "A MindSpore iteration interval also contains host-side work" in _caveats(bound)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_platform_caveat_kept_where_the_run_may_be_on_that_platform(lang):
    compiled = compile_rule(next(r for r in load_rules([], lang=lang) if r.name == "fp32-compute"))
    metrics = compiled.rule.examples[0].metrics
    hf32 = "HF32"

    def caveats(**run):
        finding, _ = evaluate_rule(compiled, metrics, framework=run.get("framework", "unknown"),
                                   device=run.get("device", "unknown"), lang=lang, run=run_context(**run))
        return _caveats(finding)

    assert hf32 in caveats(device="ascend")  # framework not recorded
    assert hf32 in caveats(framework="torch_npu", device="ascend")
    assert hf32 in caveats()  # nothing known: not ruled out
    assert hf32 not in caveats(framework="pytorch", device="gpu")
    assert len(caveats(device="gpu")) < len(caveats(device="ascend"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_what_would_confirm_an_inferred_finding_is_said_for_the_runs_platform(lang):
    compiled = compile_rule(next(r for r in load_rules([], lang=lang) if r.name == "launch-bound"))
    metrics = next(e for e in compiled.rule.examples if e.name.startswith("small MLP in eager mode")).metrics
    said = {}
    for device in ("gpu", "ascend"):
        finding, _ = evaluate_rule(compiled, metrics, framework="unknown", device=device, lang=lang,
                                   run=run_context(device=device))
        assert finding.direct_evidence is False
        said[device] = finding.message
    assert "CUDA" in said["gpu"] and "trace_view.json" not in said["gpu"]
    assert "trace_view.json" in said["ascend"] and "CUDA" not in said["ascend"] and "NPU" in said["ascend"]

    compiled = compile_rule(next(r for r in load_rules([], lang=lang) if r.name == "exposed-p2p"))
    metrics = next(e for e in compiled.rule.examples if e.expect == "fire").metrics
    for device, ascend_only in (("gpu", False), ("ascend", True), ("unknown", True)):
        finding, _ = evaluate_rule(compiled, metrics, device=device, lang=lang, run=run_context(device=device))
        assert finding.direct_evidence is False
        assert ("step_trace_time.csv" in finding.message) is ascend_only, (device, finding.message)


def test_gpu_model_threshold_is_compute_capability_8():
    from advisor.profile import RunMeta

    assert RunMeta(compute_capability="7.5").bf16_tensor_cores is False  # T4
    assert RunMeta(compute_capability="8.0").bf16_tensor_cores is True  # A100
    assert RunMeta(compute_capability="8.9").bf16_tensor_cores is True
    assert RunMeta().bf16_tensor_cores is None


def test_ascend_run_without_framework_gets_torch_npu_and_mindspore_fixes_each_with_its_condition(corpus):
    report = advisor.analyze(corpus / ASCEND_CLUSTER)
    assert report.run.device == "ascend" and report.run.framework == "unknown"
    idle = next(f for f in report.findings if f.rule == "device-idle")
    assert "torch_npu or MindSpore" in idle.fix.framework
    assert idle.fix.text.startswith("If the job runs PyTorch with torch_npu: ")
    assert " If it runs MindSpore: " in idle.fix.text
    assert "# torch_npu\nimport torch_npu" in idle.fix.code and "# MindSpore\nimport mindspore" in idle.fix.code
    for finding in report.findings:
        for wrong in GPU_ONLY:
            assert wrong not in finding.fix.text + (finding.fix.code or ""), (finding.rule, wrong)


def test_ascend_fix_under_both_conditions_in_english_and_chinese():
    finding = _fired("fp32-compute", "MindSpore VGG16", device="ascend")
    assert finding.fix.text.startswith("If the job runs PyTorch with torch_npu: Run the forward pass under "
                                       "autocast on the NPU")
    assert 'device_type="npu"' in finding.fix.code and "amp.auto_mixed_precision(network, amp_level=\"O2\")" in finding.fix.code
    compiled = compile_rule(next(r for r in load_rules([], lang="zh") if r.name == "fp32-compute"))
    metrics = compiled.rule.examples[0].metrics
    zh, _ = evaluate_rule(compiled, metrics, device="ascend", lang="zh", run=run_context(device="ascend"))
    assert zh.fix.text.startswith("若作业使用 PyTorch（torch_npu）：") and "若使用 MindSpore：" in zh.fix.text


def test_known_framework_gets_its_own_fix_only():
    npu = _fired("fp32-compute", "MindSpore VGG16", framework="torch_npu", device="ascend")
    assert npu.fix.framework == "torch_npu" and "MindSpore" not in npu.fix.text


def _rank(tmp_path: Path, framework_files: list[str]) -> Path:
    """A rank folder whose name does not tell the framework, with the given
    files under FRAMEWORK/."""
    root = tmp_path / "rank_0"
    (root / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (root / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_text(STEP_TRACE)
    (root / "profiler_info_0.json").write_text(json.dumps({"rank_id": 0}))
    if framework_files:
        (root / "FRAMEWORK").mkdir()
        for name in framework_files:
            (root / "FRAMEWORK" / name).write_bytes(b"\0")
    return root


@pytest.mark.parametrize(("files", "framework"), [
    (["torch.op_range", "torch.op_mark"], "torch_npu"),
    (["cpu_op_execute_timestamp_0.txt"], "mindspore"),
    ([], "unknown"),
])
def test_ascend_framework_is_read_from_the_files_the_framework_writes(tmp_path, files, framework):
    assert load_profile(_rank(tmp_path, files)).meta.framework == framework


def test_a_timeline_whose_host_lanes_hold_pytorch_calls_is_torch_npu(corpus):
    """A lone trace_view.json (no folder name, no FRAMEWORK/ files) whose host
    lanes hold aten:: and autograd:: calls was written by torch_npu: its
    fixes are torch_npu's alone, and the optimizer's is the fused one of its
    own algorithm (Adam, not AdamW)."""
    report = advisor.analyze(corpus / "mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json")
    assert report.run.framework == "torch_npu"
    fused = next(f for f in report.findings if f.rule == "unfused-optimizer")
    assert "Adam" in fused.message and fused.fix.framework == "torch_npu"
    assert "NpuFusedAdam(" in fused.fix.code and "instead of torch.optim.Adam\n" in fused.fix.code + "\n"
    for finding in report.findings:
        assert "MindSpore" not in finding.fix.text and "import mindspore" not in (finding.fix.code or "")


def test_a_mindspore_timeline_is_not_taken_for_torch_npu(corpus):
    """MindSpore names its host operators by scope or primitive, never aten::
    or autograd::: every event name of a real MindSpore trace_view.json,
    read as host calls, leaves the framework unknown."""
    import pandas as pd

    from advisor.collectors.ascend.meta import framework_from_host_calls

    (trace,) = (corpus / "mindspore-cpu").glob("*_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json")
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = pd.DataFrame({"name": [str(e.get("name", "")) for e in events]})
    assert len(names) > 50 and names["name"].str.contains("MatMul").any()
    assert framework_from_host_calls(names) == "unknown"
    torch_names = pd.DataFrame({"name": ["Optimizer.step#Adam.step", "aten::addmm"]})
    assert framework_from_host_calls(torch_names) == "torch_npu"


def test_ascend_run_without_framework_never_gets_a_pytorch_fix_as_the_mindspore_one():
    """exposed-collective has a PyTorch fix only: it is the torch_npu one,
    under its condition, and nothing is offered as MindSpore's."""
    assert set(_rule("exposed-collective").rule.fix) == {"pytorch"}
    finding = _fired("exposed-collective", "", device="ascend")
    assert finding.fix.text.startswith("If the job runs PyTorch with torch_npu: ")
    assert "MindSpore" not in finding.fix.text and "# MindSpore" not in finding.fix.code


def test_memory_growth_fix_per_framework_on_ascend():
    """memory-growth's snapshot is the framework's own: torch_npu's allocator
    on torch_npu, none of CUDA's; a MindSpore run keeps Python numbers."""
    npu = _fired("memory-growth", "", framework="torch_npu", device="ascend")
    assert npu.fix.framework == "torch_npu" and "npu_memory._dump_snapshot" in npu.fix.code
    assert "cuda" not in npu.fix.code
    ms = _fired("memory-growth", "", framework="mindspore", device="ascend")
    assert ms.fix.framework == "mindspore" and "loss.asnumpy()" in ms.fix.code and "torch" not in ms.fix.code


def test_a_gpu_without_tensor_cores_is_not_told_it_has_them(corpus):
    """Compute capability below 7.0 (Pascal) has no tensor cores: the
    no-tensor-cores measure is not evaluated (nothing to move there), and
    fp32-compute's fix says float16 must be measured, not that the GPU has
    float16 tensor cores. The V100 trace's kernels read as a P100's."""
    from advisor.metrics.ops import fp32_no_tensor_core_ratio
    from advisor.metrics.registry import NotEvaluated

    profile = load_profile(corpus / V100_RUN)
    assert fp32_no_tensor_core_ratio(profile).value > 0  # on the V100 it is measured
    profile.meta.compute_capability = "6.0"
    with pytest.raises(NotEvaluated, match="has no tensor cores"):
        fp32_no_tensor_core_ratio(profile)
    pascal = _fired("fp32-compute", "MindSpore VGG16", framework="pytorch", device="gpu",
                    device_model="Tesla P100-PCIE-16GB", compute_capability="6.0", bf16_tensor_cores=False)
    assert "has no tensor cores" in pascal.fix.text and "has float16 tensor cores" not in pascal.fix.text
