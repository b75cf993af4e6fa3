"""The block-dim check (advisor.metrics.kernels.block_dim_* and the rule
block-dim-underfill) on torch_npu output folders written to the documented
formats, and on the corpus's kernel files, which have block dims but no
device core count.

The kernel rows are those of tests/metrics/test_kernels.py (torch_npu's
kernel_details.csv with its Block Dim and Mix Block Dim columns). The
device's core counts are in ``PROF_*/device_{id}/info.json.{id}``, a JSON
object whose "DeviceInfo" list holds ``ai_core_num`` and ``aiv_num``: the
record msprof writes and tests (msprof's
test/.../profiling_bean/basic_info/test_device_info.py ``info_json``;
msprof-analyze reads the same keys in advisor/dataset/profiling/device_info.py
and judges the block dims in advisor/analyzer/computation/bound/
block_dim_checker.py). Beside it msprof leaves ``info.json.{id}.done``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.metrics.kernels import idle_share
from advisor.pipeline import analyze
from tests.metrics.test_kernels import ADAMW, HEADER, NEW_KERNELS, OLD_KERNELS, _row

#: The vector cores of an Atlas A2 training card as its info.json states
#: them (ai_core_num 24, aiv_num 48); the fixture writes them, advisor reads them.
AIC, AIV = 24, 48


def _info(aic: int | None, aiv: int | None) -> dict:
    device = {"id": 0, "env_type": 3, "ctrl_cpu_id": "ARMv8_Cortex_A55", "ctrl_cpu_core_num": 4,
              "ts_cpu_core_num": 1, "ai_cpu_core_num": 4, "ai_core_id": 0, "hwts_frequency": "50",
              "aic_frequency": "1800", "aiv_frequency": "1800"}
    if aic is not None:
        device["ai_core_num"] = aic
    if aiv is not None:
        device["aiv_num"] = aiv
    return {"DeviceInfo": [device]}


def _rank_folder(tmp_path: Path, per_step, steps: int = 4, info: dict | None = None) -> Path:
    """A torch_npu rank folder: ASCEND_PROFILER_OUTPUT/kernel_details.csv,
    step_trace_time.csv (1 ms steps; its columns as torch_npu writes them,
    advisor.collectors.ascend.fields) and, when ``info`` is given,
    PROF_*/device_0/info.json.0 (+ .done)."""
    root = tmp_path / "worker_1234_20250101000000000_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    rows, t = [], 1736413971558972.0
    for s in range(1, steps + 1):
        for name, op_type, core, dur, shapes, dtypes, kw in per_step(s):
            rows.append(_row(s, t, name, op_type, core, dur, shapes, dtypes, **kw))
            t += dur + 2.0
    (out / "kernel_details.csv").write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    (out / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
        "Communication(Not Overlapped and Exclude Receive),Preparing\n"
        + "".join(f"{s},900.0,0,0,0,100.0,1000.0,0,0,0\n" for s in range(1, steps + 1)))
    if info is not None:
        device = root / "PROF_000001_20250101000000000_ABCDEFGHIJ" / "device_0"
        device.mkdir(parents=True)
        (device / "info.json.0").write_text(json.dumps(info))
        (device / "info.json.0.done").write_text("")
    return root


MATMUL = ("aclnnMatmul_MatMulV2", "MatMulV2", "AI_CORE", 400.0, "4096,4096;4096,4096", "DT_BF16;DT_BF16",
          {"cube": (0.8, 0.6, 0.1), "block": (24, 0)})
#: an elementwise add spread over 20 of the 48 vector cores
ADD_20 = ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", 300.0, "2560,1280;2560,1280", "DT_BF16;DT_BF16",
          {"vec": (0.4, 0.5, 0.4), "block": (20, 0)})
ADD_48 = ADD_20[:6] + ({"vec": (0.4, 0.5, 0.4), "block": (48, 0)},)


def _rules(report) -> dict:
    return {f.rule: f for f in report.all_findings()}


@pytest.mark.parametrize("blocks,cores,idle", [(20, 48, 28 / 48), (48, 48, 0.0), (96, 48, 0.0),
                                               (50, 48, 46 / 96), (1, 24, 23 / 24)])
def test_idle_share_is_the_empty_core_slots_of_the_waves(blocks, cores, idle):
    import pandas as pd
    assert idle_share(pd.Series([float(blocks)]), pd.Series([float(cores)]))[0] == pytest.approx(idle)


def test_block_dim_underfill_fires_on_a_vector_op_on_20_of_48_cores(tmp_path):
    root = _rank_folder(tmp_path, lambda s: [MATMUL, ADD_20, ADAMW], info=_info(AIC, AIV))
    report = analyze(root, jobs=1)
    idle = report.metrics["kernels.block_dim_idle_ms"]
    # Add: 300 us a step on 20 of 48 cores; MatMul (24 on 24) and AdamW (24 on 48 vector cores)
    adamw_idle = 120.0 * (1 - 24 / 48)
    assert idle.value == pytest.approx((300.0 * 28 / 48 + adamw_idle) / 1000, rel=1e-3)
    assert report.metrics["kernels.block_dim_underfilled_ms"].value == pytest.approx(0.42, rel=1e-3)
    top = idle.evidence["ops"][0]
    assert (top["type"], top["block_dim"], top["cores"]) == ("Add", 20, AIV)
    assert idle.evidence["ai_core_num"] == [AIC] and idle.evidence["aiv_num"] == [AIV]
    finding = _rules(report)["block-dim-underfill"]
    assert finding.estimated_gain_ms == pytest.approx(idle.value, rel=1e-3)
    assert "Add (block dim 20 on 48 cores, 58% idle)" in finding.message


def test_block_dim_underfill_quiet_when_block_dims_fill_the_cores(tmp_path):
    adamw_48 = ADAMW[:6] + ({**ADAMW[6], "block": (48, 0)},)
    root = _rank_folder(tmp_path, lambda s: [MATMUL, ADD_48, adamw_48], info=_info(AIC, AIV))
    report = analyze(root, jobs=1)
    assert report.metrics["kernels.block_dim_idle_ms"].value == 0.0
    assert "block-dim-underfill" not in _rules(report)


#: a MIX_AIC kernel of 24 cube blocks and 40 vector blocks
FA = ("aclnnFlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 500.0, "8,2048,1024;8,2048,1024",
      "DT_BF16;DT_BF16", {"cube": (0.7, 0.5, 0.1), "block": (24, 40)})


def test_mix_kernels_are_judged_by_their_mix_block_dim_on_the_vector_cores(tmp_path):
    # 40 vector blocks: 8 of 48 vector cores idle
    report = analyze(_rank_folder(tmp_path, lambda s: [MATMUL, FA], info=_info(AIC, AIV)), jobs=1)
    assert report.metrics["kernels.block_dim_idle_ms"].value == pytest.approx(0.5 * 8 / 48, rel=1e-3)


def test_mix_kernels_without_a_vector_count_are_judged_by_their_cube_blocks(tmp_path):
    # 24 cube blocks on the 24 AI Cores: none idle
    report = analyze(_rank_folder(tmp_path, lambda s: [MATMUL, FA], info=_info(AIC, None)), jobs=1)
    assert report.metrics["kernels.block_dim_idle_ms"].value == 0.0


def test_not_evaluated_without_the_device_core_count(tmp_path):
    report = analyze(_rank_folder(tmp_path, lambda s: [MATMUL, ADD_20, ADAMW], info=None), jobs=1)
    assert "kernels.block_dim_idle_ms" not in report.metrics
    assert any("info.json" in s.reason for s in report.skipped if "block_dim_idle" in s.what)


def test_an_info_json_without_ai_core_num_counts_as_none(tmp_path):
    report = analyze(_rank_folder(tmp_path, lambda s: [ADD_20], info=_info(None, AIV)), jobs=1)
    assert "kernels.block_dim_idle_ms" not in report.metrics
    assert "block-dim-underfill" not in _rules(report)


@pytest.mark.parametrize("path", [NEW_KERNELS, OLD_KERNELS])
def test_corpus_kernels_have_block_dims_but_no_core_count(corpus, path):
    report = analyze(corpus / path, jobs=1)
    assert "kernels.block_dim_idle_ms" not in report.metrics
    assert "block-dim-underfill" not in _rules(report)


def _db_rank(tmp_path: Path, add_blocks: int) -> Path:
    """The same rank in the database layout (bench.scenarios.ascend.write_db: COMPUTE_TASK_INFO's
    blockNum / mixBlockNum, msprof "Profile Data File Reference (DB)"), 1 ms steps of a MatMul on
    24 AI Cores and an Add on ``add_blocks`` blocks, and the device's info.json beside it."""
    from bench.scenarios.ascend import RankSpec, write_db

    spec = RankSpec(rank=0)
    for k in range(4):
        s0 = k * 1_000_000
        spec.steps.append((k + 1, s0, s0 + 1_000_000))
        spec.tasks.append(MATMUL[:3] + (MATMUL[5], MATMUL[4], s0 + 10_000, s0 + 410_000))
        spec.tasks.append(ADD_20[:3] + (ADD_20[5], ADD_20[4], s0 + 420_000, s0 + 720_000))
        spec.blocks[2 * k], spec.blocks[2 * k + 1] = (24, 0), (add_blocks, 0)
        spec.breakdown[k + 1] = (710.0, 0.0, 0.0, 0.0, 290.0, 1000.0, 0.0, 0.0)
    root = write_db(tmp_path, spec)
    device = root / "PROF_000001_20250101000000000_ABCDEFGHIJ" / "device_0"
    device.mkdir(parents=True)
    (device / "info.json.0").write_text(json.dumps(_info(AIC, AIV)))
    return root


def test_block_dims_from_the_database_layout(tmp_path):
    report = analyze(_db_rank(tmp_path, 20), jobs=1)
    idle = report.metrics["kernels.block_dim_idle_ms"]
    assert idle.value == pytest.approx(0.3 * 28 / 48, rel=1e-3)  # the Add: 300 us a step on 20 of 48 cores
    top = idle.evidence["ops"][0]
    assert (top["type"], top["block_dim"], top["cores"]) == ("Add", 20, AIV)
    assert "block-dim-underfill" in _rules(report)


def test_block_dims_from_the_database_layout_that_fill_the_cores(tmp_path):
    report = analyze(_db_rank(tmp_path, 48), jobs=1)
    assert report.metrics["kernels.block_dim_idle_ms"].value == 0.0
    assert "block-dim-underfill" not in _rules(report)
