"""Ascend communication files -> ``comm``, ``bandwidth`` and ``links`` tables.

Handles the per-rank ``communication.json`` / ``communication_matrix.json``
written by torch_npu and MindSpore, and msprof-analyze's
``cluster_communication.json``. Their nesting differs (step -> collective|p2p
-> op@group, or group -> step -> op@group -> rank), so records are found by
shape, not by depth: an operator record is a dict holding "Communication
Time Info" / "Communication Bandwidth Info"; a link record is a dict under a
``"src-dst"`` key holding "Transit Size(MB)" / "Transport Type". The keys on
the way down give the step (``stepN``), the operator (``name@group``) and,
in cluster files, the rank (a bare number). "Total Op Info" summaries are
skipped: they are sums of the records already read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from advisor.errors import InputError

from .fileio import load_json

TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"
_STEP_KEY = re.compile(r"^step(\d*)$", re.IGNORECASE)
_LINK_KEY = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")
_RANK_KEY = re.compile(r"^\d+$")
_CATEGORY_KEYS = {"collective", "p2p"}

# Communication Time Info field (name part, normalized) -> comm column.
_TIME_FIELDS = {
    "elapsetime": "elapse_us",
    "transittime": "transit_us",
    "waittime": "wait_us",
    "synchronizationtime": "sync_us",
    "idletime": "idle_us",
    "ideltime": "idle_us",  # spelled so in some releases
    "starttimestamp": "start_us",
}
_UNIT_TO_US = {"us": 1.0, "μs": 1.0, "µs": 1.0, "ms": 1000.0, "ns": 0.001, "s": 1e6}


def split_op_key(key: str) -> tuple[str, str | None]:
    """``"hcom_allReduce__123_0@6297...`` -> (name, group); no ``@`` -> no group."""
    name, sep, group = key.partition("@")
    return name, (group if sep else None)


@functools.lru_cache(maxsize=4096)
def comm_kind(name: str) -> str:
    """Collective kind of an HCCL operator name (allreduce, send, ..., other)."""
    n = name.lower().replace("_", "").replace("-", "")
    for needle, kind in (
        ("reducescatter", "reducescatter"),
        ("allreduce", "allreduce"),
        ("allgather", "allgather"),
        ("alltoall", "alltoall"),
        ("broadcast", "broadcast"),
        ("batchsendrecv", "other"),
        ("receive", "receive"),
        ("recv", "receive"),
        ("send", "send"),
    ):
        if needle in n:
            return kind
    return "other"


@functools.lru_cache(maxsize=4096)
def _field(key: str) -> tuple[str, float | None]:
    """``"Elapse Time(ms)"`` -> ("elapsetime", 1000.0); no unit -> factor None."""
    m = re.match(r"^\s*([^()]*?)\s*(?:\(([^)]*)\))?\s*$", key)
    base = "".join((m.group(1) if m else key).split()).lower()
    unit = (m.group(2) or "").strip().lower() if m else ""
    return base, _UNIT_TO_US.get(unit) if unit else None


def _walk(node, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], dict]]:
    """Yield (keys from the root, dict) for every dict below ``node``."""
    if isinstance(node, dict):
        yield path, node
        for key, child in node.items():
            if isinstance(child, dict) and not str(key).startswith("Total"):
                yield from _walk(child, path + (str(key),))


def _context(path: tuple[str, ...]) -> dict:
    """Step, rank and operator key from the keys above an operator record."""
    step = rank = op = None
    for key in path:
        m = _STEP_KEY.match(key)
        if m:
            step = int(m.group(1)) if m.group(1) else None
        elif _RANK_KEY.match(key):
            rank = int(key)
        elif key.lower() not in _CATEGORY_KEYS:
            op = key
    return {"step": step, "rank": rank, "op": op}


