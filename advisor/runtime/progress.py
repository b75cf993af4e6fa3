"""Progress on a terminal, drawn without a thread.

rich's live displays redraw from a thread of their own. A process that runs
a second thread cannot fork safely, and advisor forks its readers (the rank
pool, the helpers of a split trace): with a spinner running, the pool had to
start its workers from a fork server (each re-importing pandas and pyarrow)
and a large trace was read on one core -- on a terminal only, so every
interactive run paid it and no benchmark saw it. These displays redraw when
the work reports progress, at most every ``REDRAW_S`` seconds, and never
start a thread (``forking.can_fork`` stays true).

They show only when stderr is a terminal and this is not a worker process.
All share one stderr console, so a bar opened under ``status`` is drawn
below its line; a bar opened under another bar shows nothing (one bar at a
time: the per-rank bar, not a trace bar inside it).
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Least time between two redraws of a display (seconds).
REDRAW_S = 0.1

_console = None
_bars_open = 0


def on_terminal() -> bool:
    """stderr is a terminal and this is the main process (not a pool
    worker or a split-read helper)."""
    stderr = sys.stderr
    return multiprocessing.parent_process() is None and stderr is not None and stderr.isatty()


def _stderr_console():
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(stderr=True, highlight=False)
    return _console


@contextmanager
def status(text: str) -> Iterator[None]:
    """A transient line ``text`` on the terminal while the block runs."""
    if not on_terminal():
        yield
        return
    from rich.live import Live
    from rich.text import Text

    with Live(Text(text), console=_stderr_console(), auto_refresh=False, transient=True,
              redirect_stdout=False, redirect_stderr=False):  # drawn once on entry
        yield


@contextmanager
def bar(label: str, total: float, *, in_bytes: bool = False) -> Iterator[Callable[[float], None]]:
    """A transient bar ``label`` on the terminal while the block runs;
    yields ``show(done)``, ``done`` out of ``total`` (units, or bytes with
    ``in_bytes``). A no-op off a terminal or under another bar."""
    global _bars_open
    if not on_terminal() or _bars_open:
        yield lambda done: None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = ((DownloadColumn(), TimeRemainingColumn()) if in_bytes
               else (MofNCompleteColumn(), TimeElapsedColumn()))
    progress = Progress(TextColumn(label), BarColumn(), *columns, console=_stderr_console(),
                        auto_refresh=False, transient=True, redirect_stdout=False, redirect_stderr=False)
    task = progress.add_task(label, total=total)
    last = 0.0

    def show(done: float) -> None:
        nonlocal last
        progress.update(task, completed=done)
        now = time.monotonic()
        if now - last >= REDRAW_S or done >= total:
            last = now
            progress.refresh()

    _bars_open += 1
    try:
        with progress:
            yield show
    finally:
        _bars_open -= 1
