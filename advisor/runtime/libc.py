"""A function of the C library, for the few Linux calls Python does not
wrap (``prctl``, ``renameat2``, ``malloc_trim``)."""

from __future__ import annotations

import ctypes
import sys


def libc_function(name: str, argtypes: list):
    """The C library's ``name`` with ``argtypes`` (errno kept for
    ``ctypes.get_errno``); None off Linux or where the library lacks it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        func = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    func.argtypes = argtypes
    return func


def release_free_memory() -> None:
    """Hand the C heap's free memory back to the OS (glibc ``malloc_trim``;
    a no-op elsewhere): the many batch-sized arrays freed while reading
    leave holes that glibc would otherwise keep for the process's lifetime."""
    trim = libc_function("malloc_trim", [ctypes.c_size_t])
    if trim is not None:
        trim(0)
