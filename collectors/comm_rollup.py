"""Bandwidth and link records summed per rank, step and kind of transfer.

Profilers write a bandwidth record per communication operator and
transport, and a link record per operator and ``src-dst`` pair, every
step: a 1024-rank LLM job with a few hundred collectives a step writes
tens of millions of them, gigabytes once in pandas. Everything advisor
does with them sums sizes and times over operators (achieved bandwidth
per transport; a link's bandwidth against its peers of the same transport
and size class), so the collectors keep the sums instead (the ``links``
and ``bandwidth`` tables of ``advisor.profile``):

* ``links``: one row per (rank, step, src, dst, transport, size_class);
* ``bandwidth``: one row per (rank, step, kind, transport);

each with ``ops`` (records summed), ``size_mb`` and ``time_ms`` (sums),
``bandwidth_gbps`` = size_mb / time_ms (MB/ms = GB/s) and, for bandwidth
where written, ``large_packet_ratio`` (mean weighted by size).

``size_class`` is floor(log2(size_mb)) of each record before summing, so a
link's 0.5 MB and 64 MB transfers stay apart: small transfers are latency
bound and never reach the bandwidth of large ones. Records that moved
nothing or took no time (size or time not positive) say nothing about
speed and are left out. Summing is idempotent: rolling up rolled-up rows
changes nothing, so a reader may roll up per batch and again later.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Group keys of each rolled-up table, in column order.
KEYS = {
    "links": ("rank", "step", "src", "dst", "transport", "size_class"),
    "bandwidth": ("rank", "step", "kind", "transport"),
}
_TYPES = {"rank": pa.int64(), "step": pa.int64(), "src": pa.int64(), "dst": pa.int64(),
          "size_class": pa.int64(), "transport": pa.string(), "kind": pa.string()}
_UNIT = "__unit"
_WEIGHTED = "__packets_mb"  # large_packet_ratio x size_mb
_WEIGHED = "__weighed_mb"  # size_mb of the records with a large_packet_ratio


def rollup(name: str, table: pa.Table) -> pa.Table:
    """One table of ``name`` (``links`` or ``bandwidth``) rolled up."""
    return rollup_units(name, [table])[0]


def rollup_units(name: str, tables: list[pa.Table]) -> list[pa.Table]:
    """Several units' tables rolled up at once (one group-by for a reader's
    batch), each unit keeping its own rows."""
    if not tables:
        return []
    keys = KEYS[name]
    sizes = [t.num_rows for t in tables]
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    table = table.append_column(_UNIT, pa.array(np.repeat(np.arange(len(tables)), sizes)))
    for col in ("size_mb", "time_ms"):
        if col not in table.column_names:
            table = table.append_column(col, pa.nulls(table.num_rows, pa.float64()))
    table = _with_size_class(table) if "size_class" in keys else table
    table = table.filter(_moved(table))
    for key in keys:
        if key not in table.column_names:
            table = table.append_column(key, pa.nulls(table.num_rows, _TYPES[key]))
    if "ops" not in table.column_names:
        table = table.append_column("ops", pa.array(np.ones(table.num_rows, dtype=np.int64)))
    sums = [("ops", "sum"), ("size_mb", "sum"), ("time_ms", "sum")]
    if "large_packet_ratio" in table.column_names:
        ratio, size = table.column("large_packet_ratio"), table.column("size_mb")
        table = table.append_column(_WEIGHTED, pc.multiply(ratio, size))
        table = table.append_column(_WEIGHED, pc.if_else(pc.is_valid(ratio), size, 0.0))
        sums += [(_WEIGHTED, "sum"), (_WEIGHED, "sum")]
    grouped = table.group_by([_UNIT, *keys], use_threads=False).aggregate(sums)
    grouped = grouped.sort_by([(c, "ascending") for c in (_UNIT, *keys)])  # same order however batched
    size, time = grouped.column("size_mb_sum"), grouped.column("time_ms_sum")
    columns = {key: grouped.column(key).cast(_TYPES[key]) for key in keys}
    columns |= {"ops": grouped.column("ops_sum"), "size_mb": size, "time_ms": time,
                "bandwidth_gbps": pc.divide(size, time)}
    if _WEIGHTED in table.column_names:
        weighed = grouped.column(f"{_WEIGHED}_sum")
        ratio = pc.divide(grouped.column(f"{_WEIGHTED}_sum"), weighed)
        columns["large_packet_ratio"] = pc.if_else(pc.greater(weighed, 0), ratio, pa.scalar(None, pa.float64()))
    out = pa.table(columns)
    counts = np.bincount(grouped.column(_UNIT).to_numpy(), minlength=len(tables))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return [out.slice(int(s), int(n)) for s, n in zip(starts, counts)]


def _with_size_class(table: pa.Table) -> pa.Table:
    """``table`` with ``size_class`` = floor(log2(size_mb)) of each record
    (null where the size is not positive); kept as is if already there."""
    if "size_class" in table.column_names:
        return table
    size = table.column("size_mb").to_numpy(zero_copy_only=False).astype(np.float64)
    positive = size > 0
    with np.errstate(all="ignore"):
        cls = np.floor(np.log2(np.where(positive, size, 1.0))).astype(np.int64)
    return table.append_column("size_class", pa.array(cls, mask=~positive))


def _moved(table: pa.Table) -> pa.Array:
    """Records with a positive size and time (null counts as not)."""
    moved = pc.and_(pc.greater(table.column("size_mb"), 0), pc.greater(table.column("time_ms"), 0))
    return pc.fill_null(moved, False)
