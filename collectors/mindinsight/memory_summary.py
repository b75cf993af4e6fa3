"""``memory_usage_summary_{rank}.json`` -> ``memory_summary``: the device
memory a rank's graphs need against what the device has.

MindSpore's ``MemoryUsageParser`` (``mindspore/profiler/parser/
memory_usage_parser.py``) writes it beside ``memory_usage_details_{rank}.json``
(the per-graph curves) from the framework's memory proto, and MindInsight's
memory view (``mindinsight/profiler/analyser/memory_usage_analyser.py``)
shows it: one object ``{"capacity", "allocations", "deallocations",
"peak_mem", "static_mem"}``, sizes in GiB (the proto's bytes divided by
``GIGABYTES = 1024**3``), ``peak_mem`` the highest static + live tensor
memory over the nodes of every graph, ``allocations`` the tensors allocated.
A file without ``capacity`` or ``peak_mem`` numbers is skipped, naming what
is missing.

``memory_usage_details_{rank}.json``, where present, gives the graph whose
curve holds the peak: ``{graph_id: {"graph_id", "static_mem", "lines",
...}}``, ``lines`` the static + live memory (GiB) after each node of the
graph (``GraphMemoryParser._mem_change``), whose maximum is the graph's peak.
An unusable details file is skipped on its own; the summary still counts.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from advisor.collectors.io.files import load_json
from advisor.errors import InputError
from advisor.profile import Profile

FILE = "memory_usage_summary_{}.json"
DETAILS_FILE = "memory_usage_details_{}.json"
#: key in the file -> column (GiB sizes kept in GiB)
_NUMBERS = {"capacity": "capacity_gib", "peak_mem": "peak_gib", "static_mem": "static_gib",
            "allocations": "allocations"}
_REQUIRED = ("capacity", "peak_mem")


def summary_table(profile: Profile, folder: Path, fid: int, rank: int) -> pd.DataFrame | None:
    """One row for the rank, or None without the file; unusable -> ``profile.skip``."""
    path = folder / FILE.format(fid)
    if not path.is_file():
        return None
    try:
        row = _row(path)
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return None
    details = folder / DETAILS_FILE.format(fid)
    if details.is_file():
        try:
            peaks = graph_peaks(details)
        except InputError as exc:
            profile.skip(exc.path, exc.problem)
        else:
            if peaks:
                row["graphs"] = len(peaks)
                row["peak_graph"] = max(peaks, key=peaks.get)
    return pd.DataFrame([{"rank": rank, **row}])


def graph_peaks(path: Path) -> dict[int, float]:
    """Graph id -> its peak (GiB): the highest value of its ``lines``."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object of graphs")
    out = {}
    for key, graph in data.items():
        lines = graph.get("lines") if isinstance(graph, dict) else None
        values = [v for v in (lines or []) if _number(v) is not None] if isinstance(lines, list) else []
        try:
            gid = int(key)
        except ValueError:
            continue
        if values:
            out[gid] = float(max(values))
    return out


def _number(value) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return float(value) if ok else None


def _row(path: Path) -> dict:
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object")
    missing = [k for k in _REQUIRED if _number(data.get(k)) is None]
    if missing:
        raise InputError(path, f"no {' / '.join(repr(k) for k in missing)} number: memory summary not read")
    row = {col: _number(data.get(key)) for key, col in _NUMBERS.items() if _number(data.get(key)) is not None}
    if "allocations" in row:
        row["allocations"] = int(row["allocations"])
    return row
