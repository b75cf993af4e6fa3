"""Writes MindSpore GPU ``profiler/`` folders in the documented layout, for
the tests of ``advisor.collectors.mindspore_gpu``.

No real GPU profile is public (the MindSpore and MindInsight test data hold
only a two-event ``gpu_timeline_display_0.json``), so each file is written
as the MindSpore source that produces it writes it:

* ``gpu_op_detail_info``, ``gpu_op_type_info``, ``gpu_activity_data``
  (headers and row order): ``OpDetailInfo`` / ``OpType`` / ``ActivityData``
  in ``mindspore/ccsrc/plugin/device/gpu/hal/profiler/gpu_data_saver.h``
  and ``include/backend/debug/profiler/data_saver.h``; kernel names quoted.
* ``step_trace_profiling`` (per-point form, 10 ns ticks): ``GpuDataSaver::
  WriteStepTrace`` in ``gpu_data_saver.cc``; the per-step form (ns):
  ``GpuDataSaver::WriteStepTraceAsyncLaunchKernel``.
* ``step_trace_raw_{dev}_detail_time.csv``: ``GpuStepTraceParser`` and
  ``BaseStepTraceParser._record_average_info`` in
  ``mindspore/python/mindspore/profiler/parser/step_trace_parser.py``
  (steps from 1, then the mean row with step_num ``-``).
* ``minddata_getnext_profiling``: ``GetNextProfiling::SaveProfilingData`` in
  ``.../gpu/data/dataset_profiling.cc`` (``GetNext start_ns end_ns size``).
* ``minddata_pipeline_raw``: ``MinddataPipelineParser`` in
  ``mindspore/python/mindspore/profiler/parser/minddata_pipeline_parser.py``.
* ``device_queue_profiling``: MindData connector records
  ``1 capacity batch size time_ms``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

TICKS_PER_MS = 100_000  # 10 ns ticks
#: A plausible system-clock origin (ns) for the timestamps.
T0_NS = 1_600_695_893_269_618_200

FP_OP = "Default/network-WithLossCell/_backbone-ResNet/conv1-Conv2d/Conv2D-op107"
BP_OP = "Gradients/Default/network-WithLossCell/_backbone-ResNet/gradConv2D/Conv2DBackpropFilter-op618"
END_OP = "Default/optimizer-Momentum/ApplyMomentum-op55"
START_OP = "Default/GetNext-op1"
ALLREDUCE_OP = "Default/AllReduce-op3"


@dataclass
class Kernel:
    name: str
    op_full_name: str
    per_step_us: float
    launches_per_step: int = 1


#: float32 ResNet kernels without tensor cores (cuBLAS/cuDNN SIMT names).
FP32_KERNELS = (
    Kernel("volta_sgemm_128x64_nn", "Default/network-WithLossCell/_backbone-ResNet/fc-Dense/MatMul-op2", 9000.0, 2),
    Kernel("void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true, false, true>"
           "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, "
           "float, float, int, float const*, float const*, bool, int, int)",
           "Default/network-WithLossCell/_backbone-ResNet/conv1-Conv2d/Conv2D-op107", 21000.0, 53),
    Kernel("void cudnn::detail::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, "
           "float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, "
           "float*, float*, float, float)",
           "Default/network-WithLossCell/_backbone-ResNet/bn1-BatchNorm2d/BatchNorm-op9", 6000.0, 53),
    Kernel("void MomentumUpdateVariableKernel<float, float, float>(unsigned long, float*, float*, float const*, "
           "float const*, float const*, bool)", END_OP, 2000.0, 161),
)
#: The same network in float16 on tensor cores.
FP16_KERNELS = (
    Kernel("volta_h884gemm_64x64_ldg8_nn", "Default/network-WithLossCell/_backbone-ResNet/fc-Dense/MatMul-op2",
           2500.0, 2),
    Kernel("volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1",
           "Default/network-WithLossCell/_backbone-ResNet/conv1-Conv2d/Conv2D-op107", 7000.0, 53),
    Kernel("void cudnn::bn_fw_tr_1C11_singleread_fp16<512, 1, 2, 0>(cudnnTensorStruct, __half2 const*, "
           "cudnnTensorStruct, __half2*, float const*, float const*, float, float, float*, float*, float*, "
           "float*, float, float)",
           "Default/network-WithLossCell/_backbone-ResNet/bn1-BatchNorm2d/BatchNorm-op9", 3000.0, 53),
    Kernel("void MomentumUpdateVariableKernel<float, float, float>(unsigned long, float*, float*, float const*, "
           "float const*, float const*, bool)", END_OP, 2000.0, 161),
)


@dataclass
class GpuRun:
    """One device's profile: steps (ms), kernels, data pipeline and queues."""

    dev: int = 0
    steps: int = 10
    interval_ms: float = 45.0
    fp_bp_ms: float = 48.0
    tail_ms: float = 7.0
    kernels: tuple[Kernel, ...] = FP32_KERNELS
    #: (op_id, op_type, workers, output queue usage or None for the root, parent id or None)
    pipeline: tuple = ((0, "Batch", 4, None, None), (1, "Map", 2, 0.04, 0), (2, "ImageFolder", 8, 0.96, 1))
    queue_capacity: int = 64
    getnext_sizes: list[int] = field(default_factory=lambda: [32] + [0] * 9)
    host_queue_sizes: list[int] = field(default_factory=lambda: [2] + [0] * 9)
    allreduce_ms: float | None = None
    rank_size: int = 1

    @property
    def step_ms(self) -> float:
        return self.interval_ms + self.fp_bp_ms + self.tail_ms


