"""Typed, streaming decoding of Kineto (PyTorch profiler) Chrome traces.

``load_trace(path)`` reads a ``.json`` or ``.json.gz`` trace with msgspec
Structs that name only the fields the analysis uses (ph, cat, name, pid,
tid, ts, dur and a few ``args``); every other field is skipped by the
decoder without building Python objects. The ``traceEvents`` array is
streamed (:mod:`kineto_stream`): the file is read, and gzip decompressed,
in chunks of a few MB, each run of complete events is decoded with the
garbage collector paused and at once reduced to compact numpy columns
(float64 times and correlation ids, small integer codes into tables of
distinct names, threads and input-type tuples) of the events some table
reads (:class:`_Builder`); the Structs are dropped before the next chunk
is read. Kept are the device events, runtime calls with a correlation id
or that block, start up the device or allocate, the cuda_sync records,
the Python frames of the profiled program (``with_stack=True``), the
host events the tables look for (step markers, DataLoader spans,
collective ops, ops with tensor dtypes, torch.compile's compile ops, host
ops long enough to be a slow first call) and the host ops that are
top-level within their batch (the CPU-only tables read top-level ops
only; a GPU trace's idle attribution reads what the launching thread was
doing). Once the whole trace is read, a GPU trace keeps only the runtime
calls that launched a device event, that belong to a cuda_sync record or
that block, start up or allocate, a CPU-only trace only its top-level ops
and the named or long host events. Memory therefore
grows with the number of kept events (about 30 bytes each, a few per
device event) and not with the size of the JSON text (see
``bench/memory_vs_size.py``). Documents that cannot be streamed (no
``traceEvents`` array near the start) are decoded whole.

The reduction relies on host ops nesting like a call stack on each thread
(as ``record_function`` scopes do); ops that overlap without nesting may
be attributed (launch dtypes, top-level ops) differently than if every
event were kept.

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
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from advisor.collectors.io import limits
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.io.files import open_regular
from advisor.collectors.kineto import stream
from advisor.errors import InputError
from advisor.runtime.libc import release_free_memory

# Categories, current and 2021 vocabulary.
HOST_OP_CATS = frozenset({"cpu_op", "Operator", "user_annotation"})
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver"})
KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
#: CUPTI synchronization records: a host sync (``Stream Sync``, ``Event
#: Sync``, ``Context Sync``, inside the runtime call of the same correlation
#: id) or a stream waiting on an event (``Stream Wait Event``, on the waiting
#: stream's row); ``wait_on_stream`` / ``wait_on_cuda_event_record_corr_id``
#: name what is waited for.
SYNC_CATS = frozenset({"cuda_sync"})
#: Python frames (``with_stack=True``); only the profiled program's are kept.
PYTHON_CATS = frozenset({"python_function"})
#: The device span of a ``record_function`` range (``gpu_user_annotation``:
#: from the range's first kernel start to its last kernel end, on a device row).
ANNOT_CATS = frozenset({"gpu_user_annotation"})
DEVICE_CATS = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS
WANTED_CATS = HOST_OP_CATS | RUNTIME_CATS | DEVICE_CATS
OLD_VOCAB_CATS = frozenset({"Operator", "Runtime", "Kernel", "Memcpy", "Memset"})

# Event kinds stored in ``Events.kind``. PYTHON (python_function frames) and
# SYNC (cuda_sync records) are below HOST so that ``kind >= KERNEL`` still
# means "device activity"; so is ANNOT (gpu_user_annotation spans, which
# cover kernels rather than being activity of their own).
ANNOT, PYTHON, SYNC, HOST, RUNTIME, KERNEL, MEMCPY, MEMSET = -3, -2, -1, 0, 1, 2, 3, 4
_KIND = {c: HOST for c in HOST_OP_CATS}
_KIND.update({c: RUNTIME for c in RUNTIME_CATS})
_KIND.update({c: KERNEL for c in KERNEL_CATS})
_KIND.update({c: MEMCPY for c in MEMCPY_CATS})
_KIND.update({c: MEMSET for c in MEMSET_CATS})
_KIND.update({c: SYNC for c in SYNC_CATS})
_KIND.update({c: PYTHON for c in PYTHON_CATS})
_KIND.update({c: ANNOT for c in ANNOT_CATS})
CATEGORIES = tuple(sorted(_KIND))
_CAT_CODE = {c: i for i, c in enumerate(CATEGORIES)}
_CAT_KIND = np.array([_KIND[c] for c in CATEGORIES], dtype=np.int8)

#: Name of the allocator's instant events (``profile_memory=True``).
MEMORY_EVENT = "[memory]"

PEEK_BYTES = 64 * 1024
#: Files at least this large (on disk) get a progress bar while streaming.
PROGRESS_BYTES = 64 << 20
#: Traces with at least this many analysed events hand freed memory back to
#: the OS after decoding (it costs about a millisecond).
BIG_TRACE_EVENTS = 1 << 18


_NO_RAW = msgspec.Raw()
#: ``args`` members kept as raw JSON text (parsed once per distinct text).
_RAW_ARGS = ("Input type", "Input Dims", "Input dims", "Concrete Inputs")


class Args(msgspec.Struct, gc=False):
    """The ``args`` fields we read; all others are skipped. The input
    types and shapes stay raw JSON (empty when absent): ops repeat a few
    distinct ones, which are parsed once (:meth:`_Builder._itype_code`)."""

    correlation: int | str | None = None
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    input_dims_lc: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input dims")
    concrete: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: int | float | str | None = msgspec.field(default=None, name="In msg nelems")
    msg_dtype: str | int | None = msgspec.field(default=None, name="dtype")
    pg_name: str | int | None = msgspec.field(default=None, name="Process Group Name")
    pg_desc: str | None = msgspec.field(default=None, name="Process Group Description")
    wait_on_stream: int | str | None = None
    wait_on_event: int | str | None = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")
    # ``[memory]`` instant events (``profile_memory=True``): the caching allocator's totals after each
    # allocation or free, and the device it is on (c10 DeviceType: 0 CPU, 1 CUDA, ...)
    total_reserved: int | float | str | None = msgspec.field(default=None, name="Total Reserved")
    total_allocated: int | float | str | None = msgspec.field(default=None, name="Total Allocated")
    device_type: int | str | None = msgspec.field(default=None, name="Device Type")
    device_id: int | str | None = msgspec.field(default=None, name="Device Id")
    nbytes: int | float | str | None = msgspec.field(default=None, name="Bytes")  # signed: + allocated, - freed


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


class GpuModel(msgspec.Struct, frozen=True):
    """A ``deviceProperties`` entry's ``name`` and ``computeMajor.computeMinor``."""

    name: str | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    totalGlobalMem: int | float | None = None  # the device's memory, bytes

    @property
    def capability(self) -> str | None:
        """"7.0" for a V100; None when the entry gives no major version."""
        if self.computeMajor is None:
            return None
        return f"{self.computeMajor}.{self.computeMinor or 0}"


_GPU = msgspec.json.Decoder(GpuModel)


class CpuModel(msgspec.Struct, frozen=True):
    """The ``cpuProperties`` object ``advisor run`` adds to a trace
    (``cpu_properties`` in ``collectors/live/bootstrap/_advisor_live.py``):
    the host CPU's architecture, the vector ISA PyTorch used, whether it
    has bfloat16 / float16 arithmetic instructions, and the CPUs the
    process could run on (None: unknown)."""

    arch: str | None = None
    capability: str | None = None
    bf16: bool | None = None
    fp16: bool | None = None
    usable_cpus: int | None = None


class TraceDoc(msgspec.Struct):
    """Top level of a Kineto trace object. ``deviceProperties`` lists the
    GPUs the profiler saw (an empty list on a machine without one); their
    number and the first one's model and compute capability are read
    (:func:`_devices`)."""

    traceEvents: list[Event] = []
    distributedInfo: DistInfo | None = None
    schemaVersion: int | str | None = None
    deviceProperties: list[msgspec.Raw] | None = None
    cpuProperties: msgspec.Raw | None = None


