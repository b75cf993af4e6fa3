"""Read-only inputs and deterministic output, through the real CLI.

* A copied input tree made read-only (``chmod -R a-w``): ``report``,
  ``compare`` and ``gate`` succeed, and no file or folder under it changed
  (content, mode, mtime). Root ignores permission bits, so the snapshot
  comparison is what proves nothing was written.
* The same input gives byte-identical report.json apart from
  ``run.generated_at``: across runs, across processes (different hash
  seeds) and across ``--jobs 1`` / ``--jobs 2``.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from rb_damage import EXAMPLES, copy_tree, hta2, npu_cluster
from rb_util import run_batch, run_cli, snapshot

from advisor.cli import cli


def _commands() -> set[str]:
    return set(cli.commands)


def _make_read_only(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in [*filenames, *dirnames, ""]:
            path = Path(dirpath) / name if name else Path(dirpath)
            if path.is_symlink():
                continue
            mode = stat.S_IMODE(path.lstat().st_mode)
            path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _make_writable(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*filenames, *dirnames, ""]:
            path = Path(dirpath) / name if name else Path(dirpath)
            if not path.is_symlink():
                path.chmod(stat.S_IMODE(path.lstat().st_mode) | stat.S_IWUSR)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, corpus):
    """One batch: the read-only commands and the determinism runs."""
    base = tmp_path_factory.mktemp("ro")
    tree = base / "inputs"
    tree.mkdir()
    bound = copy_tree(EXAMPLES / "resnet50_data_bound", tree / "bound")
    fixed = copy_tree(EXAMPLES / "resnet50_data_fixed", tree / "fixed")
    npu = npu_cluster(corpus, tree / "npu")
    kineto = hta2(corpus, tree / "kineto")
    _make_read_only(tree)
    before = snapshot(tree)
    out = base / "out"
    commands = _commands()
    jobs = {
        "report": ["report", str(bound), "-o", str(out / "report")],
        "report-npu": ["report", str(npu), "-o", str(out / "report-npu")],
    }
    if "compare" in commands:
        jobs["compare"] = ["compare", str(bound), str(fixed), "-o", str(out / "compare")]
    if "gate" in commands:
        jobs["gate"] = ["gate", str(fixed), "--baseline", str(bound), "-o", str(out / "gate")]
    for name, src in (("npu", npu), ("kineto", kineto)):
        for jobs_n in (1, 2):
            jobs[f"det-{name}-j{jobs_n}"] = ["report", str(src), "-o", str(out / f"det-{name}-j{jobs_n}"),
                                             "--jobs", str(jobs_n)]
    work = base / "cwd"
    work.mkdir()
    results = run_batch([{"argv": [*argv, "--no-color"], "cwd": str(work)} for argv in jobs.values()],
                        base / "batch")
    # one more run of each determinism input in a fresh interpreter (its own hash seed)
    fresh = {}
    for name, src in (("npu", npu),):
        dest = out / f"det-{name}-fresh"
        proc = run_cli("report", str(src), "-o", str(dest), "--jobs", "2", "--no-color", cwd=work)
        fresh[name] = (proc, dest)
    after = snapshot(tree)
    yield {"results": dict(zip(jobs, results)), "before": before, "after": after, "out": out,
           "fresh": fresh, "commands": commands}
    _make_writable(tree)


@pytest.mark.parametrize("command", ["report", "compare", "gate"])
def test_read_only_input(runs, command):
    if command not in runs["commands"]:
        pytest.skip(f"`advisor {command}` does not exist yet (not in `advisor --help`)")
    result = runs["results"][command]
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    produced = list((runs["out"] / command).iterdir())
    assert produced, f"{command} wrote nothing"


def test_read_only_tree_unchanged(runs):
    """No file under the inputs changed: content, mode and mtime, and no new entry."""
    assert runs["results"]["report-npu"].returncode == 0, runs["results"]["report-npu"].stderr
    assert runs["after"] == runs["before"]


def _normalized(path: Path) -> bytes:
    doc = json.loads(path.read_text())
    assert doc["run"]["generated_at"]
    doc["run"]["generated_at"] = "<time>"
    return json.dumps(doc, indent=2).encode()


def _raw_without_time(path: Path) -> bytes:
    """The file's own bytes with only the generated_at value blanked."""
    lines = path.read_bytes().splitlines(keepends=True)
    return b"".join(b'    "generated_at": "<time>"\n' if b'"generated_at"' in line
                    else line for line in lines)


@pytest.mark.parametrize("name", ["npu", "kineto"])
def test_deterministic_json_across_jobs_and_runs(runs, name):
    outs = []
    for jobs_n in (1, 2):
        result = runs["results"][f"det-{name}-j{jobs_n}"]
        assert result.returncode == 0, result.stderr
        outs.append(runs["out"] / f"det-{name}-j{jobs_n}" / "report.json")
    if name in runs["fresh"]:
        proc, dest = runs["fresh"][name]
        assert proc.returncode == 0, proc.stderr
        outs.append(dest / "report.json")
    first = _raw_without_time(outs[0])
    for other in outs[1:]:
        assert _raw_without_time(other) == first, f"{other} differs from {outs[0]}"
    assert _normalized(outs[0]) == _normalized(outs[-1])


def test_runs_under_blocked_network(runs):
    """The batch runs advisor with the socket guard on (see _cli_batch.py):
    a report that succeeded there reached no other machine."""
    assert runs["results"]["report"].returncode == 0


def test_cli_runner_report_is_read_only(tmp_path):
    """In-process too: ``report`` on a read-only copy leaves it identical."""
    src = copy_tree(EXAMPLES / "resnet50_data_fixed", tmp_path / "in")
    _make_read_only(src)
    before = snapshot(src)
    result = CliRunner().invoke(cli, ["report", str(src), "-o", str(tmp_path / "out"), "--jobs", "1"])
    after = snapshot(src)
    _make_writable(src)
    assert result.exit_code == 0, result.output
    assert after == before
