"""Typed decoding of per-rank communication files: the common layout, fast.

torch_npu and MindSpore write ``communication.json`` as
``step -> collective|p2p -> op@group -> record`` and
``communication_matrix.json`` as ``step -> collective|p2p -> op@group ->
"src-dst" -> link``, with a fixed vocabulary of field names. msgspec decodes
exactly that layout into structs in C, keeping only the fields we read;
at 1024 ranks this is ~1 ms per rank less than the generic walk.

The contract is strict so that results never depend on which path ran: any
other nesting, a field name other than the first spelling of each field in
``ascend.fields`` or one it lists as known (another unit, spelling or
version), a text value where a number belongs, or a record without its time
info makes these functions return None, and ``ascend_comm`` reads the file
with its generic, shape-based walk instead. Values are the generic walk's:
JSON null is "absent", times in microseconds, sizes/bandwidths as written.
One exception: the matrix samples that a ``{type}-total`` entry repeats
(``comm_keys.repeated_links``) are not decoded, only checked to be JSON,
since both walks leave their rows out.
"""

from __future__ import annotations

import functools
import re

import msgspec

from advisor.collectors.ascend import fields
from advisor.collectors.ascend.comm_keys import descend, is_summary, link_ends, sample_key, split_op_key
from advisor.collectors.vocab import collective_kind

_ABSENT = msgspec.Raw()  # fields we skip over: kept undecoded


def _record(name: str, source: str, required: dict[str, type] | None = None) -> type[msgspec.Struct]:
    """A struct of ``source``'s fields (``ascend.fields``), each under its
    first spelling, named as the Profile column it fills: a number or None
    (absent or null), except the ``required`` ones, of the type given; plus
    the source's known fields, kept undecoded. Any other field fails the
    decode. Untracked by the garbage collector (``gc=False``): a record
    holds numbers, text and raw bytes, never a cycle, and thousands of
    tracked structs a rank set off collections of everything the reader
    holds."""
    spec = fields.text(source)
    required = required or {}
    rename = {column: spec.raw(column) for column in spec.fields}
    members = [(column, required[column]) if column in required else (column, float | None, None)
               for column in spec.fields]
    for i, raw in enumerate(spec.known):
        rename[f"_known{i}"] = raw
        members.append((f"_known{i}", msgspec.Raw, _ABSENT))
    return msgspec.defstruct(name, members, rename=rename, forbid_unknown_fields=True, kw_only=True, gc=False)


_TimeInfo = _record("_TimeInfo", "Communication Time Info")
_Transport = _record("_Transport", "Communication Bandwidth Info")
_Link = _record("_Link", "communication_matrix.json", required={"transport": str})
_OpRecord = msgspec.defstruct("_OpRecord", [
    ("time", _TimeInfo | None, None),
    ("bandwidth", dict[str, _Transport] | None, None),
], rename={"time": fields.text("communication.json").raw("time"),
           "bandwidth": fields.text("communication.json").raw("bandwidth")}, gc=False)


_COMM_LAYOUT = msgspec.json.Decoder(dict[str, dict[str, dict[str, _OpRecord]]])
_LINK_LAYOUT = msgspec.json.Decoder(dict[str, dict[str, dict[str, dict[str, _Link]]]])
#: The matrix down to its operator entries, each kept undecoded (``link_columns``).
_LINK_ENTRIES = msgspec.json.Decoder(dict[str, dict[str, dict[str, msgspec.Raw]]])
_LINKS = msgspec.json.Decoder(dict[str, _Link])
#: Where a matrix file has ``{type}-total`` entries (``comm_keys.matrix_entry``).
_TOTAL = re.compile(rb"-total", re.IGNORECASE)

Columns = dict[str, list]


class _OutsideLayout(Exception):
    """The file is not in the per-rank layout: read it generically."""


