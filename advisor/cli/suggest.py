"""Close names for a name the user mistyped (``did you mean``)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: How close (difflib ratio, 0-1) a known name must be to be suggested, and
#: how many are named at most.
CUTOFF = 0.75
MAX_SUGGESTIONS = 3


def _key(name: str) -> str:
    """Case, ``_`` against ``-`` and spaces do not matter."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """Known names the user probably meant by ``name``: the same name up to
    case and ``_``/``-``, the same name without its namespace prefix
    (``free_ratio`` for ``step.free_ratio``), then difflib's closest."""
    known = list(dict.fromkeys(known))
    key = _key(name)
    by_key: dict[str, list[str]] = {}
    for k in known:
        by_key.setdefault(_key(k), []).append(k)
        by_key.setdefault(_key(k).rsplit(".", 1)[-1], []).append(k)
    exact = by_key.get(key) or by_key.get(key.rsplit(".", 1)[-1], [])
    if exact:
        return sorted(set(exact), key=known.index)[:MAX_SUGGESTIONS]
    close = difflib.get_close_matches(key, list(by_key), n=MAX_SUGGESTIONS, cutoff=CUTOFF)
    out = [k for c in close for k in by_key[c]]
    return list(dict.fromkeys(out))[:MAX_SUGGESTIONS]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` or ``""`` when nothing is close."""
    names = close_names(name, known)
    if not names:
        return ""
    quoted = [repr(n) for n in names]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"; did you mean {listed}?"
