"""The Profile's shared vocabulary: collective kinds, tensor dtypes and
PyTorch's operator namespaces.

Every collector names a communication operator's kind and an operator's
input dtypes through this module, so one operator reads the same from any
format.

Collective kinds (the ``kind`` column of ``comm`` and ``bandwidth``)
    ``allreduce``, ``reducescatter``, ``allgather``, ``alltoall``,
    ``broadcast`` (collectives of a whole group), ``send``, ``receive``
    (one-way point-to-point), ``sendrecv`` (point-to-point that sends and
    receives in one operator) and ``other``. ``collective_kind`` reads the
    kind from a name in any spelling: NCCL kernels
    (``ncclKernel_AllReduce_RING_LL_Sum_float``), c10d / gloo ops
    (``nccl:all_to_all``, ``gloo:all_reduce``), HCCL operators
    (``hcom_allReduce__123_0``, ``HcomAllReduce``) and MindSpore operators
    (``AllReduce-op1``, ``Send-op3``): case, ``_``, ``-``, ``:``, digits and
    other separators are ignored, and the first kind whose token the name
    contains wins (``KIND_TOKENS``, ordered so that a longer token is tried
    before one it contains).

    ``sendrecv`` is a batch of sends and receives issued as one operator:
    HCCL's ``HcomBatchSendRecv`` (``torch.distributed.batch_isend_irecv``,
    how Megatron-style pipeline parallelism swaps activations and gradients
    between neighbouring stages) and NCCL's ``SendRecv`` kernel, which runs
    every grouped point-to-point transfer. It is point-to-point, so not a
    rendezvous of a group (not ``allreduce``/``alltoall``...), and it moves
    data both ways, so neither ``send`` nor ``receive`` alone; ``other``
    would lose that it is pipeline traffic. A caller with a more specific
    name for the same operator (the Kineto collector: the ``nccl:recv`` or
    ``nccl:all_to_all`` host op that launched a ``SendRecv`` kernel) uses
    that one (``more_specific``).

Dtypes (``ops.input_dtypes``, ";"-joined)
    One spelling per type, CANN's without its ``DT_`` prefix: ``FLOAT``
    (32-bit), ``FLOAT16``, ``BF16``, ``DOUBLE``, ``INT8`` .. ``INT64``,
    ``UINT8`` .. ``UINT64``, ``BOOL``, ``COMPLEX64`` ... ``dtype`` maps every
    spelling the profilers write -- CANN ``DT_FLOAT16``, MindSpore
    ``NUMBER_TYPE_FLOAT32`` / ``kNumberTypeFloat32`` / ``Float32``, PyTorch's
    C++ names in Kineto ``Input type`` (``float``, ``c10::Half``, ``long
    int``), its scalar-type names in the ``dtype`` arg of collectives
    (``Float``, ``BFloat16``, ``Byte``, ``Char``), plain ``float32`` /
    ``fp16`` -- to it; ``dtype_bytes`` gives its width. A spelling not in
    ``DTYPES`` is kept, upper case, separators as ``_``
    (``c10::Float8_e4m3fn`` -> ``FLOAT8_E4M3FN``).

Transfer size classes (``size_class`` of ``bandwidth``, ``links``,
``comm_contention``)
    floor(log2(MB)) of one record's size (``size_classes``): a transfer's
    bandwidth is compared only with transfers of its class, since a small
    transfer never reaches a large one's bandwidth.
"""

from __future__ import annotations

import functools
import re

import numpy as np

# ---------------------------------------------------------------- kinds

ALLREDUCE = "allreduce"
REDUCESCATTER = "reducescatter"
ALLGATHER = "allgather"
ALLTOALL = "alltoall"
BROADCAST = "broadcast"
SEND = "send"
RECEIVE = "receive"
SENDRECV = "sendrecv"
OTHER = "other"
#: Every kind, in the order the module doc lists them.
KINDS = (ALLREDUCE, REDUCESCATTER, ALLGATHER, ALLTOALL, BROADCAST, SEND, RECEIVE, SENDRECV, OTHER)

