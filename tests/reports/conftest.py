"""Report objects for the renderer tests, built here with realistic contents:
a 4-rank data-parallel run with findings, fixes, chart tables, metrics,
skipped items, and op names that try to inject markup."""

from __future__ import annotations

import math
import random

import pytest

from advisor.model import CheckGroup, Finding, FindingScope, Fix, Metric, Report, RunInfo, Verdict
from advisor.profile import Skip

from xss_names import XSS_FLAG_SCRIPT, XSS_IMG, XSS_SCRIPT  # noqa: E402

TORCH_DATALOADER_FIX = """\
loader = torch.utils.data.DataLoader(
    dataset,
    batch_size=64,
    num_workers=8,          # was 0: decode images in worker processes
    pin_memory=True,
    persistent_workers=True,
    prefetch_factor=4,
)"""

MS_DATASET_FIX = """\
import mindspore.dataset as ds

ds.config.set_prefetch_size(16)
dataset = dataset.map(operations=transforms, input_columns="image",
                      num_parallel_workers=8, python_multiprocessing=True)"""

NPU_FUSION_FIX = """\
import torch_npu
# fuse gradient all-reduce into larger buckets
model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=100)"""


def _run(ranks: list[int], steps: int) -> RunInfo:
    return RunInfo(
        framework="torch_npu",
        device="ascend",
        source_format="ascend_pt",
        source_version="CANN 8.0.RC2",
        source_path="/data/profiles/llama7b_dp4_<run>&\"q\"/ASCEND_PROFILER_OUTPUT",
        ranks=ranks,
        steps_found=steps,
        notes=["rank 3 has no memory table", "times converted from us to ms"],
        advisor_version="0.1.0",
        generated_at="2025-11-22T21:10:00Z",
    )


