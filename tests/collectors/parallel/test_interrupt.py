"""Ctrl-C during a parallel cluster read: the command stops with exit code
130 and one line, writes no report, and leaves no worker process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


from bench.scenarios import Spec, generate

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to find the workers")

#: Seconds allowed for things that take well under one here (a hang guard, not a timing test).
PATIENCE = 120


def _many_ranks(root: Path, copies: int) -> Path:
    """One generated rank folder hard-linked ``copies`` times as ranks 0..copies-1
    (enough reading for the interrupt to land while the workers run)."""
    data, _ = generate(Spec(ranks=1, steps=10, seed=1, kernels_per_step=200), root / "gen")
    source = next(data.iterdir())
    out = root / "cluster"
    for rank in range(copies):
        dest = out / f"node0_{rank}_ascend_pt"
        for path in source.rglob("*"):
            if path.is_file():
                name = f"profiler_info_{rank}.json" if path.name.startswith("profiler_info_") else path.name
                target = dest / path.relative_to(source).parent / name
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, target)
    return out


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _reading(tmp_path: Path) -> tuple[subprocess.Popen, list[int], Path, float]:
    """``advisor report -j 2`` on 400 ranks, every rank's kernel file read
    (~1.5 s of reading on two cores: room for the interrupt to land while
    the readers run), returned once its two readers run: (process, reader
    pids, output folder, deadline)."""
    data = _many_ranks(tmp_path, 400)
    out = tmp_path / "report"
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor", "report", str(data), "-o", str(out), "-j", "2", "--no-color",
         "--kernel-ranks", "all"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a CI shell may start us ignoring it
    deadline = time.monotonic() + PATIENCE
    workers: list[int] = []
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
        workers = _children(proc.pid)
    assert len(workers) >= 2, "the read finished (or never started) before the workers were seen"
    return proc, workers, out, deadline


@pytest.mark.parametrize("delay", [0.0, 0.15, 0.3])
def test_ctrl_c_stops_a_parallel_read_cleanly(tmp_path, delay):
    """Ctrl-C while the readers read -- also while this process imports the
    later stages and loads the rules meanwhile (the first ~0.3 s), whose
    imports must not be cut half-way -- exits 130 with one line."""
    proc, workers, out, deadline = _reading(tmp_path)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 130, err.decode()
    assert err.decode().split() == ["advisor:", "aborted"]
    assert not out.exists() or not any(out.iterdir())
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if _alive(pid)]


def test_ctrl_c_stops_a_split_trace_read_cleanly(tmp_path, corpus, monkeypatch):
    """One large Kineto trace read in parts (``kineto_split``): Ctrl-C while
    the helper decodes its part exits 130 at once and leaves no helper."""
    import bench.kineto_load as kl

    monkeypatch.setattr(kl, "OUT_DIR", tmp_path)
    if not kl.SOURCE.exists():
        pytest.skip(f"corpus trace not found: {kl.SOURCE}")
    trace = kl.generate(120, gz=False)  # ~0.6 s of decoding per part here: room to interrupt it
    out = tmp_path / "report"
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor", "report", str(trace), "-o", str(out), "-j", "2", "--no-color"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + PATIENCE
    helpers: list[int] = []
    while not helpers and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
        helpers = _children(proc.pid)
    assert helpers, "the read finished (or never started) before the helper was seen"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 130, err.decode()
    assert err.decode().split() == ["advisor:", "aborted"]
    assert not out.exists() or not any(out.iterdir())
    assert not [pid for pid in helpers if _alive(pid)]


def test_a_reader_killed_mid_read_gives_one_line(tmp_path):
    """A reader process killed while it reads (what the kernel's OOM killer
    does): exit 2 with one line saying so and how to read in one process,
    no traceback, no report, no worker left."""
    proc, workers, out, deadline = _reading(tmp_path)
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=PATIENCE)
    text = err.decode()
    assert proc.returncode == 2, text
    assert text.count("\n") == 1 and "Traceback" not in text, text
    assert text.startswith("advisor: error: a reader process died") and "-j 1" in text
    assert not out.exists() or not any(out.iterdir())
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if _alive(pid)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_killing_the_command_leaves_no_worker(tmp_path, sig):
    """``kill -TERM`` / ``kill -9`` of ``advisor report -j 2`` (the command
    alone, not its group, as a job scheduler or an OOM killer does): the
    workers die with it instead of waiting on their queue forever."""
    proc, workers, _out, deadline = _reading(tmp_path)
    os.kill(proc.pid, sig)
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:  # never leave them to the machine (they hold the command's pipes, too)
        os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=PATIENCE)
    assert proc.returncode == -sig
    assert not left


def test_a_ctrl_c_while_the_pool_starts_arrives_once_it_has_started():
    """A Ctrl-C between the workers' start and the pool's manager thread's
    left a pool that could not shut down ("cannot join thread before it is
    started"); while the pool starts, Ctrl-C is held and arrives after."""
    code = """
import os, signal, time
from advisor.runtime.forking import sigint_held
seen = []
try:
    with sigint_held():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        seen.append("held")
    seen.append("not delivered")
except KeyboardInterrupt:
    seen.append("delivered after")
print(" ".join(seen))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=PATIENCE,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["held", "delivered", "after"]
