"""Matrix links in global ranks.

``communication_matrix.json`` (and ``CommAnalyzerMatrix`` in analysis.db)
names a link ``src-dst`` by the two ends' ranks *within the link's
communication group* (the ``@group`` of its ``op@group`` key): in a job
with tensor-, pipeline- and data-parallel groups, link ``0-1`` of one
8-rank group and ``0-1`` of another are different cards. The rank's
``profiler_metadata.json`` lists its groups (``parallel_group_info``:
group name -> ``global_ranks``); a group's local rank i is the i-th of its
sorted global ranks, and the id in a matrix key is msprof's ``double_hash``
of the group name -- the mapping msprof-analyze's cluster analysis uses.

The rank's own entry (``i-i``, transport LOCAL) checks the mapping: i must
map to the reading rank. A group the metadata does not list, or whose own
entry is already the reading rank's global id, is kept as written when its
ranks look global (no own entry, or ``rank-rank``: one group over the whole
job, as in plain data parallelism) and left out otherwise, with a note:
naming its links by local ranks would blame the wrong cards.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from advisor.collectors.parallel.batch_tables import PendingTable, select_rows


@lru_cache(maxsize=4096)
def double_hash(name: str) -> str:
    """msprof's id of a communication group name (two 32-bit rolling hashes);
    remembered, as every rank of a group names the same groups (~10 us a
    rank at 1024 ranks)."""
    h0 = h1 = 0
    for ch in name:
        h0 = (h0 * 29 + ord(ch)) & 0xFFFFFFFF
        h1 = (h1 * 131 + ord(ch)) & 0xFFFFFFFF
    return str((h0 << 32) | h1)


def global_ranks(info) -> list[int] | None:
    """A ``parallel_group_info`` entry's ``global_ranks``, sorted; None unless
    a non-empty list of ints."""
    ranks = info.get("global_ranks") if isinstance(info, dict) else None
    if isinstance(ranks, list) and ranks and set(map(type, ranks)) == {int}:  # map: a group holds thousands
        return sorted(ranks)
    return None


def group_ranks(parallel_group_info) -> dict[str, list[int]]:
    """``parallel_group_info`` -> {group id (its name and its hash): sorted global ranks}."""
    out: dict[str, list[int]] = {}
    if not isinstance(parallel_group_info, dict):
        return out
    for name, info in parallel_group_info.items():
        ranks = global_ranks(info)
        if ranks is not None:
            out[str(name)] = out[double_hash(str(name))] = ranks
    return out


#: What to do with a group's rows: its global ranks, keep them as written, or drop them.
_KEEP, _DROP = "keep", "drop"


def to_global(links: PendingTable | None, rank: int,
              groups: dict[str, list[int]]) -> tuple[PendingTable | None, int]:
    """``links`` (one rank's matrix rows, left to build) with ``src`` and
    ``dst`` in global ranks; rows of groups that cannot be mapped, and rows
    whose local rank is outside their group, left out. Returns the table
    (None when no row is left) and how many groups lost rows."""
    if links is None:
        return None, 0
    cols = links.columns
    src, dst = _ints(cols["src"]), _ints(cols["dst"])
    group = cols.get("group") or [None] * links.n
    plan = _plan(src, dst, group, rank, groups)
    if all(p == _KEEP for p in plan.values()):
        return links, 0
    keep: list[bool] = []  # per row
    new_src: list[int] = []
    new_dst: list[int] = []
    outside: set = set()  # groups with a local rank beyond their size (not local ranks after all?)
    for s, d, g in zip(src, dst, group):  # a rank's few hundred links: plain Python beats array set-up
        how = plan[g]
        if how == _KEEP:
            kept = True
        elif how == _DROP:
            kept = False
        else:
            kept = 0 <= s < len(how) and 0 <= d < len(how)
            if kept:
                s, d = how[s], how[d]
            else:
                outside.add(g)
        keep.append(kept)
        if kept:
            new_src.append(s)
            new_dst.append(d)
    dropped = sum(1 for p in plan.values() if p == _DROP) + len(outside)
    if not new_src:
        return None, dropped
    columns = {**select_rows(cols, np.array(keep)), "src": new_src, "dst": new_dst}  # same keys, same order
    return replace(links, columns=columns, n=len(new_src)), dropped


def _ints(values) -> list[int]:
    return values.tolist() if isinstance(values, np.ndarray) else [int(v) for v in values]


def _plan(src: list[int], dst: list[int], group: list, rank: int,
          groups: dict[str, list[int]]) -> dict:
    """For each group of the rows: its global ranks, ``_KEEP`` or ``_DROP``."""
    own: dict = {}
    for s, d, g in zip(src, dst, group):
        if s == d:
            own.setdefault(g, s)
    plan: dict = {}
    for g in set(group):
        ranks = groups.get(str(g)) if g is not None else None
        mine = own.get(g)
        if ranks is not None and (mine is None or (0 <= mine < len(ranks) and ranks[mine] == rank)):
            plan[g] = ranks  # the metadata's order agrees with the rank's own entry
        else:  # no metadata, or the entries are already global: keep those that look global
            plan[g] = _KEEP if (rank if mine is None else mine) == rank else _DROP
    return plan
