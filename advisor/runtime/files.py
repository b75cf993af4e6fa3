"""Writing files so that a reader never sees half of one, or a mix of two runs.

:func:`write_atomic` writes one file: to a new temporary file in the
target's folder, then renamed over the target (``os.replace``, atomic on
POSIX and Windows): another process sees the old file, or none, or the whole
new one. The temporary file has an unpredictable name and is created
exclusively (``O_CREAT | O_EXCL``, which never follows a symlink), so a
symlink planted in a shared folder under a guessed name cannot redirect the
write; the rename replaces a symlink at the target's name instead of writing
through it. Modes follow the umask, as a plain ``open`` would give them. On
any failure the temporary file is removed and the error is raised.

:func:`write_set` writes a set of files that belong together (a report's
HTML, Markdown and JSON) as one: into a fresh folder beside the target
folder, which is then swapped with it in one rename (``renameat2`` with
``RENAME_EXCHANGE`` on Linux; elsewhere two renames, between which the
folder is briefly absent, never mixed). A crash before the swap leaves the
previous set whole. What else the folder held is moved into the new one
after the swap, nothing is deleted but the previous versions of the set's
files. The swap needs a folder advisor recognises as its own: one that
holds only the set's files, its marker file (``MARKER``, written by ``advisor
run`` into its output folder) and the entries the marker lists. Any other folder (``-o .``) gets each file written atomically in
place instead. A target folder that is a symlink owned by another user is
refused (in a shared ``/tmp``, someone else's symlink is not a place to write).

:func:`write_text` adds what a command needs around a single file: the
folder is created, and a failure is an ``AdvisorError`` with a one-line
message.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import stat
from pathlib import Path

from advisor.errors import AdvisorError, ConfigError
from advisor.runtime.libc import libc_function

#: The marker file advisor writes into a folder whose contents it manages:
#: JSON with ``entries``, the names in that folder that advisor wrote.
MARKER = ".advisor-output.json"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def _create(path: Path, data: str | bytes, mode: int = 0o666) -> None:
    """Write ``data`` to the new file ``path``, which must not exist (not even
    as a symlink); ``mode`` less the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY, mode)
    if isinstance(data, bytes):
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    else:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(data)


def _fresh_name(folder: Path, name: str, suffix: str) -> Path:
    """An unpredictable name beside ``name`` in ``folder``."""
    return folder / f".{name}.{secrets.token_hex(6)}{suffix}"