class _LooseDoc(msgspec.Struct):
    """Fallback: events as untyped objects, converted one by one."""

    traceEvents: list[Any] = []
    distributedInfo: Any = None
    schemaVersion: Any = None
    deviceProperties: Any = None
    cpuProperties: Any = None


_BATCH = msgspec.json.Decoder(list[Event])
_FIELDS = operator.attrgetter("cat", "name", "pid", "tid", "ts", "dur", "args")
_EXTRAS = operator.attrgetter("input_type", "collective", "pg_name", "pg_desc", "wait_on_stream", "wait_on_event",
                              "in_nelems")
_NO_EXTRAS = (_NO_RAW, None, None, None, None, None, None)
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
#: Distinct (input types, shapes) texts remembered per trace, at most.
_ITYPE_CACHE = 1 << 16
_DOC = msgspec.json.Decoder(TraceDoc)
_LOOSE = msgspec.json.Decoder(_LooseDoc)


@dataclass
class Events:
    """Complete events of the analysed categories that the tables read, as
    aligned columns (see :class:`_Builder` for which events are kept).

    ``name``, ``thread`` and ``cat`` are integer codes into ``names`` /
    ``threads`` / ``CATEGORIES``; ``kind`` is HOST, RUNTIME, KERNEL, MEMCPY
    or MEMSET. ``input_type`` is a code into ``input_types`` (tuples of the
    ``Input type`` strings of tensor inputs), ``collective`` into
    ``collectives`` (``Collective name`` args), ``group`` into ``groups``
    (process-group labels), ``wait`` into ``waits`` (``(wait_on_stream,
    wait_on_cuda_event_record_corr_id)`` of cuda_sync records, -1 where the
    trace says unknown) and ``msg`` into ``msgs`` (a collective's message
    size in bytes: :func:`_msg_bytes`); -1 means absent. Code columns use
    the smallest integer type that holds their table's size. ``kind`` SYNC
    marks the cuda_sync records, PYTHON the Python frames of the profiled
    program (``calls.program_frame``) and those ``calls.host_call_class``
    names (``Python GC``, ``empty_cache``); other frames are not kept.

    Facts about every analysed event, also those not kept: ``span`` (first
    start, last end), ``activity`` (the same over every event but the
    ``ProfilerStep#N`` annotations: the span the profiler recorded work in),
    ``op_time`` (per thread code, the summed duration of its host ops --
    ``cpu_op`` and 2021 ``Operator`` events that are not annotations --,
    -inf for a thread without any) and ``op_stats`` (per name code, over
    those host ops: how many, their summed duration and the start of the
    earliest; the one-time work of :mod:`kineto_window` compares an op's
    first call with its repeats by them).
    """

    kind: np.ndarray
    cat: np.ndarray
    name: np.ndarray
    names: np.ndarray
    thread: np.ndarray
    threads: list[str]
    ts: np.ndarray
    dur: np.ndarray
    corr: np.ndarray  # float correlation id, NaN when absent
    input_type: np.ndarray
    input_types: list[tuple]
    collective: np.ndarray
    collectives: list[str]
    group: np.ndarray
    groups: list[str]
    wait: np.ndarray
    waits: list[tuple[int, int]]
    msg: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int8))
    msgs: list[int] = field(default_factory=list)
    span: tuple[float, float] = (np.nan, np.nan)
    op_time: np.ndarray = field(default_factory=lambda: np.empty(0))
    activity: tuple[float, float] = (np.nan, np.nan)
    op_stats: OpStats = field(default_factory=lambda: OpStats.empty(0))
    #: start, duration, FLOPs, smaller of rows and inner size and operand type (a code of
    #: ``kineto.work.OPERAND_TYPES``) of each call of an operator whose work is counted
    #: (:mod:`kineto.work`), kept or not, in time order
    work_ts: np.ndarray = field(default_factory=lambda: np.empty(0))
    work_dur: np.ndarray = field(default_factory=lambda: np.empty(0))
    work_flops: np.ndarray = field(default_factory=lambda: np.empty(0))
    work_smallest: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    work_type: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int8))
    #: start, duration, role and input shapes (a tuple of shape tuples) of each event with a role in
    #: :mod:`kineto.shaped_events` (gradient accumulations, backward nodes, optimizer operators, lookups,
    #: clones ...), kept or not, in time order
    shaped_ts: np.ndarray = field(default_factory=lambda: np.empty(0))
    shaped_dur: np.ndarray = field(default_factory=lambda: np.empty(0))
    shaped_role: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int8))
    shaped_shapes: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=object))

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def end_at(self, sel: np.ndarray) -> np.ndarray:
        """``end[sel]`` without computing the end of every event."""
        return self.ts[sel] + self.dur[sel]

    def __len__(self) -> int:
        return int(self.ts.size)

    def cat_is(self, category: str) -> np.ndarray:
        """Boolean mask of the events of one category."""
        code = _CAT_CODE.get(category)
        return self.cat == code if code is not None else np.zeros(len(self), dtype=bool)

    def named(self, match) -> np.ndarray:
        """Boolean mask of the events whose name matches ``match``: a
        compiled pattern (``search``), a set of names, or a predicate on a
        name; tested once per distinct name."""
        if hasattr(match, "search"):
            test = match.search
        elif callable(match):
            test = match
        else:
            test = match.__contains__
        hit = np.fromiter((bool(test(n)) for n in self.names), dtype=bool, count=len(self.names))
        return hit[self.name] if hit.size else np.zeros(len(self), dtype=bool)

    def host_ops(self) -> np.ndarray:
        """Boolean mask of the host ops proper (``_oplike``): the events
        ``op_time`` and ``op_stats`` count."""
        from advisor.collectors.kineto.tables import ANNOTATION_RE  # it imports this module

        flags = np.where(self.named(ANNOTATION_RE), ANNOTATION_NAME, 0)
        return (self.kind == HOST) & _oplike(self.cat, flags)

    def collective_of(self, i: int) -> str | None:
        c = int(self.collective[i])
        return self.collectives[c] if c >= 0 else None

    def group_of(self, i: int) -> str | None:
        c = int(self.group[i])
        return self.groups[c] if c >= 0 else None

    def stream_of(self, sel: np.ndarray) -> np.ndarray:
        """Stream ids of device events and cuda_sync records (their ``tid``;
        -1 when it is not a number)."""
        ids = np.array([_as_int(t.rpartition("/")[2]) for t in self.threads], dtype=object)
        ids = np.array([-1 if i is None else i for i in ids], dtype=np.int64)
        return ids[self.thread[sel]] if ids.size else np.full(np.size(self.thread[sel]), -1)


    def msg_bytes(self, idx: np.ndarray) -> np.ndarray:
        """Message bytes of the events ``idx`` (float, NaN when unknown)."""
        table = np.array([*self.msgs, np.nan], dtype=np.float64)
        return table[self.msg[idx]] if self.msg.size else np.full(len(idx), np.nan)


@dataclass
class OpStats:
    """Per event-name code: count, summed duration and earliest start of the
    host ops (see :class:`Events`); merged across batches and processes."""

    count: np.ndarray
    total: np.ndarray
    first: np.ndarray

    @classmethod
    def empty(cls, size: int) -> OpStats:
        return cls(np.zeros(size, dtype=np.int64), np.zeros(size), np.full(size, np.inf))

    def grow(self, size: int) -> None:
        """Room for ``size`` name codes."""
        extra = size - self.count.size
        if extra > 0:
            more = OpStats.empty(extra)
            self.count = np.r_[self.count, more.count]
            self.total = np.r_[self.total, more.total]
            self.first = np.r_[self.first, more.first]

    def add(self, codes: np.ndarray, ts: np.ndarray, dur: np.ndarray, size: int) -> None:
        """Count the ops with name ``codes``, starts ``ts`` and durations ``dur``."""
        self.grow(size)
        if codes.size == 0:
            return
        codes = codes.astype(np.int64, copy=False)
        self.count += np.bincount(codes, minlength=self.count.size)
        self.total += np.bincount(codes, weights=dur, minlength=self.total.size)
        np.minimum.at(self.first, codes, ts)

    def merge(self, other: OpStats, codes: np.ndarray, size: int) -> None:
        """Add ``other``'s entries, whose name codes map to ``codes`` here."""
        self.grow(size)
        seen = np.flatnonzero(other.count)
        if seen.size == 0:
            return
        to = codes[seen]
        np.add.at(self.count, to, other.count[seen])
        np.add.at(self.total, to, other.total[seen])
        np.minimum.at(self.first, to, other.first[seen])


