"""Rebuild the three tuning cases of the MindSpore performance guide as small
example profiles in the MindSpore 1.x ``profiler/`` file formats, plus a
healthy counterpart of each.

    python examples/make_tuning_cases.py            # writes examples/<case>/profiler/

Deterministic: every case uses its own seeded numpy generator. Numbers come
from the guide (see examples/README.md); per-step noise is zero-mean and the
averages are pinned to the guide's values exactly, as MindInsight's
step-trace summary (the file's average row) would show them.

File formats follow MindSpore's writers (mindspore/profiler/parser/*.py):
step-trace values are 10 ns system-counter ticks, the AI Core detail file
holds average milliseconds per execution, device-queue tracing lines are
``type extra batch value time_ms``.
"""

from __future__ import annotations

import csv
import json
import shutil
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TICKS_PER_MS = 100_000  # one Ascend system-counter tick is 10 ns
BASE_TICK = 1_734_512_000_000_000 // 10  # an arbitrary device counter origin
BASE_MS = 1_734_512_000_000  # host clock origin (ms) for MindData tracing
MS_VERSION = "1.8.1"


# --------------------------------------------------------------- step trace


@dataclass
class StepPlan:
    """Per-step phase durations (ms) and optional reduce events of a rank."""

    interval: np.ndarray
    fp_bp: np.ndarray
    tail: np.ndarray
    #: per reduce op: (column name, start offset from bp_point in ms, duration ms) arrays
    reduces: list[tuple[str, np.ndarray, np.ndarray]] = field(default_factory=list)


def pin_mean(values: np.ndarray, target: float, fixed: slice = slice(0, 0)) -> np.ndarray:
    """Shift the non-``fixed`` entries so the whole array averages ``target``."""
    out = values.astype(float).copy()
    free = np.ones(len(out), bool)
    free[fixed] = False
    out[free] += (target * len(out) - out.sum()) / free.sum()
    return out


def noisy(rng: np.random.Generator, n: int, mean: float, rel: float) -> np.ndarray:
    """``n`` values around ``mean`` with relative std ``rel`` (clipped > 0)."""
    return np.clip(rng.normal(mean, mean * rel, n), mean * 0.5, None)


