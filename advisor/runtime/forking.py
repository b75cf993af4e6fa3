"""Worker processes forked from advisor: when forking is safe
(``can_fork``), what every worker does first (``parent_in_charge``),
Ctrl-C held while they start (``sigint_held``), and one function run in a
forked process beside this one (``beside``).

advisor forks its helpers (the rank reader's pool, the helpers of a split
trace read, the metrics computed beside the main process) so they inherit
the imported libraries and the data already read instead of loading them
again.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


@contextmanager
def sigint_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back while the block runs; a Ctrl-C pressed
    meanwhile is recorded and handled as before once the block ends.
    Around a fork (a process pool's first ``submit`` starts the workers,
    then the pool's manager thread: a Ctrl-C between the two leaves a pool
    that cannot be shut down; a forked process gets the handler in place
    until ``parent_in_charge`` runs, so one landing there records instead of
    raising) and around imports (one cut half-way leaves a half-built module
    behind: pydantic reported it as a schema error). Outside the main thread
    (where Python runs signal handlers) nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    if previous is None:  # a handler installed outside Python: restore the default
        previous = signal.SIG_DFL
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed and previous is not signal.SIG_IGN:
        if callable(previous):
            previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt
        else:
            os.kill(os.getpid(), signal.SIGINT)  # SIG_DFL: end as the signal ends a process


def beside(func: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start ``func(*args)`` in a forked process while this one goes on;
    returns the function that waits for its result (``func``'s exception is
    raised again there). Where forking is not safe, or in a daemon process
    (which may not start one), or when the process dies before it answers
    (killed for memory?), ``func`` runs in this process instead. The result
    comes back pickled: meant for results far smaller than ``args``."""
    if not can_fork() or multiprocessing.current_process().daemon:
        return lambda: func(*args)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_run_and_send, args=(func, args, send), daemon=True)
    with sigint_held():
        child.start()
    send.close()

    def result() -> Any:
        try:
            status, value = receive.recv()
        except (EOFError, OSError):
            status, value = "ok", func(*args)
        finally:
            receive.close()
            child.join()
        if status == "error":
            raise value
        return value

    return result


def _run_and_send(func: Callable[..., Any], args: tuple, send) -> None:
    """In the forked process: ``func(*args)`` or its exception, sent to the
    parent; nothing sent when it cannot be pickled (the parent runs it)."""
    parent_in_charge()
    try:
        message = ("ok", func(*args))
    except Exception as exc:  # noqa: BLE001 -- raised again in the parent
        message = ("error", exc)
    try:
        send.send(message)
    except Exception:  # noqa: BLE001 -- unpicklable: the parent runs it
        pass
    send.close()
