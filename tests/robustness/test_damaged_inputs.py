"""The damaged-input corpus through the real CLI.

Each case (see ``rb_cases.CASES``) is a valid real profile damaged in one
way. ``advisor report`` must either write a partial report whose
``skipped`` list names what was left out (the rest of the cluster still
analyzed) or exit 2 with one line naming the file -- never a traceback, and
never a change under the input.

The cases run as ``advisor.cli.main(argv)`` in forks of one warm process
(``_cli_batch.py``), two at a time, so fifty CLI runs cost one set of heavy
imports; ``test_batch_matches_real_cli`` checks that a few of them give the
same result through ``python -m advisor``.
"""

from __future__ import annotations

import json

import pytest
from _once import once
from rb_cases import CASES, IS_ROOT, NEEDS_NON_ROOT
from rb_util import run_batch, run_cli, snapshot

from advisor.model import Report

NAMES = list(CASES)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, corpus):
    """name -> (result, target, input folder, output folder, before, after),
    built and run once however many workers run these tests (``_once``)."""
    return once(tmp_path_factory, "damaged-inputs", lambda base: _run_cases(base, corpus))


def _run_cases(base, corpus) -> dict:
    """Build every case under ``base``, run them all (module doc)."""
    built = {}
    jobs = []
    for i, name in enumerate(NAMES):
        if name in NEEDS_NON_ROOT and IS_ROOT:
            continue
        case_dir = base / f"case{i:02d}"
        case_dir.mkdir()
        build, _ = CASES[name]
        target = build(case_dir, corpus)
        out = base / f"case{i:02d}_report"
        built[name] = (target, case_dir / "in", out, snapshot(case_dir / "in"))
        jobs.append({"argv": ["report", str(target), "-o", str(out), "--no-color"]})
    results = run_batch(jobs, base / "batch")
    return {name: (res, *built[name], snapshot(built[name][1]))
            for name, res in zip(built, results)}


def _skips(out) -> list[str]:
    report = json.loads((out / "report.json").read_text())
    return [f"{s['what']}: {s['reason']}" for s in report["skipped"]]


@pytest.mark.parametrize("name", NAMES)
def test_damaged_input(outcomes, name):
    if name in NEEDS_NON_ROOT and IS_ROOT:
        pytest.skip("runs as root: root reads files whatever their permission bits")
    result, target, in_dir, out, before, after = outcomes[name]
    expect = CASES[name][1]
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text
    assert after == before, "the input tree changed"
    if expect.kind == "error":
        assert result.returncode == 2, text
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("advisor: error: "), lines[0]
        assert expect.fragments[0] in lines[0], lines[0]
        assert not (out / "report.json").exists()
        return
    assert result.returncode == 0, text
    assert "Warning" not in result.stderr, result.stderr  # no numpy noise at the user
    raw = (out / "report.json").read_text()
    report = Report.model_validate_json(raw)
    assert report.run.ranks, "no rank analyzed"
    skips = _skips(out)
    for fragment in expect.fragments:
        assert any(fragment in s for s in skips), f"{fragment!r} not named in skipped: {skips}"
    if expect.kind == "partial" and not expect.fragments:
        assert any(s for s in skips if not s.startswith(("metric ", "rule "))), skips


def test_partial_cluster_keeps_the_other_ranks(outcomes):
    """One broken rank of eight: the seven others are still analyzed."""
    result, *_, out, _, _ = outcomes["mi: empty step trace CSV (rank 5)"]
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["ranks"] == [0, 1, 2, 3, 4, 6, 7]
    assert report["metrics"]["step.count"]["value"] > 0


REAL_CLI = ["mi: empty step trace CSV (rank 5)", "kineto: single trace cut mid-stream",
            "npu: communication.json cut mid-way (rank 2)"]


def test_batch_matches_real_cli(outcomes, tmp_path):
    """The fork batch behaves as ``python -m advisor`` does (exit code, stderr)."""
    for name in REAL_CLI:
        batch, target, _, _, _, _ = outcomes[name]
        real = run_cli("report", str(target), "-o", str(tmp_path / "out"), "--no-color", cwd=tmp_path)
        assert real.returncode == batch.returncode, (name, real.stderr)
        assert "Traceback" not in real.stderr
        if real.returncode == 2:
            assert real.stderr == batch.stderr