def _levels(data: dict, links: bool = False):
    """(context, second-level dict) for every second-level entry that is not
    a summary, context being the (step, rank, op) its keys give; the keys
    below it are read with ``_op_context``: together, the walk of every
    third-level entry, "Total ..." summaries left out at every level,
    context as the generic walk gives it. ``links``: a "src-dst" key above
    the third level is outside the layout (``_OutsideLayout``)."""
    for k1, level1 in data.items():
        c1 = _below(k1, _TOP, links)
        if c1 is None:
            continue
        for k2, level2 in level1.items():
            c2 = _below(k2, c1, links)
            if c2 is not None:
                yield c2, level2


def _op_context(key: str, context: tuple, links: bool) -> tuple | None:
    """``_below(key, context, links)``, an operator key found uncached
    (operator keys are often unique to a rank)."""
    if "@" in key and not key.startswith("Total"):
        return context[0], context[1], key
    return _below(key, context, links)


_TOP = (None, None, None)


@functools.lru_cache(maxsize=65536)
def _below(key: str, context: tuple, links: bool) -> tuple | None:
    """``descend(key, *context)``; None for a summary key. With ``links``, a
    "src-dst" key raises _OutsideLayout. (Cached: every rank of a run has
    the same keys, and a walk looks each up once per record.)"""
    if is_summary(key):
        return None
    if links and link_ends(key):
        raise _OutsideLayout
    return descend(key, *context)


_BASE = ("name", "kind", "group", "step", "rank")
COMM_FIELDS = (*_BASE, "start_us", "elapse_us", "transit_us", "wait_us", "sync_us", "idle_us")
BANDWIDTH_FIELDS = (*_BASE, "transport", "size_mb", "time_ms", "bandwidth_gbps", "large_packet_ratio")
LINK_FIELDS = ("src", "dst", "name", "group", "step", "rank", "transport", "size_mb", "time_ms", "bandwidth_gbps")


def comm_columns(raw: bytes) -> tuple[Columns, Columns] | None:
    """``communication.json`` bytes in the per-rank layout -> (comm columns,
    bandwidth columns) as ``ascend_comm.comm_records`` rows would give them;
    None outside the layout (see the module docstring) or without records."""
    try:
        data = _COMM_LAYOUT.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    comm: list[tuple] = []
    bandwidth: list[tuple] = []
    records = 0
    for context, level2 in _levels(data):  # runs once per record
        for key, record in level2.items():
            if "@" in key and not key.startswith("Total"):  # ``_op_context``'s operator key, without the call
                step, rank, op = context[0], context[1], key
            else:
                at = _below(key, context, False)
                if at is None:
                    continue
                step, rank, op = at
            info = record.time
            if info is None or op is None:
                return None  # not a record, or a record with no operator key: the generic walk decides
            records += 1
            name, group, kind = _op_parts(op)
            if info.elapse_us is not None:  # the generic walk keeps only timed operators; ms -> us as it scales them
                transit, wait, sync, idle = info.transit_us, info.wait_us, info.sync_us, info.idle_us
                comm.append((name, kind, group, step, rank, info.start_us, info.elapse_us * 1000.0,
                             None if transit is None else transit * 1000.0, None if wait is None else wait * 1000.0,
                             None if sync is None else sync * 1000.0, None if idle is None else idle * 1000.0))
            if record.bandwidth:
                for transport, t in record.bandwidth.items():
                    if not t.size_mb and not t.time_ms:
                        continue  # transport not used by this operator (size and time 0 or absent)
                    bandwidth.append((name, kind, group, step, rank, _upper(transport), t.size_mb, t.time_ms,
                                      t.bandwidth_gbps, t.large_packet_ratio))
    return (_columns(COMM_FIELDS, comm), _columns(BANDWIDTH_FIELDS, bandwidth)) if records else None


def _columns(fields: tuple[str, ...], rows: list[tuple]) -> Columns:
    """Row tuples -> columns named ``fields`` (one transpose in C)."""
    return dict(zip(fields, map(list, zip(*rows)))) if rows else {f: [] for f in fields}


