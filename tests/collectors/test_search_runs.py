"""A folder a collector recognises may hold several independent runs side
by side: they are listed for the user to pick one, never merged as the
ranks of one run; one run spread over folders stays one run.

Kineto fixtures follow the trace layout documented in
``tests/collectors/kineto/test_captures.py`` (``distributedInfo.rank`` in
the trace object, as PyTorch's profiler writes it for a distributed job).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.collectors import load_profile
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.search import separate
from advisor.errors import InputError
from tests.collectors.kineto.test_captures import _steps
from tests.collectors.kineto.test_kineto import write

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_rankless_traces_in_two_folders_are_two_runs(tmp_path):
    write((tmp_path / "job_a").mkdir() or tmp_path / "job_a" / "h_11.1700000000001.pt.trace.json", _steps(1, 2, 11))
    write((tmp_path / "job_b").mkdir() or tmp_path / "job_b" / "h_22.1700000000002.pt.trace.json", _steps(1, 2, 22))
    places = separate(tmp_path, kineto, kineto.discover(tmp_path))
    assert [p.shown for p in places] == [tmp_path / "job_a", tmp_path / "job_b"]
    with pytest.raises(InputError, match="2 separate profiles below it: job_a, job_b"):
        load_profile(tmp_path, jobs=1)


def test_ranked_traces_in_rank_folders_are_one_run(tmp_path):
    for rank, name in ((0, "first"), (1, "second")):
        (tmp_path / name).mkdir()
        write(tmp_path / name / f"h_{rank}.1700000000001.pt.trace.json", _steps(1, 2, 100 + rank),
              distributedInfo={"rank": rank, "world_size": 2})
    assert load_profile(tmp_path, jobs=1).meta.ranks == [0, 1]


def test_the_examples_folder_is_refused_with_its_runs_named():
    names = sorted(p.name for p in EXAMPLES.iterdir() if (p / "profiler").is_dir())
    with pytest.raises(InputError, match=f"this folder holds {len(names)} separate profiles") as err:
        load_profile(EXAMPLES, jobs=1)
    assert f"{names[0]}/profiler" in str(err.value)