def _tables(ranks: list[int], steps: int, rng: random.Random) -> dict:
    step_rows = []
    for s in range(steps):
        computing = 120 + rng.uniform(-6, 6)
        overlapped = 18 + rng.uniform(-2, 2)
        exposed = 24 + rng.uniform(-3, 3) + (30 if s == 7 else 0)
        free = 41 + rng.uniform(-5, 5)
        step_rows.append(
            {
                "step": s + 1,
                "duration_ms": computing + exposed + free,
                "computing_ms": computing,
                "overlapped_ms": overlapped,
                "exposed_comm_ms": exposed,
                "free_ms": free,
            }
        )
    rank_rows = []
    for r in ranks:
        slow = 25 if r == 2 else 0
        rank_rows.append(
            {
                "rank": r,
                "duration_ms": 185 + slow,
                "computing_ms": 120 + slow,
                "overlapped_ms": 18,
                "exposed_comm_ms": 24 + (5 if r != 2 else 0),
                "free_ms": 41 - (5 if r != 2 else 0),
            }
        )
    ops = [
        ("MatMulV2", "MatMulV2", "AI_CORE", 4096, 812.5),
        ("aclnnFlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 512, 640.1),
        ("hcom_allReduce__123_0", "HcomAllReduce", "HCCL", 64, 455.0),
        (XSS_SCRIPT, "Custom", "AI_CPU", 12, 301.0),
        (XSS_IMG, "Custom", "AI_VECTOR_CORE", 9, 250.0),
        (XSS_FLAG_SCRIPT, "Custom", "AI_CPU", 3, 120.0),
        ("LayerNormV3", "LayerNormV3", "AI_VECTOR_CORE", 2048, 210.4),
        ("Cast", "Cast", "AI_VECTOR_CORE", 9000, 188.0),
        ("TransData", "TransData", "AI_CORE", 3000, 160.2),
        ("aclnnSoftmax", "SoftmaxV2", "AI_VECTOR_CORE", 1024, 90.7),
        ("a" * 300, "VeryLongNameOp", "AI_CORE", 1, 50.0),
    ]
    top_ops = [
        {"name": n, "type": t, "core": c, "count": k, "total_ms": ms} for n, t, c, k, ms in ops
    ]
    links = [
        {
            "src": a,
            "dst": b,
            "transport": "HCCS" if (a // 8) == (b // 8) else "RDMA",
            "size_mb": 1024.0,
            "time_ms": round(1024.0 / bw, 4),
            "bandwidth_gbps": bw,
        }
        for a in ranks
        for b in ranks
        if a != b
        for bw in [round(18.0 + rng.uniform(-1, 1) - (9.0 if 2 in (a, b) else 0.0), 3)]
    ]
    tables = {"step_breakdown": step_rows, "rank_breakdown": rank_rows, "top_ops": top_ops}
    if links:
        tables["links"] = sorted(links, key=lambda r: r["bandwidth_gbps"])
    return tables


def _findings() -> list[Finding]:
    return [
        Finding(
            rule="input-bound",
            id="ADV001",
            title="The input pipeline stalls the device",
            severity="high",
            message=f"The device is idle 22% of each step waiting for data; slowest op {XSS_SCRIPT}.",
            estimated_gain_ms=38.5,
            estimated_gain_pct=20.8,
            confidence=0.86,
            scope=FindingScope(ranks=[0, 1, 2, 3], steps=list(range(1, 21)), ops=[XSS_IMG]),
            evidence={
                "step.free_ratio": 0.221,
                "data.wait_ms": 36.9,
                "worst_op": XSS_SCRIPT,
                "per_rank": {"0": 0.2, "1": 0.21, "2": 0.25, "3": 0.22},
            },
            fix=Fix(
                framework="pytorch",
                text="Load and decode batches in worker processes and pin host memory.",
                code=TORCH_DATALOADER_FIX,
            ),
            caveats=["Gains assume the dataset fits the page cache.", f"Op {XSS_IMG} was excluded."],
            claims="data_wait",
            contributing=[
                Finding(
                    rule="slow-dataset-op",
                    id="ADV002",
                    title="One dataset operation starves the input pipeline",
                    severity="medium",
                    message=f"{XSS_SCRIPT} is the slowest stage of the dataset pipeline; try 8 workers.",
                    estimated_gain_ms=30.0,
                    estimated_gain_pct=16.2,
                    time_at_stake_ms=36.9,
                    confidence=0.7,
                    scope=FindingScope(ops=[XSS_SCRIPT]),
                    evidence={"data.bottleneck_op": XSS_SCRIPT, "data.bottleneck_usage_drop": 0.93},
                    fix=Fix(framework="mindspore", text="Raise num_parallel_workers of the slow map.",
                            code=MS_DATASET_FIX),
                    claims="data_wait",
                ),
            ],
        ),
        Finding(
            rule="exposed-communication",
            id="ADV004",
            title="Gradient all-reduce is not hidden behind backward",
            severity="medium",
            message="Exposed communication is 13% of step time; all-reduce buckets are small (25 MB).",
            estimated_gain_ms=14.2,
            estimated_gain_pct=7.7,
            confidence=0.7,
            scope=FindingScope(ranks=[0, 1, 3]),
            evidence={"comm.exposed_ratio": 0.13, "comm.allreduce_count": 64},
            fix=Fix(framework="torch_npu", text="Use larger DDP buckets.", code=NPU_FUSION_FIX),
        ),
        Finding(
            rule="slow-rank",
            id="ADV007",
            title="Rank 2 is 13% slower than its peers",
            severity="medium",
            message="Rank 2 computes 25 ms more per step than the median rank.",
            estimated_gain_ms=9.0,
            estimated_gain_pct=4.9,
            scope=FindingScope(ranks=[2]),
            evidence={"cluster.slow_rank": 2, "cluster.compute_spread_ms": 25.0},
            fix=Fix(framework="mindspore", text="Check the dataset shard sizes.", code=MS_DATASET_FIX),
        ),
        Finding(
            rule="aicpu-ops",
            id="ADV012",
            title="Operators fall back to AI CPU",
            severity="low",
            message=f"3 operators run on AI_CPU, e.g. `{XSS_SCRIPT}` | and `{XSS_IMG}`.",
            estimated_gain_ms=None,
            estimated_gain_pct=None,
            scope=FindingScope(ops=[XSS_SCRIPT, XSS_IMG, XSS_FLAG_SCRIPT]),
            evidence={"ops.aicpu_count": 3},
        ),
    ]


def _metrics(n_extra: int, rng: random.Random) -> dict[str, Metric]:
    base = [
        Metric(id="step.mean_ms", value=185.2, unit="ms", evidence={"ranks": [0, 1, 2, 3]}),
        Metric(id="step.free_ratio", value=0.221, unit="ratio"),
        # the step's parts (the verdict's share bar): 100 + 20 + 24 + 41.2 = 185.2
        Metric(id="step.time_ms", value=185.2, unit="ms"),
        Metric(id="step.computing_ms", value=120.0, unit="ms"),
        Metric(id="step.overlapped_ms", value=20.0, unit="ms"),
        Metric(id="step.exposed_comm_ms", value=24.0, unit="ms"),
        Metric(id="step.free_ms", value=41.2, unit="ms"),
        Metric(id="step.data_wait_ms", value=36.9, unit="ms"),
        Metric(id="comm.overlap_ratio", value=0.43, unit="ratio"),
        Metric(id="comm.exposed_ratio", value=0.13, unit="ratio"),
        Metric(id="cluster.slow_rank", value=2, unit="count", scope="rank"),
        Metric(id="data.queue_empty_ratio", value=None, unit="ratio"),
        Metric(id="ops.aicpu_names", value=[XSS_SCRIPT, XSS_IMG], unit="list", scope="op"),
        Metric(id="run.is_distributed", value=True, unit="bool"),
        Metric(id="ops.worst_name", value=XSS_FLAG_SCRIPT, unit="text", scope="op"),
        Metric(id="step.duration_cv", value=0.0412, unit="ratio"),
        Metric(id="comm.bandwidth_gbps", value=17.8, unit="GB/s", scope="link"),
    ]
    out = {m.id: m for m in base}
    for i in range(n_extra):
        mid = f"op.time_ms.op_{i:05d}"
        out[mid] = Metric(id=mid, value=round(rng.uniform(0, 1000), 3), unit="ms", scope="op")
    return out


def make_report(
    *,
    ranks: int = 4,
    steps: int = 20,
    extra_metrics: int = 0,
    extra_findings: int = 0,
    tables: bool = True,
) -> Report:
    rng = random.Random(7)
    rank_ids = list(range(ranks))
    findings = _findings()
    for i in range(extra_findings):
        findings.append(
            Finding(
                rule=f"synthetic-rule-{i}",
                id=f"ADV{100 + i}",
                title=f"Synthetic finding {i} with a | pipe and `tick`",
                severity=("info", "low", "medium", "high")[i % 4],
                message=f"Op {XSS_SCRIPT} is slow on step {i}; " + "detail " * 20,
                estimated_gain_ms=round(1000 / (i + 1), 2),
                estimated_gain_pct=round(math.log(i + 2), 2),
                scope=FindingScope(steps=[i]),
                evidence={"value": i},
                fix=Fix(framework="pytorch", text="Try this.", code=f"x = {i}  # ```\nprint(x)\n" * 5),
            )
        )
    return Report(
        run=_run(rank_ids, steps),
        verdict=Verdict(
            status="problems",
            reason="3 finding(s) of medium severity or above, led by: The input pipeline stalls the device",
            missing=[f"compute: ops.fp32_matrix_ratio: the ops table has no input_dtypes values ({XSS_IMG})"],
            checks=[CheckGroup(group="data", judged=True, evaluated=["input-bound"]),
                    CheckGroup(group="compute", judged=False, skipped=["fp32-compute"])],
        ),
        findings=findings,
        metrics=_metrics(extra_metrics, rng),
        skipped=[
            Skip(what="memory", reason="rank 3: memory_record.csv not found"),
            Skip(what="rule:data-queue-empty", reason=f"needs data.queue_empty_ratio; op {XSS_IMG}"),
        ],
        tables=_tables(rank_ids, steps, rng) if tables else {},
    )


@pytest.fixture
def report() -> Report:
    return make_report()


@pytest.fixture
def single_rank_report() -> Report:
    r = make_report(ranks=1)
    r.tables.pop("rank_breakdown")
    return r


@pytest.fixture
def big_report() -> Report:
    return make_report(extra_metrics=5000, extra_findings=196)


@pytest.fixture
def report_factory():
    return make_report
