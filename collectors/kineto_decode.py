"""Typed, fast decoding of Kineto (PyTorch profiler) Chrome traces.

``load_trace(path)`` reads a ``.json`` or ``.json.gz`` trace with msgspec
Structs that name only the fields the analysis uses (ph, cat, name, pid,
tid, ts, dur and a few ``args``); every other field is skipped by the
decoder without building Python objects. The complete-event ("ph": "X")
rows of the categories we analyse are turned into numpy columns
(:class:`Events`) and the Struct list is dropped at once.

``ts``/``dur`` may be numbers or numeric strings. When an event has a field
of an unexpected type the typed decode fails as a whole; we then decode
leniently (event by event) and drop, and count, the events that do not fit.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

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


@dataclass
class Events:
    """Complete events of the analysed categories, as aligned columns.

    ``name`` and ``thread`` are integer codes into ``names`` / ``threads``;
    ``kind`` is HOST, RUNTIME, KERNEL, MEMCPY or MEMSET.
    """

    kind: np.ndarray
    cat: np.ndarray  # category strings (object), for the host-op subclasses
    name: np.ndarray
    names: np.ndarray
    thread: np.ndarray
    threads: list[str]
    pid: np.ndarray  # codes into ``pids``
    pids: list[str]
    ts: np.ndarray
    dur: np.ndarray
    corr: np.ndarray  # float correlation id, NaN when absent
    input_type: list  # per event: list of type strings or None
    collective: list
    group: list

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def __len__(self) -> int:
        return int(self.ts.size)


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


def read_bytes(path: Path) -> bytes:
    """The file's (decompressed) bytes; InputError when unreadable."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(path, f"truncated or corrupt gzip file ({exc})") from None
    except OSError as exc:
        raise InputError(path, f"cannot read file ({exc.strerror or exc})") from None


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


def _decode(path: Path, data: bytes) -> tuple[TraceDoc, int]:
    """Typed decode, falling back to a lenient per-event decode."""
    stripped = data.lstrip()[:1]
    if stripped != b"{":
        raise InputError(path, "not a Kineto trace (expected a JSON object with traceEvents)")
    enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            return msgspec.json.decode(data, type=TraceDoc), 0
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as exc:
            raise InputError(path, f"malformed or truncated JSON ({exc})") from None
        try:
            loose = msgspec.json.decode(data, type=_LooseDoc)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InputError(path, f"malformed trace ({exc})") from None
        return _convert_loose(loose)
    finally:
        if enabled:
            gc.enable()


def _convert_loose(loose: _LooseDoc) -> tuple[TraceDoc, int]:
    """Convert untyped events one by one, dropping those that do not fit."""
    good: list[Event] = []
    dropped = 0
    for raw in loose.traceEvents:
        try:
            good.append(msgspec.convert(raw, Event, strict=False))
        except (msgspec.ValidationError, TypeError):
            if isinstance(raw, dict) and raw.get("ph") == "X":
                dropped += 1
    try:
        dist = msgspec.convert(loose.distributedInfo, DistInfo | None, strict=False)
    except msgspec.ValidationError:
        dist = None
    sv = loose.schemaVersion if isinstance(loose.schemaVersion, (int, str)) else None
    return TraceDoc(traceEvents=good, distributedInfo=dist, schemaVersion=sv), dropped


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


