"""A second Ascend cluster generator, written apart from ``bench.scenarios``.

The speed benchmark measures advisor beside msprof-analyze on generated
clusters. Measured on one generator only, a ratio may reflect what that
generator happens to write (its column set, its file order, its sizes)
rather than the tools. This one is written from the format documents
(``reference/ascend-pytorch-profiler-files-zh.txt``: the torch_npu
output tree and the columns of ``kernel_details.csv`` and
``step_trace_time.csv``; ``reference/mindspore-ascend-profiling-guide.txt``:
``communication.json`` and ``communication_matrix.json``) and from what
msprof-analyze's cluster reader asks of a rank folder
(``cluster_data_preprocess``: a ``*_ascend_pt`` folder holding
``profiler_info_{rank}.json`` and ``ASCEND_PROFILER_OUTPUT/``; folders of
one rank sorted by the timestamp in ``{host}_{pid}_{timestamp}_ascend_pt``).

How it differs from ``bench.scenarios`` on purpose:

* ranks are laid out as hosts of 8 devices, folders named by host and
  process, and written in a shuffled rank order (file creation order is
  not rank order);
* ``kernel_details.csv`` carries the full documented column set (device
  id, model, task and stream ids, block dims, HF32, input and output
  shapes/types/formats), and compute kernels of several types and shapes;
* ``step_trace_time.csv`` carries ``Stage``, ``Bubble`` and the
  receive-excluded column; step ids start at an arbitrary number;
* several gradient buckets per step (``hcom_allReduce__...`` operators)
  with bandwidth records per transport, plus ``communication_matrix.json``;
* ranks vary as hosts do: a per-host and a per-rank factor on compute,
  so a large cluster has a natural spread and no two ranks are equal.

    python -m bench.ascend_cluster --ranks 1024 -o /tmp/alt1024
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

#: Devices per host (an Atlas 800T A2 server has 8 NPUs).
DEVICES_PER_HOST = 8
#: Columns of kernel_details.csv, in the documented order (reference table 1).
KERNEL_COLUMNS = (
    "Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
    "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim",
    "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
    "Output Data Types", "Output Formats",
)
#: Columns of step_trace_time.csv (reference table 6, plus the pipeline columns).
STEP_COLUMNS = (
    "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
    "Bubble", "Communication(Not Overlapped and Exclude Receive)",
)
#: (type, name stem, accelerator core, input shapes, dtypes, share of compute time)
KERNEL_KINDS = (
    ("MatMulV2", "aclnnMm_MatMulCommon_MatMulV2", "AI_CORE", '"4096,1024;1024,4096"', '"FLOAT16;FLOAT16"', 0.46),
    ("BatchMatMul", "aclnnBmm_BatchMatMul", "AI_CORE", '"16,512,64;16,64,512"', '"BF16;BF16"', 0.18),
    ("FlashAttentionScore", "aclnnFlashAttentionScore_FlashAttentionScore", "MIX_AIC",
     '"1,16,2048,128;1,16,2048,128"', '"BF16;BF16"', 0.14),
    ("Add", "aclnnAdd_AddAiCore_Add", "AI_VECTOR_CORE", '"4096,1024;4096,1024"', '"FLOAT16;FLOAT16"', 0.07),
    ("Cast", "aclnnCast_CastAiCore_Cast", "AI_VECTOR_CORE", '"4096,1024"', '"FLOAT"', 0.05),
    ("LayerNorm", "aclnnLayerNorm_LayerNormV4", "AI_VECTOR_CORE", '"4096,1024;1024"', '"FLOAT16;FLOAT16"', 0.06),
    ("TransData", "TransData", "AI_CORE", '"1024,4096"', '"FLOAT16"', 0.04),
)


@dataclass(frozen=True)
class Layout:
    """What to write: ``ranks`` devices, ``steps`` steps of ``kernels``
    compute kernels each, ``buckets`` all-reduce operators per step."""

    ranks: int
    steps: int = 12
    kernels: int = 160
    buckets: int = 4
    step_ms: float = 180.0
    first_step: int = 37
    seed: int = 11


def _folder(parent: Path, rank: int, rng: random.Random) -> Path:
    host = rank // DEVICES_PER_HOST
    pid = 200_000 + 97 * rank + rng.randrange(90)
    stamp = 20250314091500123 + rng.randrange(5000)
    return parent / f"node-{host:03d}_{pid}_{stamp}_ascend_pt"


def _step_rows(lay: Layout, compute_us: list[float], comm_us: float, rng: random.Random) -> list[list[float]]:
    rows = []
    for s in range(lay.steps):
        comp = compute_us[s]
        overlapped = comm_us * (0.55 + 0.1 * rng.random())
        exposed = comm_us - overlapped
        free = lay.step_ms * 1000 * 0.04 * (0.8 + 0.4 * rng.random())
        rows.append([lay.first_step + s, comp, exposed, overlapped, comm_us, free, comp + exposed + free, 0.0,
                     exposed])
    return rows


def _kernel_lines(lay: Layout, rank: int, compute_us: list[float], comm_us: float,
                  rng: random.Random) -> list[str]:
    lines = [",".join(KERNEL_COLUMNS)]
    t = 1_741_915_000_000_000.0 + rank * 3.0
    task = 0
    per_bucket = comm_us / lay.buckets
    kinds = len(KERNEL_KINDS)
    counts = [sum(1 for j in range(lay.kernels) if j % kinds == i) for i in range(kinds)]
    for s in range(lay.steps):
        step = lay.first_step + s
        start = t
        budget = compute_us[s]
        for k in range(lay.kernels):
            kind = KERNEL_KINDS[k % kinds]
            dur = budget * kind[5] / counts[k % kinds] * (0.9 + 0.2 * rng.random())
            task += 1
            lines.append(f"{step},{rank % DEVICES_PER_HOST},4294967295,{task},2,{kind[1]}_{k},{kind[0]},static,"
                         f"{kind[2]},\"{t:.3f}\t\",{dur:.3f},{0.4 + rng.random():.3f},40,0,NO,{kind[3]},{kind[4]},"
                         f"\"ND;ND\",\"4096,1024\",FLOAT16,ND")
            t += dur + 1.5
            if k % (lay.kernels // lay.buckets) == lay.kernels // lay.buckets - 1:
                task += 1
                lines.append(f"{step},{rank % DEVICES_PER_HOST},4294967295,{task},7,"
                             f"hcom_allReduce__{rank % 1000}_{s * lay.buckets + k // (lay.kernels // lay.buckets)}_1,"
                             f"hcom_allReduce_,N/A,HCCL,\"{t:.3f}\t\",{per_bucket:.3f},0,0,0,N/A,\"\",\"\",\"\",\"\",\"\","
                             "\"\"")
        t = start + lay.step_ms * 1000
    return lines


def _communication(lay: Layout, rank: int, comm_us: float, rng: random.Random) -> dict:
    out = {}
    per_bucket_ms = comm_us / lay.buckets / 1000
    size_mb = 96.0
    for s in range(lay.steps):
        ops = {}
        for b in range(lay.buckets):
            transit = per_bucket_ms * (0.7 + 0.1 * rng.random())
            wait = per_bucket_ms - transit
            hccs = {"Transit Size(MB)": size_mb, "Transit Time(ms)": transit,
                    "Bandwidth(GB/s)": round(size_mb / transit / 1000, 4) if transit else 0,
                    "Large Packet Ratio": 1.0, "Size Distribution": {"12.0": [8, transit]}}
            empty = {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
                     "Size Distribution": {}}
            rdma = dict(hccs) if lay.ranks > DEVICES_PER_HOST else empty
            ops[f"hcom_allReduce__{rank % 1000}_{s * lay.buckets + b}_1@{lay.ranks}ranks_group"] = {
                "Communication Time Info": {
                    "Start Timestamp(us)": 1_741_915_000_000_000.0 + s * lay.step_ms * 1000 + b * 5000,
                    "Elapse Time(ms)": per_bucket_ms, "Transit Time(ms)": transit, "Wait Time(ms)": wait,
                    "Synchronization Time(ms)": wait * 0.3, "Idle Time(ms)": 0.0,
                    "Wait Time Ratio": round(wait / (wait + transit), 4),
                    "Synchronization Time Ratio": round(0.3 * wait / (0.3 * wait + transit), 4)},
                "Communication Bandwidth Info": {"RDMA": rdma, "HCCS": hccs, "PCIE": empty, "SDMA": hccs,
                                                 "SIO": empty},
            }
        out[f"step{lay.first_step + s}"] = {"collective": ops, "p2p": {}}
    return out


def _matrix(lay: Layout, rank: int) -> dict:
    peer = (rank + 1) % lay.ranks
    link = {"Transport Type": "HCCS" if rank // DEVICES_PER_HOST == peer // DEVICES_PER_HOST else "RDMA",
            "Transit Size(MB)": 96.0 * lay.buckets, "Transit Time(ms)": 4.0 * lay.buckets,
            "Bandwidth(GB/s)": 24.0, "op_name": f"hcom_allReduce__{rank % 1000}_0_1"}
    return {f"step{lay.first_step + s}": {"collective": {f"allreduce-top1@{lay.ranks}ranks_group": {
        f"{rank}-{peer}": link}}, "p2p": {}} for s in range(lay.steps)}


def write_rank(out: Path, lay: Layout, rank: int, host_factor: float) -> Path:
    """One rank's ``*_ascend_pt`` folder under ``out``."""
    rng = random.Random(lay.seed * 1_000_003 + rank)
    folder = _folder(out, rank, rng)
    result = folder / "ASCEND_PROFILER_OUTPUT"
    result.mkdir(parents=True)
    rank_factor = host_factor * (1 + rng.gauss(0, 0.02))
    compute = [lay.step_ms * 1000 * 0.78 * rank_factor * (1 + rng.gauss(0, 0.006)) for _ in range(lay.steps)]
    comm_us = lay.step_ms * 1000 * 0.22 * (1 + rng.gauss(0, 0.01))
    (folder / f"profiler_info_{rank}.json").write_text(json.dumps({
        "config": {"common_config": {"activities": ["CPU", "NPU"], "schedule": {"wait": 1, "warmup": 1,
                                                                                  "active": lay.steps}},
                   "experimental_config": {"profiler_level": "Level1", "aic_metrics": "AiCoreNone"}},
        "start_info": {"syscnt_enable": True, "freq": 100.0}, "end_info": {"collectionTimeEnd": 0},
        "torch_npu_version": "2.1.0.post10", "cann_version": "8.0.RC3"}))
    (folder / "profiler_metadata.json").write_text(json.dumps({
        "distributed_args": {"rank": rank, "world_size": lay.ranks, "tensor_model_parallel_size": 1,
                             "pipeline_model_parallel_size": 1, "data_parallel_size": lay.ranks},
        "ENV_VARIABLES": {"ASCEND_GLOBAL_LOG_LEVEL": "3", "HCCL_RDMA_TC": ""}}))
    (result / "kernel_details.csv").write_text("\n".join(_kernel_lines(lay, rank, compute, comm_us, rng)) + "\n")
    rows = _step_rows(lay, compute, comm_us, rng)
    (result / "step_trace_time.csv").write_text(
        ",".join(STEP_COLUMNS) + "\n" + "\n".join(",".join(f"{v:.3f}" if i else str(int(v)) for i, v in enumerate(r))
                                                  for r in rows) + "\n")
    (result / "communication.json").write_text(json.dumps(_communication(lay, rank, comm_us, rng)))
    (result / "communication_matrix.json").write_text(json.dumps(_matrix(lay, rank)))
    return folder


def write(out: Path, lay: Layout) -> Path:
    """The cluster under ``out`` (created), ranks in a shuffled order."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(lay.seed)
    hosts = (lay.ranks + DEVICES_PER_HOST - 1) // DEVICES_PER_HOST
    host_factor = [1 + rng.gauss(0, 0.015) for _ in range(hosts)]
    order = list(range(lay.ranks))
    rng.shuffle(order)
    for rank in order:
        write_rank(out, lay, rank, host_factor[rank // DEVICES_PER_HOST])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ascend_cluster", description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--steps", type=int, default=Layout.steps)
    ap.add_argument("--kernels", type=int, default=Layout.kernels)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)
    print(write(args.out, Layout(ranks=args.ranks, steps=args.steps, kernels=args.kernels)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
