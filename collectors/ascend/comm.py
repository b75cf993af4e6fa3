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

import numpy as np
import pyarrow as pa

from advisor.collectors.ascend import comm_typed as ascend_comm_typed
from advisor.collectors.ascend import fields
from advisor.collectors.ascend.comm_keys import descend, is_summary, link_ends, repeated_links, split_op_key
from advisor.collectors.io.files import parse_json, read_bytes
from advisor.collectors.parallel import batch_tables
from advisor.collectors.parallel.batch_tables import PendingTable
from advisor.collectors.vocab import collective_kind
from advisor.errors import InputError

#: Why a communication file nested deeper than the decoders follow is skipped.
TOO_DEEP = "JSON nested too deeply to be a communication file"
TIME_INFO = fields.text("communication.json").raw("time")
BANDWIDTH_INFO = fields.text("communication.json").raw("bandwidth")
_UNIT_TO_US = {"us": 1.0, "μs": 1.0, "µs": 1.0, "ms": 1000.0, "ns": 0.001, "s": 1e6}


@functools.lru_cache(maxsize=4096)
def _field(key: str) -> tuple[str, float | None]:
    """``"Elapse Time(ms)"`` -> ("elapsetime", 1000.0); no unit -> factor None."""
    m = re.match(r"^\s*([^()]*?)\s*(?:\(([^)]*)\))?\s*$", key)
    base = "".join((m.group(1) if m else key).split()).lower()
    unit = (m.group(2) or "").strip().lower() if m else ""
    return base, _UNIT_TO_US.get(unit) if unit else None


def _op_records(node: dict, step, rank, op, out: list) -> None:
    """Append (step, rank, op key, record) for every operator record below
    ``node``, in document order; records' own values and "Total ..."
    summaries are not descended."""
    for key, child in node.items():
        if not isinstance(child, dict) or is_summary(key):
            continue
        s, r, o = descend(key, step, rank, op)
        if TIME_INFO in child or BANDWIDTH_INFO in child:
            out.append((s, r, o, child))
        else:
            _op_records(child, s, r, o, out)


def _num(value) -> float | None:
    """A JSON number (or numeric string) as float; anything else None."""
    kind = type(value)
    if kind is float:
        return value
    if kind is int:
        return float(value)
    if kind is str:
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _key_lookup(source: str, default_factor) -> "functools._lru_cache_wrapper":
    """A cached map: raw JSON key -> (column, factor to us) or None, for keys
    whose name part, normalized (``_field``), is that of a spelling of
    ``source``'s fields (``ascend.fields``), whatever its unit;
    ``default_factor(column)`` when the key has no unit."""
    names = {_field(raw)[0]: col for raw, col in fields.text(source).by_raw().items()}

    @functools.lru_cache(maxsize=1024)
    def lookup(key: str):
        base, factor = _field(key)
        col = names.get(base)
        if col is None:
            return None
        return col, (default_factor(col) if factor is None else factor)
    return lookup


# Timestamps without a unit are us, spans ms.
_time_key = _key_lookup(TIME_INFO, lambda col: 1.0 if col == "start_us" else 1000.0)
_bandwidth_key = _key_lookup(BANDWIDTH_INFO, lambda col: 1.0)


def _time_row(info: dict) -> dict:
    """Communication Time Info -> comm columns in microseconds."""
    row: dict = {}
    for key, value in info.items():
        hit = _time_key(key) if type(key) is str else None
        if hit is not None:
            num = _num(value)
            if num is not None:
                row[hit[0]] = num * hit[1]
    return row


def _bandwidth_rows(info: dict) -> Iterator[dict]:
    """Communication Bandwidth Info -> one row per transport that moved data
    (sizes MB, times ms and bandwidths GB/s as written)."""
    for transport, stats in info.items():
        if not isinstance(stats, dict):
            continue
        row = {"transport": str(transport).upper()}
        for key, value in stats.items():
            hit = _bandwidth_key(key) if type(key) is str else None
            if hit is not None:
                num = _num(value)
                if num is not None:
                    row[hit[0]] = num
        if row.get("size_mb", 0.0) == 0.0 and row.get("time_ms", 0.0) == 0.0:
            continue  # transport not used by this operator
        yield row


