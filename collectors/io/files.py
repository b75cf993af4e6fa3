"""Reading input files: every failure becomes an InputError naming the file.

Only regular files are read. A FIFO, socket or device named like a profiler
file (``mkfifo rank0.pt.trace.json``) would block a plain ``open`` forever
(a FIFO waits for a writer) or never end (``/dev/zero``); :func:`open_regular`
opens without blocking (``O_NONBLOCK``), checks the opened file itself
(``fstat``, so the check and the read are about the same file) and refuses
anything else with a one-line InputError. :func:`check_regular` is the same
check for a path handed to a library that opens it itself (SQLite, pyarrow).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson

from advisor.errors import InputError

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def _kind(mode: int) -> str:
    """What a non-regular file is, for the error message."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a file"


def not_regular(path: Path, mode: int) -> InputError:
    """The error for ``path`` whose ``st_mode`` is ``mode``, not a regular file."""
    return InputError(path, f"not a regular file ({_kind(mode)}); not read")


def _oserror(path: Path, exc: OSError, what: str = "cannot read file") -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(path, "file not found")
    return InputError(path, f"{what} ({exc.strerror or exc})")


def _open_fd(path: str | Path) -> int:
    """A read-only descriptor of the regular file ``path`` (see ``open_regular``)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC | _BINARY)
    except OSError as exc:
        check_regular(path)  # a socket cannot be opened at all: say what it is
        raise _oserror(Path(path), exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(Path(path), st.st_mode)
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | Path, mode: str = "rb", **kwargs):
    """``open(path, mode)`` for reading a regular file; InputError naming the
    file when it is missing, unreadable, or a FIFO, socket, device or folder
    (never blocks on one). ``mode`` is ``"rb"`` or a text mode ``"r"``
    (``kwargs`` go to ``open``: encoding, newline)."""
    fd = _open_fd(path)
    try:
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def check_regular(path: str | Path, missing: str = "file not found") -> None:
    """InputError unless ``path`` is (a symlink to) a regular file;
    ``missing`` is the problem reported when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(path, missing) from None
    except OSError as exc:
        raise _oserror(Path(path), exc) from None
    if not stat.S_ISREG(st.st_mode):
        raise not_regular(Path(path), st.st_mode)


#: Bytes asked of each read after the first (which asks for the whole file).
_READ_MORE = 1 << 16


def read_bytes(path: Path, limit: int | None = None) -> bytes | None:
    """The file's bytes; missing, unreadable or not a regular file ->
    InputError. ``limit``: None instead when the file holds more bytes.
    Read with plain system calls: a thousand ranks' small files spend more
    in building a buffered file object than in reading."""
    fd = _open_fd(path)
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            return None
        parts = []
        ask = size + 1  # one read to the end, one more to see it
        while chunk := os.read(fd, ask):
            parts.append(chunk)
            ask = _READ_MORE
        return parts[0] if len(parts) == 1 else b"".join(parts)
    except OSError as exc:
        raise _oserror(Path(path), exc) from None
    finally:
        os.close(fd)


def load_json(path: Path):
    """Parse a JSON file with orjson; empty, truncated or invalid -> InputError."""
    return parse_json(path, read_bytes(path))


def parse_json(path: Path, data: bytes):
    """``load_json`` of bytes already read from ``path``."""
    if not data.strip():
        raise InputError(path, "empty file")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON (truncated?): {exc}") from None
