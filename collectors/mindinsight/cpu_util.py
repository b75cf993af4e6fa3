"""``minddata_cpu_utilization_{rank}.json`` -> the CPU use of each dataset op
(``data_ops.cpu_pct``).

MindSpore's MindData CPU sampler writes it (``CpuSampling::SaveToFile``,
``mindspore/ccsrc/minddata/dataset/engine/perf/cpu_sampler.cc``);
MindInsight's ``MinddataCpuUtilizationAnalyser`` (``mindinsight/profiler/
analyser/minddata_cpu_utilization_analyser.py``) reads ``sampling_interval``,
``time_stamp``, ``cpu_processor_num``, ``device_info`` and ``process_info``
(``user_utilization``, ``sys_utilization``, ... sample lists) and
``op_info``: ``[{"op_id", "metrics": {"user_utilization": [...],
"sys_utilization": [...]}}]`` (``op_id`` -1: not a pipeline op). An op's
values are CPU percent summed over its threads; MindSpore warns that an op
"may benefit from increasing num_parallel_workers" when it uses more than
80% CPU per thread.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from advisor.collectors.io.files import load_json
from advisor.errors import InputError

FILE = "minddata_cpu_utilization_{}.json"


def op_cpu(path: Path) -> dict[int, float]:
    """op id -> mean user + system CPU percent over the samples."""
    data = load_json(path)
    ops = data.get("op_info") if isinstance(data, dict) else None
    if not isinstance(ops, list):
        raise InputError(path, "no 'op_info' list")
    out = {}
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("op_id"), int) or op["op_id"] < 0:
            continue
        metrics = op.get("metrics") or {}
        total = 0.0
        seen = False
        for key in ("user_utilization", "sys_utilization"):
            values = [v for v in metrics.get(key) or [] if isinstance(v, (int, float)) and math.isfinite(v)]
            if values:
                total += sum(values) / len(values)
                seen = True
        if seen:
            out[op["op_id"]] = total
    return out


def add_cpu(ops: pd.DataFrame, cpu: dict[int, float]) -> pd.DataFrame:
    """``ops`` with ``cpu_pct`` where the sampler recorded the op."""
    if not cpu or "op_id" not in ops:
        return ops
    ops = ops.copy()
    ops["cpu_pct"] = [cpu.get(int(i), float("nan")) for i in ops["op_id"]]
    return ops
