"""A generated run on disk: the data in a real profiler layout, and
``labels.json`` beside it naming the fault."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import orjson

from bench.scenarios import ascend, kineto
from bench.scenarios.model import Scenario, Spec, build

#: layouts a scenario is written in: Ascend text files, the Ascend database
#: layout (``export_type=db``), PyTorch profiler (Kineto) traces
FORMATS = ("ascend-text", "ascend-db", "kineto")


def write(scenario: Scenario, out: Path, fmt: str = "ascend-text", level: int = 1) -> Path:
    """Write ``scenario`` under ``out`` (created, must be empty or absent) in
    ``fmt`` and ``labels.json`` beside the data; returns the data folder
    (``out/data``: the path to analyze). ``level``: the Ascend profiler
    level (``ascend.LEVELS``; 0 writes no communication analysis)."""
    if level not in ascend.LEVELS:
        raise ValueError(f"unknown profiler level {level!r} (choose from {ascend.LEVELS})")
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    out = Path(out)
    data = out / "data"
    data.mkdir(parents=True, exist_ok=False)
    if fmt == "ascend-text":
        ascend.write_scenario_text(scenario, data, level)
    elif fmt == "ascend-db":
        ascend.write_scenario_db(scenario, data, level)
    else:
        kineto.write(scenario, data)
    labels = {**scenario.labels, "format": fmt, "spec": asdict(scenario.spec)}
    if fmt != "kineto":
        labels["level"] = level
    (out / "labels.json").write_bytes(orjson.dumps(labels, option=orjson.OPT_INDENT_2))
    return data


def generate(spec: Spec, out: Path, fmt: str = "ascend-text", level: int = 1) -> tuple[Path, dict]:
    """Build and write; returns (data folder, labels)."""
    scenario = build(spec)
    return write(scenario, out, fmt, level), scenario.labels
