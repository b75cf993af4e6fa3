"""Keys of the Ascend communication JSON files: what each key on the way
down to a record says (step, rank, category or operator) and link ends
(``"src-dst"``). Shared by the
generic walk (``ascend_comm``) and the typed per-rank decoder
(``ascend_comm_typed``) so both read keys the same way."""

from __future__ import annotations

import functools
import re

_STEP_KEY = re.compile(r"^step(\d*)$", re.IGNORECASE)
_LINK_KEY = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")
_RANK_KEY = re.compile(r"^\d+$")
_CATEGORY_KEYS = {"collective", "p2p"}
#: The instance part of an HCCL operator name: ``hcom_allReduce__606_0_1``
#: is an instance of type ``hcom_allReduce_`` (the suffix replaced by "_").
OP_INSTANCE_SUFFIX = r"__\d+(?:_\d+)*$"
_MATRIX_ENTRY = re.compile(r"^(.+)-(top\d+|middle|bottom\d*|total)$", re.IGNORECASE)


def split_op_key(key: str) -> tuple[str, str | None]:
    """``"hcom_allReduce__123_0@6297...`` -> (name, group); no ``@`` -> no group."""
    name, sep, group = key.partition("@")
    return name, (group if sep else None)


# Roles of the keys on the way down to a record (see ``_key_role``).
STEP, RANK, CATEGORY, OP = range(4)


@functools.lru_cache(maxsize=65536)
def key_role(key: str) -> tuple[int, object]:
    """What a key above a record says: (STEP, n or None for a bare "step"),
    (RANK, n) for a bare number, (CATEGORY, None) for collective/p2p, else
    (OP, key): the operator key ``name@group``."""
    if "@" in key:  # no other role's key holds one: the operator keys, cheaply
        return OP, key
    m = _STEP_KEY.match(key)
    if m:
        return STEP, (int(m.group(1)) if m.group(1) else None)
    if _RANK_KEY.match(key):
        return RANK, int(key)
    if key.lower() in _CATEGORY_KEYS:
        return CATEGORY, None
    return OP, key


def descend(key, step, rank, op) -> tuple:
    """(step, rank, op) below ``key``: the nearest key of each role wins."""
    role, value = key_role(key if type(key) is str else str(key))
    if role == STEP:
        return value, rank, op
    if role == RANK:
        return step, value, op
    if role == OP:
        return step, rank, value
    return step, rank, op


def is_summary(key) -> bool:
    """"Total Op Info" and the like: sums of the records beside them."""
    return (key if type(key) is str else str(key)).startswith("Total")


@functools.lru_cache(maxsize=65536)
def link_ends(key: str) -> tuple[int, int] | None:
    """``"3-8"`` -> (3, 8); any other key None."""
    m = _LINK_KEY.match(key)
    return (int(m.group(1)), int(m.group(2))) if m else None


@functools.lru_cache(maxsize=4096)
def matrix_entry(name: str) -> tuple[str, bool] | None:
    """What a ``communication_matrix.json`` operator key stands for.

    torch_npu and MindSpore do not write an entry per operator: per
    collective type, group and link they write ``{type}-total`` (the sums
    over every operator of that type) and ``{type}-top1``, ``-middle``,
    ``-bottom1`` .. ``-bottom3`` (single operators, ranked by bandwidth,
    repeated from the total). ``"allreduce-total"`` -> ("allreduce", True),
    ``"allreduce-top1"`` -> ("allreduce", False); an operator's own name
    (``hcom_allReduce__123_0``) -> None."""
    m = _MATRIX_ENTRY.match(name)
    return (m.group(1), m.group(2).lower() == "total") if m else None


def sample_key(name, group, step, rank) -> tuple[tuple, bool] | None:
    """For a matrix entry that is a ``{type}-total`` or one of its samples
    (``matrix_entry``): (the key a total shares with the samples it
    repeats, whether this entry is the total); None for any other entry."""
    entry = matrix_entry(name) if isinstance(name, str) else None
    return None if entry is None else ((rank, step, group, entry[0]), entry[1])


def repeated_links(names, groups, steps, ranks) -> list[bool] | None:
    """Which link rows repeat a transfer that a ``{type}-total`` entry of
    the same rank, step, group and collective type already sums: the
    ``-top1`` / ``-middle`` / ``-bottomN`` samples (``matrix_entry``).
    Summing them with the total counted one operator's transfer up to five
    times. None when nothing repeats. Arguments are equal-length sequences
    (None where a file has no such column)."""
    n = len(names)
    groups, steps, ranks = (groups or [None] * n), (steps or [None] * n), (ranks or [None] * n)
    keys = list(map(sample_key, names, groups, steps, ranks))
    totals = {k[0] for k in keys if k and k[1]}
    if not totals:
        return None
    repeated = [bool(k) and not k[1] and k[0] in totals for k in keys]
    return repeated if any(repeated) else None
