"""Which ranks of a large cluster have their kernel files read.

A rank's kernel list (``kernel_details.csv``, the profiler database's
tasks) is by far its largest file -- 10^5 kernels and hundreds of MB a rank
on real jobs -- and what advisor draws from it is the same on every replica
of the model: the hot operators, their dtypes, the float32 matrix share,
device idle. Slow ranks, slow links, stages and data waits come from the
step-trace and communication files, which are read on every rank.

So above ``DEFAULT_LIMIT`` ranks, the kernel files of a sample are read,
``limit`` ranks at most:

* a spread of ``limit - slowest_count(limit)`` ranks: ranks (in rank
  order) are cut into blocks of ``k = ceil(ranks / spread)`` consecutive
  ranks, and block ``j`` gives its rank at position ``j mod len(block)``.
  Every block (so every pipeline stage laid out in blocks of ranks, and
  every host where a block is no larger than a host) and every position in
  a block (so every local card, and every stage when stages alternate rank
  by rank, Megatron-LM's other orders) is read;
* and, once every rank's steps are read, the ``slowest_count(limit)``
  ranks slowest in compute (``slowest``): a compute straggler's kernels
  beside its peers' tell a slower device (the same kernels, each slower)
  from more work (``advisor.metrics.cluster``), and a straggler is one rank
  that a spread finds by chance only.
* A rank whose steps come from nothing but its kernels is read whole by its
  collector whatever the sample says.

The report states how many ranks the operator tables come from;
``--kernel-ranks all`` reads every rank. msprof-analyze's ``advisor all``
analyzes operators on one rank (the slowest) or one per pipeline stage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Ranks whose kernel files are read when a run has more.
DEFAULT_LIMIT = 64
#: Of a sample of ``limit`` ranks, at most this many are the ranks slowest
#: in compute, and at most one in ``SLOWEST_SHARE_OF`` (the rest is the spread).
SLOWEST = 4
SLOWEST_SHARE_OF = 8


def slowest_count(limit: int | None) -> int:
    """How many of a sample of ``limit`` ranks are the slowest in compute (module doc)."""
    return 0 if limit is None else min(SLOWEST, limit // SLOWEST_SHARE_OF)


def chosen(count: int, limit: int | None) -> list[bool]:
    """For each of ``count`` units in rank order: read its kernels? All of
    them when ``limit`` is None or ``count <= limit`` (see module doc)."""
    if limit is None or count <= limit:
        return [True] * count
    if limit < 1:
        raise ValueError(f"kernel rank limit {limit}: must be 1 or more")
    k = math.ceil(count / (limit - slowest_count(limit)))
    out = [False] * count
    for j, start in enumerate(range(0, count, k)):
        size = min(k, count - start)
        out[start + j % size] = True
    return out


def slowest(compute: Sequence[float], stages: Sequence[object], read: Sequence[bool], limit: int) -> list[int]:
    """The units (indices) outside the spread (``read`` False) whose kernels
    are read too: the ``slowest_count(limit)`` with the most compute per
    step over the median of their pipeline stage (``stages``: one label per
    unit, all alike without stages), those above it only. ``compute``: each
    unit's median compute per step, NaN where unknown."""
    import numpy as np  # not at import: ``advisor`` reads ``DEFAULT_LIMIT`` from here without NumPy

    values = np.asarray(compute, dtype=float)
    labels = np.asarray([str(s) for s in stages])
    ratio = np.full(values.size, np.nan)
    for stage in np.unique(labels):
        members = (labels == stage) & np.isfinite(values)
        if members.any():
            median = np.median(values[members])
            if median > 0:
                ratio[members] = values[members] / median
    candidates = [i for i in np.argsort(-np.nan_to_num(ratio, nan=-np.inf), kind="stable").tolist()
                  if not read[i] and ratio[i] > 1]
    return candidates[:slowest_count(limit)]


def note(read: int, total: int, limit: int, slow: int = 0) -> str:
    """The report's note for operators read on ``read`` of ``total`` ranks
    sampled with ``limit``, ``slow`` of them the slowest in compute."""
    spread = math.ceil(total / (limit - slowest_count(limit)))
    also = f", and the {slow} slowest in compute" if slow else ""
    return (f"operators and device idle from the kernel files of {read} of {total} ranks "
            f"(one in every {spread}{also}; --kernel-ranks all reads every rank); "
            "steps and communication from every rank")
