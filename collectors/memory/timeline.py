"""Decoding a raw PyTorch memory timeline into the ``memory`` table.

``torch.profiler.profile.export_memory_timeline(path, device)`` with a path
ending ``.raw.json.gz`` writes ``MemoryProfileTimeline.export_memory_timeline_raw``
(``torch/profiler/_memory_profiler.py``): a JSON list of events
``[time_ns, action, bytes, category]`` for one device, in time order:

* ``time_ns``: the profiler's clock in nanoseconds; ``-1`` for memory that
  existed before profiling started.
* ``action``: ``Action`` enum values (``enum.auto()``, from 1):
  1 PREEXISTING, 2 CREATE, 3 INCREMENT_VERSION, 4 DESTROY.
* ``bytes``: signed: positive for PREEXISTING and CREATE, negative for
  DESTROY; a version increment is two events at the same time, minus the
  bytes under the tensor's old category and plus them under its new one
  (the live total does not change).
* ``category``: index into ``_CATEGORY_TO_COLORS``: 0 parameter,
  1 optimizer state, 2 input, 3 temporary, 4 activation, 5 gradient,
  6 autograd detail, 7 unknown (no category found).

So the live bytes at any moment are the running sum of ``bytes``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from advisor.collectors.kineto import decode
from advisor.errors import InputError

#: ``action`` codes -> the ``memory`` table's names.
ACTIONS = {1: "preexisting", 2: "create", 3: "increment_version", 4: "destroy"}
#: ``category`` codes -> the ``memory`` table's names.
CATEGORIES = {0: "parameter", 1: "optimizer_state", 2: "input", 3: "temporary", 4: "activation",
              5: "gradient", 6: "autograd_detail", 7: "unknown"}
#: Bytes of the file's start that ``looks_like_timeline`` reads: a few
#: dozen events, enough to see the shape without reading the file.
PEEK_BYTES = 4096


def head(path: Path) -> str:
    """The first ``PEEK_BYTES`` of the (decompressed) file as text; '' when unreadable."""
    return decode.peek(path, PEEK_BYTES)


def head_is_timeline(text: str) -> bool:
    """Whether a file's first bytes start a list of raw timeline events:
    ``[[`` then four integers (the first possibly -1), action 1-4, category 0-7."""
    text = text.lstrip()
    if not text.startswith("["):
        return False
    body = text[1:].lstrip()
    if not body.startswith("["):
        return False
    end = body.find("]")
    if end < 0:
        return False
    parts = [p.strip() for p in body[1:end].split(",")]
    if len(parts) != 4:
        return False
    try:
        t, action, _size, category = (int(p) for p in parts)
    except ValueError:
        return False
    return t >= -1 and action in ACTIONS and category in CATEGORIES


def read_events(path: Path) -> np.ndarray:
    """The file's events as an int64 array of shape (n, 4); InputError
    (one line, naming the file) when it is not a raw memory timeline."""
    data = decode.read_bytes(path)  # bounded gzip, regular files only, errors naming the file
    if not data.strip():
        raise InputError(path, "empty file")
    try:
        events = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON (truncated?): {exc}") from None
    if not isinstance(events, list) or not events:
        raise InputError(path, "not a memory timeline: expected a non-empty JSON list of "
                               "[time_ns, action, bytes, category] events")
    if not all(isinstance(e, list) and len(e) == 4 and all(type(v) is int for v in e) for e in events):
        raise InputError(path, "not a memory timeline: every event must be four integers "
                               "[time_ns, action, bytes, category]")
    try:
        arr = np.array(events, dtype=np.int64)
    except OverflowError:
        raise InputError(path, "not a memory timeline: a value does not fit 64 bits") from None
    bad_action = ~np.isin(arr[:, 1], list(ACTIONS))
    bad_category = ~np.isin(arr[:, 3], list(CATEGORIES))
    if bad_action.any() or bad_category.any():
        i = int(np.flatnonzero(bad_action | bad_category)[0])
        raise InputError(path, f"not a memory timeline: event {i} has action {arr[i, 1]} "
                               f"(expected 1-4) and category {arr[i, 3]} (expected 0-7)")
    if (arr[:, 0] < -1).any():
        raise InputError(path, "not a memory timeline: a time below -1 ns")
    return arr


def table(events: np.ndarray, rank: int = 0) -> pd.DataFrame:
    """The ``memory`` table of ``events`` (``read_events``), one row per
    event in time order (pre-existing memory first, then stable by time):
    ``time_us`` (NaN for pre-existing memory), ``action``, ``bytes``
    (signed), ``category``, ``rank``."""
    order = np.argsort(events[:, 0], kind="stable")
    events = events[order]
    times = events[:, 0].astype("float64") / 1000.0
    times[events[:, 0] < 0] = np.nan
    return pd.DataFrame({
        "rank": np.full(len(events), rank, dtype="int64"),
        "time_us": times,
        "action": [ACTIONS[a] for a in events[:, 1].tolist()],
        "bytes": events[:, 2],
        "category": [CATEGORIES[c] for c in events[:, 3].tolist()],
    })
