"""A MindSpore pipeline-parallel cluster written in the MindInsight
``profiler/`` layout, file by file as MindSpore writes them:

* ``step_trace_raw_{rank}_detail_time.csv``: MindSpore ``step_trace_parser``
  (header ``step_num,start_point,end_point,total,fp_point,bp_point,
  iteration_interval,fp_and_bp,tail`` then per reduce point
  ``stream_{s}_{i}_{op}`` with ``_start_point`` / ``_end_point``; 10 ns
  ticks; a last row of means numbered ``-``; MindInsight
  ``cluster_analyser.py`` reads it the same way);
* ``ascend_cluster_analyse_pipeline-parallel_{stages}_{rank_size}_{rank}.csv``:
  ``_write_cluster_metrices`` in MindSpore ``base_timeline_generator.py``
  (header ``computation_time,communication_alone_time,stage_time,
  receive_alone_time,collective_communication_alone_time``, ms, a last row
  of means over the steps after the first, ``ascend_timeline_generator.py``
  ``_parse_cluster_metrices``);
* ``hccl_raw_{rank}.csv``: MindSpore ``hccl_parser.py`` (``step_num,
  communication_cost,wait_cost,link_info,communication_operator_cost``;
  link values ``[time_ms, size_KB, bandwidth_KB/s]``; a ``-`` row of means);
* ``flops_summary_{rank}.json``: ``{"FLOPs": MFLOPs, "FLOPS": GFLOPS,
  "FLOPS_Utilization": %}`` as MindInsight's ``ClusterFlopsAnalyser`` reads it.

Four ranks, two stages (rank // 2, MindInsight's stage formula), five
steps of 120 ms. Stage 0 (ranks 0, 1) is heavy: 115 ms of stage time and
three times the FLOPs; stage 1 (ranks 2, 3) waits ``WAIT_MS`` per step in
its Receive operators. Link ``slow_link`` (default 1-0, SDMA) carries its
all-reduce bytes at a quarter of the bandwidth of the other links.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

TICKS_PER_MS = 1e5
STEPS = 5
STEP_MS = 120.0
RANKS = 4
STAGES = 2
#: Stage 1's Receive wait per step (ms): most of the step by default.
WAIT_MS = 70.0
RECEIVE = "Default/network-PipelineCell/Receive-op10"
ALLREDUCE = "Gradients/Default/network-PipelineCell/AllReduce-op20"


def stage_of(rank: int) -> int:
    return rank // (RANKS // STAGES)


def _timing(rank: int, step: int) -> dict:
    """Per-step ms of one rank: stage 0 computes, stage 1 waits in Receive."""
    jitter = 0.1 * ((rank + step) % 3)
    if stage_of(rank) == 0:
        return {"receive": 5.0 + jitter, "allreduce": 10.0, "interval": 2.0, "tail": 30.0}
    return {"receive": WAIT_MS + jitter, "allreduce": 10.0, "interval": 2.0, "tail": 3.0}


def write_step_trace(folder: Path, rank: int, summary: str = "-", receive_columns: bool = True) -> None:
    header = ["step_num", "start_point", "end_point", "total", "fp_point", "bp_point",
              "iteration_interval", "fp_and_bp", "tail"]
    cols = [f"stream_5_0_{RECEIVE}"] if receive_columns else []
    cols.append(f"stream_6_1_{ALLREDUCE}")
    for c in cols:
        header += [c, f"{c}_start_point", f"{c}_end_point"]
    rows = []
    start = 1_000_000.0
    for step in range(1, STEPS + 1):
        t = _timing(rank, step)
        fp_bp = STEP_MS - t["interval"] - t["tail"]
        end = start + STEP_MS * TICKS_PER_MS
        fp = start + t["interval"] * TICKS_PER_MS
        bp = fp + fp_bp * TICKS_PER_MS
        row = [step, start, end, STEP_MS * TICKS_PER_MS, fp, bp, t["interval"] * TICKS_PER_MS,
               fp_bp * TICKS_PER_MS, t["tail"] * TICKS_PER_MS]
        if receive_columns:
            row += [t["receive"] * TICKS_PER_MS, fp, fp + t["receive"] * TICKS_PER_MS]
        row += [t["allreduce"] * TICKS_PER_MS, bp, bp + t["allreduce"] * TICKS_PER_MS]
        rows.append(row)
        start = end
    means = [summary] + [sum(r[i] for r in rows) / len(rows) for i in range(1, len(header))]
    with open(folder / f"step_trace_raw_{rank}_detail_time.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
        w.writerow(means)


def write_cluster_analyse(folder: Path, rank: int) -> None:
    rows = []
    for step in range(1, STEPS + 1):
        t = _timing(rank, step)
        alone = t["receive"] + t["allreduce"]
        rows.append([round(STEP_MS - alone, 4), round(alone, 4), round(STEP_MS - t["receive"], 4),
                     round(t["receive"], 4), t["allreduce"]])
    means = [round(sum(r[i] for r in rows[1:]) / (len(rows) - 1), 4) for i in range(5)]
    name = f"ascend_cluster_analyse_pipeline-parallel_{STAGES}_{RANKS}_{rank}.csv"
    with open(folder / name, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["computation_time", "communication_alone_time", "stage_time", "receive_alone_time",
                    "collective_communication_alone_time"])
        w.writerows(rows)
        w.writerow(means)


def _peers(rank: int) -> list[tuple[int, str, float]]:
    """(dst, operator, size KB) of the links a rank sends on each step: its
    all-reduce partner in the stage, its pipeline neighbour (activations
    forward from stage 0, gradients back from stage 1)."""
    partner = rank ^ 1
    neighbour = rank + 2 if stage_of(rank) == 0 else rank - 2
    return [(partner, f"stream_6_1_{ALLREDUCE}", 200_000.0), (neighbour, "stream_5_0_Send-op11", 50_000.0)]


def write_hccl_raw(folder: Path, rank: int, slow_link: str = "1-0", transport: str = "SDMA") -> None:
    rows = []
    for step in range(1, STEPS + 1):
        links, operators = {}, {}
        cost = 0.0
        for dst, op, size_kb in _peers(rank):
            key = f"{rank}-{dst}"
            time_ms = size_kb / 20_000.0 * (4.0 if key == slow_link else 1.0)  # 20 GB/s, a quarter on the slow link
            value = [time_ms, size_kb, size_kb / (time_ms / 1e3)]
            links[key] = {transport: value}
            operators[op] = [str(step), time_ms, 0.5, {key: {transport: value}}]
            cost += time_ms
        rows.append([str(step), cost, 1.0, json.dumps(links), json.dumps(operators)])
    mean_links = json.loads(rows[0][3])
    with open(folder / f"hccl_raw_{rank}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step_num", "communication_cost", "wait_cost", "link_info", "communication_operator_cost"])
        w.writerows(rows)
        w.writerow(["-", rows[0][1], 1.0, json.dumps(mean_links), json.dumps({})])


def write_flops(folder: Path, rank: int) -> None:
    mflops = 3_000_000.0 if stage_of(rank) == 0 else 1_000_000.0
    (folder / f"flops_summary_{rank}.json").write_text(
        json.dumps({"FLOPs": mflops, "FLOPS": mflops / 600.0, "FLOPS_Utilization": 40.0}))


def write_cluster(folder: Path, *, cluster_files: bool = True, hccl: bool = True, slow_link: str = "1-0",
                  transport: str = "SDMA") -> Path:
    """The whole cluster in ``folder`` (created); returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(RANKS):
        write_step_trace(folder, rank)
        if cluster_files:
            write_cluster_analyse(folder, rank)
            write_flops(folder, rank)
        if hccl:
            write_hccl_raw(folder, rank, slow_link, transport)
    return folder
