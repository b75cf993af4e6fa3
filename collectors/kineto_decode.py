"""Typed, streaming decoding of Kineto (PyTorch profiler) Chrome traces.

``load_trace(path)`` reads a ``.json`` or ``.json.gz`` trace with msgspec
Structs that name only the fields the analysis uses (ph, cat, name, pid,
tid, ts, dur and a few ``args``); every other field is skipped by the
decoder without building Python objects. The ``traceEvents`` array is
streamed (:mod:`kineto_stream`): the file is read, and gzip decompressed,
in chunks of a few MB, each run of complete events is decoded with the
garbage collector paused, its complete-event ("ph": "X") rows of the
analysed categories are reduced at once to compact numpy columns
(float64 times, int8/int32 codes into tables of distinct names, threads,
input-type tuples), and the Structs are dropped before the next chunk is
read. Memory therefore grows with the number of analysed events (about
60 bytes each) and not with the size of the JSON text: a 300 MB trace
loads in a few hundred MB. Documents that cannot be streamed (no
``traceEvents`` array near the start) are decoded whole.

``ts``/``dur`` may be numbers or numeric strings. When an event has a field
of an unexpected type the typed decode of its batch fails; that batch is
then decoded leniently (event by event) and the events that do not fit are
dropped and counted.
"""

from __future__ import annotations

import gc
import gzip
import operator
import re
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from advisor.collectors import kineto_stream as stream
from advisor.errors import InputError

# Categories, current and 2021 vocabulary.
HOST_OP_CATS = frozenset({"cpu_op", "Operator", "user_annotation"})
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver"})
KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
DEVICE_CATS = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS
WANTED_CATS = HOST_OP_CATS | RUNTIME_CATS | DEVICE_CATS
OLD_VOCAB_CATS = frozenset({"Operator", "Runtime", "Kernel", "Memcpy", "Memset"})

# Event kinds stored in ``Events.kind``.
HOST, RUNTIME, KERNEL, MEMCPY, MEMSET = 0, 1, 2, 3, 4
_KIND = {c: HOST for c in HOST_OP_CATS}
_KIND.update({c: RUNTIME for c in RUNTIME_CATS})
_KIND.update({c: KERNEL for c in KERNEL_CATS})
_KIND.update({c: MEMCPY for c in MEMCPY_CATS})
_KIND.update({c: MEMSET for c in MEMSET_CATS})
CATEGORIES = tuple(sorted(_KIND))
_CAT_CODE = {c: i for i, c in enumerate(CATEGORIES)}
_CAT_KIND = np.array([_KIND[c] for c in CATEGORIES], dtype=np.int8)

PEEK_BYTES = 64 * 1024


class Args(msgspec.Struct, gc=False):
    """The ``args`` fields we read; all others are skipped."""

    correlation: int | str | None = None
    input_type: list | None = msgspec.field(default=None, name="Input type")
    input_dims: list[msgspec.Raw] | None = msgspec.field(default=None, name="Input Dims")
    input_dims_lc: list[msgspec.Raw] | None = msgspec.field(default=None, name="Input dims")
    collective: str | None = msgspec.field(default=None, name="Collective name")
    pg_name: str | int | None = msgspec.field(default=None, name="Process Group Name")
    pg_desc: str | None = msgspec.field(default=None, name="Process Group Description")