@dataclass
class Trace:
    """A decoded trace: metadata plus the event columns."""

    path: Path
    events: Events | None  # None once the collector has built its tables
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    schema_version: str | None = None
    old_vocabulary: bool = False
    analysed: int = 0  # complete events of analysed categories, kept or not
    dropped: int = 0  # events dropped for unusable fields
    problems: list[str] = field(default_factory=list)
    devices: int = 0  # entries of deviceProperties (GPUs the profiler saw)
    gpu: GpuModel | None = None  # the first deviceProperties entry's model, where it names one
    cpu: CpuModel | None = None  # the host CPU, where ``advisor run`` recorded it (cpuProperties)
    categories: frozenset = frozenset()  # the ``cat`` of every event, analysed or not
    counters: bool = False  # the trace holds counter ("ph": "C") events
    #: the highest ``Total Reserved`` and ``Total Allocated`` (bytes) of the ``[memory]`` events of a
    #: device (not the CPU's), None where the trace has none (recorded without ``profile_memory=True``)
    device_memory_peak: tuple[float, float] | None = None
    #: the ``[memory]`` events of one device in time order (``memory_timeline``), None without any
    memory_timeline: np.ndarray | None = None


def _open(path: Path):
    """A binary file object over the (decompressed) file; InputError when it
    is not a regular file (``open_regular``); a gzip file's expansion is
    bounded (:mod:`advisor.collectors.io.limits`)."""
    if path.name.endswith(".gz"):
        return limits.open_gzip(path)
    return open_regular(path)


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
        with open_regular(path) as fh:
            raw = fh.read(size if not path.name.endswith(".gz") else size // 2)
    except (OSError, InputError):
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
            good.append(msgspec.convert(_raw_args(raw), Event, strict=False))
        except (msgspec.ValidationError, TypeError):
            if isinstance(raw, dict) and raw.get("ph") == "X":
                dropped += 1
    return good, dropped


def _raw_args(raw):
    """An untyped event with the :data:`_RAW_ARGS` members of its ``args``
    as raw JSON, as the typed decoder leaves them."""
    args = raw.get("args") if isinstance(raw, dict) else None
    if not isinstance(args, dict) or not any(k in args for k in _RAW_ARGS):
        return raw
    args = {k: msgspec.Raw(msgspec.json.encode(v)) if k in _RAW_ARGS else v for k, v in args.items()}
    return dict(raw, args=args)


def _decode_batch(text: bytes) -> tuple[list[Event], int]:
    """One JSON array of events -> Structs (lenient when a field misfits);
    msgspec.DecodeError when the text is not valid JSON, or nests deeper
    than the decoder can follow (an event's ``args`` 10^5 levels deep)."""
    try:
        try:
            return _BATCH.decode(text), 0
        except msgspec.ValidationError:
            pass
        loose = msgspec.json.decode(text)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None
    return _convert_loose(loose if isinstance(loose, list) else [])


def _devices(listed) -> tuple[int, GpuModel | None]:
    """The number of ``deviceProperties`` entries (0 unless it is a list) and
    the first entry's model (None where it names none or is malformed; the
    GPUs of one trace are one machine's, and a profiler sees one model)."""
    if not isinstance(listed, list):
        return 0, None
    gpu = None
    if listed:
        first = listed[0]
        try:
            gpu = (_GPU.decode(first) if isinstance(first, msgspec.Raw)
                   else msgspec.convert(first, GpuModel, strict=False))
        except (msgspec.DecodeError, msgspec.ValidationError):
            gpu = None
        if gpu is not None and gpu.name is None and gpu.computeMajor is None:
            gpu = None
    return len(listed), gpu


def _cpu(value) -> CpuModel | None:
    """The ``cpuProperties`` object (:class:`CpuModel`), None where absent or malformed."""
    if value is None:
        return None
    try:
        return (msgspec.json.decode(value, type=CpuModel) if isinstance(value, msgspec.Raw)
                else msgspec.convert(value, CpuModel, strict=False))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


#: What a trace says of its machine: the number of GPUs, the first one's
#: model (``_devices``) and the host CPU (``_cpu``).
Hardware = tuple[int, GpuModel | None, CpuModel | None]


def _hardware(doc: TraceDoc | _LooseDoc) -> Hardware:
    """:data:`Hardware` from a document's deviceProperties and cpuProperties."""
    return (*_devices(doc.deviceProperties), _cpu(doc.cpuProperties))


def _decode_meta(path: Path, text: bytes) -> tuple[DistInfo | None, Any, Hardware]:
    """distributedInfo, schemaVersion and the :data:`Hardware` from the
    document without events."""
    try:
        doc = _DOC.decode(text)
        return doc.distributedInfo, doc.schemaVersion, _hardware(doc)
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
    return dist, sv, _hardware(loose)


def _as_int(value) -> int | None:
    """An int from an int or numeric string, else None."""
    try:
        return int(value) if value is not None and str(value).strip() != "" else None
    except (TypeError, ValueError):
        return None


#: Rows of a ``[memory]`` event array: time (us), signed bytes (+ allocated,
#: - freed), the allocator's total allocated after it, Device Type (c10:
#: 0 CPU, 1 CUDA, ...), Device Id.
MEMORY_ROWS = ("ts", "bytes", "total_allocated", "device_type", "device_id")


def memory_timeline(batches: list[np.ndarray]) -> np.ndarray | None:
    """The ``[memory]`` events (``MEMORY_ROWS`` x events) of one device, in
    time order: of the accelerator with the most events where the trace has
    any (a GPU run's host allocations are not its device memory), else of
    the CPU; events without a time or a size left out. None without any."""
    if not batches:
        return None
    ev = np.concatenate(batches, axis=1)
    ev = ev[:, np.isfinite(ev[0]) & np.isfinite(ev[1]) & np.isfinite(ev[3])]
    if not ev.shape[1]:
        return None
    kind, ident = ev[3], np.nan_to_num(ev[4], nan=-1.0)
    accel = kind != 0
    pool = accel if accel.any() else ~accel
    keys, counts = np.unique(np.stack([kind[pool], ident[pool]]), axis=1, return_counts=True)
    chosen_kind, chosen_id = keys[:, int(np.argmax(counts))]
    ev = ev[:, (kind == chosen_kind) & (ident == chosen_id)]
    return ev[:, np.argsort(ev[0], kind="stable")]


def _numeric(values: list) -> np.ndarray:
    """Numbers or numeric strings -> float64 (NaN when not numeric)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)


# Flags of a distinct event name: the names the tables look for.
STEP_NAME, LOADER_NAME, COMM_NAME, SYNC_NAME, ANNOTATION_NAME = 1, 2, 4, 8, 16
INIT_NAME, ALLOC_NAME, COMPILE_NAME, FRONT_END_NAME = 32, 64, 128, 256
#: Events the ``host_calls`` table counts (``calls.host_call_class``): kept
#: whether nested or not, Python frames among them (``Python GC``) included.
HOST_CALL_NAME = 512
#: Operators whose floating-point work is counted from their shapes (:mod:`kineto.work`).
WORK_NAME = 1024
#: Events read with their input shapes, by their role (:mod:`kineto.shaped_events`).
SHAPED_NAME = 2048
_WANTED_HOST_NAME = STEP_NAME | LOADER_NAME | COMM_NAME | COMPILE_NAME | HOST_CALL_NAME
#: Runtime calls kept whatever they launched: they block, start up the
#: device, or allocate (the one-time work of :mod:`kineto_window`, and
#: what the host was doing while the device idled).
_WANTED_RUNTIME_NAME = SYNC_NAME | INIT_NAME | ALLOC_NAME


def name_flags(name: str) -> int:
    """STEP_NAME | LOADER_NAME | ... for one event name, by the patterns of
    :mod:`kineto_tables` and :mod:`kineto_calls` (step markers, DataLoader
    spans, collective host ops, blocking sync calls, 2021 annotations,
    start-up and allocation calls, torch.compile's compile ops, c10d front
    ends)."""
    from advisor.collectors.kineto import tables as kt  # it imports this module
    from advisor.collectors.kineto.calls import ALLOC_CALLS, COMPILE_OPS, DATALOADER_RE, INIT_CALLS, SYNC_CALLS
    from advisor.collectors.kineto.calls import host_call_class
    from advisor.collectors.kineto.shaped_events import role_of
    from advisor.collectors.kineto.work import COUNTED_OPS

    return (STEP_NAME * bool(kt.STEP_RE.search(name))
            | LOADER_NAME * bool(DATALOADER_RE.search(name))
            | COMM_NAME * bool(kt.HOST_COMM_RE.search(name))
            | SYNC_NAME * (name in SYNC_CALLS)
            | ANNOTATION_NAME * bool(kt.ANNOTATION_RE.search(name))
            | INIT_NAME * (name in INIT_CALLS)
            | ALLOC_NAME * (name in ALLOC_CALLS)
            | COMPILE_NAME * bool(COMPILE_OPS.search(name))
            | FRONT_END_NAME * bool(kt.FRONT_END_RE.search(name))
            | HOST_CALL_NAME * (host_call_class(name) is not None)
            | WORK_NAME * (name in COUNTED_OPS)
            | SHAPED_NAME * (role_of(name) is not None))


def _long_op_us() -> float:
    """Host ops at least this long are kept: the first call of an op can be
    one-time work only when it is (``kineto_window.FIRST_CALL_MIN_EXCESS_US``)."""
    from advisor.collectors.kineto.window import FIRST_CALL_MIN_EXCESS_US  # it imports this module

    return FIRST_CALL_MIN_EXCESS_US


def _has_dtypes(types: tuple) -> bool:
    """True when an ``Input type`` tuple names at least one tensor dtype."""
    from advisor.collectors.vocab import dtype_list

    return dtype_list(types) is not None


class _Table:
    """Distinct values -> stable int codes, shared by all batches; with
    ``flag``, also an int flag per distinct value, computed once."""

    def __init__(self, key=lambda v: v, flag=None):
        self.codes: dict = {}
        self.values: list = []
        self.key = key
        self.flag = flag
        self._flags = np.zeros(0, dtype=np.uint16)

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

    def flags(self, pad: int = 0) -> np.ndarray:
        """``flag(value)`` per code, plus ``pad`` zeros (so that code -1
        reads 0)."""
        if self._flags.size < len(self.values):
            new = np.fromiter((self.flag(v) for v in self.values[self._flags.size:]), dtype=np.uint16)
            self._flags = np.concatenate([self._flags, new])
        return np.concatenate([self._flags, np.zeros(pad, dtype=np.uint16)]) if pad else self._flags


def _code_dtype(size: int) -> type:
    """Smallest signed integer type holding codes -1 .. ``size``."""
    for dt in (np.int8, np.int16, np.int32):
        if size < np.iinfo(dt).max:
            return dt
    return np.int64


_CODE_COLUMNS = ("name", "input_type", "collective", "group", "wait", "msg")
_EMPTY_DTYPES = {"cat": np.int8, "pair": np.int32}


@dataclass
class _Builder:
    """Accumulates per-batch columns with global codes, keeping only the
    events some table may read (:meth:`_needed`, then :meth:`_gpu_needed`
    once the whole trace is known to have device events)."""

    names: _Table = field(default_factory=lambda: _Table(flag=name_flags))
    pids: _Table = field(default_factory=lambda: _Table(lambda v: "" if v is None else str(v)))
    tids: _Table = field(default_factory=lambda: _Table(lambda v: "" if v is None else str(v)))
    pairs: _Table = field(default_factory=_Table)  # (pid code, tid code) of each thread
    itypes: _Table = field(default_factory=lambda: _Table(flag=_has_dtypes))
    colls: _Table = field(default_factory=_Table)
    groups: _Table = field(default_factory=_Table)
    waits: _Table = field(default_factory=_Table)
    msgs: _Table = field(default_factory=_Table)  # message sizes in bytes
    parts: list = field(default_factory=list)
    dropped: int = 0
    analysed: int = 0
    span: tuple[float, float] = (np.inf, -np.inf)
    op_time: np.ndarray = field(default_factory=lambda: np.empty(0))
    op_seen: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))
    cats_seen: set = field(default_factory=set)
    all_cats: set = field(default_factory=set)  # categories of every event, analysed or not
    phases: set = field(default_factory=set)  # "ph" of every event
    activity: tuple[float, float] = (np.inf, -np.inf)
    op_stats: OpStats = field(default_factory=lambda: OpStats.empty(0))
    device_seen: bool = False
    reduce: bool = True  # False keeps every analysed event (checks, debugging)
    itype_of: dict = field(default_factory=dict)  # raw (types, shapes) texts -> code
    program: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # per name: a program frame
    size_of: dict = field(default_factory=dict)  # raw (types, shapes) texts -> bytes or None
    memory_peak: list = field(default_factory=lambda: [-np.inf, -np.inf])  # device Total Reserved, Allocated
    memory_events: list = field(default_factory=list)  # per batch, MEMORY_ROWS x events of its [memory] events
    work: list = field(default_factory=list)  # the work_* columns of counted ops (Events), per batch
    flops_of: dict = field(default_factory=dict)  # (name code, raw shapes, concrete inputs, types) -> op_work
    shaped: list = field(default_factory=list)  # (start, duration, role, shapes) per batch (kineto.shaped_events)
    shapes_of: dict = field(default_factory=dict)  # raw Input Dims -> shaped_events.shapes
    role_of: dict = field(default_factory=dict)  # name code -> shaped_events.role_of

    def add(self, events: list[Event]) -> None:
        """Reduce one batch of decoded events to columns of the needed ones."""
        self.all_cats.update({e.cat for e in events})
        self.phases.update({e.ph for e in events})
        self._memory([e for e in events if e.name == MEMORY_EVENT and e.args is not None])
        cols = _complete(events)
        if cols is None:
            return
        cats, names, pids, tids, ts, dur, args, bad = cols
        self.dropped += bad
        n = ts.size
        if n == 0:
            return
        self.analysed += n
        cat_local, cat_uniques = pd.factorize(pd.Series(cats, dtype=object))
        # frames outlast the work; device annotations only cover it
        work = _CAT_KIND[[_CAT_CODE[c] for c in cat_uniques]][cat_local] >= SYNC
        if work.any():
            self.span = (min(self.span[0], float(ts[work].min())), max(self.span[1], float((ts + dur)[work].max())))
        self.cats_seen.update(cat_uniques)
        name = self.names.encode([nm or "" for nm in names])
        flags = self.names.flags()[name]
        sized = ((flags & COMM_NAME) != 0) & ((flags & FRONT_END_NAME) == 0)
        corr, itype, coll, grp, wait, msg = self._args(args, n, sized)
        self._work(name, flags, ts, dur, args)
        self._shaped(name, flags, ts, dur, args)
        part = {
            "cat": np.array([_CAT_CODE[c] for c in cat_uniques], dtype=np.int8)[cat_local],
            "name": name,
            "pair": self._pairs(pids, tids),
            "ts": ts, "dur": dur, "corr": corr,
            "input_type": itype, "collective": coll, "group": grp, "wait": wait, "msg": msg,
        }
        if not self.device_seen and np.any(_CAT_KIND[part["cat"]] >= KERNEL):
            self._now_gpu()
        flags = self.names.flags()[part["name"]]
        self._add_facts(part, flags)
        if self.reduce:
            keep = self._needed(part)
            part = {k: v[keep] for k, v in part.items()}
        else:
            op = (_CAT_KIND[part["cat"]] == HOST) & _oplike(part["cat"], flags)
            self._add_op_time(part["pair"][op], part["dur"][op])
        self.parts.append(self._compact(part))

    def _work(self, name: np.ndarray, flags: np.ndarray, ts: np.ndarray, dur: np.ndarray, args: tuple) -> None:
        """Append the start, duration, FLOPs, smaller of rows and inner size
        and operand type of the batch's counted operator calls
        (:func:`kineto.work.op_work`, once per distinct name, shapes and types)."""
        from advisor.collectors.kineto.work import op_work

        idx = np.flatnonzero((flags & WORK_NAME) != 0)
        if idx.size == 0:
            return
        flops = np.full(idx.size, np.nan)
        smallest = np.zeros(idx.size, dtype=np.int64)
        types = np.zeros(idx.size, dtype=np.int8)
        for j, i in enumerate(idx):
            a = args[i]
            if a is None or not (a.input_dims or a.input_dims_lc):
                continue
            key = (int(name[i]), bytes(a.input_dims or a.input_dims_lc), bytes(a.concrete), bytes(a.input_type))
            if key not in self.flops_of:
                if len(self.flops_of) >= _ITYPE_CACHE:
                    self.flops_of.clear()
                self.flops_of[key] = op_work(self.names.values[key[0]], *key[1:])
            value = self.flops_of[key]
            if value is not None:
                flops[j], smallest[j], types[j] = value
        known = np.isfinite(flops)
        if known.any():
            self.work.append((ts[idx[known]], dur[idx[known]], flops[known], smallest[known], types[known]))

    def _shaped(self, name: np.ndarray, flags: np.ndarray, ts: np.ndarray, dur: np.ndarray, args: tuple) -> None:
        """Append the start, duration, role and input shapes of the batch's
        events that have a role (:func:`kineto.shaped_events.role_of`;
        shapes parsed once per distinct ``Input Dims`` text)."""
        from advisor.collectors.kineto.shaped_events import role_of, shapes

        idx = np.flatnonzero((flags & SHAPED_NAME) != 0)
        if idx.size == 0 or self.device_seen:  # read on CPU-only traces only
            return
        for c in np.unique(name[idx]):
            if int(c) not in self.role_of:
                self.role_of[int(c)] = role_of(self.names.values[c])
        role = np.array([self.role_of[int(c)] for c in name[idx]], dtype=np.int8)
        found = np.empty(idx.size, dtype=object)
        for j, i in enumerate(idx):
            a = args[i]
            raw = bytes(a.input_dims or a.input_dims_lc) if a is not None else b""
            if raw not in self.shapes_of:
                if len(self.shapes_of) >= _ITYPE_CACHE:
                    self.shapes_of.clear()
                self.shapes_of[raw] = shapes(raw)
            found[j] = self.shapes_of[raw]
        self.shaped.append((ts[idx], dur[idx], role, found))

    def _memory(self, events: list[Event]) -> None:
        """Raise ``memory_peak`` by the ``[memory]`` events of a device
        (Device Type other than the CPU's 0), and keep every ``[memory]``
        event's ``MEMORY_ROWS`` (``memory_events``)."""
        if not events:
            return
        args = [e.args for e in events]
        kind = _numeric([a.device_type for a in args])
        self.memory_events.append(np.stack([_numeric([e.ts for e in events]), _numeric([a.nbytes for a in args]),
                                            _numeric([a.total_allocated for a in args]), kind,
                                            _numeric([a.device_id for a in args])]))
        on_device = np.isfinite(kind) & (kind != 0)
        if not on_device.any():
            return
        for k, values in enumerate(([a.total_reserved for a in args], [a.total_allocated for a in args])):
            v = _numeric(values)[on_device]
            v = v[np.isfinite(v)]
            if v.size:
                self.memory_peak[k] = max(self.memory_peak[k], float(v.max()))

    def _add_facts(self, part: dict, flags: np.ndarray) -> None:
        """The whole-trace facts of one batch: the span of the events other
        than step annotations, and the per-name host-op statistics."""
        ts, end = part["ts"], part["ts"] + part["dur"]
        work = (flags & STEP_NAME) == 0
        if work.any():
            self.activity = (min(self.activity[0], float(ts[work].min())),
                             max(self.activity[1], float(end[work].max())))
        op = (_CAT_KIND[part["cat"]] == HOST) & _oplike(part["cat"], flags)
        self.op_stats.add(part["name"][op], ts[op], part["dur"][op], len(self.names.values))

    def _compact(self, part: dict) -> dict:
        """The part with its code columns in the smallest integer type that
        holds their table so far (concatenation widens them as needed)."""
        sizes = {"name": self.names, "pair": self.pairs, "input_type": self.itypes,
                 "collective": self.colls, "group": self.groups, "wait": self.waits, "msg": self.msgs}
        for k, table in sizes.items():
            part[k] = part[k].astype(_code_dtype(len(table.values)), copy=False)
        return part

    def _now_gpu(self) -> None:
        """The trace has device events: from now on keep only the host events
        the GPU tables read, and drop the others already kept."""
        self.device_seen = True
        self.shaped = []  # read on CPU-only traces only
        for i, part in enumerate(self.parts if self.reduce else []):
            flags = self.names.flags()[part["name"]]
            keep = (_CAT_KIND[part["cat"]] != HOST) | self._wanted_host(part, flags) | part["top"]
            if not keep.all():
                self.parts[i] = {k: v[keep] for k, v in part.items()}

    def _pairs(self, pids: tuple, tids: tuple) -> np.ndarray:
        """Thread codes (first seen (pid, tid) pairs, in no particular order)."""
        key = (self.pids.encode(list(pids)).astype(np.int64) << 32) | self.tids.encode(list(tids))
        uniq, inverse = np.unique(key, return_inverse=True)
        codes = np.fromiter((self.pairs.code((int(k) >> 32, int(k) & 0xFFFFFFFF)) for k in uniq),
                            dtype=np.int32, count=uniq.size)
        return codes[inverse.ravel()]

    def _args(self, args: tuple, n: int, sized: np.ndarray) -> tuple[np.ndarray, ...]:
        """correlation, input-type, collective, group, wait and message-size
        columns; ``sized`` marks the collective host ops whose tensor inputs
        are the message (``nccl:*``, ``gloo:*``; not the c10d front ends,
        whose arguments hold the output buffers too)."""
        corr = _numeric([None if a is None else a.correlation for a in args])
        itype = np.full(n, -1, dtype=np.int32)
        coll = np.full(n, -1, dtype=np.int32)
        grp = np.full(n, -1, dtype=np.int32)
        wait = np.full(n, -1, dtype=np.int32)
        msg = np.full(n, -1, dtype=np.int32)
        for i in [i for i, a in enumerate(args) if a is not None and _EXTRAS(a) != _NO_EXTRAS]:
            a = args[i]
            if a.input_type:
                itype[i] = self._itype_code(a)
            if a.collective is not None:
                coll[i] = self.colls.code(a.collective)
            g = _group(a)
            if g is not None:
                grp[i] = self.groups.code(g)
            if a.wait_on_stream is not None or a.wait_on_event is not None:
                wait[i] = self.waits.code(_wait(a))
            size = _msg_bytes(a) if a.in_nelems is not None else self._input_bytes(a) if sized[i] else None
            if size is not None:
                msg[i] = self.msgs.code(size)
        return corr, itype, coll, grp, wait, msg

    def _input_bytes(self, a: Args) -> int | None:
        """Bytes of an op's tensor inputs (:func:`_tensor_bytes`), computed
        once per distinct raw text."""
        if not a.input_type:
            return None
        key = (bytes(a.input_type), bytes(a.input_dims), bytes(a.input_dims_lc))
        if key not in self.size_of:
            if len(self.size_of) >= _ITYPE_CACHE:
                self.size_of.clear()
            self.size_of[key] = _tensor_bytes(a)
        return self.size_of[key]

    def _itype_code(self, a: Args) -> int:
        """Code of an op's tensor input types (-1 when it records none),
        parsed once per distinct raw text."""
        key = (bytes(a.input_type), bytes(a.input_dims), bytes(a.input_dims_lc))
        code = self.itype_of.get(key)
        if code is None:
            if len(self.itype_of) >= _ITYPE_CACHE:
                self.itype_of.clear()
            types = _tensor_types(a)
            code = self.itype_of[key] = -1 if types is None else self.itypes.code(types)
        return code

    def _wanted_host(self, part: dict, flags: np.ndarray) -> np.ndarray:
        """Host events the GPU tables read: step markers, DataLoader spans,
        collective ops, ops with tensor dtypes (the launch attribution
        climbs to the nearest enclosing one), ``record_function`` ranges
        (``user_annotation``: the annotations table); and for the one-time
        work, compile ops and host ops long enough to be a slow first call."""
        has_dt = self.itypes.flags(pad=1).astype(bool)[part["input_type"]]
        ranges = part["cat"] == _CAT_CODE["user_annotation"]
        return ((flags & _WANTED_HOST_NAME) != 0) | has_dt | ranges | _long_ops(part, flags)

    def _needed(self, part: dict) -> np.ndarray:
        """Events of one batch that a table may read, the trace's kind (GPU or
        CPU-only) being still unknown: device events; runtime calls with a
        correlation id or that block; the host events :meth:`_wanted_host`
        keeps; and the host ops (``cpu_op``, ...) that are top-level within
        this batch -- an op nested in another op of the batch is nested in
        the whole trace too, so it cannot be one of the top-level ops the
        CPU tables read -- and their time per thread (a GPU trace's idle
        attribution reads them too: what the launching thread was doing).
        Marks the top-level ones in ``part["top"]``."""
        kind = _CAT_KIND[part["cat"]]
        flags = self.names.flags()[part["name"]]
        host = kind == HOST
        keep = kind >= KERNEL
        keep |= (kind == RUNTIME) & (np.isfinite(part["corr"]) | ((flags & _WANTED_RUNTIME_NAME) != 0))
        keep |= host & self._wanted_host(part, flags)
        keep |= (kind == SYNC) | (kind == ANNOT) | self._program_frames(part)
        keep |= (kind == PYTHON) & ((flags & HOST_CALL_NAME) != 0)
        part["top"] = self._top_level_ops(part, host & _oplike(part["cat"], flags))
        keep |= part["top"]
        return keep

    def _program_frames(self, part: dict) -> np.ndarray:
        """Mask of the Python frames of the profiled program
        (``calls.program_frame``, tested once per distinct name)."""
        from advisor.collectors.kineto.calls import program_frame

        names = self.names.values
        if self.program.size < len(names):
            more = np.fromiter((program_frame(n) for n in names[self.program.size:]), dtype=bool)
            self.program = np.r_[self.program, more]
        return (_CAT_KIND[part["cat"]] == PYTHON) & self.program[part["name"]]

    def _top_level_ops(self, part: dict, oplike: np.ndarray) -> np.ndarray:
        """Mask of the host ops not nested in another host op of this batch;
        adds every host op's time to its thread's total."""
        top = np.zeros(oplike.size, dtype=bool)
        op = np.flatnonzero(oplike)
        if op.size:
            ts, dur, pair = part["ts"][op], part["dur"][op], part["pair"][op]
            self._add_op_time(pair, dur)
            top[op[iv.depth(pair, ts, ts + dur) == 0]] = True
        return top

    def _add_op_time(self, pair: np.ndarray, dur: np.ndarray) -> None:
        """Sum host-op durations per thread (picks the CPU training thread)."""
        size = len(self.pairs.values)
        if self.op_time.size < size:
            self.op_time = np.r_[self.op_time, np.zeros(size - self.op_time.size)]
            self.op_seen = np.r_[self.op_seen, np.zeros(size - self.op_seen.size, dtype=bool)]
        self.op_time += np.bincount(pair, weights=dur, minlength=size)
        self.op_seen[pair] = True

    def _gpu_needed(self, part: dict, dev_corr: np.ndarray) -> np.ndarray:
        """Events of a GPU trace the tables read: device events, the host
        events :meth:`_wanted_host` keeps, blocking, start-up and allocation
        runtime calls and the runtime calls that launched a device event
        (same correlation id); for the idle attribution the host ops
        top-level within their batch, the cuda_sync records and the runtime
        calls they belong to (``dev_corr`` holds their correlation ids too)."""
        kind = _CAT_KIND[part["cat"]]
        flags = self.names.flags()[part["name"]]
        rt = kind == RUNTIME
        keep = kind >= KERNEL
        keep |= (kind == HOST) & self._wanted_host(part, flags)
        keep |= rt & ((flags & _WANTED_RUNTIME_NAME) != 0)
        keep[rt] |= _sorted_has(dev_corr, part["corr"][rt])
        keep |= part["top"] | (kind == SYNC) | (kind == PYTHON) | (kind == ANNOT)
        return keep

    def _only_top_level(self, keep: list[np.ndarray]) -> list[np.ndarray]:
        """``keep`` without the ops that were top-level in their batch but
        are nested in an op of another batch (unless kept for their name or
        dtypes): the kept events of a GPU trace do not depend on where
        batches end. Every op that is top-level in the whole trace is
        top-level in its batch, so the nesting among those ops decides."""
        cand = [np.flatnonzero(k & p["top"]) for p, k in zip(self.parts, keep)]
        pair, ts, dur = (np.concatenate([p[c][i] for p, i in zip(self.parts, cand)]) if cand else np.empty(0)
                         for c in ("pair", "ts", "dur"))
        nested = iv.depth(pair, ts, ts + dur) > 0
        at = 0
        for p, k, i in zip(self.parts, keep, cand):
            drop = i[nested[at:at + i.size]]
            at += i.size
            if drop.size:
                flags = self.names.flags()[p["name"][drop]]
                sub = {c: v[drop] for c, v in p.items()}
                k[drop[~self._wanted_host(sub, flags)]] = False
        return keep

    def _cpu_needed(self, part: dict) -> np.ndarray:
        """Events of a CPU-only trace the tables read: the host events
        the tables look for, the long ones that may be slow first calls,
        the ``record_function`` ranges and the ops top-level within their batch."""
        host = _CAT_KIND[part["cat"]] == HOST
        flags = self.names.flags()[part["name"]]
        wanted = ((flags & _WANTED_HOST_NAME) != 0) | _long_ops(part, flags)
        wanted |= part["cat"] == _CAT_CODE["user_annotation"]
        return ~host | wanted | part["top"]

    def _device_corr(self) -> np.ndarray | None:
        """Correlation ids of the device events and cuda_sync records; None
        without device events."""
        ids = [p["corr"][(_CAT_KIND[p["cat"]] >= KERNEL) | (_CAT_KIND[p["cat"]] == SYNC)] for p in self.parts]
        if not any(np.any(_CAT_KIND[p["cat"]] >= KERNEL) for p in self.parts):
            return None
        ids = np.concatenate(ids)
        return np.unique(ids[np.isfinite(ids)])

    def feed(self, batches, advance=lambda: None) -> None:
        """Add each decoded ``(events, dropped)`` batch; ``advance()`` after
        each. A batch is let go before the next is decoded."""
        for events, dropped in batches:
            self.dropped += dropped
            self.add(events)
            del events
            advance()

    #: The code tables, in the order ``absorb`` remaps them.
    _TABLES = ("names", "pids", "tids", "itypes", "colls", "groups", "waits", "msgs")

    def state(self) -> dict:
        """What this builder holds, in plain picklable form (the code tables'
        key functions are not), for :meth:`absorb` in another process."""
        return {"values": {t: getattr(self, t).values for t in (*self._TABLES, "pairs")},
                "parts": self.parts, "dropped": self.dropped, "analysed": self.analysed,
                "span": self.span, "op_time": self.op_time, "op_seen": self.op_seen,
                "cats_seen": self.cats_seen, "device_seen": self.device_seen,
                "all_cats": self.all_cats, "phases": self.phases, "activity": self.activity,
                "op_stats": self.op_stats, "memory_peak": self.memory_peak,
                "memory_events": self.memory_events, "work": self.work,
                "shaped": self.shaped}

    def absorb(self, other: dict) -> None:
        """Append the batches of another builder's ``state`` (the events that
        follow this builder's in the trace), as if this builder had read
        them: its distinct values get this builder's codes (new ones in
        their first-seen order, as one builder would have numbered them),
        counts and per-thread op time add up, and once either side has seen
        a device event every batch is pruned as for a GPU trace."""
        maps = {t: np.fromiter((getattr(self, t).code(v) for v in other["values"][t]), dtype=np.int64,
                               count=len(other["values"][t])) for t in self._TABLES}
        pairs = np.fromiter((self.pairs.code((int(maps["pids"][p]), int(maps["tids"][t])))
                             for p, t in other["values"]["pairs"]), dtype=np.int64,
                            count=len(other["values"]["pairs"]))
        column_maps = {"name": maps["names"], "pair": pairs, "input_type": np.append(maps["itypes"], -1),
                       "collective": np.append(maps["colls"], -1), "group": np.append(maps["groups"], -1),
                       "wait": np.append(maps["waits"], -1),
                       "msg": np.append(maps["msgs"], -1)}
        for part in other["parts"]:
            for column, codes in column_maps.items():
                part[column] = codes[part[column]]  # -1 (none) reads the appended -1
            self.parts.append(self._compact(part))
        self.dropped += other["dropped"]
        self.analysed += other["analysed"]
        self.span = (min(self.span[0], other["span"][0]), max(self.span[1], other["span"][1]))
        seen = np.flatnonzero(other["op_seen"])
        self._add_op_time(pairs[seen], other["op_time"][seen])
        self.cats_seen |= other["cats_seen"]
        self.all_cats |= other["all_cats"]
        self.phases |= other["phases"]
        self.activity = (min(self.activity[0], other["activity"][0]), max(self.activity[1], other["activity"][1]))
        self.op_stats.merge(other["op_stats"], maps["names"], len(self.names.values))
        self.memory_peak = [max(a, b) for a, b in zip(self.memory_peak, other["memory_peak"])]
        self.memory_events.extend(other["memory_events"])
        self.work.extend(other["work"])
        self.shaped.extend(other["shaped"])
        if other["device_seen"] or self.device_seen:
            self.device_seen = False
            self._now_gpu()

    def events(self) -> Events:
        """All batches as one Events, reduced to what the tables of a GPU or
        of a CPU-only trace read."""
        dev_corr = self._device_corr() if self.reduce else None
        if not self.reduce:
            keep = [None] * len(self.parts)
        elif dev_corr is not None:
            keep = self._only_top_level([self._gpu_needed(p, dev_corr) for p in self.parts])
        else:
            keep = [self._cpu_needed(p) for p in self.parts]
        sizes = {"name": len(self.names.values), "input_type": len(self.itypes.values),
                 "collective": len(self.colls.values), "group": len(self.groups.values),
                 "wait": len(self.waits.values),
                 "msg": len(self.msgs.values)}
        cols = {}
        big = self.analysed >= BIG_TRACE_EVENTS
        # Column by column, freeing each part's column as it is copied (and,
        # for a big trace, handing the freed heap back to the OS at once).
        for k in ("cat", "pair", "ts", "dur", "corr", *_CODE_COLUMNS):
            dtype = _code_dtype(sizes[k]) if k in sizes else None
            pieces = [p.pop(k) if m is None else p.pop(k)[m] for p, m in zip(self.parts, keep)]
            cols[k] = (np.concatenate(pieces, dtype=dtype) if pieces
                       else np.empty(0, dtype=dtype or _EMPTY_DTYPES.get(k, np.float64)))
            del pieces
            if big:
                release_free_memory()
        self.parts = []
        thread, threads, op_time = self._threads(cols.pop("pair"))
        return Events(
            kind=_CAT_KIND[cols["cat"]], cat=cols["cat"], name=cols["name"],
            names=np.asarray(self.names.values, dtype=object), thread=thread, threads=threads,
            ts=cols["ts"], dur=cols["dur"], corr=cols["corr"],
            input_type=cols["input_type"], input_types=self.itypes.values,
            collective=cols["collective"], collectives=self.colls.values,
            group=cols["group"], groups=self.groups.values,
            wait=cols["wait"], waits=self.waits.values,
            msg=cols["msg"], msgs=self.msgs.values,
            span=self.span if self.analysed else (np.nan, np.nan), op_time=op_time,
            activity=self.activity if self.activity[0] <= self.activity[1] else (np.nan, np.nan),
            op_stats=self._op_stats(),
            **self._work_columns(),
            **self._shaped_columns(),
        )

    def _work_columns(self) -> dict[str, np.ndarray]:
        """The ``work_*`` columns of :class:`Events`, in time order."""
        batches, self.work = self.work, []
        return _time_ordered(batches, ("work_ts", "work_dur", "work_flops", "work_smallest", "work_type"))

    def _shaped_columns(self) -> dict[str, np.ndarray]:
        """The ``shaped_*`` columns of :class:`Events`, in time order."""
        batches, self.shaped = self.shaped, []
        return _time_ordered(batches, ("shaped_ts", "shaped_dur", "shaped_role", "shaped_shapes"))

    def _op_stats(self) -> OpStats:
        """The per-name host-op statistics, one entry per name code."""
        self.op_stats.grow(len(self.names.values))
        return self.op_stats

    def _threads(self, pair: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray]:
        """Thread codes of the kept events, ordered by (pid, tid) first
        appearance and labelled 'pid/tid', and the host-op time per code."""
        keys = np.array(self.pairs.values, dtype=np.int64).reshape(-1, 2)
        present = np.unique(pair) if pair.size else np.empty(0, dtype=np.int64)
        width = max(len(self.tids.values), 1)
        order = np.argsort(keys[present, 0] * width + keys[present, 1], kind="stable")
        code_of = np.full(len(keys), -1, dtype=np.int64)
        code_of[present[order]] = np.arange(present.size)
        pids, tids = self.pids.values, self.tids.values
        labels = [f"{pids[p]}/{tids[t]}" for p, t in keys[present[order]]]
        self._add_op_time(np.empty(0, dtype=np.int64), np.empty(0))  # one entry per thread
        op_time = np.full(present.size, -np.inf)
        if not self.device_seen:  # read for CPU-only traces only; a GPU trace's would depend on its batches
            seen = present[self.op_seen[present]]
            op_time[code_of[seen]] = self.op_time[seen]
        return code_of[pair].astype(_code_dtype(present.size)), labels, op_time


def _time_ordered(batches: list[tuple], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per-batch column tuples (the first the start times) -> one column per
    key, concatenated and in time order; {} without batches."""
    if not batches:
        return {}
    columns = [np.concatenate(c) for c in zip(*batches)]
    order = np.argsort(columns[0], kind="stable")
    return {k: c[order] for k, c in zip(keys, columns)}


def _sorted_has(table: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin(values, table)`` for a sorted ``table``, without sorting it
    again for every call."""
    if table.size == 0:
        return np.zeros(values.size, dtype=bool)
    pos = np.clip(np.searchsorted(table, values), 0, table.size - 1)
    return table[pos] == values


def _long_ops(part: dict, flags: np.ndarray) -> np.ndarray:
    """Host ops of a batch long enough to be a slow first call (:func:`_long_op_us`)."""
    return _oplike(part["cat"], flags) & (part["dur"] >= _long_op_us())


def _oplike(cat: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Host ops proper: ``cpu_op`` events and 2021 ``Operator`` events that
    are not annotations (ProfilerStep#, DataLoader, ``## ... ##``)."""
    return (cat == _CAT_CODE["cpu_op"]) | ((cat == _CAT_CODE["Operator"])
                                           & ((flags & ANNOTATION_NAME) == 0))


def _complete(events: list[Event]) -> tuple | None:
    """Field columns of the complete ("X") events of analysed categories;
    events with unusable ts/dur are left out and counted (last item)."""
    xs = [e for e in events if e.ph == "X" and e.cat in _CAT_CODE]
    if not xs:
        return None
    cats, names, pids, tids, ts, dur, args = zip(*map(_FIELDS, xs))
    ts = _numeric(ts)
    dur = _numeric(dur)
    dur = np.where(np.isnan(dur), 0.0, dur)
    ok = np.isfinite(ts) & (dur >= 0)
    if ok.all():
        return cats, names, pids, tids, ts, dur, args, 0
    keep = np.flatnonzero(ok)
    cats, names, pids, tids, args = ([col[i] for i in keep] for col in (cats, names, pids, tids, args))
    return cats, names, pids, tids, ts[keep], dur[keep], args, int((~ok).sum())


def _tensor_types(a: Args) -> tuple | None:
    """``Input type`` entries of tensor inputs: those whose ``Input Dims``
    entry is a non-empty shape (scalars and 0-d tensors have ``[]``); None
    when the op records no input types."""
    types = _json(a.input_type)
    if not isinstance(types, list) or not types:
        return None
    dims = _raw_list(a.input_dims)
    if dims is None:
        dims = _raw_list(a.input_dims_lc)
    if dims is None or len(dims) != len(types):
        return tuple(t if isinstance(t, str) else "" for t in types)
    return tuple(t if isinstance(t, str) else "" for t, d in zip(types, dims) if _is_shape(d))


def _msg_bytes(a: Args) -> int | None:
    """A collective's message size from its ``In msg nelems`` and ``dtype``
    args (NCCL kernels and ``record_param_comms`` ops of recent PyTorch);
    None when either is missing or the dtype is not known."""
    from advisor.collectors.vocab import dtype_bytes

    nelems = _as_int(a.in_nelems)
    width = dtype_bytes(a.msg_dtype) if isinstance(a.msg_dtype, str) and a.msg_dtype else None
    if nelems is None or width is None or nelems < 0:
        return None
    return nelems * width


def _tensor_bytes(a: Args) -> int | None:
    """Bytes of an op's tensor inputs from ``Input Dims`` and ``Input type``
    (how ``nccl:*`` / ``gloo:*`` ops record their buffers): the sum over
    inputs whose shape is a list of sizes and whose type is a known dtype
    (a 0-dim tensor, e.g. a loss all-reduced for logging, records ``[]``:
    one element); None when there is none (a tensor list, as c10d front
    ends record, has no element type)."""
    from advisor.collectors.vocab import dtype_bytes

    types = _json(a.input_type)
    dims = _json(a.input_dims) if len(a.input_dims) else _json(a.input_dims_lc)
    if not isinstance(types, list) or not isinstance(dims, list) or len(types) != len(dims):
        return None
    total, found = 0, False
    for typ, shape in zip(types, dims):
        width = dtype_bytes(typ) if isinstance(typ, str) and typ else None
        if width is None or not isinstance(shape, list):
            continue
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            continue
        total += width * int(np.prod(shape, dtype=np.int64))
        found = True
    return total if found else None


def _json(raw: msgspec.Raw):
    """The value of a raw JSON text (None when empty or malformed)."""
    try:
        return msgspec.json.decode(raw) if len(raw) else None
    except msgspec.DecodeError:
        return None


def _raw_list(raw: msgspec.Raw) -> list[msgspec.Raw] | None:
    """The entries of a raw JSON array, None when it is not one."""
    try:
        return _RAW_LIST.decode(raw) if len(raw) else None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _is_shape(dims: msgspec.Raw) -> bool:
    """A non-empty ``Input Dims`` entry (not ``[]``, spaces aside)."""
    return len(dims) > 2 and len(bytes(dims).replace(b" ", b"")) > 2


def _wait(a: Args) -> tuple[int, int]:
    """(stream waited on, correlation id of the event's record), -1 when unknown."""
    stream, record = _as_int(a.wait_on_stream), _as_int(a.wait_on_event)
    return (-1 if stream is None else stream, -1 if record is None else record)


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
    with _reading(path), _open(path) as fh, _gc_paused(), _progress(path) as advance:
        raw = getattr(fh, "fileobj", fh)  # the compressed file under a gzip reader
        try:
            builder.feed(stream.iter_batches(fh, rest, _decode_batch), lambda: advance(raw.tell()))
        except msgspec.DecodeError as exc:
            raise InputError(path, f"malformed JSON in traceEvents ({exc})") from None
        except ValueError as exc:
            raise InputError(path, f"malformed or truncated JSON ({exc})") from None
    return rest.document()


@contextmanager
def _progress(path: Path):
    """A bar of the bytes of ``path`` read (``advisor.runtime.progress.bar``) for a
    file of at least ``PROGRESS_BYTES``. Yields ``advance(bytes_read)``."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if size < PROGRESS_BYTES:
        yield lambda _pos: None
        return
    from advisor.runtime.progress import bar

    with bar(f"reading {path.name}", size, in_bytes=True) as show:
        yield show


def _whole(path: Path, builder: _Builder) -> tuple[DistInfo | None, Any, Hardware]:
    """Fallback for documents that cannot be streamed: decode at once
    (typed, then leniently); distributedInfo, schemaVersion and the
    :data:`Hardware`."""
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
            return doc.distributedInfo, doc.schemaVersion, _hardware(doc)
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


def load_trace(path: Path, reduce: bool = True, helpers: int = 0) -> Trace:
    """Decode one trace file; InputError when it is not usable. With
    ``reduce=False`` every analysed event is kept (to check the reduction).
    ``helpers``: extra processes that may decode parts of a large file
    (``kineto_split``)."""
    from advisor.collectors.kineto import split as kineto_split

    split = kineto_split.load_parts(path, helpers, reduce) if helpers else None
    if split is not None:
        builder, document = split
        dist, schema, devices = _decode_meta(path, document)
    else:
        builder = _Builder(reduce=reduce)
        try:
            dist, schema, devices = _decode_meta(path, _stream(path, builder))
        except stream.NotStreamable:
            builder = _Builder(reduce=reduce)
            dist, schema, devices = _whole(path, builder)
    events = builder.events()
    if builder.analysed >= BIG_TRACE_EVENTS:
        release_free_memory()
    return Trace(
        path=path,
        events=events,
        rank=_as_int(dist.rank) if dist else None,
        world_size=_as_int(dist.world_size) if dist else None,
        backend=dist.backend if dist else None,
        schema_version=None if schema is None else str(schema),
        old_vocabulary=bool(builder.cats_seen & OLD_VOCAB_CATS),
        analysed=builder.analysed,
        dropped=builder.dropped,
        devices=devices[0],
        gpu=devices[1],
        cpu=devices[2],
        categories=frozenset(builder.all_cats),
        counters="C" in builder.phases,
        device_memory_peak=(tuple(builder.memory_peak) if np.isfinite(builder.memory_peak).any() else None),
        memory_timeline=memory_timeline(builder.memory_events),
    )


_RANK_IN_HEAD = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*"?(\d+)')


def head_rank(head: str) -> int | None:
    """``distributedInfo.rank`` when it is in the file's first bytes."""
    m = _RANK_IN_HEAD.search(head)
    return int(m.group(1)) if m else None


#: Host event categories (both vocabularies) whose ``pid`` is the profiled
#: process's id; device events carry the device id there instead.
_HOST_CATS = r"(?:cpu_op|user_annotation|python_function|cuda_runtime|cuda_driver|Operator|Runtime)"
_PID_IN_HEAD = re.compile(
    r'\{[^{}]*?"cat"\s*:\s*"' + _HOST_CATS + r'"[^{}]*?"pid"\s*:\s*"?(\d+)'
    r'|\{[^{}]*?"pid"\s*:\s*"?(\d+)"?[^{}]*?"cat"\s*:\s*"' + _HOST_CATS + '"')


def head_pid(head: str) -> int | None:
    """The id of the process that wrote the trace: the ``pid`` most host
    events in the file's first bytes carry; None when none is there."""
    pids = Counter(int(a or b) for a, b in _PID_IN_HEAD.findall(head))
    return pids.most_common(1)[0][0] if pids else None