def comm_records(data) -> tuple[list[dict], list[dict]]:
    """All operator records of a communication JSON -> (comm rows, bandwidth rows).

    Rows carry ``rank`` only where the file names it (cluster files).
    """
    comm_rows: list[dict] = []
    bw_rows: list[dict] = []
    found: list[tuple] = []
    if isinstance(data, dict) and TIME_INFO not in data and BANDWIDTH_INFO not in data:
        _op_records(data, None, None, None, found)
    for step, rank, op, node in found:
        if op is None:
            continue
        name, group = split_op_key(op)
        base = {"name": name, "kind": collective_kind(name), "group": group, "step": step, "rank": rank}
        info = node.get(TIME_INFO)
        if isinstance(info, dict):
            row = {**base, **_time_row(info)}
            if "elapse_us" in row:
                comm_rows.append(row)
        info = node.get(BANDWIDTH_INFO)
        if isinstance(info, dict):
            for bw in _bandwidth_rows(info):
                bw_rows.append({**base, **bw})
    return comm_rows, bw_rows


def _link_holders(node: dict, step, rank, op, out: list) -> None:
    """Append (step, rank, op key, dict) for every dict holding ``"src-dst"``
    link records, in document order; link records are not descended."""
    children = [(key if type(key) is str else str(key), child) for key, child in node.items()
                if isinstance(child, dict) and not is_summary(key)]
    if any(link_ends(key) for key, _ in children):
        out.append((step, rank, op, node))
    for key, child in children:
        if link_ends(key) is None:
            _link_holders(child, *descend(key, step, rank, op), out)


def link_records(data) -> list[dict]:
    """All ``"src-dst"`` link records of a communication matrix JSON."""
    rows: list[dict] = []
    holders: list[tuple] = []
    if isinstance(data, dict):
        _link_holders(data, None, None, None, holders)
    for step, rank, op, node in holders:
        name, group = split_op_key(op or "")
        for key, info in node.items():
            ends = link_ends(key if type(key) is str else str(key))
            if ends is not None and isinstance(info, dict):
                rows.append(_link_row(info, ends[0], ends[1], name, group, step, rank))
    return rows


_link_key = _key_lookup("communication_matrix.json", lambda col: 1.0)


def _link_row(info: dict, src: int, dst: int, name: str, group: str | None, step, rank) -> dict:
    """One link record -> a links row."""
    row = {"src": src, "dst": dst, "name": name, "group": group, "step": step, "rank": rank}
    for key, value in info.items():
        hit = _link_key(key) if type(key) is str else None
        if hit is None:
            continue
        if hit[0] == "transport":
            row["transport"] = str(value).upper()
        else:
            num = _num(value)
            if num is not None:
                row[hit[0]] = num
    return row


#: Columns of the comm / bandwidth / links tables that hold text; ``rank``,
#: ``step``, ``src`` and ``dst`` are integers, everything else float.
TEXT_COLUMNS = frozenset({"name", "kind", "group", "transport"})
INT_COLUMNS = frozenset({"rank", "step", "src", "dst"})


#: Arrow types of the comm / bandwidth / links columns that are not float.
_TYPES = {**dict.fromkeys(TEXT_COLUMNS, pa.string()), **dict.fromkeys(INT_COLUMNS, pa.int64())}


def pending_columns(cols: dict[str, list], rank: int | None,
                    columns: tuple[str, ...]) -> PendingTable | None:
    """Columns of equal length -> a table to build (``batch_tables``): known
    ``columns`` first in their order, then unknown ones as given.

    ``rank``: the rank of a per-rank file, given to every row (any number
    key in such a file is not a rank); None for cluster files, whose rows
    name their own. Columns with no value at all are dropped (never emitted
    as all-null); rows without a rank are dropped only when no row has one
    (the table is then unusable: None).
    """
    n = len(next(iter(cols.values()), []))
    if n == 0:
        return None
    if rank is not None:
        cols["rank"] = [rank] * n
    ranks = cols.get("rank")
    if ranks is None or ranks.count(None) == n:
        return None
    return PendingTable(cols, n, order=columns, types=_TYPES)


