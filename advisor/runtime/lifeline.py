"""Processes that end with the one that started them.

* :func:`die_with_parent`, called first thing in a worker process (the rank
  reader's pool, the helpers of a split trace read): the worker is killed
  when its parent dies, however it dies (``kill -9`` included) -- on Linux
  by the kernel (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), elsewhere by a
  watchdog thread that checks every ``WATCHDOG_S`` seconds whether the
  parent is still there. Without it, workers blocked on their task queue
  outlive a killed ``advisor report -j N`` forever.
* :func:`subreaper`: while a job runs (``advisor run``), processes of the job
  whose parent exits are re-parented to advisor instead of to init
  (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux), so a daemon the training
  script leaves behind (double fork, ``setsid()``) is still found in
  advisor's process tree and stopped with the job.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from contextlib import contextmanager

from advisor.runtime.libc import libc_function

#: Seconds between two checks of the watchdog thread (where prctl is missing).
WATCHDOG_S = 1.0
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False where there is no prctl or it fails."""
    prctl = libc_function("prctl", [ctypes.c_int] + [ctypes.c_ulong] * 4)
    return prctl is not None and prctl(option, value, 0, 0, 0) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def die_with_parent() -> None:
    """End this process when the process that started it ends (see the
    module doc). The parent is ``multiprocessing``'s parent process when
    this is one of its workers, else the current parent."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    pid = parent.pid if parent is not None and parent.pid else os.getppid()
    if _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL):
        # The signal follows the process that forked this one (a fork server
        # for some start methods, which ends with advisor); a parent that
        # died before the call sends nothing, so look once.
        if os.getppid() != pid and not _alive(pid):
            os._exit(1)
        return
    first = os.getppid()

    def watch() -> None:
        while os.getppid() == first and _alive(pid):
            time.sleep(WATCHDOG_S)
        os._exit(1)

    threading.Thread(target=watch, name="advisor-lifeline", daemon=True).start()


@contextmanager
def subreaper():
    """Within the block, orphaned descendants are re-parented to this
    process (see the module doc). Yields whether that holds here."""
    on = _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    try:
        yield on
    finally:
        if on:
            _prctl(_PR_SET_CHILD_SUBREAPER, 0)