#: (token in the folded name, kind), first match wins: ``reducescatter``
#: before ``allreduce`` would not matter, but ``sendrecv`` must come before
#: ``send`` and ``recv``.
KIND_TOKENS = (
    ("reducescatter", REDUCESCATTER),
    ("allgather", ALLGATHER),
    ("allreduce", ALLREDUCE),
    ("alltoall", ALLTOALL),
    ("broadcast", BROADCAST),
    ("sendrecv", SENDRECV),
    ("receive", RECEIVE),
    ("recv", RECEIVE),
    ("send", SEND),
)
_NOT_A_LETTER = re.compile(r"[^a-z]+")


@functools.lru_cache(maxsize=8192)
def collective_kind(name: str | None) -> str:
    """The kind of a communication operator, kernel or op named ``name``
    (module doc); ``other`` when the name says none."""
    if not name:
        return OTHER
    folded = _NOT_A_LETTER.sub("", str(name).lower())
    for token, kind in KIND_TOKENS:
        if token in folded:
            return kind
    return OTHER


def more_specific(*names: str | None) -> str:
    """The kind of the first of ``names`` that gives one other than
    ``other`` and the generic ``sendrecv``; else ``sendrecv`` if one gave
    it, else ``other``. For an operator known by several names (a kernel,
    its ``Collective name`` argument, the op that launched it)."""
    found = OTHER
    for name in names:
        kind = collective_kind(name)
        if kind not in (OTHER, SENDRECV):
            return kind
        if kind == SENDRECV:
            found = SENDRECV
    return found


# --------------------------------------------------------------- dtypes

#: Folded spelling (upper case, letters and digits only, vendor prefix
#: removed: ``_fold``) -> the Profile's spelling.
DTYPES = {
    "FLOAT": "FLOAT", "FLOAT32": "FLOAT", "FP32": "FLOAT",
    "FLOAT16": "FLOAT16", "FP16": "FLOAT16", "HALF": "FLOAT16",
    "BF16": "BF16", "BFLOAT16": "BF16", "BFP16": "BF16",
    "DOUBLE": "DOUBLE", "FLOAT64": "DOUBLE", "FP64": "DOUBLE",
    "INT8": "INT8", "SIGNEDCHAR": "INT8", "CHAR": "INT8",
    "INT16": "INT16", "SHORT": "INT16", "SHORTINT": "INT16",
    "INT": "INT32", "INT32": "INT32",
    "INT64": "INT64", "LONG": "INT64", "LONGINT": "INT64",
    "UINT8": "UINT8", "UNSIGNEDCHAR": "UINT8", "BYTE": "UINT8",
    "UINT": "UINT32", "UINT16": "UINT16", "UINT32": "UINT32", "UINT64": "UINT64", "INT128": "INT128",
    "BOOL": "BOOL",
    "COMPLEX64": "COMPLEX64", "COMPLEXFLOAT": "COMPLEX64",
    "COMPLEX128": "COMPLEX128", "COMPLEXDOUBLE": "COMPLEX128",
    "COMPLEX32": "COMPLEX32", "COMPLEXHALF": "COMPLEX32",
}
#: The floating-point types of matrix work, in the Profile's spelling.
FLOATING_TYPES = ("FLOAT", "BF16", "FLOAT16", "DOUBLE")
FLOAT, BF16, FLOAT16, DOUBLE = FLOATING_TYPES
#: Kineto ``Input type`` entries that are not tensors.
NON_TENSOR_TYPES = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None", "String"})
#: Vendor prefixes: CANN ``DT_`` (``DT`` in some MindSpore files), MindSpore
#: ``NUMBER_TYPE_`` / ``kNumberType``, PyTorch ``c10::`` (also inside
#: ``c10::complex<c10::Half>``).
_PREFIX = re.compile(r"^(?:DT_?|NUMBER_TYPE_|KNUMBERTYPE)")
_C10 = re.compile(r"C10::")
_SEPARATORS = re.compile(r"[^A-Z0-9]+")


