"""Per-rank tables in Arrow form, and their conversion to the Profile's pandas tables.

A collector that reads many small per-rank files (the Ascend text layout)
builds each rank's tables as ``pyarrow.Table``: cheap to build, to pickle
out of a worker process and to concatenate. The cluster engine concatenates
each table over all ranks and converts it to pandas once (``merge``),
instead of building, pickling and concatenating thousands of small
DataFrames -- at 1024 ranks that per-rank pandas work cost more than
parsing the files.

A Profile whose tables are Arrow is transient: it never leaves the
collectors. ``to_pandas`` gives the dtypes every metric expects:

* ``rank``, ``src``, ``dst``, ``count``, ``ops`` int64 (nullable ``Int64`` if a
  value is missing), as are those ``TABLE_INT_COLUMNS`` names for one
  table; ``step`` always nullable ``Int64``;
* floats float64 (NaN where missing);
* text: pandas ``string`` in the ``steps``, ``ops`` and ``data_ops``
  tables (as ``csvio.read_columns`` gives), pandas' default text dtype in
  the others (as a DataFrame built from JSON records gets).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from advisor.profile import TABLES, Profile, RunMeta, merge_profiles

#: Integer columns that are never missing in a well-formed table.
INT_COLUMNS = ("rank", "src", "dst", "count", "ops")
#: Integer columns that are never missing in one table only (by table name).
TABLE_INT_COLUMNS = {"comm_contention": ("size_class",), "kernel_sequences": ("length", "steps")}
#: Tables whose text columns are pandas ``string`` dtype.
STRING_TABLES = frozenset({"steps", "ops", "data_ops", "kernels"})


@dataclass(frozen=True)
class Rows:
    """Rows ``offset .. offset + count`` of a worker chunk's packed table,
    with one rank's ``columns``: that rank's table as ``unpack`` leaves it.
    A sliced ``pyarrow.Table`` per rank and table costs ~0.5 KB of C++
    objects per column, tens of MB in this process at 1024 ranks; ``merge``
    takes each run of neighbouring ranks of one chunk as one slice."""

    table: pa.Table
    offset: int
    count: int
    columns: tuple[str, ...]

    def __len__(self) -> int:
        return self.count

    def follows(self, other: Rows) -> bool:
        """These rows come right after ``other``'s in the same table, same columns."""
        return (self.table is other.table and self.columns == other.columns
                and self.offset == other.offset + other.count)

    def resolve(self) -> pa.Table:
        return self.table.slice(self.offset, self.count).select(list(self.columns))


def is_arrow(table) -> bool:
    """True for a pyarrow Table or ``Rows`` of one."""
    return isinstance(table, (pa.Table, Rows))


def _resolved(tables: list) -> list[pa.Table]:
    """Arrow tables and ``Rows`` -> tables, neighbouring rows of one packed
    table joined into one slice."""
    out: list = []
    for table in tables:
        if isinstance(table, Rows) and out and isinstance(out[-1], Rows) and table.follows(out[-1]):
            last = out[-1]
            out[-1] = Rows(last.table, last.offset, last.count + table.count, last.columns)
        else:
            out.append(table)
    return [t.resolve() if isinstance(t, Rows) else t for t in out]


def to_pandas(name: str, table: pa.Table | Rows) -> pd.DataFrame:
    """One table (``name`` from ``TABLES``) in the Profile's pandas dtypes."""
    if isinstance(table, Rows):
        table = table.resolve()
    strings = name in STRING_TABLES
    ints = INT_COLUMNS + TABLE_INT_COLUMNS.get(name, ())
    nullable = [c for c, t in zip(table.column_names, table.schema.types)
                if pa.types.is_integer(t) and (c == "step" or c not in ints or table.column(c).null_count)]

    def mapper(arrow_type):
        if strings and (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)):
            return pd.StringDtype()
        return None

    # one block per column: numbers without nulls stay in Arrow's buffers
    # (consolidating them into one 2-D block cost ~3x the table in memory)
    df = table.drop_columns(nullable).to_pandas(types_mapper=mapper, split_blocks=True)
    for col in nullable:
        values = table.column(col)
        array = pd.arrays.IntegerArray(values.fill_null(0).to_numpy().astype("int64"),
                                       values.is_null().to_numpy())
        df.insert(table.column_names.index(col), col, array)
    return df


def concat(tables: list[pa.Table]) -> pa.Table:
    """Tables with possibly different columns -> one (missing columns null,
    column order by first appearance, as ``pandas.concat``)."""
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive")


def _one_chunk_text(table: pa.Table) -> pa.Table:
    """``table`` with each text column in one chunk. Text stays Arrow in
    pandas, and grouping on a column of one chunk per rank costs ~5x more
    (pandas factorizes chunk by chunk, then unifies: ~40 ms per key column
    at 1024 ranks); numbers become one NumPy array either way."""
    for i, (name, kind) in enumerate(zip(table.column_names, table.schema.types)):
        if (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and table.column(i).num_chunks > 1:
            table = table.set_column(i, name, table.column(i).combine_chunks())
    return table


def profile_to_pandas(profile: Profile) -> Profile:
    """Convert a Profile's Arrow tables to pandas in place; returns it."""
    for name in TABLES:
        table = getattr(profile, name)
        if is_arrow(table):
            setattr(profile, name, to_pandas(name, table) if len(table) else None)
    return profile


def merge(parts: list[Profile], meta: RunMeta) -> Profile:
    """``merge_profiles`` for parts whose tables may be Arrow: each table is
    concatenated in Arrow when every part holds it so, then converted once."""
    shells = [Profile(meta=p.meta, skipped=p.skipped) for p in parts]
    out = merge_profiles(shells, meta)
    for name in TABLES:
        tables = [t for t in (getattr(p, name) for p in parts) if t is not None and len(t)]
        if not tables:
            continue
        if all(is_arrow(t) for t in tables):
            setattr(out, name, to_pandas(name, _one_chunk_text(concat(_resolved(tables)))))
        else:
            frames = [to_pandas(name, t) if is_arrow(t) else t for t in tables]
            setattr(out, name, pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0])
    return out


def pack(results: list[tuple]) -> tuple:
    """A worker's results for a chunk of units, with each table's Arrow
    parts concatenated over the chunk: one table to pickle instead of one
    per unit (per-table pickling overhead dominated small ranks).
    ``unpack`` restores the per-unit results."""
    layout: dict[str, list[tuple[int, int, list[str]]]] = {}
    tables: dict[str, pa.Table] = {}
    for name in TABLES:
        parts = []
        for i, result in enumerate(results):
            table = getattr(result[1], name) if result[0] == "ok" else None
            if is_arrow(table):
                parts.append(table)
                layout.setdefault(name, []).append((i, table.num_rows, table.column_names))
                setattr(result[1], name, None)
        if parts:
            tables[name] = concat(parts).combine_chunks()  # one buffer per column: pickles ~30x faster
    return ("packed", results, layout, tables)


def unpack(packed: tuple) -> list[tuple]:
    """The per-unit results of ``pack``, each table as ``Rows`` of the
    packed one (resolved when merged or converted)."""
    _, results, layout, tables = packed
    for name, entries in layout.items():
        offset = 0
        for i, rows, columns in entries:
            setattr(results[i][1], name, Rows(tables[name], offset, rows, tuple(columns)))
            offset += rows
    return results