def step_rows(plan: StepPlan, start_tick: int, inference: bool = False) -> tuple[list[str], list[list]]:
    """Step-trace header and rows (ticks) like MindSpore's step trace parser.

    The first step has no previous iteration end, so MindSpore sets its start
    to the FP point: its iteration interval is 0.
    """
    header = ["step_num", "start_point", "end_point", "total", "fp_point", "bp_point",
              "iteration_interval", "fp_and_bp", "tail"]
    for name, _, _ in plan.reduces:
        header += [name, f"{name}_start_point", f"{name}_end_point"]
    rows = []
    prev_end = start_tick
    for i in range(len(plan.fp_bp)):
        t = lambda ms: int(round(ms * TICKS_PER_MS))  # noqa: E731
        fp = prev_end + (t(plan.interval[i]) if i else 0)
        start = prev_end if i else fp
        bp = fp + t(plan.fp_bp[i])
        end = bp + t(plan.tail[i])
        row = [i + 1, start, end, end - start, fp, bp, fp - start, bp - fp, end - bp]
        for _, offset, dur in plan.reduces:
            r0 = bp + t(offset[i])
            row += [t(dur[i]), r0, r0 + t(dur[i])]
        rows.append(row)
        prev_end = end
    if inference:  # MindSpore drops bp_point/tail and names fp_and_bp+tail 'fp'
        header = header[:5] + ["iteration_interval", "fp"]
        rows = [r[:5] + [r[6], r[7] + r[8]] for r in rows]
    avg = [round(sum(Decimal(r[j]) for r in rows) / len(rows)) for j in range(len(header))]
    avg[0] = "-"
    return header, rows + [avg]


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    """A CSV written the way Python's csv module does in MindSpore."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def write_profiler_info(folder: Path, rank: int, rank_size: int, mode: str) -> None:
    """``profiler_info_{rank}.json`` (subset of MindSpore's keys)."""
    info = {"ms_version": MS_VERSION, "context_mode": "graph", "rank_size": rank_size,
            "parallel_mode": mode, "stage_num": 1, "device_target": "Ascend"}
    (folder / f"profiler_info_{rank}.json").write_text(json.dumps(info))


# ----------------------------------------------------------------- MindData


@dataclass
class DataOp:
    """One dataset pipeline op and its output-queue fill level (0..1)."""

    op_id: int
    op_type: str
    workers: int
    children: list[int]
    fill: float | None  # None: no output connector (DeviceQueueOp)
    capacity: int = 16


def queue_samples(rng: np.random.Generator, op: DataOp, n: int) -> list[int]:
    """``n`` sampled sizes of the op's output connector around its fill."""
    if op.fill is None:
        return []
    mean = op.fill * op.capacity
    raw = rng.normal(mean, max(0.4, 0.08 * op.capacity * min(op.fill, 1 - op.fill) * 4), n)
    return [int(v) for v in np.clip(np.rint(raw), 0, op.capacity)]


def write_pipeline(folder: Path, rank: int, rng: np.random.Generator, ops: list[DataOp], n: int = 60) -> None:
    """``pipeline_profiling_{rank}.json`` (raw) and ``minddata_pipeline_raw_{rank}.csv`` (parsed)."""
    sampling_interval = 10
    op_info, rows = [], []
    parent = {c: op.op_id for op in ops for c in op.children}
    for op in ops:
        sizes = queue_samples(rng, op, n)
        metrics = {"output_queue": {"size": sizes, "length": op.capacity}} if sizes else None
        op_info.append({"op_id": op.op_id, "op_type": op.op_type, "num_workers": op.workers,
                        "metrics": metrics, "children": op.children or None})
        avg = sum(sizes) / len(sizes) if sizes else None
        rows.append([op.op_id, op.op_type, op.workers, sizes if sizes else None,
                     avg, op.capacity if sizes else None,
                     avg / op.capacity if sizes else None, sampling_interval,
                     parent.get(op.op_id), op.children or None])
    (folder / f"pipeline_profiling_{rank}.json").write_text(
        json.dumps({"sampling_interval": sampling_interval, "op_info": op_info}))
    write_csv(folder / f"minddata_pipeline_raw_{rank}.csv",
              ["op_id", "op_type", "num_workers", "output_queue_size", "output_queue_average_size",
               "output_queue_length", "output_queue_usage_rate", "sample_interval", "parent_id",
               "children_id"], rows)


def write_host_queue(folder: Path, rank: int, sizes: list[int], batch_ms: np.ndarray,
                     push_ms: np.ndarray, capacity: int = 16) -> None:
    """``device_queue_profiling_{rank}.txt``: per batch the push, batch and
    pipeline times (type 0) and the connector size (type 1)."""
    lines, now = [], BASE_MS
    for b, size in enumerate(sizes, start=1):
        now += int(round(batch_ms[b - 1]))
        push, batch = int(round(push_ms[b - 1])), int(round(batch_ms[b - 1]))
        lines += [f"0 1 {b} {push} {now}", f"0 2 {b} {batch} {now}",
                  f"0 0 {b} {batch - push} {now}", f"1 {capacity} {b} {size} {now}"]
    (folder / f"device_queue_profiling_{rank}.txt").write_text("\n".join(lines) + "\n")


def write_device_queue(folder: Path, rank: int, sizes: list[int], step_ms: np.ndarray) -> None:
    """``minddata_aicpu_{rank}.txt``: GetNext_dequeue_wait start end queue_size (us)."""
    lines, now = ["node_name start_time end_time queue_size"], BASE_MS * 1000
    for i, size in enumerate(sizes):
        wait = 60 if size else int(step_ms[i] * 1000 * 0.8)
        lines.append(f"GetNext_dequeue_wait {now} {now + wait} {size}")
        now += int(step_ms[i] * 1000)
    (folder / f"minddata_aicpu_{rank}.txt").write_text("\n".join(lines) + "\n")


def resnet_pipeline(image_workers: int, fills: tuple[float, float, float, float]) -> list[DataOp]:
    """ModelZoo ResNet50 ImageNet pipeline: ImageFolder -> map(image) ->
    map(label TypeCast) -> batch(32) -> device queue; ids as MindSpore numbers them."""
    f_batch, f_label, f_image, f_source = fills
    return [
        DataOp(0, "DeviceQueueOp", 1, [1], None),
        DataOp(1, "BatchOp", 1, [2], f_batch),
        DataOp(2, "MapOp", 8, [3], f_label),
        DataOp(3, "MapOp", image_workers, [4], f_image),
        DataOp(4, "ImageFolderOp", 8, [], f_source),
    ]


# ------------------------------------------------------------------ operators


def op_info_json(inputs: list[tuple[str, str]], outputs: list[tuple[str, str]], fmt: str = "DefaultFormat") -> str:
    """framework_raw ``op_info``: input_i/output_i with format, data_type, shape."""
    info = {}
    for kind, items in (("input", inputs), ("output", outputs)):
        for i, (dtype, shape) in enumerate(items):
            info[f"{kind}_{i}"] = {"format": fmt, "data_type": dtype, "shape": shape}
    return json.dumps(info)


@dataclass
class Op:
    """One device operator of a graph: name, type, inputs, outputs, avg ms."""

    full_name: str
    op_type: str
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    avg_ms: float | None  # None: not an AI Core task (e.g. HCCL)


def write_ops(folder: Path, rank: int, ops: list[Op], count: int, rng: np.random.Generator) -> None:
    """framework_raw, aicore_intermediate detail/type and output_op_compute_time."""
    fw_rows, detail, compute = [], [], []
    for task_id, op in enumerate(ops, start=2):
        fw_rows.append([task_id, 0 if op.avg_ms is not None else 5, 32 if op.avg_ms else 0,
                        op.full_name, op.full_name.rsplit("/", 1)[-1], op.op_type,
                        op.full_name.split("/", 1)[0], op_info_json(op.inputs, op.outputs)])
        if op.avg_ms is not None:
            avg = round(op.avg_ms * (1 + rng.normal(0, 0.004)), 6)
            detail.append([op.full_name, avg])
            compute.append(f"{op.full_name} {avg} 0 {count}")
    write_csv(folder / f"framework_raw_{rank}.csv",
              ["task_id", "stream_id", "block_dim", "full_op_name", "op_name", "op_type", "subgraph", "op_info"],
              fw_rows)
    write_csv(folder / f"aicore_intermediate_{rank}_detail.csv", ["full_op_name", "execution_time"], detail)
    by_type: dict[str, list[float]] = {}
    for op, (_, avg) in zip([o for o in ops if o.avg_ms is not None], detail):
        by_type.setdefault(op.op_type, []).append(avg)
    total = sum(sum(v) for v in by_type.values())
    write_csv(folder / f"aicore_intermediate_{rank}_type.csv",
              ["op_type", "execution_time", "execution_frequency", "percent"],
              [[t, round(sum(v), 6), len(v), round(sum(v) / total * 100, 2)]
               for t, v in sorted(by_type.items(), key=lambda kv: -sum(kv[1]))])
    text = ["====================op compute time====================",
            "op_name       compute_time(ms) stream_id execution_times",
            "------------  ---------------  ---------", *compute, f"total op  {round(total, 6)} 0"]
    (folder / f"output_op_compute_time_{rank}.txt").write_text("\n".join(text) + "\n")


def vgg16_ops(fp16: bool, batch: int = 32) -> list[Op]:
    """VGG16 (ImageNet head) inference graph on Ascend with per-op average ms.

    fp32: the three fully connected MatMuls run in float32 and dominate;
    fp16 (``add_flags_recursive(fp16=True)``): everything runs in float16,
    with a Cast at the input and the output.
    """
    dt = "NUMBER_TYPE_FLOAT16" if fp16 else "NUMBER_TYPE_FLOAT32"
    scope = "Default/network-Vgg"
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    # average ms per conv layer (fp32, fp16): early layers are the heaviest
    conv_ms = [(1.55, 0.62), (3.40, 1.22), (1.60, 0.58), (3.05, 1.05), (1.55, 0.55), (2.95, 0.98),
               (2.95, 0.98), (1.50, 0.52), (2.90, 0.96), (2.90, 0.96), (0.78, 0.27), (0.78, 0.27),
               (0.78, 0.27)]
    ops: list[Op] = []
    if fp16:
        ops.append(Op(f"{scope}/Cast-op1", "Cast", [("NUMBER_TYPE_FLOAT32", f"{batch},3,224,224")],
                      [(dt, f"{batch},3,224,224")], 0.15))
    c_in, hw, k, p, idx = 3, 224, 0, 0, 2
    for item in cfg:
        if item == "M":
            p += 1
            ops.append(Op(f"{scope}/layers-SequentialCell/MaxPool-op{idx}", "MaxPool",
                          [(dt, f"{batch},{c_in},{hw},{hw}")], [(dt, f"{batch},{c_in},{hw // 2},{hw // 2}")],
                          (0.42, 0.21)[fp16] * (224 / hw) ** 0.5 / 2))
            hw //= 2
        else:
            ops.append(Op(f"{scope}/layers-SequentialCell/{k}-Conv2d/Conv2D-op{idx}", "Conv2D",
                          [(dt, f"{batch},{c_in},{hw},{hw}"), (dt, f"{item},{c_in},3,3"), (dt, f"{item}")],
                          [(dt, f"{batch},{item},{hw},{hw}")], conv_ms[k][fp16]))
            idx += 1
            ops.append(Op(f"{scope}/layers-SequentialCell/{k}-ReLU/ReLU-op{idx}", "ReLU",
                          [(dt, f"{batch},{item},{hw},{hw}")], [(dt, f"{batch},{item},{hw},{hw}")],
                          (0.16, 0.085)[fp16] * (hw / 112) ** 1.2 + 0.02))
            c_in, k = item, k + 1
        idx += 1
    ops.append(Op(f"{scope}/flatten-Flatten/TransData-op{idx}", "TransData",
                  [(dt, f"{batch},512,7,7")], [(dt, f"{batch},25088")], (2.70, 0.60)[fp16]))
    dense = [("fc6", 25088, 4096, (38.0, 1.90)), ("fc7", 4096, 4096, (6.30, 0.32)),
             ("fc8", 4096, 1000, (1.60, 0.08))]
    for name, n_in, n_out, ms in dense:
        idx += 1
        ops.append(Op(f"{scope}/classifier-SequentialCell/{name}-Dense/MatMul-op{idx}", "MatMul",
                      [(dt, f"{batch},{n_in}"), (dt, f"{n_out},{n_in}")], [(dt, f"{batch},{n_out}")], ms[fp16]))
        idx += 1
        ops.append(Op(f"{scope}/classifier-SequentialCell/{name}-Dense/BiasAdd-op{idx}", "BiasAdd",
                      [(dt, f"{batch},{n_out}"), (dt, f"{n_out}")], [(dt, f"{batch},{n_out}")], (0.1, 0.05)[fp16]))
        if name != "fc8":
            idx += 1
            ops.append(Op(f"{scope}/classifier-SequentialCell/{name}-ReLU/ReLU-op{idx}", "ReLU",
                          [(dt, f"{batch},{n_out}")], [(dt, f"{batch},{n_out}")], 0.02))
    if fp16:
        ops.append(Op(f"{scope}/Cast-op{idx + 1}", "Cast", [(dt, f"{batch},1000")],
                      [("NUMBER_TYPE_FLOAT32", f"{batch},1000")], 0.03))
    return ops


def resnet50_grad_shapes() -> list[str]:
    """Shapes of ResNet50's 160 gradient tensors in parameter order.

    conv1 + bn1 (3), 16 bottlenecks x (3 convs + 3 BN gamma/beta) plus 4
    down-sample conv+BN (156), and the fc weight: 160, the count the guide
    uses (a dense layer with a bias would add a 161st).
    """
    shapes = ["64,3,7,7", "64", "64"]
    c_in = 64
    for blocks, mid in ((3, 64), (4, 128), (6, 256), (3, 512)):
        out = mid * 4
        for b in range(blocks):
            shapes += [f"{mid},{c_in},1,1", f"{mid}", f"{mid}", f"{mid},{mid},3,3", f"{mid}", f"{mid}",
                       f"{out},{mid},1,1", f"{out}", f"{out}"]
            if b == 0:
                shapes += [f"{out},{c_in},1,1", f"{out}", f"{out}"]
            c_in = out
    shapes.append("1000,2048")
    assert len(shapes) == 160
    return shapes


ALLREDUCE = "Default/network-TrainOneStepWithLossScaleCell/grad_reducer-DistributedGradReducer/AllReduce-op{}"


def allreduce_ops(splits: list[int]) -> list[Op]:
    """The fused gradient AllReduce op(s): one per all_reduce_fusion_config segment."""
    shapes = resnet50_grad_shapes()
    bounds = [0, *splits]
    ops = []
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        tensors = [("NUMBER_TYPE_FLOAT32", s) for s in shapes[lo:hi]]
        ops.append(Op(ALLREDUCE.format(1157 + i), "AllReduce", tensors, tensors, None))
    return ops


def resnet_compute_ops(batch: int = 32) -> list[Op]:
    """A few heavy ResNet50 compute ops (rank 0's framework file is trimmed)."""
    dt = "NUMBER_TYPE_FLOAT16"
    s = "Default/network-TrainOneStepWithLossScaleCell/network-WithLossCell/_backbone-ResNet"
    g = "Gradients/Default/network-TrainOneStepWithLossScaleCell/network-WithLossCell/_backbone-ResNet"
    return [
        Op(f"{s}/conv1-Conv2d/Conv2D-op7", "Conv2D", [(dt, f"{batch},3,224,224"), (dt, "64,3,7,7")],
           [(dt, f"{batch},64,112,112")], 0.21),
        Op(f"{s}/bn1-BatchNorm2d/BNTrainingUpdate-op9", "BNTrainingUpdate", [(dt, f"{batch},64,112,112")],
           [(dt, f"{batch},64,112,112")], 0.12),
        Op(f"{g}/layer1-SequentialCell/0-ResidualBlock/conv2-Conv2d/gradConv2D/Conv2DBackpropFilter-op412",
           "Conv2DBackpropFilter", [(dt, f"{batch},64,56,56"), (dt, f"{batch},64,56,56")],
           [("NUMBER_TYPE_FLOAT32", "64,64,3,3")], 0.18),
        Op(f"{s}/end_point-Dense/MatMul-op301", "MatMul", [(dt, f"{batch},2048"), (dt, "1000,2048")],
           [(dt, f"{batch},1000")], 0.03),
        Op("Default/optimizer-Momentum/ApplyMomentum-op1300", "ApplyMomentum",
           [("NUMBER_TYPE_FLOAT32", "1000,2048"), ("NUMBER_TYPE_FLOAT32", "1000,2048")],
           [("NUMBER_TYPE_FLOAT32", "1000,2048")], 0.01),
    ]


# ---------------------------------------------------------------------- cases


def fresh(name: str) -> Path:
    """An empty ``examples/<name>/profiler`` folder."""
    case = HERE / name
    if case.exists():
        shutil.rmtree(case)
    folder = case / "profiler"
    folder.mkdir(parents=True)
    return folder


def case_resnet50_data(name: str, fixed: bool, seed: int, n: int = 60) -> None:
    """Case 1: ResNet50 1p, batch 32; map(num_parallel_workers=1 or 12)."""
    rng = np.random.default_rng(seed)
    folder = fresh(name)
    write_profiler_info(folder, 0, 1, "stand_alone")
    fp_bp = pin_mean(noisy(rng, n, 16.2 if fixed else 15.6, 0.012), 16.2 if fixed else 15.6)
    tail = pin_mean(noisy(rng, n, 1.62 if fixed else 1.6, 0.03), 1.62 if fixed else 1.6)
    fp_bp[0] += 2.5  # first step: kernel caches warm up
    fp_bp = pin_mean(fp_bp, 16.2 if fixed else 15.6, fixed=slice(0, 1))
    if fixed:
        # Host pipeline keeps ahead: the interval is the bare GetNext hand-over.
        interval = noisy(rng, n, 0.25, 0.12)
        interval[0] = 0.0
        interval = pin_mean(interval, 0.25, fixed=slice(0, 1))
        device_sizes = [int(v) for v in np.clip(np.rint(rng.normal(28, 4, n)), 12, 32)]
        host_sizes = [int(v) for v in np.clip(np.rint(rng.normal(14, 1.5, n)), 6, 16)]
        fills = (0.84, 0.88, 0.80, 0.56)
        workers = 12
    else:
        # Graph compile prefetched a few batches; once they are gone every
        # step waits for MapOp_3 (one worker decoding + augmenting 32 images).
        interval = noisy(rng, n, 77.0, 0.025)
        interval[:4] = [0.0, 0.30, 0.32, 18.0]
        interval = pin_mean(interval, 72.8, fixed=slice(0, 4))
        device_sizes = [3, 2, 1] + [0] * (n - 3)
        host_sizes = [12, 8, 4, 1] + [0] * (n - 4)
        fills = (0.02, 0.015, 0.03, 0.985)
        workers = 1
    plan = StepPlan(interval, fp_bp, tail)
    write_csv(folder / "step_trace_raw_0_detail_time.csv", *step_rows(plan, BASE_TICK))
    write_pipeline(folder, 0, rng, resnet_pipeline(workers, fills))
    step_ms = interval + fp_bp + tail
    write_host_queue(folder, 0, host_sizes, step_ms, noisy(rng, n, 1.4, 0.1))
    write_device_queue(folder, 0, device_sizes, step_ms)


def case_vgg16(name: str, fp16: bool, seed: int, n: int = 30) -> None:
    """Case 2: VGG16 inference, 1p; float32 vs float16 network."""
    rng = np.random.default_rng(seed)
    folder = fresh(name)
    write_profiler_info(folder, 0, 1, "stand_alone")
    fp_mean = 16.89 if fp16 else 82.45
    interval_mean = 1.10 if fp16 else 113.79 - 82.45
    fp = noisy(rng, n, fp_mean, 0.006)
    fp[0] = fp_mean * 1.08  # first inference step
    fp = pin_mean(fp, fp_mean, fixed=slice(0, 1))
    interval = noisy(rng, n, interval_mean, 0.04)
    interval[0] = 0.0
    interval = pin_mean(interval, interval_mean, fixed=slice(0, 1))
    # The inference trace has no BP point; MindSpore folds the tail into 'fp'.
    plan = StepPlan(interval, fp - 0.05, np.full(n, 0.05))
    write_csv(folder / "step_trace_raw_0_detail_time.csv", *step_rows(plan, BASE_TICK, inference=True))
    write_ops(folder, 0, vgg16_ops(fp16), n, rng)


def case_resnet50_8p(name: str, overlapped: bool, seed: int, n: int = 30, ranks: int = 8) -> None:
    """Case 3: ResNet50 8p data parallel, batch 32 per device.

    Tail-bound: one AllReduce of all 160 gradients starts after backward.
    Overlapped: all_reduce_fusion_config=[65, 120]; the two later segments
    (ready first, as backward runs from the last layer) reduce under
    backward, the first one (small early-layer gradients) in the tail.
    """
    rng = np.random.default_rng(seed)
    folder = fresh(name)
    if overlapped:
        step, tail_mean, splits = 18.0, 1.0, [65, 120, 160]
    else:
        step, tail_mean, splits = 23.6, 6.15, [160]
    interval_mean = 0.35
    fp_bp_mean = step - tail_mean - interval_mean
    common_fp_bp = noisy(rng, n, fp_bp_mean, 0.008)
    common_fp_bp[0] += 3.0  # first step
    for rank in range(ranks):
        write_profiler_info(folder, rank, ranks, "data_parallel")
        fp_bp = pin_mean(common_fp_bp + rng.normal(0, 0.05, n), fp_bp_mean, fixed=slice(0, 1))
        interval = noisy(rng, n, interval_mean, 0.1)
        interval[0] = 0.0
        interval = pin_mean(interval, interval_mean, fixed=slice(0, 1))
        tail = pin_mean(noisy(rng, n, tail_mean, 0.01), tail_mean)
        reduces = []
        names = [f"stream_5_{i}_{ALLREDUCE.format(1157 + i)}" for i in range(len(splits))]
        if overlapped:
            # segment 2 (indices 120..159) and 1 (65..119) run under backward
            reduces.append((names[2], np.full(n, -6.2) + rng.normal(0, 0.05, n), noisy(rng, n, 2.6, 0.02)))
            reduces.append((names[1], np.full(n, -3.1) + rng.normal(0, 0.05, n), noisy(rng, n, 2.4, 0.02)))
            reduces.append((names[0], np.full(n, 0.08), tail - 0.08 - 0.40))
        else:
            reduces.append((names[0], np.full(n, 0.20), tail - 0.20 - 0.72))
        plan = StepPlan(interval, fp_bp, tail, sorted(reduces, key=lambda r: r[0]))
        write_csv(folder / f"step_trace_raw_{rank}_detail_time.csv", *step_rows(plan, BASE_TICK + rank * 37))
    # Rank 0's operator files, trimmed to the gradient AllReduce(s) and a few
    # compute ops so the example stays small.
    write_ops(folder, 0, resnet_compute_ops() + allreduce_ops(splits), n, rng)


def main() -> None:
    """Write all six example folders."""
    case_resnet50_data("resnet50_data_bound", fixed=False, seed=11)
    case_resnet50_data("resnet50_data_fixed", fixed=True, seed=12)
    case_vgg16("vgg16_fp32", fp16=False, seed=21)
    case_vgg16("vgg16_fp16", fp16=True, seed=22)
    case_resnet50_8p("resnet50_8p_allreduce_tail", overlapped=False, seed=31)
    case_resnet50_8p("resnet50_8p_overlapped", overlapped=True, seed=32)
    for case in sorted(p for p in HERE.iterdir() if (p / "profiler").is_dir()):
        size = sum(f.stat().st_size for f in case.rglob("*") if f.is_file())
        print(f"{case.name}: {size / 1024:.1f} KB")


if __name__ == "__main__":
    main()