def _fold(upper: str) -> str:
    return _SEPARATORS.sub("", upper)


@functools.lru_cache(maxsize=4096)
def dtype(name: str) -> str:
    """One dtype in the Profile's spelling (module doc); "" for a blank one."""
    upper = _PREFIX.sub("", _C10.sub("", str(name).strip().upper()))
    known = DTYPES.get(_fold(upper))
    return known if known is not None else _SEPARATORS.sub("_", upper).strip("_")


#: Bytes per element of each dtype in the Profile's spelling (``FLOAT8_*``
#: spellings are one byte: :func:`dtype_bytes`).
DTYPE_BYTES = {
    "FLOAT": 4, "FLOAT16": 2, "BF16": 2, "DOUBLE": 8,
    "INT8": 1, "INT16": 2, "INT32": 4, "INT64": 8,
    "UINT8": 1, "UINT16": 2, "UINT32": 4, "UINT64": 8, "BOOL": 1, "INT128": 16,
    "COMPLEX32": 4, "COMPLEX64": 8, "COMPLEX128": 16,
}


def dtype_bytes(name: str) -> int | None:
    """Bytes per element of a dtype in any spelling ``dtype`` reads (the
    ``dtype`` arg of NCCL kernels says ``Float``, ``BFloat16``, ``Byte``);
    None when unknown."""
    spelled = dtype(name)
    return DTYPE_BYTES.get(spelled, 1 if spelled.startswith("FLOAT8") else None)


#: HCCL's dtype enum (``ENUM_HCCL_DATA_TYPE`` of the Ascend profiler
#: database, id -> name, msprof "Profile Data File Reference (DB)"; 65534
#: is N/A), for a database that lacks the table. ``BFP16`` is bfloat16.
HCCL_DATA_TYPES = {0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64",
                   7: "UINT8", 8: "UINT16", 9: "UINT32", 10: "FP64", 11: "BFP16", 12: "INT128"}


def dtype_list(names) -> str | None:
    """Kineto-style ``Input type`` entries -> ";"-joined Profile dtypes of
    the tensor inputs (``NON_TENSOR_TYPES`` left out); None without any."""
    if not names:
        return None
    out = [dtype(n) for n in names if isinstance(n, str) and n not in NON_TENSOR_TYPES]
    return ";".join(out) or None


def dtype_text(text: str | None) -> str | None:
    """A ";"-joined dtype cell as profilers write it (``DT_BF16;DT_BF16``)
    -> the same in Profile spelling (``BF16;BF16``); every part kept."""
    if text is None:
        return None
    return ";".join(dtype(part) for part in str(text).split(";"))


def size_classes(size_mb) -> tuple[np.ndarray, np.ndarray]:
    """(size class of each size in MB, which sizes are positive): floor(log2(MB))
    (module doc); a size that is not positive has no class (0 here, masked out)."""
    size = np.asarray(size_mb, dtype=np.float64)
    positive = size > 0
    with np.errstate(all="ignore"):
        return np.floor(np.log2(np.where(positive, size, 1.0))).astype(np.int64), positive


# ----------------------------------------------- PyTorch operator namespaces

#: The namespace of PyTorch's operators in host call names (``aten::addmm``).
ATEN = "aten::"
#: Namespaces only PyTorch's dispatcher and autograd engine give host calls
#: (``aten::addmm``, ``autograd::engine::evaluate_function: ...``): a
#: timeline that holds them was written by PyTorch (torch_npu on Ascend).
#: MindSpore names its host operators by the network's scopes
#: (``Default/network/...``) or by the primitive (``MatMul``).
TORCH_NAMESPACES = (ATEN, "autograd::")