def _num(value) -> float | None:
    """A JSON number (or numeric string) as float; anything else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        return None


def _time_row(info: dict) -> dict:
    """Communication Time Info -> comm columns in microseconds."""
    row: dict = {}
    for key, value in info.items():
        base, factor = _field(str(key))
        col = _TIME_FIELDS.get(base)
        num = _num(value)
        if col is None or num is None:
            continue
        if factor is None:  # no unit in the key: timestamps are us, spans ms
            factor = 1.0 if col == "start_us" else 1000.0
        row[col] = num * factor
    return row


def _bandwidth_rows(info: dict) -> Iterator[dict]:
    """Communication Bandwidth Info -> one row per transport that moved data."""
    for transport, stats in info.items():
        if not isinstance(stats, dict):
            continue
        row = {"transport": str(transport).upper()}
        for key, value in stats.items():
            base, _ = _field(str(key))
            col = {
                "transitsize": "size_mb",
                "transittime": "time_ms",
                "bandwidth": "bandwidth_gbps",
                "largepacketratio": "large_packet_ratio",
            }.get(base)
            if col is not None and _num(value) is not None:
                row[col] = _num(value)
        if row.get("size_mb", 0.0) == 0.0 and row.get("time_ms", 0.0) == 0.0:
            continue  # transport not used by this operator
        yield row


def comm_records(data) -> tuple[list[dict], list[dict]]:
    """All operator records of a communication JSON -> (comm rows, bandwidth rows).

    Rows carry ``rank`` only where the file names it (cluster files).
    """
    comm_rows: list[dict] = []
    bw_rows: list[dict] = []
    for path, node in _walk(data, ()):
        if TIME_INFO not in node and BANDWIDTH_INFO not in node:
            continue
        ctx = _context(path)
        if ctx["op"] is None:
            continue
        name, group = split_op_key(ctx["op"])
        base = {"name": name, "kind": comm_kind(name), "group": group,
                "step": ctx["step"], "rank": ctx["rank"]}
        if isinstance(node.get(TIME_INFO), dict):
            row = {**base, **_time_row(node[TIME_INFO])}
            if "elapse_us" in row:
                comm_rows.append(row)
        if isinstance(node.get(BANDWIDTH_INFO), dict):
            for bw in _bandwidth_rows(node[BANDWIDTH_INFO]):
                bw_rows.append({**base, **bw})
    return comm_rows, bw_rows


def link_records(data) -> list[dict]:
    """All ``"src-dst"`` link records of a communication matrix JSON."""
    rows: list[dict] = []
    for path, node in _walk(data, ()):
        for key, info in node.items():
            m = _LINK_KEY.match(str(key))
            if not m or not isinstance(info, dict):
                continue
            ctx = _context(path)
            op = ctx["op"] or ""
            name, group = split_op_key(op)
            row = {"src": int(m.group(1)), "dst": int(m.group(2)), "name": name,
                   "group": group, "step": ctx["step"], "rank": ctx["rank"]}
            for k, value in info.items():
                base, _ = _field(str(k))
                if base == "transporttype":
                    row["transport"] = str(value).upper()
                elif base in ("transitsize", "transittime", "bandwidth"):
                    num = _num(value)
                    if num is not None:
                        row[{"transitsize": "size_mb", "transittime": "time_ms",
                             "bandwidth": "bandwidth_gbps"}[base]] = num
            rows.append(row)
    return rows


def to_frame(rows: list[dict], rank: int | None, columns: tuple[str, ...]) -> pd.DataFrame | None:
    """Rows -> DataFrame with typed ``rank``/``step``; None when there are no rows.

    ``rank`` fills rows that carry none; columns with no value at all are
    dropped (never emitted as all-null).
    """
    if not rows:
        return None
    df = pd.DataFrame(rows)
    if rank is not None:
        df["rank"] = df["rank"].fillna(rank) if "rank" in df else rank
    df = df.dropna(axis=1, how="all")
    if "rank" not in df:
        return None
    df["rank"] = df["rank"].astype("int64")
    if "step" in df:
        df["step"] = df["step"].astype("Int64")
    for col in ("src", "dst"):
        if col in df:
            df[col] = df[col].astype("int64")
    ordered = [c for c in columns if c in df] + [c for c in df if c not in columns]
    return df[ordered].reset_index(drop=True)


COMM_COLUMNS = ("rank", "step", "name", "kind", "group", "start_us", "elapse_us",
                "transit_us", "wait_us", "sync_us", "idle_us")
BANDWIDTH_COLUMNS = ("rank", "step", "name", "kind", "group", "transport", "size_mb",
                     "time_ms", "bandwidth_gbps", "large_packet_ratio")
LINK_COLUMNS = ("rank", "step", "src", "dst", "transport", "name", "group", "size_mb",
                "time_ms", "bandwidth_gbps")


def read_communication(path: Path, rank: int | None) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """``communication.json`` or ``cluster_communication.json`` -> (comm, bandwidth).

    ``rank`` is the unit's rank for per-rank files (None for cluster files,
    whose records name their rank). Raises InputError when the file is
    unreadable or holds no operator record.
    """
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object of communication operators")
    comm_rows, bw_rows = comm_records(data)
    if not comm_rows and not bw_rows:
        raise InputError(path, "no communication operator records found")
    if rank is not None:  # a per-rank file: any number key is not a rank
        for row in comm_rows + bw_rows:
            row["rank"] = rank
    comm = to_frame(comm_rows, rank, COMM_COLUMNS)
    bandwidth = to_frame(bw_rows, rank, BANDWIDTH_COLUMNS)
    return comm, bandwidth


def read_matrix(path: Path, rank: int | None) -> pd.DataFrame | None:
    """``communication_matrix.json`` -> links table (rank = the reading rank)."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object of communication links")
    rows = link_records(data)
    if not rows:
        raise InputError(path, "no src-dst link records found")
    if rank is not None:
        for row in rows:
            row["rank"] = rank
    return to_frame(rows, rank, LINK_COLUMNS)


def rank_from_links(path: Path) -> int | None:
    """The one rank that is an end of every link in a matrix file, if unique."""
    try:
        rows = link_records(load_json(path))
    except InputError:
        return None
    common: set[int] | None = None
    for row in rows:
        ends = {row["src"], row["dst"]}
        common = ends if common is None else common & ends
    return next(iter(common)) if common and len(common) == 1 else None
