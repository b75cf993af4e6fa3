"""Worker processes forked from advisor: when forking is safe, and what
every worker does first.

advisor forks its helpers (the rank reader's pool, the helpers of a split
trace read, the metrics computed beside the main process) so they inherit
the imported libraries and the data already read instead of loading them
again.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
import threading

from advisor.runtime import lifeline


def can_fork() -> bool:
    """True where ``fork`` is safe: it exists, this is not macOS (whose
    system libraries may run threads of their own; CPython defaults to
    ``spawn`` there for that reason) and this process runs no other thread
    (forking a threaded process can deadlock the child)."""
    return (sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods()
            and threading.active_count() == 1)


def parent_in_charge() -> None:
    """What every worker does first: leave Ctrl-C and its own end to the
    parent.

    Workers ignore Ctrl-C (SIGINT reaches the whole process group): the
    parent cancels what is queued, and the workers end after the task they
    are on (terminating a worker while it sends its result would hang a
    pool), with no traceback from each of them. Also spares pyarrow's CSV
    reader a signal-handler swap per file (~1% of a rank). And a worker
    dies with its parent (``lifeline.die_with_parent``): a parent killed by
    ``kill -TERM`` or ``kill -9`` leaves no worker behind."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lifeline.die_with_parent()