def points(run: GpuRun) -> list[dict]:
    """Per step: start, fp, bp, end (ns)."""
    out, t = [], T0_NS
    for _ in range(run.steps):
        fp = t + round(run.interval_ms * 1e6)
        bp = fp + round(run.fp_bp_ms * 1e6)
        end = bp + round(run.tail_ms * 1e6)
        out.append({"start": t, "fp": fp, "bp": bp, "end": end})
        t = end
    return out


def write(folder: Path, run: GpuRun, *, csv_trace: bool = True, txt_trace: str | None = "point") -> Path:
    """Write ``run`` into ``folder`` (created); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    d = run.dev
    pts = points(run)
    if csv_trace:
        write_step_csv(folder / f"step_trace_raw_{d}_detail_time.csv", run, pts)
    if txt_trace == "point":
        write_step_txt_points(folder / f"step_trace_profiling_{d}.txt", run, pts)
    elif txt_trace == "step":
        write_step_txt_steps(folder / f"step_trace_profiling_{d}.txt", run, pts)
    write_activity(folder / f"gpu_activity_data_{d}.csv", run)
    write_op_detail(folder / f"gpu_op_detail_info_{d}.csv", run)
    write_op_type(folder / f"gpu_op_type_info_{d}.csv", run)
    write_pipeline(folder / f"minddata_pipeline_raw_{d}.csv", run)
    (folder / f"minddata_getnext_profiling_{d}.txt").write_text("".join(
        f"GetNext {p['start']} {p['start'] + 20_000} {size}\n" for p, size in zip(pts, run.getnext_sizes)))
    (folder / f"device_queue_profiling_{d}.txt").write_text("".join(
        f"1 {run.queue_capacity} {i + 1} {size} {p['start'] // 1_000_000}\n"
        for i, (p, size) in enumerate(zip(pts, run.host_queue_sizes))))
    (folder / f"profiler_info_{d}.json").write_text(json.dumps(
        {"rank_size": run.rank_size, "ms_version": "2.2.14", "graph_ids": [1]}))
    return folder


def _allreduce(run: GpuRun, p: dict) -> tuple[int, int]:
    start = p["bp"] + 1_000_000
    return start, start + round(run.allreduce_ms * 1e6)


def write_step_csv(path: Path, run: GpuRun, pts: list[dict]) -> None:
    header = ["step_num", "start_point", "end_point", "total", "fp_point", "bp_point", "iteration_interval",
              "fp_and_bp", "tail"]
    rows = []
    for i, p in enumerate(pts, start=1):
        t = {k: v // 10 for k, v in p.items()}
        row = [i, t["start"], t["end"], t["end"] - t["start"], t["fp"], t["bp"], t["fp"] - t["start"],
               t["bp"] - t["fp"], t["end"] - t["bp"]]
        if run.allreduce_ms is not None:
            s, e = (v // 10 for v in _allreduce(run, p))
            row += [e - s, s, e]
        rows.append(row)
    if run.allreduce_ms is not None:
        col = "stream_ops_0_AllReduce-op3"
        header += [col, col + "_start_point", col + "_end_point"]
    mean = ["-"] + [round(sum(r[j] for r in rows) / len(rows)) for j in range(1, len(header))]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
        w.writerow(mean)


def write_step_txt_points(path: Path, run: GpuRun, pts: list[dict]) -> None:
    """Per-point form: 'op s,e s,e ...' in 10 ns ticks (op start/end)."""
    spans = {FP_OP: [(p["fp"], p["fp"] + 300_000) for p in pts],
             BP_OP: [(p["bp"] - 400_000, p["bp"]) for p in pts],
             END_OP: [(p["end"] - 50_000, p["end"]) for p in pts]}
    if run.allreduce_ms is not None:
        spans[ALLREDUCE_OP] = [_allreduce(run, p) for p in pts]
    path.write_text("".join(f"{op} " + "".join(f"{s // 10},{e // 10} " for s, e in pairs) + "\n"
                            for op, pairs in spans.items()))


def write_step_txt_steps(path: Path, run: GpuRun, pts: list[dict]) -> None:
    """Per-step form: 'start_op,t fp_op,t bp_op,t end_op,t [comm,s,e]' in ns."""
    lines = []
    for p in pts:
        line = f"{START_OP},{p['start']} {FP_OP},{p['fp']} {BP_OP},{p['bp']} {END_OP},{p['end']}"
        if run.allreduce_ms is not None:
            s, e = _allreduce(run, p)
            line += f" {ALLREDUCE_OP},{s},{e}"
        lines.append(line + "\n")
    path.write_text("".join(lines))


def write_activity(path: Path, run: GpuRun) -> None:
    with path.open("w", newline="") as f:
        f.write("name,type,op_full_name,stream_id,block_dim,grid_dim,occurrences,"
                "total_duration(us),avg_duration(us),max_duration(us),min_duration(us)\n")
        for k in run.kernels:
            n = k.launches_per_step * run.steps
            total = k.per_step_us * run.steps
            avg = total / n
            f.write(f'"{k.name}",cuLaunchKernel,{k.op_full_name},7,"128,1,1","64,1,1",{n},{total},{avg},'
                    f"{avg * 1.2},{avg * 0.9}\n")


def _ops(run: GpuRun) -> dict[str, list[float]]:
    ops: dict[str, list[float]] = {}
    for k in run.kernels:
        entry = ops.setdefault(k.op_full_name, [0, 0.0, 0.0, 0])
        entry[0] = max(entry[0], run.steps)
        entry[1] += k.per_step_us * run.steps * 1.1  # host-measured: launch and wait
        entry[2] += k.per_step_us * run.steps
        entry[3] += k.launches_per_step * run.steps
    return ops


def write_op_detail(path: Path, run: GpuRun) -> None:
    ops = _ops(run)
    total = sum(v[1] for v in ops.values())
    with path.open("w") as f:
        f.write("op_side,op_type,op_name,op_full_name,op_occurrences,op_total_time(us),op_avg_time(us),"
                "total_proportion,cuda_activity_cost_time(us),cuda_activity_call_count\n")
        for full, (count, host, device, calls) in ops.items():
            name = full.rsplit("/", 1)[-1]
            f.write(f"Device,{name.rsplit('-', 1)[0]},{name},{full},{count},{host},{host / count},"
                    f"{host / total},{device},{calls}\n")


def write_op_type(path: Path, run: GpuRun) -> None:
    ops = _ops(run)
    total = sum(v[1] for v in ops.values())
    with path.open("w") as f:
        f.write("op_type,type_occurrences,total_time(us),total_proportion,avg_time(us)\n")
        for full, (count, host, _device, _calls) in ops.items():
            f.write(f"{full.rsplit('/', 1)[-1].rsplit('-', 1)[0]},{count},{host},{host / total},{host / count}\n")


def write_pipeline(path: Path, run: GpuRun) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op_id", "op_type", "num_workers", "output_queue_size", "output_queue_average_size",
                    "output_queue_length", "output_queue_usage_rate", "sample_interval", "parent_id",
                    "children_id"])
        children = {op[0]: [c[0] for c in run.pipeline if c[4] == op[0]] for op in run.pipeline}
        for op_id, op_type, workers, usage, parent in run.pipeline:
            kids = str(children[op_id]) if children[op_id] else ""
            if usage is None:  # the root feeds the device queue: no connector queue
                w.writerow([op_id, op_type, workers, "", "", "", 0, 10, "", kids])
                continue
            size = usage * run.queue_capacity
            w.writerow([op_id, op_type, workers, str([round(size)] * 4), size, run.queue_capacity, usage, 10,
                        parent, kids])
