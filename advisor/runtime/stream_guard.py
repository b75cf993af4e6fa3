"""Standard output (and error) that outlive their reader.

``advisor report DIR | head`` closes the pipe after a few lines. Python
then raises BrokenPipeError at the next write, and click turns it into exit
code 1, which for advisor means "the gate found a regression": a passing
``advisor gate ... | head`` failed a CI job. Wrapped in ``GuardedStream``,
the first write to a closed pipe instead sends the rest of the output to
the null device, and the command finishes its work (report files, gate
verdict) with its own exit code.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager


class GuardedStream:
    """A text stream's proxy whose writes and flushes survive a closed pipe."""

    def __init__(self, stream):
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop_the_rest()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop_the_rest()

    def _drop_the_rest(self) -> None:
        """Point the descriptor at the null device, so what the stream still
        buffers (flushed again at exit) goes nowhere instead of raising."""
        self.reader_gone = True
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # not a descriptor's stream: nothing buffered below us
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextmanager
def guarded_output():
    """``sys.stdout`` and ``sys.stderr`` guarded while the block runs, their
    last flush too (a stream that is None -- pythonw -- is left alone). An
    error line into a gone reader (``advisor ... 2>&1 | head``) keeps its
    exit code 2 the same way."""
    originals = {"stdout": sys.stdout, "stderr": sys.stderr}
    guards = {name: GuardedStream(stream) for name, stream in originals.items() if stream is not None}
    for name, guard in guards.items():
        setattr(sys, name, guard)
    try:
        yield
    finally:
        for name, guard in guards.items():
            guard.flush()
            setattr(sys, name, originals[name])
