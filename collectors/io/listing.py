"""Folder listings, scanned once per read instead of one stat per question.

Reading one Ascend rank folder asks about two dozen "is there a file X?" and
"which files match Y?" questions about the same two or three folders. Inside
``cached()`` each folder is scanned once (``os.scandir``) and the questions
are answered from the scan; outside it, and for a folder that cannot be
listed, the functions ask the filesystem directly, as ``pathlib`` would.
Answers follow symlinks, like ``Path.is_file`` / ``Path.is_dir``, with one
difference: :func:`is_file` is True for anything there that is not a folder
(a FIFO, socket or device too), so that a collector reads it and the read
fails with a reason the report lists (``advisor.collectors.io.files`` opens
regular files only) instead of the file vanishing silently.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

# folder -> {name: (is_file, is_dir)}, or None when the folder cannot be listed
# (or is outside the scope); keyed by the folder as asked and as an absolute path
_Listing = dict[str, tuple[bool, bool]]
_listings: ContextVar[tuple[str, dict[str, _Listing | None]] | None] = ContextVar("listings", default=None)


@contextmanager
def cached(root: Path) -> Iterator[None]:
    """Answer questions about ``root`` and the folders below it from one scan
    per folder until the block ends (files created meanwhile are not seen:
    use it around reads, never around writes). Folders elsewhere, such as
    ``root``'s parent with its thousands of sibling ranks, are not scanned."""
    token = _listings.set((os.path.abspath(root), {}))
    try:
        yield
    finally:
        _listings.reset(token)


def _listing(folder: str) -> _Listing | None:
    scope = _listings.get()
    if scope is None:
        return None
    root, cache = scope
    asked = "?" + folder  # as asked (relative or not): saves an abspath per question
    if asked in cache:
        return cache[asked]
    folder = os.path.abspath(folder)
    if folder != root and not folder.startswith(root + os.sep):
        listing = None
    elif folder in cache:
        listing = cache[folder]
    else:
        try:
            with os.scandir(folder) as entries:
                listing = {e.name: (_entry_is_file(e), e.is_dir()) for e in entries}
        except OSError:
            listing = None
        cache[folder] = listing
    cache[asked] = listing
    return listing


def _entry_is_file(entry: os.DirEntry) -> bool:
    """There, and not a folder (see the module doc); a dangling symlink is not."""
    if entry.is_file():
        return True
    if entry.is_dir():
        return False
    try:
        entry.stat()  # a FIFO, socket or device (or a symlink to one)
    except OSError:
        return False
    return True


def _file_there(path: Path) -> bool:
    """``_entry_is_file`` asked of the filesystem directly."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _lookup(path: Path) -> tuple[bool, bool] | None:
    folder, name = os.path.split(os.fspath(path))
    listing = _listing(folder or ".")
    return None if listing is None else listing.get(name, (False, False))


def is_file(path: Path) -> bool:
    """``path.is_file()``, also True for a FIFO, socket or device (see the
    module doc); False instead of an error on unreadable folders."""
    return _ask(path, 0, _file_there)


def is_dir(path: Path) -> bool:
    """``path.is_dir()``; False instead of an error on unreadable folders."""
    return _ask(path, 1, Path.is_dir)


def _ask(path: Path, which: int, direct) -> bool:
    hit = _lookup(path)
    if hit is not None:
        return hit[which]
    try:
        return direct(Path(path))
    except OSError:
        return False


def glob(folder: Path, pattern: str) -> list[Path]:
    """``sorted(folder.glob(pattern))`` for a pattern without ``/``."""
    listing = _listing(os.fspath(folder))
    if listing is None:
        try:
            return sorted(Path(folder).glob(pattern))
        except OSError:
            return []
    return [Path(folder, n) for n in sorted(fnmatch.filter(listing, pattern))]


def files(folder: Path) -> frozenset[str]:
    """The names in ``folder`` that :func:`is_file` is True for (none when it
    cannot be listed): one listing answers every "is file X there?" about
    the folder as ``name in files(folder)``, without building a path per
    question."""
    listing = _listing(os.fspath(folder))
    if listing is not None:
        return frozenset(name for name, (is_a_file, _) in listing.items() if is_a_file)
    try:
        with os.scandir(folder) as entries:
            return frozenset(e.name for e in entries if _entry_is_file(e))
    except OSError:
        return frozenset()


def names(folder: Path) -> list[str]:
    """Names in ``folder`` (unsorted; none when it cannot be listed)."""
    listing = _listing(os.fspath(folder))
    if listing is not None:
        return list(listing)
    try:
        return os.listdir(folder)
    except OSError:
        return []


def real_paths(paths) -> list[str]:
    """``os.path.realpath`` of each path, each parent folder resolved once:
    a run's rank folders share a parent, and resolving it component by
    component for each of a thousand ranks costs more than reading some of
    them. The last component is resolved on its own where it is a link."""
    parents: dict[str, str] = {}
    out = []
    for path in paths:
        head, name = os.path.split(os.fspath(path))
        if name in ("", ".", ".."):
            out.append(os.path.realpath(path))
            continue
        real = parents.get(head)
        if real is None:
            real = parents[head] = os.path.realpath(head or ".")
        full = os.path.join(real, name)
        out.append(os.path.realpath(full) if os.path.islink(full) else full)
    return out


def best_per_id(folder: Path, anchor: Callable[[str], tuple[int, int] | None],
                skip: Callable[[int], bool] | None = None) -> list[Path]:
    """One file per id in ``folder``, by id: of the names ``anchor`` maps to
    (priority, id), a readable file before one that is not, then the lowest
    priority, then the first name. ``skip(id)``, asked once per id, leaves
    that id out.

    An id whose only files are not readable (a dangling symlink, a folder
    with a file's name) still yields one, so that reading it fails with a
    message naming the file instead of the id vanishing silently.
    """
    best: dict[int, tuple[bool, int, Path]] = {}
    skipped: dict[int, bool] = {}
    try:
        entries = sorted(Path(folder).iterdir())
    except OSError:
        return []
    for path in entries:
        hit = anchor(path.name)
        if hit is None:
            continue
        prio, ident = hit
        if skip is not None:
            if ident not in skipped:
                skipped[ident] = skip(ident)
            if skipped[ident]:
                continue
        key = (not path.is_file(), prio, path)
        if ident not in best or key[:2] < best[ident][:2]:
            best[ident] = key
    return [best[i][2] for i in sorted(best)]
