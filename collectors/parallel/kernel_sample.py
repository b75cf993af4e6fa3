"""Which ranks of a large cluster have their kernel files read.

A rank's kernel list (``kernel_details.csv``, the profiler database's
tasks) is by far its largest file -- 10^5 kernels and hundreds of MB a rank
on real jobs -- and what advisor draws from it is the same on every replica
of the model: the hot operators, their dtypes, the float32 matrix share,
device idle. Slow ranks, slow links, stages and data waits come from the
step-trace and communication files, which are read on every rank.

So above ``DEFAULT_LIMIT`` ranks, the kernel files of a sample are read:

* ranks (in rank order) are cut into blocks of ``k = ceil(ranks / limit)``
  consecutive ranks, and block ``j`` gives its rank at position ``j mod
  len(block)``. Every block (so every host, and every pipeline stage laid
  out in blocks of ranks) and every position in a block (so every local
  card, and every stage when stages alternate rank by rank, Megatron-LM's
  other orders) is read; at most ``limit`` ranks are.
* A rank whose steps come from nothing but its kernels is read whole by its
  collector whatever the sample says.

The report states how many ranks the operator tables come from;
``--kernel-ranks all`` reads every rank. msprof-analyze's ``advisor all``
analyzes operators on one rank (the slowest) or one per pipeline stage.
"""

from __future__ import annotations

import math

#: Ranks whose kernel files are read when a run has more.
DEFAULT_LIMIT = 128


def chosen(count: int, limit: int | None) -> list[bool]:
    """For each of ``count`` units in rank order: read its kernels? All of
    them when ``limit`` is None or ``count <= limit`` (see module doc)."""
    if limit is None or count <= limit:
        return [True] * count
    if limit < 1:
        raise ValueError(f"kernel rank limit {limit}: must be 1 or more")
    k = math.ceil(count / limit)
    out = [False] * count
    for j, start in enumerate(range(0, count, k)):
        size = min(k, count - start)
        out[start + j % size] = True
    return out


def note(read: int, total: int, limit: int) -> str:
    """The report's note for operators read on ``read`` of ``total`` ranks
    sampled with ``limit``."""
    return (f"operators and device idle from the kernel files of {read} of {total} ranks "
            f"(one in every {math.ceil(total / limit)}; --kernel-ranks all reads every rank); "
            "steps and communication from every rank")
