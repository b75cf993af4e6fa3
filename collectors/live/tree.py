"""The processes of an ``advisor run`` job, found and stopped as one.

A job is the launched command, its process group, and every process
descending from it -- also those that left the group (torchrun puts each
worker in a session of its own) and those whose parent exited (a daemon
made by a double fork and ``setsid()``). Linux ``/proc`` lists them:

* while the job runs, advisor is a *subreaper* (``advisor.runtime.lifeline``):
  an orphaned process of the job is re-parented to advisor, so it stays in
  advisor's tree; without that (other systems), the tree is walked every
  ``POLL_S`` seconds while the job runs and every process seen in it is
  remembered (with its start time, so a reused pid is never signalled);
* when the command ends, whatever of the job still runs is stopped (SIGTERM,
  then SIGKILL after a grace period), and the adopted processes are reaped.

Where there is no ``/proc``, only the process group is known.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

#: Seconds between two walks of the process tree while the job runs.
POLL_S = 0.5

_Table = dict[int, tuple[int, int, str, int]]  # pid -> (ppid, pgrp, state, start time)


def proc_table() -> _Table:
    """pid -> (ppid, pgrp, state, start time) for every visible process."""
    table: _Table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        rest = data[data.rfind(b")") + 2:].split()
        if len(rest) < 20:
            continue
        table[int(name)] = (int(rest[1]), int(rest[2]), rest[0].decode(), int(rest[19]))
    return table


def descendants(roots, table: _Table) -> set[int]:
    """Every process below ``roots`` in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def signame(sig: int) -> str:
    """``SIGTERM`` for 15, for notes."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class Job:
    """The processes of one launched command (see the module doc).
    ``adopting``: this process is a subreaper for the job."""

    def __init__(self, proc: subprocess.Popen, adopting: bool, before: set[int]):
        self.proc = proc
        self.pgid = proc.pid
        self.adopting = adopting
        self.before = before  # this process's children before the job started
        self.seen: dict[int, int] = {}  # pid -> start time, of every process seen in the job

    @staticmethod
    def own_children() -> set[int]:
        """This process's children now (to take before the job starts)."""
        me = os.getpid()
        return {pid for pid, (ppid, *_rest) in proc_table().items() if ppid == me}

    def _look(self, table: _Table) -> None:
        roots = [self.proc.pid]
        if self.adopting:
            me = os.getpid()
            roots += [pid for pid, (ppid, *_rest) in table.items()
                      if ppid == me and pid not in self.before and pid != self.proc.pid]
            self.seen.update((pid, table[pid][3]) for pid in roots[1:])
        for pid in descendants(roots, table):
            self.seen.setdefault(pid, table[pid][3])

    def living(self, table: _Table | None = None) -> set[int]:
        """The job's processes that still run (the command itself aside)."""
        table = proc_table() if table is None else table
        if not table:
            try:
                os.killpg(self.pgid, 0)
            except (OSError, AttributeError):
                return set()
            return {self.pgid}
        self._look(table)
        alive = {pid for pid, start in self.seen.items()
                 if pid in table and table[pid][3] == start and table[pid][2] not in "ZX"}
        alive |= {pid for pid, (_, pg, st, _s) in table.items() if pg == self.pgid and st not in "ZX"}
        alive.discard(self.proc.pid)
        return alive

    def wait(self, timeout: float | None) -> None:
        """``proc.wait(timeout)``, walking the tree meanwhile; TimeoutExpired."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.monotonic()))
            try:
                self.proc.wait(timeout=step)
                return
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
            self._look(proc_table())

    def _send(self, pids, sig) -> None:
        """``sig`` to the job's process group and to each of ``pids`` outside
        it -- once each: a second SIGTERM would cut short the profiler's
        flush that the first one started."""
        try:
            os.killpg(self.pgid, sig)
            grouped = True
        except (OSError, AttributeError):
            grouped = False
        for pid in pids:
            try:
                if not (grouped and os.getpgid(pid) == self.pgid):
                    os.kill(pid, sig)
            except OSError:
                pass

    def stop(self, grace: float, first: int) -> str:
        """Stop the command and every process of the job: ``first`` signal,
        then SIGKILL after ``grace`` seconds. Returns how it went, for a note."""
        signalled = self.living() | ({self.proc.pid} if self.proc.poll() is None else set())
        self._send(signalled, first)
        deadline = time.monotonic() + grace
        while True:
            self.proc.poll()
            left = self.living()
            fresh = left - signalled
            if fresh:
                self._send(fresh, first)
                signalled |= fresh
            if self.proc.returncode is not None and not left:
                self.reap()
                return f"stopped the job with {signame(first)}"
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        self._send(left | {self.proc.pid}, signal.SIGKILL)
        self.proc.wait()
        end = time.monotonic() + 5
        while time.monotonic() < end and self.living():
            time.sleep(0.05)
        self.reap()
        return (f"sent {signame(first)}, then SIGKILL to {len(left)} process(es) still "
                f"running after {grace:g}s")

    def reap(self) -> None:
        """Collect the exit status of the adopted processes that ended."""
        if not self.adopting:
            return
        me = os.getpid()
        for pid, (ppid, _pg, state, _s) in proc_table().items():
            if ppid == me and pid not in self.before and pid != self.proc.pid and state in "ZX":
                try:
                    os.waitpid(pid, os.WNOHANG)
                except OSError:
                    pass
