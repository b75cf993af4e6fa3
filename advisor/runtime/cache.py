"""advisor's folder in the user's cache: things that take long to build and
are quick to load, so that a short ``advisor report`` does not rebuild them
in every process -- the CEL parser's tables (:mod:`advisor.engine.cel`) and the
compiled report template (:mod:`advisor.reports.html`).

The folder is ``$XDG_CACHE_HOME/advisor``, else ``~/.cache/advisor``. Each
entry's name carries a hash of everything that made it (library versions,
sources), so a stale entry is never read, just left behind; deleting the
folder is always safe. Best effort: when the folder cannot be written, or an
entry cannot be read, advisor builds the thing as if there were no cache.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from advisor.runtime.files import write_atomic


def cache_dir() -> Path:
    """The cache folder (see the module doc); it may not exist yet."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "advisor"


def key(*parts: str | bytes) -> str:
    """A short hash of ``parts``, for an entry's name."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def read(name: str) -> bytes | None:
    """The entry ``name``, or None when there is none (or it is unreadable)."""
    try:
        return (cache_dir() / name).read_bytes()
    except (OSError, ValueError):
        return None


def write(name: str, data: bytes) -> None:
    """Store ``data`` as entry ``name``, atomically (another process sees the
    old entry, or none, or the whole new one); silently nothing on failure."""
    path = cache_dir() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    except (OSError, ValueError):
        pass