class Event(msgspec.Struct, gc=False):
    """One trace event, reduced to the fields the collector uses."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | str | None = None
    dur: float | str | None = None
    args: Args | None = None


class DistInfo(msgspec.Struct):
    """``distributedInfo`` as written by torch.distributed-aware profiling."""

    rank: int | str | None = None
    world_size: int | str | None = None
    backend: str | None = None


class TraceDoc(msgspec.Struct):
    """Top level of a Kineto trace object."""

    traceEvents: list[Event] = []
    distributedInfo: DistInfo | None = None
    schemaVersion: int | str | None = None


class _LooseDoc(msgspec.Struct):
    """Fallback: events as untyped objects, converted one by one."""

    traceEvents: list[Any] = []
    distributedInfo: Any = None
    schemaVersion: Any = None


_BATCH = msgspec.json.Decoder(list[Event])
_FIELDS = operator.attrgetter("cat", "name", "pid", "tid", "ts", "dur", "args")
_DOC = msgspec.json.Decoder(TraceDoc)
_LOOSE = msgspec.json.Decoder(_LooseDoc)


@dataclass
class Events:
    """Complete events of the analysed categories, as aligned columns.

    ``name``, ``thread``, ``pid`` and ``cat`` are integer codes into
    ``names`` / ``threads`` / ``pids`` / ``CATEGORIES``; ``kind`` is HOST,
    RUNTIME, KERNEL, MEMCPY or MEMSET. ``input_type`` is a code into
    ``input_types`` (tuples of the ``Input type`` strings of tensor inputs),
    ``collective`` into ``collectives`` (``Collective name`` args) and
    ``group`` into ``groups`` (process-group labels); -1 means absent.
    """

    kind: np.ndarray
    cat: np.ndarray
    name: np.ndarray
    names: np.ndarray
    thread: np.ndarray
    threads: list[str]
    pid: np.ndarray
    pids: list[str]
    ts: np.ndarray
    dur: np.ndarray
    corr: np.ndarray  # float correlation id, NaN when absent
    input_type: np.ndarray
    input_types: list[tuple]
    collective: np.ndarray
    collectives: list[str]
    group: np.ndarray
    groups: list[str]

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def __len__(self) -> int:
        return int(self.ts.size)

    def cat_is(self, category: str) -> np.ndarray:
        """Boolean mask of the events of one category."""
        code = _CAT_CODE.get(category)
        return self.cat == code if code is not None else np.zeros(len(self), dtype=bool)

    def collective_of(self, i: int) -> str | None:
        c = int(self.collective[i])
        return self.collectives[c] if c >= 0 else None

    def group_of(self, i: int) -> str | None:
        c = int(self.group[i])
        return self.groups[c] if c >= 0 else None


@dataclass
class Trace:
    """A decoded trace: metadata plus the event columns."""

    path: Path
    events: Events
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    schema_version: str | None = None
    old_vocabulary: bool = False
    dropped: int = 0  # events dropped for unusable fields
    problems: list[str] = field(default_factory=list)


def _open(path: Path):
    """A binary file object over the (decompressed) file."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


@contextmanager
def _reading(path: Path):
    """Map gzip/OS errors while reading ``path`` to InputError."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(path, f"truncated or corrupt gzip file ({exc})") from None
    except OSError as exc:
        raise InputError(path, f"cannot read file ({exc.strerror or exc})") from None


@contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_bytes(path: Path) -> bytes:
    """The file's (decompressed) bytes; InputError when unreadable."""
    with _reading(path), _open(path) as fh:
        return fh.read()


def peek(path: Path, size: int = PEEK_BYTES) -> str:
    """The first ``size`` bytes of the (decompressed) file as text, tolerant
    of truncation; '' when unreadable."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(size if not path.name.endswith(".gz") else size // 2)
    except OSError:
        return ""
    if path.name.endswith(".gz"):
        try:
            raw = zlib.decompressobj(wbits=47).decompress(raw, size)
        except zlib.error:
            return ""
    return raw.decode("utf-8", errors="replace")


def _convert_loose(raw_events: list) -> tuple[list[Event], int]:
    """Convert untyped events one by one, dropping those that do not fit."""
    good: list[Event] = []
    dropped = 0
    for raw in raw_events:
        try:
            good.append(msgspec.convert(raw, Event, strict=False))
        except (msgspec.ValidationError, TypeError):
            if isinstance(raw, dict) and raw.get("ph") == "X":
                dropped += 1
    return good, dropped


def _decode_batch(text: bytes) -> tuple[list[Event], int]:
    """One JSON array of events -> Structs (lenient when a field misfits);
    msgspec.DecodeError when the text is not valid JSON."""
    try:
        return _BATCH.decode(text), 0
    except msgspec.ValidationError:
        pass
    loose = msgspec.json.decode(text)
    return _convert_loose(loose if isinstance(loose, list) else [])


def _decode_meta(path: Path, text: bytes) -> tuple[DistInfo | None, Any]:
    """distributedInfo and schemaVersion from the document without events."""
    try:
        doc = _DOC.decode(text)
        return doc.distributedInfo, doc.schemaVersion
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise InputError(path, f"malformed JSON around traceEvents ({exc})") from None
    try:
        loose = _LOOSE.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InputError(path, f"malformed trace ({exc})") from None
    try:
        dist = msgspec.convert(loose.distributedInfo, DistInfo | None, strict=False)
    except msgspec.ValidationError:
        dist = None
    sv = loose.schemaVersion if isinstance(loose.schemaVersion, (int, str)) else None
    return dist, sv


def _as_int(value) -> int | None:
    """An int from an int or numeric string, else None."""
    try:
        return int(value) if value is not None and str(value).strip() != "" else None
    except (TypeError, ValueError):
        return None


def _numeric(values: list) -> np.ndarray:
    """Numbers or numeric strings -> float64 (NaN when not numeric)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)