_SUMMARY = ()


@functools.lru_cache(maxsize=65536)
def _link_key(key: str) -> tuple | None:
    """A key below an operator: ``_SUMMARY`` for "Total ...", the link's
    (src, dst), or None for anything else."""
    return _SUMMARY if is_summary(key) else link_ends(key)


@functools.lru_cache(maxsize=4096)
def _link_keys(keys: tuple[str, ...]) -> tuple | None:
    """``_link_key`` of each key below an operator; None if one is neither a
    link nor a summary, () if none is a link. (Cached: the operators of a
    rank, and the ranks of a run, have the same few link sets.)"""
    ends = tuple(map(_link_key, keys))
    if None in ends:
        return None
    return ends if ends.count(_SUMMARY) < len(ends) else ()


@functools.lru_cache(maxsize=256)
def _upper(text: str) -> str:
    return text.upper()


_INSTANCE_CHARS = "0123456789_"


@functools.lru_cache(maxsize=65536)
def _op_parts(op: str) -> tuple[str, str | None, str]:
    """(name, group, collective kind) of an operator key ``name@group``.
    The kind is looked up without the name's trailing digits and
    underscores (its instance number): ``collective_kind`` reads letters
    only, so it is the same, and its cache hits for every instance."""
    name, group = split_op_key(op)
    return name, group, collective_kind(name.rstrip(_INSTANCE_CHARS))


def link_columns(raw: bytes) -> Columns | None:
    """``communication_matrix.json`` bytes in the per-rank layout -> links
    columns as ``ascend_comm.link_records`` rows would give them, without
    the repeated entries (``comm_keys.repeated_links``, decided once per
    operator: its links share its name, group, step and rank); None outside
    the layout or without links. In a file with ``{type}-total`` entries
    those are decoded first, and the samples they repeat (four of every five
    entries a profiler writes) are left undecoded: only their JSON syntax is
    checked. Other files are decoded in one pass."""
    layout = _LINK_ENTRIES if _TOTAL.search(raw) else _LINK_LAYOUT
    entries = []  # (step, rank, name, group, sample_key, value) of each operator entry
    try:
        for context, level2 in _levels(layout.decode(raw), links=True):
            for key, value in level2.items():
                at = _op_context(key, context, True)
                if at is not None:
                    name, group, _ = _op_parts(at[2] or "")
                    entries.append((at[0], at[1], name, group, sample_key(name, group, at[0], at[1]), value))
    except (msgspec.ValidationError, msgspec.DecodeError, _OutsideLayout):
        return None
    links: dict[int, tuple | None] = {}  # entry -> (link ends, links), () for no link: the totals, decoded first
    for i, entry in enumerate(entries):
        if entry[4] and entry[4][1]:
            links[i] = _entry_links(entry[5])
    totals = {entries[i][4][0] for i, found in links.items() if found}
    rows = []
    for i, (step, rank, name, group, key, value) in enumerate(entries):
        if key and not key[1] and key[0] in totals:
            continue  # a sample its total already sums
        found = links[i] if i in links else _entry_links(value)
        if found is None:
            return None  # something other than links below an operator
        if found:
            ends, entry = found
            rows += [(e[0], e[1], name, group, step, rank, _upper(link.transport), link.size_mb, link.time_ms,
                      link.bandwidth_gbps) for e, link in zip(ends, entry.values()) if e is not _SUMMARY]
    return _columns(LINK_FIELDS, rows) if rows else None


def _entry_links(value: msgspec.Raw | dict) -> tuple | None:
    """One operator entry's (link ends, links), () when it has no link, None
    when it holds something other than links. ``value``: undecoded, or
    decoded already."""
    try:
        entry = _LINKS.decode(value) if isinstance(value, msgspec.Raw) else value
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    ends = _link_keys(tuple(entry))
    if ends is None:
        return None
    return (ends, entry) if ends else ()