COMM_COLUMNS = ("rank", "step", "name", "kind", "group", "start_us", "elapse_us",
                "transit_us", "wait_us", "sync_us", "idle_us")
BANDWIDTH_COLUMNS = ("rank", "step", "name", "kind", "group", "transport", "size_mb",
                     "time_ms", "bandwidth_gbps", "large_packet_ratio")
LINK_COLUMNS = ("rank", "step", "src", "dst", "transport", "name", "group", "size_mb",
                "time_ms", "bandwidth_gbps")


def read_communication(path: Path, rank: int | None) -> tuple[pa.Table | None, pa.Table | None]:
    """``communication.json`` or ``cluster_communication.json`` -> (comm, bandwidth).

    ``rank`` is the unit's rank for per-rank files (None for cluster files,
    whose records name their rank). Raises InputError when the file is
    unreadable or holds no operator record.
    """
    comm, bandwidth = communication_columns(path, rank)
    return batch_tables.build_one(comm), batch_tables.build_one(bandwidth)


def communication_columns(path: Path, rank: int | None) -> tuple[PendingTable | None, PendingTable | None]:
    """``read_communication`` with the tables left to build (``batch_tables``)."""
    raw = read_bytes(path)
    try:
        typed = ascend_comm_typed.comm_columns(raw)
        if typed is not None:
            comm_cols, bw_cols = typed
        else:
            data = parse_json(path, raw)
            if not isinstance(data, dict):
                raise InputError(path, "expected a JSON object of communication operators")
            comm_rows, bw_rows = comm_records(data)
    except RecursionError:
        raise InputError(path, TOO_DEEP) from None
    if typed is None:
        if not comm_rows and not bw_rows:
            raise InputError(path, "no communication operator records found")
        comm_cols, bw_cols = rows_to_columns(comm_rows), rows_to_columns(bw_rows)
    return pending_columns(comm_cols, rank, COMM_COLUMNS), pending_columns(bw_cols, rank, BANDWIDTH_COLUMNS)


def rows_to_columns(rows: list[dict]) -> dict[str, list]:
    """Rows -> columns, in order of first appearance (missing cells None)."""
    seen = dict.fromkeys(k for row in rows for k in row)
    return {c: [row.get(c) for row in rows] for c in seen}


def _link_columns(path: Path) -> dict[str, list]:
    """The link columns of a communication matrix file (typed layout first,
    else the generic walk), repeated entries dropped (``repeated_links``);
    InputError when unreadable or without links."""
    raw = read_bytes(path)
    try:
        typed = ascend_comm_typed.link_columns(raw)  # repeats already left out
        if typed is not None:
            return typed
        data = parse_json(path, raw)
        if not isinstance(data, dict):
            raise InputError(path, "expected a JSON object of communication links")
        rows = link_records(data)
    except RecursionError:
        raise InputError(path, TOO_DEEP) from None
    if not rows:
        raise InputError(path, "no src-dst link records found")
    return without_repeats(rows_to_columns(rows))


def without_repeats(cols: dict[str, list]) -> dict[str, list]:
    """Link columns without the rows ``repeated_links`` names."""
    repeated = repeated_links(cols.get("name", []), cols.get("group"), cols.get("step"), cols.get("rank"))
    return cols if repeated is None else batch_tables.select_rows(cols, ~np.array(repeated, dtype=bool))


def read_matrix(path: Path, rank: int | None) -> pa.Table | None:
    """``communication_matrix.json`` -> links table (rank = the reading rank)."""
    return batch_tables.build_one(matrix_columns(path, rank))


def matrix_columns(path: Path, rank: int | None) -> PendingTable | None:
    """``read_matrix`` with the table left to build (``batch_tables``)."""
    return pending_columns(_link_columns(path), rank, LINK_COLUMNS)


def rank_from_links(path: Path) -> int | None:
    """The one rank that is an end of every link in a matrix file, if unique."""
    try:
        cols = _link_columns(path)
    except InputError:
        return None
    common: set[int] | None = None
    for src, dst in zip(cols["src"], cols["dst"]):
        ends = {src, dst}
        common = ends if common is None else common & ends
    return next(iter(common)) if common and len(common) == 1 else None
