"""Progress displays on a terminal leave this process free to fork.

A display that redraws from a thread made every run on a terminal start the
rank pool from a fork server and read a large trace on one core
(``advisor.runtime.progress``). These tests put stderr on a real pseudo-terminal.
"""

from __future__ import annotations

import os
import pty
import select
import sys
import threading

import pytest

from advisor.collectors.kineto import split as kineto_split
from advisor.collectors.parallel import rank_reader
from advisor.runtime import forking, progress
from tests._pty import advisor_on_pty

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")


@pytest.fixture
def terminal(monkeypatch):
    """Call it in the test body (pytest puts its own capture back on
    ``sys.stderr`` between setup and call) to put stderr on a
    pseudo-terminal; it returns a function giving what was drawn there."""
    opened: list[tuple] = []

    def attach():
        master, slave = pty.openpty()
        stream = os.fdopen(slave, "w", buffering=1, encoding="utf-8")
        opened.append((master, stream))
        monkeypatch.setattr(sys, "stderr", stream)
        drawn = bytearray()

        def read() -> str:
            stream.flush()
            while select.select([master], [], [], 0.05)[0]:
                drawn.extend(os.read(master, 65536))
            return drawn.decode(errors="replace")

        return read

    yield attach
    monkeypatch.undo()
    for master, stream in opened:
        stream.close()
        os.close(master)


_THREADS_BEFORE: set = set()


def _free_to_fork() -> None:
    """No thread started since ``_mark_threads``; with none left running by
    earlier tests (Dask's may linger), this process may fork its readers."""
    assert set(threading.enumerate()) == _THREADS_BEFORE
    if len(_THREADS_BEFORE) == 1:
        assert forking.can_fork()
        assert rank_reader._mp_context("advisor.collectors.ascend.collector").get_start_method() == "fork"
        assert kineto_split.usable_helpers(2) == 1


@pytest.fixture(autouse=True)
def _mark_threads():
    _THREADS_BEFORE.clear()
    _THREADS_BEFORE.update(threading.enumerate())


def test_status_and_bar_draw_without_a_thread(terminal):
    drawn = terminal()
    assert progress.on_terminal()
    with progress.status("reading the profile"):
        _free_to_fork()
        with progress.bar("reading ranks", 4) as show:
            _free_to_fork()
            for done in range(1, 5):
                show(done)
        shown = drawn()
    assert "reading the profile" in shown
    assert "reading ranks" in shown and "4/4" in shown


def test_the_cli_reading_line_draws_without_a_thread(terminal):
    from rich.console import Console

    from advisor.cli.console import reading

    drawn = terminal()
    with reading("en", False, Console(force_terminal=True)):
        _free_to_fork()
    assert "reading the profile" in drawn()


def test_a_bar_alone_draws_without_a_thread(terminal):
    drawn = terminal()
    with progress.bar("reading big.pt.trace.json", 2 << 20, in_bytes=True) as show:
        _free_to_fork()
        show(1 << 20)
        _free_to_fork()
        show(2 << 20)
    assert "reading big.pt.trace.json" in drawn() and "2.1/2.1 MB" in drawn()


def test_a_bar_under_a_bar_draws_nothing(terminal):
    drawn = terminal()
    with progress.bar("reading ranks", 2) as outer:
        with progress.bar("reading inner.pt.trace.json", 10, in_bytes=True) as inner:
            inner(10)
        outer(2)
    shown = drawn()
    assert "reading ranks" in shown and "inner" not in shown


def test_redraws_are_spaced_but_the_last_is_drawn(terminal, monkeypatch):
    drawn = terminal()
    monkeypatch.setattr(progress, "REDRAW_S", 3600.0)
    with progress.bar("reading ranks", 1000) as show:
        for done in range(1, 1001):
            show(done)
        shown = drawn()
    assert shown.count("reading ranks") <= 3  # start, at most one early, the last
    assert "1000/1000" in shown


def test_nothing_is_drawn_off_a_terminal(capfd):
    assert not progress.on_terminal()
    with progress.status("reading the profile"), progress.bar("reading ranks", 2) as show:
        show(2)
    assert capfd.readouterr().err == ""


def _report_on_a_terminal(examples, tmp_path, **env) -> str:
    """``advisor report`` on an example, stdout and stderr on one
    pseudo-terminal, as a user runs it (``NO_COLOR`` only if given): what
    the terminal received."""
    env = {**{k: v for k, v in os.environ.items() if k != "NO_COLOR"}, "COLUMNS": "100", **env}
    code, shown, _ = advisor_on_pty(["report", str(examples / "vgg16_fp16"), "-o", str(tmp_path / "out")],
                                    tmp_path, env, stderr_too=True)
    assert code == 0
    return shown


def test_the_reading_line_shows_on_a_terminal_and_not_without_colour(examples, tmp_path):
    """The CLI decides on the reading line without loading rich: a
    terminal with colour shows it, ``NO_COLOR`` does not."""
    assert "reading the profile" in _report_on_a_terminal(examples, tmp_path)
    assert "reading the profile" not in _report_on_a_terminal(examples, tmp_path, NO_COLOR="1")
