"""Read one large Kineto trace on several processes.

Decoding a trace is CPU-bound and, for one big file, ran on one core while
the others idled. For a plain (not gzipped) trace of at least
``SPLIT_BYTES``, :func:`load_parts` cuts the ``traceEvents`` array into
``parts`` byte ranges at event boundaries, streams the first range in this
process and the others in forked helpers (each with its own
``kineto_decode._Builder``), then appends the helpers' batches to this
process's builder in file order (``_Builder.absorb``), which numbers their
values as one builder reading the whole file would have. The tables are
those of a one-process read: batch boundaries never change them (a batch is
only a unit of decoding), and the tests compare both reads.

A cut is placed at the first ``}, {`` after the range's nominal start. The
look-alike inside a string cannot be told apart without scanning from the
top, but a range that starts inside a string does not decode; any failure
in any part (or no ``fork``, or threads in this process) returns None and
the caller reads the file in one process, which reports real errors.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import msgspec

from advisor.collectors.kineto import stream

#: Smallest trace read in parts: below it the helper's start-up and the
#: hand-over of its batches (~20 ms) cost about what the split saves.
SPLIT_BYTES = 24 << 20
#: Bytes searched after a nominal cut for the first event boundary.
_WINDOW = 1 << 20
#: This process's share of the file relative to a helper's: it also merges
#: the helpers' batches.
OWN_SHARE = 0.8


def split_points(path: Path, parts: int) -> list[tuple[int, int | None]] | None:
    """Byte ranges ``(start, end)`` of the events of ``path`` for ``parts``
    processes (the last one's end None: to the array's end); None when the
    file is too small, gzipped, not streamable, or no boundary is found."""
    if parts < 2 or path.name.endswith(".gz"):
        return None
    try:
        size = path.stat().st_size
        if size < SPLIT_BYTES:
            return None
        with open(path, "rb") as fh:
            first = stream.events_start(fh)[1]
            cuts = []
            unit = (size - first) / (parts - 1 + OWN_SHARE)
            for k in range(1, parts):
                at = first + int(unit * (k - 1 + OWN_SHARE))
                fh.seek(at)
                found = stream.boundary_after(fh.read(_WINDOW))
                if found is None:
                    return None
                cuts.append((at + found[0], at + found[1]))
    except (OSError, stream.NotStreamable):
        return None
    if any(b[0] <= a[1] for a, b in zip(cuts, cuts[1:])):
        return None  # boundaries too close together: not worth splitting
    starts = [first] + [begin for _, begin in cuts]
    ends = [end for end, _ in cuts] + [None]
    return list(zip(starts, ends))


def usable_helpers(jobs: int) -> int:
    """Helper processes for a split read with ``jobs`` in all: none in a pool
    worker (its siblings use the other cores), without ``fork``, or when
    this process runs other threads (forking them can deadlock)."""
    from advisor.runtime.forking import can_fork
    from advisor.runtime.cpus import usable_cpus

    if jobs < 2 or multiprocessing.parent_process() is not None or not can_fork():
        return 0
    return min(jobs, usable_cpus()) - 1


def load_parts(path: Path, helpers: int, reduce: bool):
    """``(builder, rest document)`` of ``path`` read in ``helpers + 1``
    parts, or None (read it in one process). On Ctrl-C (or any exception here) the helpers are
    terminated at once: each is a plain forked process with a pipe, which
    nothing else waits on."""
    from advisor.collectors.kineto import decode as dec

    ranges = split_points(path, helpers + 1)
    if ranges is None:
        return None
    context = multiprocessing.get_context("fork")
    running = []
    done = False
    try:
        for start, end in ranges[1:]:
            receive, send = context.Pipe(duplex=False)
            proc = context.Process(target=_part_to_pipe, args=(send, path, start, end, reduce), daemon=True)
            proc.start()
            send.close()
            running.append((proc, receive))
        builder = dec._Builder(reduce=reduce)
        rest = stream.Rest()
        start, end = ranges[0]
        try:
            with open(path, "rb") as fh, dec._gc_paused(), dec._progress(path) as advance:
                rest.prefix = fh.read(start - 1)  # the document up to the array's "["
                # the parts advance together: this one's share stands for the whole
                builder.feed(stream.iter_range(fh, start, end, rest, dec._decode_batch),
                             lambda: advance((fh.tell() - start) * len(ranges)))
        except (OSError, ValueError, msgspec.DecodeError):
            return None
        states = [_receive(receive) for _, receive in running]
        done = True
    finally:
        for proc, receive in running:
            if not done:
                proc.terminate()
            proc.join()
            receive.close()
    if any(s is None for s in states):
        return None
    for state, suffix in states:
        builder.absorb(state)
        rest.suffix = suffix  # the last part's: what follows the array
    return builder, rest.document()


def _receive(connection):
    """A helper's result; None when it died without sending one."""
    try:
        return connection.recv()
    except (EOFError, OSError):
        return None


def _part_to_pipe(connection, path: Path, start: int, end: int | None, reduce: bool) -> None:
    """Helper process: ``_read_part`` sent through ``connection``. Ctrl-C is
    left to the parent, which terminates the helper; it dies with the parent."""
    from advisor.runtime.forking import parent_in_charge

    parent_in_charge()
    try:
        result = _read_part(path, start, end, reduce)
    except Exception:  # noqa: BLE001 -- any failure: the parent reads the file in one process
        result = None
    connection.send(result)
    connection.close()


def _read_part(path: Path, start: int, end: int | None, reduce: bool):
    """One part in a helper: ``(builder state, rest suffix)``, or None when
    the part does not decode (the caller then reads the whole file)."""
    import gc

    from advisor.collectors.kineto import decode as dec

    gc.disable()  # many small objects, all freed together
    builder = dec._Builder(reduce=reduce)
    rest = stream.Rest()
    try:
        with open(path, "rb") as fh:
            builder.feed(stream.iter_range(fh, start, end, rest, dec._decode_batch))
    except (OSError, ValueError, msgspec.DecodeError):
        return None
    return builder.state(), rest.suffix
