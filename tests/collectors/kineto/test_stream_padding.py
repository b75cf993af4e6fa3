"""The streaming tokenizer's work grows linearly with padding: whitespace
between events (or inside one) is scanned a bounded number of times, not
once per chunk read after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.collectors.kineto import decode, stream

CHUNK = 1 << 16  # small chunks: a few hundred KB of padding spans many reads


def _event(i: int) -> bytes:
    return json.dumps({"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1,
                       "ts": 10 * i, "dur": 5}).encode()


def _between(padding: int) -> bytes:
    """Padding between two events of the array."""
    return b'{"traceEvents": [' + _event(0) + b"," + b" " * padding + _event(1) + b"]}"


def _inside(padding: int) -> bytes:
    """Padding inside one event, between two of its members."""
    ev = _event(1)
    return (b'{"traceEvents": [' + _event(0) + b", " + ev[:-1] + b"," + b"\n" * padding
            + b'"args": {}}' + b", " + _event(2) + b"]}")


def _after(padding: int) -> bytes:
    """Padding after the last event, before the end of the array."""
    return b'{"traceEvents": [' + _event(0) + b", " + _event(1) + b" " * padding + b'], "schemaVersion": 1}'


def _scanned(path: Path, monkeypatch) -> tuple[int, int]:
    """(bytes handed to the boundary scans while decoding ``path``, events
    decoded): the sum of the buffer sizes ``_guess_cut`` and ``structure``
    were called with, i.e. how often each byte was looked at and copied."""
    seen = [0]
    guess, structure = stream._guess_cut, stream.structure

    def counted_guess(buf):
        seen[0] += len(buf)
        return guess(buf)

    def counted_structure(buf):
        seen[0] += len(buf)
        return structure(buf)

    monkeypatch.setattr(stream, "CHUNK", CHUNK)
    monkeypatch.setattr(stream, "_guess_cut", counted_guess)
    monkeypatch.setattr(stream, "structure", counted_structure)
    trace = decode.load_trace(path, reduce=False)
    return seen[0], trace.analysed


@pytest.mark.parametrize("layout", [_between, _inside, _after], ids=["between", "inside", "after"])
def test_padding_costs_linear_work(layout, tmp_path, monkeypatch):
    n = 16 * CHUNK
    work = {}
    for size in (n, 4 * n):
        path = tmp_path / f"pad{size}.pt.trace.json"
        path.write_bytes(layout(size))
        work[size], analysed = _scanned(path, monkeypatch)
        assert analysed >= 2  # the events around the padding are read
    # Linear: four times the padding, at most about four times the work (a
    # scan per chunk over a growing buffer would be sixteen times).
    assert work[4 * n] <= 5 * work[n]
    assert work[4 * n] <= 8 * (4 * n)  # and a bounded number of looks per byte