class _Table:
    """Distinct values -> stable int codes, shared by all batches."""

    def __init__(self, key=lambda v: v):
        self.codes: dict = {}
        self.values: list = []
        self.key = key

    def code(self, value) -> int:
        k = self.key(value)
        c = self.codes.get(k)
        if c is None:
            c = self.codes[k] = len(self.values)
            self.values.append(k)
        return c

    def encode(self, values: list) -> np.ndarray:
        """Codes for a list of values (factorized first: one dict lookup per
        distinct value)."""
        if not values:
            return np.empty(0, dtype=np.int32)
        local, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
        remap = np.fromiter((self.code(u) for u in uniques), dtype=np.int32, count=len(uniques))
        return remap[local]


@dataclass
class _Builder:
    """Accumulates per-batch columns with global codes."""

    names: _Table = field(default_factory=_Table)
    pids: _Table = field(default_factory=lambda: _Table(lambda v: "" if v is None else str(v)))
    tids: _Table = field(default_factory=lambda: _Table(lambda v: "" if v is None else str(v)))
    itypes: _Table = field(default_factory=_Table)
    colls: _Table = field(default_factory=_Table)
    groups: _Table = field(default_factory=_Table)
    parts: list = field(default_factory=list)
    dropped: int = 0
    cats_seen: set = field(default_factory=set)

    def add(self, events: list[Event]) -> None:
        xs = [e for e in events if e.ph == "X" and e.cat in _CAT_CODE]
        if not xs:
            return
        cats, names, pids, tids, ts, dur, args = zip(*map(_FIELDS, xs))
        ts = _numeric(ts)
        dur = _numeric(dur)
        dur = np.where(np.isnan(dur), 0.0, dur)
        ok = np.isfinite(ts) & (dur >= 0)
        keep = None
        if not ok.all():
            self.dropped += int((~ok).sum())
            keep = np.flatnonzero(ok)
            ts, dur = ts[keep], dur[keep]
            cats, names, pids, tids, args = (
                [col[i] for i in keep] for col in (cats, names, pids, tids, args))
        n = ts.size
        if n == 0:
            return
        cat_local, cat_uniques = pd.factorize(pd.Series(cats, dtype=object))
        self.cats_seen.update(cat_uniques)
        cat = np.array([_CAT_CODE[c] for c in cat_uniques], dtype=np.int8)[cat_local]
        corr = np.full(n, np.nan)
        itype = np.full(n, -1, dtype=np.int32)
        coll = np.full(n, -1, dtype=np.int32)
        grp = np.full(n, -1, dtype=np.int32)
        with_args = [(i, a) for i, a in enumerate(args) if a is not None]
        if with_args:
            pos = np.fromiter((i for i, _ in with_args), dtype=np.int64, count=len(with_args))
            corr[pos] = _numeric([a.correlation for _, a in with_args])
            rich = [(i, a) for i, a in with_args if a.input_type or a.collective is not None
                    or a.pg_name is not None or a.pg_desc is not None]
            for i, a in rich:
                if a.input_type:
                    itype[i] = self.itypes.code(_tensor_types(a))
                if a.collective is not None:
                    coll[i] = self.colls.code(a.collective)
                g = _group(a)
                if g is not None:
                    grp[i] = self.groups.code(g)
        self.parts.append({
            "cat": cat,
            "name": self.names.encode([nm or "" for nm in names]),
            "pid": self.pids.encode(list(pids)),
            "tid": self.tids.encode(list(tids)),
            "ts": ts, "dur": dur, "corr": corr,
            "input_type": itype, "collective": coll, "group": grp,
        })

    def events(self) -> Events:
        # Column by column, freeing each part's column as it is copied.
        cols = {k: np.concatenate([p.pop(k) for p in self.parts]) if self.parts else None
                for k in ("cat", "name", "pid", "tid", "ts", "dur", "corr",
                          "input_type", "collective", "group")}
        self.parts = []
        if cols["ts"] is None:
            empty_i = np.empty(0, dtype=np.int32)
            cols = {k: empty_i for k in cols}
            cols["cat"] = np.empty(0, dtype=np.int8)
            cols["ts"] = cols["dur"] = cols["corr"] = np.empty(0)
        pids = [str(p) for p in self.pids.values]
        thread, threads = _threads(cols["pid"], pids, self.tids.values, cols.pop("tid"))
        return Events(
            kind=_CAT_KIND[cols["cat"]], cat=cols["cat"], name=cols["name"],
            names=np.asarray(self.names.values, dtype=object), thread=thread, threads=threads,
            pid=cols["pid"], pids=pids, ts=cols["ts"], dur=cols["dur"], corr=cols["corr"],
            input_type=cols["input_type"], input_types=self.itypes.values,
            collective=cols["collective"], collectives=self.colls.values,
            group=cols["group"], groups=self.groups.values,
        )


