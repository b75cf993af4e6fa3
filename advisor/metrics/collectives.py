"""Which comm rows stand for a collective, and the kinds the rules speak of.

A collective can leave more than one row in the ``comm`` table. On CPU-only
Kineto traces of a gloo job, PyTorch's dispatcher front end
(``c10d::allreduce_``) runs on the training thread: it enqueues the work
and, for a synchronous call, the thread then waits for it; the backend op
(``gloo:all_reduce``) runs on a worker thread, and that is where the
collective runs, the ranks meet and its buffers are recorded. The
collector marks such a front end (``front_end`` = 1: a rank whose trace has
backend rows too). So:

* counts, sizes and matching across ranks read the other rows
  (:func:`collective_rows`);
* exposed time reads every row: the collector splits each step's exposed
  communication among the rows (``exposed_share_us``) so that nothing is
  counted twice, and gives the time the training thread is blocked in a
  call to that call's row (a front end and its backend op have one kind,
  so the split between them does not matter for the kinds).

Kind groups (``KIND_GROUPS``): the kinds of ``advisor.collectors.vocab``
gathered by the fix that hides them, one rule each.
"""

from __future__ import annotations

import pandas as pd

from advisor.metrics.op_classes import per_value
from advisor.profile import Profile

#: Kind group -> the collective kinds in it (module doc).
KIND_GROUPS = {
    "allreduce": ("allreduce",),                      # gradient all-reduce (DDP buckets, fusion)
    "alltoall": ("alltoall",),                        # MoE / embedding exchange
    "fsdp": ("allgather", "reducescatter"),           # FSDP / ZeRO: gather parameters, scatter gradients
    "p2p": ("send", "receive", "sendrecv"),           # pipeline stages passing activations
    "broadcast": ("broadcast",),
    "other": ("other",),
}
#: What each group is called in messages and reasons.
GROUP_LABELS = {"allreduce": "all-reduce", "alltoall": "all-to-all",
                "fsdp": "all-gather / reduce-scatter", "p2p": "send / receive",
                "broadcast": "broadcast", "other": "other collective"}
_GROUP_OF = {kind: group for group, kinds in KIND_GROUPS.items() for kind in kinds}


def group_of(kind: str) -> str:
    """The kind group of a collective kind (``other`` for an unknown kind)."""
    return _GROUP_OF.get(str(kind), "other")


def groups_of(kinds: pd.Series) -> pd.Series:
    """``group_of`` of each kind in ``kinds``, looked up once per distinct
    kind (``op_classes.per_value``: a cluster's comm table repeats a few kinds
    over every rank)."""
    return per_value(kinds, lambda distinct: distinct.map(group_of))


def collective_rows(p: Profile) -> pd.DataFrame | None:
    """The comm rows that stand for collectives, one per collective (module
    doc: front ends left out). None without a comm table."""
    comm = p.table("comm")
    if comm is None or "front_end" not in comm.columns:
        return comm
    return p.memo("collectives.rows", lambda: comm[comm["front_end"].fillna(0) != 1])
