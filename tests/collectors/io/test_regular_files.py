"""Input files are read only when they are regular files: a FIFO, socket or
device is refused at once with an InputError naming it, never waited on;
the folder listing still reports it (so a collector reads it, fails and
says why instead of the file vanishing)."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from advisor.collectors.io import csv_files, files, listing
from advisor.errors import InputError

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")

#: Seconds a refusal may take (it takes microseconds): a hang guard.
PATIENCE = 30


def _refused(call, *args) -> InputError:
    """``call(*args)``'s InputError, run in a thread so that a read that
    blocks on a FIFO fails the test instead of hanging it."""
    outcome: list = []

    def target():
        try:
            call(*args)
        except InputError as exc:
            outcome.append(exc)
        except BaseException as exc:  # noqa: BLE001 -- reported below
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(PATIENCE)
    assert not worker.is_alive(), f"{call.__name__} blocked on {args[0]}"
    assert isinstance(outcome[0], InputError), outcome
    return outcome[0]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "step_trace_time.csv"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("reader", [files.read_bytes, files.load_json, files.open_regular, files.check_regular,
                                    csv_files.read_header,
                                    lambda p: csv_files.read_numbers(p, {"step": ["Step"]})],
                         ids=["read_bytes", "load_json", "open_regular", "check_regular", "read_header",
                              "read_numbers"])
def test_a_fifo_is_refused_without_waiting(fifo, reader):
    err = _refused(reader, fifo)
    assert err.path == str(fifo) and err.problem == "not a regular file (a FIFO); not read"


def test_devices_sockets_and_folders_are_refused(tmp_path):
    assert "a character device" in _refused(files.read_bytes, "/dev/zero").problem
    assert "a folder" in _refused(files.read_bytes, tmp_path).problem
    sock_path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert "a socket" in _refused(files.load_json, sock_path).problem


def test_a_symlink_to_a_fifo_is_refused_and_a_regular_file_is_read(fifo, tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    assert "a FIFO" in _refused(files.load_json, link).problem
    good = tmp_path / "good.json"
    good.write_text('{"rank_id": 3}')
    assert files.load_json(good) == {"rank_id": 3}
    with files.open_regular(good, "r", encoding="utf-8") as fh:
        assert fh.read() == '{"rank_id": 3}'
    assert files.read_bytes(good) == b'{"rank_id": 3}'
    assert _refused(files.read_bytes, tmp_path / "missing").problem == "file not found"


def test_the_listing_reports_a_fifo_as_there_and_not_a_folder(fifo, tmp_path):
    (tmp_path / "ASCEND_PROFILER_OUTPUT").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for scope in (listing.cached(tmp_path), _nothing()):
        with scope:
            assert listing.is_file(fifo) and not listing.is_dir(fifo)
            assert not listing.is_file(tmp_path / "ASCEND_PROFILER_OUTPUT")
            assert not listing.is_file(tmp_path / "dangling")
            assert listing.glob(tmp_path, "*.csv") == [fifo]


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_read_bytes_reads_whole_files_and_refuses_beyond_a_limit(tmp_path):
    """``read_bytes`` gives every byte of a file larger than its later reads
    (``files._READ_MORE``) and of an empty one; with a ``limit`` it gives
    None for a larger file and the bytes of one that fits exactly."""
    big = tmp_path / "big.bin"
    data = os.urandom(3 * files._READ_MORE + 7)
    big.write_bytes(data)
    assert files.read_bytes(big) == data
    assert files.read_bytes(big, limit=len(data)) == data
    assert files.read_bytes(big, limit=len(data) - 1) is None
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    assert files.read_bytes(empty) == b""