def _threads(pid: np.ndarray, pids: list[str], tid_labels: list[str],
             tid: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Thread codes for (pid, tid) pairs, labelled 'pid/tid'."""
    width = max(len(tid_labels), 1)
    pair = pid.astype(np.int64) * width + tid
    uniq, codes = np.unique(pair, return_inverse=True)
    labels = [f"{pids[u // width]}/{tid_labels[u % width]}" for u in uniq]
    return codes.astype(np.int32), labels


def _tensor_types(a: Args) -> tuple:
    """``Input type`` entries of tensor inputs: those whose ``Input Dims``
    entry is a non-empty shape (scalars and 0-d tensors have ``[]``)."""
    types = a.input_type
    dims = a.input_dims if a.input_dims is not None else a.input_dims_lc
    if dims is None or len(dims) != len(types):
        return tuple(t if isinstance(t, str) else "" for t in types)
    return tuple(t if isinstance(t, str) else "" for t, d in zip(types, dims)
                 if len(bytes(d).replace(b" ", b"")) > 2)


def _group(a: Args | None) -> str | None:
    """Process-group label from a collective's args, when present."""
    if a is None:
        return None
    if a.pg_name is not None and str(a.pg_name) != "":
        return str(a.pg_name) if not a.pg_desc else f"{a.pg_name}:{a.pg_desc}"
    return a.pg_desc or None


def _stream(path: Path, builder: _Builder) -> bytes:
    """Stream the events into ``builder``; the document without events."""
    rest = stream.Rest()
    with _reading(path), _open(path) as fh, _gc_paused():
        try:
            for events, dropped in stream.iter_batches(fh, rest, _decode_batch):
                builder.dropped += dropped
                builder.add(events)
                del events
        except msgspec.DecodeError as exc:
            raise InputError(path, f"malformed JSON in traceEvents ({exc})") from None
        except ValueError as exc:
            raise InputError(path, f"malformed or truncated JSON ({exc})") from None
    return rest.document()


def _whole(path: Path, builder: _Builder) -> tuple[DistInfo | None, Any]:
    """Fallback for documents that cannot be streamed: decode at once
    (typed, then leniently); distributedInfo and schemaVersion."""
    data = read_bytes(path)
    if not data.strip():
        raise InputError(path, "empty file")
    if data.lstrip()[:1] != b"{":
        raise InputError(path, "not a Kineto trace (expected a JSON object with traceEvents)")
    with _gc_paused():
        try:
            doc = _DOC.decode(data)
        except msgspec.ValidationError:
            doc = None
        except msgspec.DecodeError as exc:
            raise InputError(path, f"malformed or truncated JSON ({exc})") from None
        if doc is not None:
            del data
            builder.add(doc.traceEvents)
            return doc.distributedInfo, doc.schemaVersion
        try:
            loose = _LOOSE.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InputError(path, f"malformed trace ({exc})") from None
        del data
        raw = loose.traceEvents if isinstance(loose.traceEvents, list) else []
        events, dropped = _convert_loose(raw)
        builder.dropped += dropped
        builder.add(events)
        loose.traceEvents = []
    return _decode_meta(path, msgspec.json.encode(loose))


def load_trace(path: Path) -> Trace:
    """Decode one trace file; InputError when it is not usable."""
    builder = _Builder()
    try:
        dist, schema = _decode_meta(path, _stream(path, builder))
    except stream.NotStreamable:
        builder = _Builder()
        dist, schema = _whole(path, builder)
    events = builder.events()
    return Trace(
        path=path,
        events=events,
        rank=_as_int(dist.rank) if dist else None,
        world_size=_as_int(dist.world_size) if dist else None,
        backend=dist.backend if dist else None,
        schema_version=None if schema is None else str(schema),
        old_vocabulary=bool(builder.cats_seen & OLD_VOCAB_CATS),
        dropped=builder.dropped,
    )


_RANK_IN_HEAD = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*"?(\d+)')


def head_rank(head: str) -> int | None:
    """``distributedInfo.rank`` when it is in the file's first bytes."""
    m = _RANK_IN_HEAD.search(head)
    return int(m.group(1)) if m else None
