"""Ascend communication records summed per rank, step and kind of transfer.

Profilers write, every step, a record per communication operator
(``communication.json``: its times, and its bytes per transport) and
matrix entries per collective type and ``src-dst`` link: a 1024-rank LLM
job with a few hundred collectives a step writes tens of millions of
them, gigabytes once in pandas. Everything advisor does with Ascend
communication sums them over operators (time in collectives per rank and
step, exposed gradient sync by kind, achieved bandwidth per transport, a
link's bandwidth against its peers of the same transport and size class),
so the Ascend collectors keep the sums instead (``advisor.profile``):

* ``comm``: one row per (rank, step, kind, group, name), ``name`` being
  the operator type: the instance suffix of an HCCL name dropped
  (``hcom_allReduce__606_0_1`` -> ``hcom_allReduce_``); times and the
  message sizes the kernel rows give (``size_mb``) summed, ``start_us``
  the first start;
* ``bandwidth``: one row per (rank, step, kind, transport, size_class);
* ``links``: one row per (rank, step, src, dst, transport, size_class);

each with ``ops`` (records summed). Bandwidth and links sum ``size_mb``
and ``time_ms`` and derive ``bandwidth_gbps`` = size_mb / time_ms (MB/ms =
GB/s); bandwidth's ``large_packet_ratio`` is the mean weighted by size.
Kineto traces keep a ``comm`` row per operator: matching collectives
across ranks needs each one's start.

``size_class`` is floor(log2(size_mb)) of each record before summing, so a
link's 0.5 MB and 64 MB transfers stay apart: small transfers are latency
bound and never reach the bandwidth of large ones (and the share of an
operator's transfers below 16 MB or 1 MB stays countable:
``advisor.metrics.transfer``). Bandwidth and link
records that moved nothing or took no time (size or time not positive)
say nothing about speed and are left out. Summing is idempotent: rolling
up rolled-up rows changes nothing, so a reader may roll up per batch and
again later.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from advisor.collectors import grouping
from advisor.collectors.ascend.comm_keys import OP_INSTANCE_SUFFIX
from advisor.collectors.vocab import size_classes


@dataclass(frozen=True)
class _Spec:
    keys: tuple[str, ...]  # group keys, in column order
    sums: tuple[str, ...]  # summed columns (null when no record has a value)
    firsts: tuple[str, ...] = ()  # columns whose minimum is kept
    transfers: bool = False  # size_mb / time_ms records: filtered, bandwidth derived


SPECS = {
    "comm": _Spec(("rank", "step", "kind", "group", "name"),
                  ("elapse_us", "transit_us", "wait_us", "sync_us", "idle_us", "size_mb"), firsts=("start_us",)),
    "bandwidth": _Spec(("rank", "step", "kind", "transport", "size_class"), ("size_mb", "time_ms"), transfers=True),
    "links": _Spec(("rank", "step", "src", "dst", "transport", "size_class"), ("size_mb", "time_ms"),
                   transfers=True),
}
#: Group keys of each rolled-up table, in column order.
KEYS = {name: spec.keys for name, spec in SPECS.items()}
#: The columns of each table the rollup reads; it drops the others (a
#: record's ``bandwidth_gbps`` is derived again from the sums).
USED = {name: frozenset({*spec.keys, *spec.sums, *spec.firsts, "ops", "large_packet_ratio"})
        for name, spec in SPECS.items()}
_TYPES = {"rank": pa.int64(), "step": pa.int64(), "src": pa.int64(), "dst": pa.int64(),
          "size_class": pa.int64(), "transport": pa.string(), "kind": pa.string(),
          "group": pa.string(), "name": pa.string()}
_UNIT = "__unit"


def rollup(name: str, table: pa.Table) -> pa.Table:
    """One table of ``name`` (``comm``, ``bandwidth`` or ``links``) rolled up."""
    return rollup_units(name, [table])[0]


def rollup_units(name: str, tables: list[pa.Table]) -> list[pa.Table]:
    """Several units' tables rolled up at once (one group-by for a reader's
    batch), each unit keeping its own rows."""
    if not tables:
        return []
    spec = SPECS[name]
    sizes = [t.num_rows for t in tables]
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    table = table.select([c for c in table.column_names if c in USED[name]])  # the others are not kept
    table = table.append_column(_UNIT, pa.array(np.repeat(np.arange(len(tables)), sizes)))
    for col in (*spec.sums, *spec.firsts):
        if col not in table.column_names:
            table = table.append_column(col, pa.nulls(table.num_rows, pa.float64()))
    if spec.transfers:
        table = _with_size_class(table) if "size_class" in spec.keys else table
        table = table.filter(_moved(table))
    if "name" in spec.keys and "name" in table.column_names:
        table = table.set_column(table.column_names.index("name"), "name", _operator_types(table.column("name")))
    for key in spec.keys:
        if key not in table.column_names:
            table = table.append_column(key, pa.nulls(table.num_rows, _TYPES[key]))
    if "ops" not in table.column_names:
        table = table.append_column("ops", pa.array(np.ones(table.num_rows, dtype=np.int64)))
    by = [_UNIT, *spec.keys]
    group, first = grouping.numbers([grouping.codes(table.column(key))[0] for key in by])
    n = first.size
    grouped = table.select(by).take(first)
    columns = {key: grouped.column(key).cast(_TYPES[key]) for key in spec.keys}
    ops, _ = grouping.sums(group, *grouping.floats(table.column("ops")), n, min_count=0)
    columns["ops"] = grouping.nullable(ops.astype(np.int64))
    kept = {c: grouping.sums(group, *grouping.floats(table.column(c)), n) for c in spec.sums}
    kept.update({c: grouping.extreme(np.fmin, group, *grouping.floats(table.column(c)), n) for c in spec.firsts})
    for c, (values, present) in kept.items():
        if present.any() or spec.transfers:  # a column no record has stays absent
            columns[c] = grouping.nullable(values, present)
    if spec.transfers:
        columns["bandwidth_gbps"] = pc.divide(columns["size_mb"], columns["time_ms"])
    if spec.transfers and "large_packet_ratio" in table.column_names:
        ratio, has_ratio = grouping.floats(table.column("large_packet_ratio"))
        size, has_size = grouping.floats(table.column("size_mb"))
        weighed, some = grouping.sums(group, np.where(has_ratio, size, 0.0), ~has_ratio | has_size, n)
        weighted, any_ratio = grouping.sums(group, ratio * size, has_ratio & has_size, n)
        with np.errstate(divide="ignore", invalid="ignore"):  # the mean of the ratios, weighted by size
            columns["large_packet_ratio"] = grouping.nullable(weighted / weighed, some & any_ratio & (weighed > 0))
    order = pc.sort_indices(grouped, sort_keys=[(c, "ascending") for c in by])  # same order however batched
    out = pa.table(columns).take(order)
    unit = grouped.column(_UNIT).to_numpy()
    counts = np.bincount(unit, minlength=len(tables))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return [out.slice(int(s), int(n)) for s, n in zip(starts, counts)]


def _operator_types(names: pa.ChunkedArray) -> pa.Array:
    """Operator names without their instance suffix, the pattern applied
    once per distinct name (the ranks of a run share most of them)."""
    encoded = names.cast(pa.string()).combine_chunks().dictionary_encode()
    return pc.take(pc.replace_substring_regex(encoded.dictionary, OP_INSTANCE_SUFFIX, "_"), encoded.indices)


def _with_size_class(table: pa.Table) -> pa.Table:
    """``table`` with ``size_class`` = floor(log2(size_mb)) of each record
    (null where the size is not positive); kept as is if already there."""
    if "size_class" in table.column_names:
        return table
    cls, positive = size_classes(table.column("size_mb").to_numpy(zero_copy_only=False).astype(np.float64))
    return table.append_column("size_class", pa.array(cls, mask=~positive))


def _moved(table: pa.Table) -> pa.Array:
    """Records with a positive size and time (null counts as not)."""
    moved = pc.and_(pc.greater(table.column("size_mb"), 0), pc.greater(table.column("time_ms"), 0))
    return pc.fill_null(moved, False)
