"""advisor's folder in the user's cache: things that take long to build and
are quick to load, so that a short ``advisor report`` does not rebuild them
in every process -- the CEL parser's tables (:mod:`advisor.engine.cel`) and the
compiled report template (:mod:`advisor.reports.html`).

The folder is ``$XDG_CACHE_HOME/advisor``, else ``~/.cache/advisor``. Each
entry's name carries a hash of everything that made it (library versions,
sources), so a stale entry is never read, just left behind; deleting the
folder is always safe. Best effort: when the folder cannot be written, or an
entry cannot be read, advisor builds the thing as if there were no cache.

Both kinds of entry are code when loaded (a pickle, Python bytecode), so an
entry is used only when advisor can tell it wrote it itself:

* every entry is signed: HMAC-SHA256 over its name and content, keyed with a
  random per-user key (``KEY_FILE``). The key is kept *outside* the cache
  folder, in ``$XDG_STATE_HOME/advisor`` (else ``~/.local/state/advisor``):
  a cache folder copied between machines or restored between CI jobs
  arrives without it, and its entries -- possibly written by a job that ran
  untrusted code -- fail the check and are rebuilt;
* the key file must be a regular file of the current user that nobody else
  may read or write (mode 0600); the cache folder, the key's folder and
  each entry must be the current user's and writable by nobody else
  (not a symlink, no group/other write bit). A cache that fails any of
  this is ignored: neither read nor written.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from advisor.runtime.files import write_atomic

#: The per-user signing key's file name (in ``key_dir()``), and its length.
KEY_FILE = "cache.key"
KEY_BYTES = 32
#: What every entry starts with, before its 32-byte signature.
MAGIC = b"advisor-cache-1\n"
#: Bytes of the signature (HMAC-SHA256).
_SIG = 32
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def cache_dir() -> Path:
    """The cache folder (see the module doc); it may not exist yet."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "advisor"


def key_dir() -> Path:
    """The folder of the signing key (see the module doc)."""
    root = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(root) / "advisor"


def key(*parts: str | bytes) -> str:
    """A short hash of ``parts``, for an entry's name."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _mine(st: os.stat_result, private: bool = False) -> bool:
    """Owned by the current user, and writable by nobody else (``private``:
    nor readable)."""
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return not st.st_mode & (0o077 if private else 0o022)


def _safe_folder(folder: Path, create: bool) -> bool:
    """``folder`` is a real folder of the current user that nobody else can
    write (created, mode 0700, when ``create``)."""
    if create:
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and _mine(st)


def _read_own(path: Path, private: bool = False, limit: int = 64 << 20) -> bytes | None:
    """The content of ``path`` when it is a regular file of the current user
    that passes ``_mine`` (never through a symlink), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _mine(st, private) or st.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _signing_key(create: bool) -> bytes | None:
    """The per-user key; made on first use when ``create``. None when there is
    none that can be trusted (see the module doc)."""
    folder = key_dir()
    if not _safe_folder(folder, create):
        return None
    path = folder / KEY_FILE
    data = _read_own(path, private=True)
    if data is None and create and not os.path.lexists(path):
        tmp = folder / f".{KEY_FILE}.{secrets.token_hex(6)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES))
            os.link(tmp, path)  # published whole, or another process's key is kept
        except OSError:
            pass
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        data = _read_own(path, private=True)
    return data if data is not None and len(data) == KEY_BYTES else None


def _signature(secret: bytes, name: str, data: bytes) -> bytes:
    return hmac.new(secret, name.encode() + b"\0" + data, hashlib.sha256).digest()


def read(name: str) -> bytes | None:
    """The entry ``name``, or None when there is none, or it cannot be
    trusted (see the module doc), or it is unreadable."""
    folder = cache_dir()
    if not _safe_folder(folder, create=False):
        return None
    blob = _read_own(folder / name)
    if blob is None or not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + _SIG:
        return None
    secret = _signing_key(create=False)
    if secret is None:
        return None
    sig, data = blob[len(MAGIC):len(MAGIC) + _SIG], blob[len(MAGIC) + _SIG:]
    return data if hmac.compare_digest(sig, _signature(secret, name, data)) else None


def write(name: str, data: bytes) -> None:
    """Store ``data`` as entry ``name``, signed and atomically (another
    process sees the old entry, or none, or the whole new one); silently
    nothing on failure or where the cache cannot be trusted."""
    folder = cache_dir()
    secret = _signing_key(create=True)
    if secret is None or not _safe_folder(folder, create=True):
        return
    try:
        write_atomic(folder / name, MAGIC + _signature(secret, name, data) + data, mode=0o600)
    except (OSError, ValueError):
        pass
