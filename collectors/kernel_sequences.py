"""The ``kernel_sequences`` table: per rank, the contiguous kernel
sequences (n-grams of the device's kernel order) that repeat within steps,
with the device time they cover and the idle gaps between their kernels.

The ``ops`` table aggregates kernels per name, so their order is lost; a
chain of small kernels that runs again and again (a normalization, an
activation, an optimizer update written as separate elementwise ops) is
what kernel fusion, ``torch.compile`` or a graph launch removes, and the
gaps between its kernels are the launch and host cost it saves. This is
HolisticTraceAnalysis' ``get_frequent_cuda_kernel_sequences`` and
msprof-analyze's fusible-operator check, computed once per rank with numpy:
every n-gram of length ``MIN_LENGTH``..``MAX_LENGTH`` is hashed (a rolling
polynomial over the kernels' integer keys), counted in a hash table, and
the ``TOP_PER_LENGTH`` with the most gap time per length are kept. Cost:
``MAX_LENGTH - 1`` hash-table passes over one integer per kernel.

Kernels are in start order (all streams). A sequence never spans a
*break*: a kernel that fusion cannot take in (communication, copies, AI
CPU work: msprof-analyze's checker stops a sequence at HCCL and AI CPU
tasks) or an idle gap longer than ``LAUNCH_GAP_US`` (host work or a wait,
not a launch). Times of overlapping occurrences (a pattern that follows
itself, such as ``A A A``) are the union of the kernels and gaps they
cover, so a sequence's time is never counted twice.

Where the kernels carry AI Core pipe times (Ascend PipeUtilization), each
kept sequence also has its memory-transfer time (``mte_us``: the MTE2 load
plus the MTE3/FIXPIPE store of each kernel, msprof-analyze's
fusible-operator ``get_mte_time``) and the busy time of its cores
(``pipe_us``), and the ``TOP_PER_LENGTH`` with the most memory-transfer
time per length are kept too (``by_gap`` False unless also among those with
the most gap time): a chain bound by memory transfer gains from fusion
(its intermediates stay on the chip) even when no launch gap separates its
kernels.

Device kernels only: on a CPU-only trace the operators run on the host and
the time between them is Python and dispatch, not launch gaps the device
waits in (host-bound measures that), so no table is written for it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Shortest sequence counted: two kernels are the least that fusion merges
#: (msprof-analyze fusible_operator.yaml ``min_length: 2``).
MIN_LENGTH = 2
#: Longest sequence counted (msprof-analyze's ``max_length`` is 10; 8 keeps
#: the cost at seven sorts per rank, and a longer repeated block still shows
#: through its 8-kernel parts).
MAX_LENGTH = 8
#: Sequences kept per length and rank: HTA's ``top_k`` and msprof-analyze's
#: ``top_num`` default (5).
TOP_PER_LENGTH = 5
#: An idle gap between consecutive kernels longer than this (us) is host
#: work or a wait, not a launch: it ends a sequence. The Kineto collector's
#: launch-gap bound (``kineto.tables.KERNEL_GAP_US``): a kernel launch costs
#: the host 5-20 us, so a device fed by launches alone leaves gaps below it.
LAUNCH_GAP_US = 50.0
#: Separator of the kernel names in the ``kernels`` column.
JOIN = " -> "
#: Odd 64-bit multiplier of the rolling hash (the golden-ratio constant).
_PRIME = np.uint64(0x9E3779B97F4A7C15)

COLUMNS = ["rank", "kernels", "length", "count", "device_us", "gap_us", "steps"]
#: The columns of sequences of kernels with pipe times (module doc).
PIPE_COLUMNS = ["mte_us", "pipe_us", "by_gap"]


def _running(bad: np.ndarray) -> np.ndarray:
    """The running count of ``bad`` entries, from 0 (for ``_window_ok``)."""
    return np.concatenate(([0], np.cumsum(bad, dtype=np.int64)))


def _window_ok(c: np.ndarray, width: int) -> np.ndarray:
    """Per start i: no bad entry in ``bad[i : i + width]`` (``c``: its ``_running`` count)."""
    starts = c.size - width
    return (c[width:width + starts] - c[:starts]) == 0


def _unions(positions: np.ndarray, groups: np.ndarray, count: int, width: int, size: int) -> np.ndarray:
    """Per group g < ``count``, the boolean mask of ``size`` entries covered
    by ``[p, p + width)`` for every p of ``positions`` in g (``groups``:
    each position's group): one row per group, all built at once."""
    row = groups * (size + 1)
    cover = (np.bincount(row + positions, minlength=count * (size + 1))
             - np.bincount(row + np.minimum(positions + width, size), minlength=count * (size + 1)))
    return np.cumsum(cover.reshape(count, size + 1)[:, :-1], axis=1) > 0


#: ``ndarray.sum`` without its Python wrapper: the same reduction, so the
#: same value (a rank's rows take a few sums each).
_add = np.add.reduce


def _factorize(values: np.ndarray) -> tuple[np.ndarray, int]:
    """(code per value, number of distinct values) of uint64 ``values``,
    codes in order of first appearance: ``pd.factorize`` (whose hash table
    this is) without its wrapper's checks, which cost several times the
    table's own work on one rank's few thousand windows; ``pd.factorize``
    itself where pandas lays out its internals otherwise."""
    if _UInt64HashTable is None:
        codes, uniques = pd.factorize(values)
        return codes, uniques.size
    uniques, codes = _UInt64HashTable(values.size).factorize(values)
    return codes, uniques.size


try:
    from pandas._libs.hashtable import UInt64HashTable as _UInt64HashTable
except ImportError:  # pragma: no cover - pandas' internals moved
    _UInt64HashTable = None


def frequent_sequences(keys: np.ndarray, labels: list[str], start: np.ndarray, dur: np.ndarray,
                       fusable: np.ndarray, steps: int, rank: int,
                       pipes: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame | None:
    """The ``kernel_sequences`` rows of one rank (``sequence_rows``) as a
    DataFrame, or None."""
    found = sequence_rows(keys, labels, start, dur, fusable, steps, rank, pipes)
    return None if found is None else pd.DataFrame(found[0], columns=found[1])


def sequence_rows(keys: np.ndarray, labels: list[str], start: np.ndarray, dur: np.ndarray,
                  fusable: np.ndarray, steps: int, rank: int,
                  pipes: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[list[tuple], list[str]] | None:
    """The ``kernel_sequences`` rows of one rank and their column names, or
    None when no sequence repeats more often than the steps do.

    ``keys``: an integer key per kernel (same key = same kernel), whose text
    is ``labels[key]``; ``start`` / ``dur``: the kernels' times (us), any
    order; ``fusable``: False for kernels that end a sequence
    (communication, copies, AI CPU); ``steps``: the steps these kernels ran
    in (at least 1). A sequence is kept when it occurs more than ``steps``
    times: it repeats within a step, not only because steps repeat.
    ``pipes``: per kernel (memory-transfer time, pipe busy time) in us, 0
    where a kernel has none (module doc); None when the kernels have no
    pipe times."""
    if keys.size < MIN_LENGTH:
        return None
    order = np.argsort(start, kind="stable")
    keys = keys[order].astype(np.uint64)
    start = start[order].astype(float)
    end = start + dur[order].astype(float)
    dur = end - start
    fusable = fusable[order]
    if pipes is not None:
        mte, pipe = (np.nan_to_num(a[order].astype(float)) for a in pipes)
        csum_mte = np.concatenate(([0.0], np.cumsum(mte)))
    m = keys.size
    gap = np.maximum(start[1:] - np.maximum.accumulate(end)[:-1], 0.0)
    bad_kernel = _running(~fusable)
    bad_gap = _running(gap > LAUNCH_GAP_US)
    csum_gap = np.concatenate(([0.0], np.cumsum(gap)))
    steps = max(int(steps), 1)
    rows = []
    h = keys.copy()
    for n in range(MIN_LENGTH, min(MAX_LENGTH, m) + 1):
        with np.errstate(over="ignore"):
            h = h[:m - n + 1] * _PRIME + keys[n - 1:]
        ok = _window_ok(bad_kernel, n) & _window_ok(bad_gap, n - 1)
        idx = np.flatnonzero(ok)
        if idx.size <= steps:
            continue
        inverse, distinct = _factorize(h[idx])  # a hash table: one pass, no sort
        counts = np.bincount(inverse, minlength=distinct)
        frequent = counts > steps
        if not frequent.any():
            continue
        first = np.empty(distinct, dtype=np.int64)
        first[inverse[::-1]] = np.arange(idx.size - 1, -1, -1)  # the earliest occurrence wins
        gap_sum = np.bincount(inverse, weights=csum_gap[idx + n - 1] - csum_gap[idx], minlength=distinct)
        frequent_ids = np.flatnonzero(frequent)
        by_gap = frequent_ids[np.argsort(-gap_sum[frequent_ids], kind="stable")[:TOP_PER_LENGTH]]
        cand = by_gap
        if pipes is not None:
            mte_sum = np.bincount(inverse, weights=csum_mte[idx + n] - csum_mte[idx], minlength=distinct)
            by_mte = frequent_ids[np.argsort(-mte_sum[frequent_ids], kind="stable")[:TOP_PER_LENGTH]]
            cand = np.concatenate([by_gap, np.setdiff1d(by_mte[mte_sum[by_mte] > 0], by_gap)])
        which = np.full(distinct, -1)
        which[cand] = np.arange(cand.size)
        of = which[inverse]  # per window: its candidate, or -1
        pos, of = idx[of >= 0], of[of >= 0]
        kernels = _unions(pos, of, cand.size, n, m)
        gaps = _unions(pos, of, cand.size, n - 1, m - 1)
        gap_chosen = set(by_gap.tolist())
        for j, u in enumerate(cand.tolist()):
            at = int(idx[first[u]])
            covered = kernels[j]  # the same kernels, in the same order, for each sum
            row = (rank, JOIN.join([labels[k] for k in keys[at:at + n].tolist()]), n, int(counts[u]),
                   float(_add(dur[covered])), float(_add(gap[gaps[j]])), steps)
            if pipes is not None:
                row += (float(_add(mte[covered])), float(_add(pipe[covered])), u in gap_chosen)
            rows.append(row)
    if not rows:
        return None
    return rows, COLUMNS + (PIPE_COLUMNS if pipes is not None else [])
