"""``hccl_raw_{rank}.csv`` -> ``links`` (per step, link and transport) and
per-operator communication rows with their wait times.

Written by MindSpore's ``HcclParser`` (``mindspore/profiler/parser/
hccl_parser.py``) from the HCCL task traces; MindInsight reads it in
``ClusterHcclAnalyser`` (``mindinsight/profiler/analyser/
cluster_analyser.py``). Columns ``step_num, communication_cost,
wait_cost, link_info, communication_operator_cost``; one row per step,
then a row of means whose ``step_num`` is ``-`` (dropped). Times are ms.

* ``link_info``: JSON ``{"src-dst": {"SDMA"|"RDMA": [time_ms, size_KB,
  bandwidth_KB_per_s(, wait_ms)]}}`` -- SDMA inside a server, RDMA
  between servers; SDMA time is its Reduce Inline and Memcpy tasks, RDMA
  time its RDMASend, RDMASend, Notify Wait triples; size is in kilobytes
  (bytes / 1e3).
* ``communication_operator_cost``: JSON ``{operator: [step, cost_ms,
  wait_ms, link_info]}`` -- the operator named as in the step trace's
  reduce columns when MindSpore could map it, else as in HCCL.
* ``communication_cost`` / ``wait_cost``: the step's transfer time and its
  Notify Wait time outside the RDMA triples (waiting for the peers).
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import orjson
import pandas as pd

from advisor.collectors import vocab
from advisor.collectors.io.files import read_bytes
from advisor.errors import InputError

FILE = "hccl_raw_{}.csv"
US_PER_MS = 1000.0
KB_PER_MB = 1000.0
_HEADER = ("step_num", "communication_cost", "wait_cost", "link_info")
_LINK = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def load(path: Path) -> list[dict]:
    """The step rows: ``step``, ``cost_ms``, ``wait_ms``, ``links`` (dict)
    and ``operators`` (dict). InputError when the file is unusable."""
    try:
        text = read_bytes(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read ({exc})") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or tuple(c.strip() for c in rows[0][:4]) != _HEADER:
        raise InputError(path, "header is not 'step_num,communication_cost,wait_cost,link_info,...'")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        if not row or not row[0].strip().isdigit():
            continue  # the '-' row of means
        if len(row) < 4:
            raise InputError(path, f"line {number}: {len(row)} fields, expected >= 4 (truncated?)")
        try:
            cost, wait = float(row[1]), float(row[2])
            links = orjson.loads(row[3]) if row[3].strip() else {}
            operators = orjson.loads(row[4]) if len(row) > 4 and row[4].strip() else {}
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise InputError(path, f"line {number}: unreadable value ({exc})") from None
        if not isinstance(links, dict) or not isinstance(operators, dict):
            raise InputError(path, f"line {number}: link_info / communication_operator_cost is not a JSON object")
        out.append({"step": int(row[0]), "cost_ms": cost, "wait_ms": wait, "links": links, "operators": operators})
    if not out:
        raise InputError(path, "no step rows (only a header or the row of means)")
    return out


def _link_entries(links: dict):
    """(src, dst, transport, time_ms, size_mb) of one link_info object."""
    for key, per_type in links.items():
        m = _LINK.match(str(key))
        if not m or not isinstance(per_type, dict):
            continue
        src, dst = int(m.group(1)), int(m.group(2))
        for transport, values in per_type.items():
            if not isinstance(values, list) or len(values) < 2:
                continue
            time_ms, size_kb = _number(values[0]), _number(values[1])
            if time_ms is None or size_kb is None:
                continue
            yield src, dst, str(transport).upper(), time_ms, size_kb / KB_PER_MB


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def links_table(rows: list[dict], rank: int) -> pd.DataFrame | None:
    """``links`` rows: per step, link (src-dst) and transport, the step's
    time and size over it (``ops``: the operators that used it that step)."""
    records = []
    for row in rows:
        users: dict[tuple[int, int, str], int] = {}
        for cost in row["operators"].values():
            if isinstance(cost, list) and len(cost) > 3 and isinstance(cost[3], dict):
                for src, dst, transport, _, _ in _link_entries(cost[3]):
                    users[(src, dst, transport)] = users.get((src, dst, transport), 0) + 1
        for src, dst, transport, time_ms, size_mb in _link_entries(row["links"]):
            records.append((row["step"], src, dst, transport, users.get((src, dst, transport), 1), size_mb, time_ms))
    if not records:
        return None
    out = pd.DataFrame(records, columns=["step", "src", "dst", "transport", "ops", "size_mb", "time_ms"])
    out = out[(out["size_mb"] > 0) & (out["time_ms"] > 0)]
    if out.empty:
        return None
    out.insert(0, "rank", rank)
    out["step"] = pd.array(out["step"], dtype="Int64")
    out["size_class"] = vocab.size_classes(out["size_mb"])[0]  # every size is positive here
    out["bandwidth_gbps"] = out["size_mb"] / out["time_ms"]
    return out.reset_index(drop=True)


def operator_rows(rows: list[dict], rank: int) -> pd.DataFrame | None:
    """Per step and communication operator: transfer time (``transit_us``),
    wait for the peers (``wait_us``) and their sum (``elapse_us``); the
    name as the file gives it (``stream_{s}_{i}_`` prefix removed)."""
    records = []
    for row in rows:
        for name, cost in row["operators"].items():
            if not isinstance(cost, list) or len(cost) < 3:
                continue
            transit, wait = _number(cost[1]), _number(cost[2])
            if transit is None or wait is None:
                continue
            short = short_name(str(name))
            records.append((short, operator_kind(short), row["step"], transit * US_PER_MS, wait * US_PER_MS))
    if not records:
        return None
    out = pd.DataFrame(records, columns=["name", "kind", "step", "transit_us", "wait_us"])
    out.insert(0, "rank", rank)
    out["step"] = pd.array(out["step"], dtype="Int64")
    out["elapse_us"] = out["transit_us"] + out["wait_us"]
    return out


def short_name(name: str) -> str:
    """A step-trace reduce column or operator name without its
    ``stream_{stream}_{index}_`` prefix."""
    m = re.match(r"^stream_\d+_\d+_(.+)$", name)
    return m.group(1) if m else name


def operator_kind(name: str) -> str:
    """The collective kind of a MindSpore communication operator: what its
    name says (``AllReduce-op3``, ``Receive-op7``, HCCL's ``allReduce_1``),
    else ``allreduce`` (MindSpore's step trace marks the gradient
    all-reduces, ``stream_*_parallel_*``)."""
    last = name.rsplit("/", 1)[-1]
    kind = vocab.collective_kind(last)
    return vocab.ALLREDUCE if kind == vocab.OTHER else kind