def write_atomic(path: str | Path, data: str | bytes, mode: int = 0o666) -> None:
    """Write ``data`` (text as UTF-8 with ``\\n`` line ends, or bytes) to
    ``path`` atomically; the folder must exist (see the module doc). The
    file's mode is ``mode`` less the umask."""
    path = Path(path)
    tmp = _temporary(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _temporary(path: Path, data: str | bytes, mode: int = 0o666) -> Path:
    """A new file holding ``data`` beside ``path``, under a fresh name."""
    for _ in range(100):
        tmp = _fresh_name(path.parent, path.name, ".tmp")
        try:
            _create(tmp, data, mode)
        except FileExistsError:
            continue
        except BaseException:
            _remove(tmp)
            raise
        return tmp
    raise FileExistsError(f"{path.parent}: no free temporary name")  # pragma: no cover - 48 random bits


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically, creating its folder; returns
    the path. AdvisorError naming the path when either cannot be done."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AdvisorError(f"{path.parent}: cannot create folder ({exc.strerror or exc})") from None
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise AdvisorError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return path


# ------------------------------------------------------------ folders and sets


def safe_folder(folder: str | Path) -> Path:
    """``folder``, with a symlink in its place resolved when the current user
    owns it; ConfigError when someone else does (see the module doc)."""
    folder = Path(folder)
    try:
        st = os.lstat(folder)
    except OSError:
        return folder
    if stat.S_ISLNK(st.st_mode):
        if hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
            raise ConfigError(f"{folder}: the output folder is a symlink owned by another user; "
                              "choose another -o")
        return Path(os.path.realpath(folder))
    return folder


def read_marker(folder: Path) -> dict | None:
    """The marker of ``folder`` (``MARKER``), or None when there is none or
    it is not a regular file of the current user holding a JSON object."""
    try:
        fd = os.open(folder / MARKER, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = json.loads(fh.read(1 << 20) or b"null")
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) and isinstance(data.get("entries", []), list) else None


def marker_text(entries, **extra) -> str:
    """The marker's text: ``entries`` (names advisor wrote), plus ``extra``."""
    return json.dumps({"written_by": "advisor", "entries": sorted(set(entries)), **extra}, indent=1) + "\n"


def write_marker(folder: Path, entries, **extra) -> None:
    """Write ``folder``'s marker atomically (see ``read_marker``)."""
    write_atomic(Path(folder) / MARKER, marker_text(entries, **extra))


def write_set(folder: str | Path, files: dict[str, str | bytes]) -> dict[str, Path]:
    """Write ``files`` (name -> text or bytes) into ``folder`` as one set
    (see the module doc); returns name -> path. AdvisorError with a one-line
    message when the folder or a file cannot be written."""
    target = safe_folder(folder)
    paths = {name: Path(folder) / name for name in files}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AdvisorError(f"{folder}: cannot create the folder ({exc.strerror or exc})") from None
    try:
        entries = os.listdir(target)
    except FileNotFoundError:
        entries = None
    except NotADirectoryError:
        raise AdvisorError(f"{folder}: cannot write the report set there: not a folder") from None
    except OSError as exc:
        raise AdvisorError(f"{folder}: cannot list the folder ({exc.strerror or exc})") from None
    marker = read_marker(target) if entries else None
    own = set(files) | {MARKER} | set(map(str, (marker or {}).get("entries", [])))
    if entries and (not set(entries) <= own or any((target / name).is_dir() for name in files)):
        _write_each(target, files, paths)
        return paths
    try:
        fresh = _fresh_folder(target)
    except OSError:  # the parent is not writable: in place, file by file
        _write_each(target, files, paths)
        return paths
    try:
        for name, data in files.items():
            _create(fresh / name, data)
        if entries is not None:
            with contextlib.suppress(OSError):
                os.chmod(fresh, stat.S_IMODE(os.stat(target).st_mode))
        _swap_in(fresh, target, entries is None, set(files))
    except OSError as exc:
        _discard(fresh, set(files))
        raise AdvisorError(f"{folder}: cannot write the report set ({exc.strerror or exc})") from None
    except BaseException:
        _discard(fresh, set(files))
        raise
    return paths


def _fresh_folder(target: Path) -> Path:
    for _ in range(100):
        fresh = _fresh_name(target.parent, target.name, ".new")
        try:
            os.mkdir(fresh, 0o777)
        except FileExistsError:
            continue
        return fresh
    raise FileExistsError(f"{target.parent}: no free temporary name")  # pragma: no cover


def _write_each(target: Path, files: dict[str, str | bytes], paths: dict[str, Path]) -> None:
    """Each file atomically in place, in a folder that is not advisor's own:
    every file is written (to its temporary name) before the first is
    renamed, so a failure to write leaves the previous set whole."""
    done: dict[str, Path] = {}
    name = None
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            if (target / name).is_dir():
                raise IsADirectoryError(21, "a folder is in the way", str(target / name))
            done[name] = _temporary(target / name, data)
        for name in files:
            os.replace(done.pop(name), target / name)
    except OSError as exc:
        where = paths[name] if name is not None else target
        raise AdvisorError(f"{where}: cannot write ({exc.strerror or exc})") from None
    finally:
        for tmp in done.values():
            _remove(tmp)


def _swap_in(fresh: Path, target: Path, new: bool, names: set[str]) -> None:
    """Put the set in ``fresh`` at ``target``; the old folder's other entries
    follow it, and the old versions of the set's files are removed."""
    if new:
        try:
            os.rename(fresh, target)
            return
        except OSError:
            if not target.is_dir():
                raise
    old = fresh
    if not _exchange(fresh, target):
        old = _fresh_name(target.parent, target.name, ".old")
        os.rename(target, old)
        os.rename(fresh, target)
    for name in os.listdir(old):
        if name not in names:
            with contextlib.suppress(OSError):
                os.rename(old / name, target / name)
    _discard(old, names)


def _discard(folder: Path, names: set[str]) -> None:
    """Remove the set's files from ``folder`` (a folder this module made),
    then the folder when nothing else is in it."""
    for name in names:
        _remove(folder / name)
    with contextlib.suppress(OSError):
        os.rmdir(folder)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux ``renameat2``); False where the
    system cannot (the caller then renames twice)."""
    renameat2 = libc_function("renameat2", [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                            ctypes.c_uint])
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not on this filesystem or kernel
        return False
    raise OSError(err, os.strerror(err), str(b))