def _codes(values: list) -> tuple[np.ndarray, list[str]]:
    """Factorize ids that may be ints or strings ('7' and 7 are one id)."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
    remap, labels = pd.factorize(pd.Series([str(u) for u in uniques], dtype=object))
    return remap[codes].astype(np.int64), [str(x) for x in labels]


def _threads(pid: np.ndarray, pids: list[str], tids: list) -> tuple[np.ndarray, list[str]]:
    """Thread codes for (pid, tid) pairs, labelled 'pid/tid'."""
    tid, tid_labels = _codes(tids)
    pair = pid * max(len(tid_labels), 1) + tid
    uniq, codes = np.unique(pair, return_inverse=True)
    width = max(len(tid_labels), 1)
    labels = [f"{pids[u // width]}/{tid_labels[u % width]}" for u in uniq]
    return codes.astype(np.int64), labels


def _columns(events: list[Event]) -> tuple[Events, int]:
    """Columns of the complete events we analyse; count the unusable ones."""
    xs = [e for e in events if e.ph == "X" and e.cat in _KIND]
    cat_codes, cat_uniques = pd.factorize(pd.Series([e.cat for e in xs], dtype=object))
    kind = np.array([_KIND[c] for c in cat_uniques], dtype=np.int8)[cat_codes] if xs else np.empty(0, np.int8)
    cat = np.asarray(cat_uniques, dtype=object)[cat_codes] if xs else np.empty(0, object)
    ts = _numeric([e.ts for e in xs])
    dur = _numeric([e.dur for e in xs])
    dur = np.where(np.isnan(dur), 0.0, dur)
    ok = np.isfinite(ts) & (dur >= 0)
    dropped = int((~ok).sum())
    if dropped:
        keep = np.flatnonzero(ok)
        xs = [xs[i] for i in keep]
        kind, cat, ts, dur = kind[keep], cat[keep], ts[keep], dur[keep]
    name_codes, names = pd.factorize(pd.Series([e.name or "" for e in xs], dtype=object))
    pid_codes, pids = _codes([e.pid for e in xs])
    thr_codes, threads = _threads(pid_codes, pids, [e.tid for e in xs])
    with_args = [(i, e.args) for i, e in enumerate(xs) if e.args is not None]
    n = len(xs)
    corr = np.full(n, np.nan)
    input_type: list = [None] * n
    collective: list = [None] * n
    group: list = [None] * n
    if with_args:
        pos = np.fromiter((i for i, _ in with_args), dtype=np.int64, count=len(with_args))
        corr[pos] = _numeric([a.correlation for _, a in with_args])
        for i, a in with_args:
            if a.input_type:
                input_type[i] = _tensor_types(a)
            if a.collective is not None or a.pg_name is not None or a.pg_desc is not None:
                collective[i] = a.collective
                group[i] = _group(a)
    return Events(
        kind=kind, cat=cat, name=name_codes.astype(np.int64),
        names=np.asarray(names, dtype=object), thread=thr_codes, threads=threads,
        pid=pid_codes, pids=pids, ts=ts, dur=dur, corr=corr,
        input_type=input_type, collective=collective, group=group,
    ), dropped


def _tensor_types(a: Args) -> list | None:
    """``Input type`` entries of tensor inputs: those whose ``Input Dims``
    entry is a non-empty shape (scalars and 0-d tensors have ``[]``)."""
    types = a.input_type
    if not types:
        return None
    dims = a.input_dims if a.input_dims is not None else a.input_dims_lc
    if dims is None or len(dims) != len(types):
        return types
    return [t for t, d in zip(types, dims) if len(bytes(d).replace(b" ", b"")) > 2]


def _group(a: Args | None) -> str | None:
    """Process-group label from a collective's args, when present."""
    if a is None:
        return None
    if a.pg_name is not None and str(a.pg_name) != "":
        return str(a.pg_name) if not a.pg_desc else f"{a.pg_name}:{a.pg_desc}"
    return a.pg_desc or None


def load_trace(path: Path) -> Trace:
    """Decode one trace file; InputError when it is not usable."""
    data = read_bytes(path)
    if not data.strip():
        raise InputError(path, "empty file")
    enabled = gc.isenabled()
    gc.disable()
    try:
        doc, dropped = _decode(path, data)
        del data
        events, bad = _columns(doc.traceEvents)
    finally:
        if enabled:
            gc.enable()
    cats = {e.cat for e in doc.traceEvents[:20000] if e.cat}
    dist = doc.distributedInfo
    trace = Trace(
        path=path,
        events=events,
        rank=_as_int(dist.rank) if dist else None,
        world_size=_as_int(dist.world_size) if dist else None,
        backend=dist.backend if dist else None,
        schema_version=None if doc.schemaVersion is None else str(doc.schemaVersion),
        old_vocabulary=bool(cats & OLD_VOCAB_CATS),
        dropped=dropped + bad,
    )
    del doc
    return trace


_RANK_IN_HEAD = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*"?(\d+)')


def head_rank(head: str) -> int | None:
    """``distributedInfo.rank`` when it is in the file's first bytes."""
    m = _RANK_IN_HEAD.search(head)
    return int(m.group(1)) if m else None
