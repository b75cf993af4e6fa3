"""Bounds on decompressed input: gzip bombs are refused with one line
naming the file (exit 2), or skipped as one rank of a cluster; the bounds
can be raised from the command line and the config file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from advisor.cli.app import main
from advisor.collectors import load_profile
from advisor.collectors.io import limits
from advisor.collectors.kineto import collector as kineto
from advisor.errors import ConfigError, InputError
from advisor.settings import load_settings


@pytest.fixture(autouse=True)
def _default_limits(monkeypatch):
    """Every test starts from the default bounds, and what a command puts
    in force does not outlive the test."""
    monkeypatch.setenv(limits.ENV_MAX_DECOMPRESSED, "")  # "": the default
    monkeypatch.setenv(limits.ENV_MAX_EXPANSION, "")


def _event(i: int, name: str = "aten::mm") -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5}


def _steps(n: int) -> list[dict]:
    return [ev for i in range(n) for ev in (
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
         "ts": 100 * i, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100 * i + 10, "dur": 50})]


def whitespace_bomb(path: Path, padding: int) -> Path:
    """A trace whose two events are separated by ``padding`` bytes of spaces,
    gzipped (about 1000x)."""
    head = b'{"schemaVersion": 1, "traceEvents": [' + json.dumps(_event(0)).encode() + b", "
    tail = json.dumps(_event(1)).encode() + b"]}"
    path.write_bytes(gzip.compress(head + b" " * padding + tail, 9))
    return path


def write_trace(path: Path, events: list[dict], **top) -> Path:
    raw = json.dumps({"schemaVersion": 1, **top, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(raw) if path.name.endswith(".gz") else raw)
    return path


def _report(args: list[str], capsys) -> tuple[int, str]:
    """``advisor report ARGS`` in this process: (exit code, stderr)."""
    with pytest.raises(SystemExit) as done:
        main(["report", "-j", "1", *args])
    return done.value.code, capsys.readouterr().err


def test_expansion_bomb_is_refused_naming_the_file(tmp_path, capsys):
    bomb = whitespace_bomb(tmp_path / "bomb.pt.trace.json.gz", 2 * limits.RATIO_FLOOR)
    assert 2 * limits.RATIO_FLOOR / bomb.stat().st_size > 5 * limits.MAX_EXPANSION  # a real bomb
    with pytest.raises(InputError) as err:
        kineto.read(bomb)
    assert str(bomb) in str(err.value) and "expands" in str(err.value)
    code, stderr = _report([str(tmp_path), "-o", str(tmp_path.parent / "out")], capsys)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and str(bomb) in lines[0] and "--max-expansion" in lines[0]


def test_raised_expansion_bound_reads_the_same_file(tmp_path):
    bomb = whitespace_bomb(tmp_path / "bomb.pt.trace.json.gz", 2 * limits.RATIO_FLOOR)
    limits.configure(max_expansion=10_000)
    trace = kineto.read(bomb)
    assert trace is not None


def test_total_size_bound_and_flag_to_raise_it(tmp_path, capsys):
    path = write_trace(tmp_path / "big.pt.trace.json.gz", _steps(2_000))
    size = len(gzip.decompress(path.read_bytes()))
    assert size > 200 << 10
    code, stderr = _report([str(tmp_path), "-o", str(tmp_path.parent / "o1"), "--max-decompressed", "100K"], capsys)
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert str(path) in stderr and "more than 100.0 KB" in stderr
    # raised above the file's size, the same file is read and reported
    main(["report", "-j", "1", str(tmp_path), "-o", str(tmp_path.parent / "o2"), "--max-decompressed", "1M"])
    assert (tmp_path.parent / "o2" / "report.json").is_file()


def test_bad_bound_on_the_command_line_is_an_input_error(tmp_path, capsys):
    write_trace(tmp_path / "t.pt.trace.json", _steps(3))
    code, stderr = _report([str(tmp_path), "-o", str(tmp_path.parent / "o"), "--max-expansion", "lots"], capsys)
    assert code == 2 and "--max-expansion" in stderr


def test_bomb_rank_of_a_cluster_is_skipped_with_a_note(tmp_path):
    write_trace(tmp_path / "rank0.pt.trace.json.gz", _steps(5), distributedInfo={"rank": 0, "world_size": 2})
    bomb = whitespace_bomb(tmp_path / "rank1.pt.trace.json.gz", 3 * limits.RATIO_FLOOR)
    p = load_profile(tmp_path, jobs=1)
    assert p.meta.ranks == [0]
    assert any(str(bomb) in s.what and "expands" in s.reason for s in p.skipped)


def test_config_file_limits(tmp_path):
    cfg = tmp_path / "advisor.toml"
    cfg.write_text('[limits]\nmax_decompressed = "2G"\nmax_expansion = 500\n')
    settings = load_settings(cfg)
    assert settings.max_decompressed == 2 << 30 and settings.max_expansion == 500
    settings.apply_limits()
    assert limits.current() == limits.Limits(2 << 30, 500)
    settings.apply_limits(max_expansion=50)  # the command line wins
    assert limits.current().max_expansion == 50
    cfg.write_text('[limits]\nmax_decompressed = "huge"\n')
    with pytest.raises(ConfigError, match="limits.max_decompressed"):
        load_settings(cfg)
    cfg.write_text('[limits]\nmax_size = 3\n')
    with pytest.raises(ConfigError, match="limits"):
        load_settings(cfg)


def test_parse_size():
    assert limits.parse_size("8G", "x") == 8 << 30
    assert limits.parse_size("512MB", "x") == 512 << 20
    assert limits.parse_size("1.5GiB", "x") == int(1.5 * (1 << 30))
    assert limits.parse_size("1000", "x") == 1000
    for bad in ("", "0", "-1G", "8X", True):
        with pytest.raises(ConfigError):
            limits.parse_size(bad, "x")
