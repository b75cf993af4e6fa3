"""Writing a file so that a reader never sees half of it.

:func:`write_atomic` writes to a temporary file in the target's folder and
renames it over the target (``os.replace``, atomic on POSIX and Windows):
another process sees the old file, or none, or the whole new one. On any
failure the temporary file is removed and the error is raised.
:func:`write_text` adds what a command needs around it: the folder is
created, and a failure is an ``AdvisorError`` with a one-line message.
"""

from __future__ import annotations

import os
from pathlib import Path

from advisor.errors import AdvisorError


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8 with ``\\n`` line ends, or bytes) to
    ``path`` atomically; the folder must exist. The temporary file is
    ``.NAME.PID.tmp`` beside the target, created with a plain ``open`` so the
    file's mode follows the umask (``mkstemp`` would force 0600)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if isinstance(data, bytes):
            with open(tmp, "wb") as fh:
                fh.write(data)
        else:
            with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
