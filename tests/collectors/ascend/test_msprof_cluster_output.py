"""msprof-analyze's ``cluster_analysis_output/`` is read whole, at every level.

``msprof-analyze cluster -d <ranks> -m all`` writes, for the text layout,
``cluster_step_trace_time.csv``, ``cluster_communication.json``,
``cluster_communication_matrix.json`` and ``communication_group.json``
(``msprof_analyze/prof_common/constant.py``: CLUSTER_STEP_TIME_CSV,
CLUSTER_COMM_JSON, CLUSTER_COMMUNICATION_MATRIX_JSON,
COMMUNICATION_GROUP_JSON; the matrix is dumped by
``cluster_analyse/analysis/comm_matrix_analysis.py`` as
``{group ranks: {stepN: {op@group: {"src-dst": {Transport Type, Transit Time(ms),
Transit Size(MB), Op Name, Bandwidth(GB/s)}}}}}`` with global ranks). From a
Level0 run (no communication.json in the rank folders) it writes the step
trace and the group file only.

The peer runs here when installed (``MSPROF_ANALYZE`` or
/tmp/venv-peers/bin/msprof-analyze) on generated clusters copied to a
temporary folder (it writes into its input folder); a small fixture in the
documented layout keeps the reader tested without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from advisor.collectors.ascend import collector, hccl_rows
from advisor.pipeline import analyze
from bench.scenarios import Spec, generate

PEER = Path(os.environ.get("MSPROF_ANALYZE", "/tmp/venv-peers/bin/msprof-analyze"))
#: What ``cluster -m all`` writes from text-layout rank folders, by level.
WRITTEN = {1: {"cluster_step_trace_time.csv", "cluster_communication.json", "cluster_communication_matrix.json",
               "communication_group.json"},
           0: {"cluster_step_trace_time.csv", "communication_group.json"}}


def _peer_output(tmp_path: Path, level: int) -> Path:
    if not PEER.is_file():
        pytest.skip(f"msprof-analyze is not installed ({PEER}; set MSPROF_ANALYZE): the real "
                    "cluster_analysis_output cannot be produced here")
    data, _ = generate(Spec(ranks=4, steps=5, fault="exposed-allreduce", seed=3, kernels_per_step=6),
                       tmp_path / "run", "ascend-text", level)
    out = tmp_path / "out"
    done = subprocess.run([str(PEER), "cluster", "-d", str(data), "-m", "all", "-o", str(out)],
                          capture_output=True, text=True, timeout=600, input="")
    assert done.returncode == 0, done.stderr[-2000:]
    return out / "cluster_analysis_output"


@pytest.mark.parametrize("level", [1, 0])
def test_every_file_cluster_all_writes_is_read(tmp_path: Path, level: int) -> None:
    folder = _peer_output(tmp_path, level)
    written = {p.name for p in folder.iterdir()}
    assert WRITTEN[level] <= written, written
    profile = collector.read(folder)
    assert not profile.skipped, profile.skipped
    assert profile.meta.ranks == [0, 1, 2, 3]
    assert set(profile.steps["rank"]) == {0, 1, 2, 3}
    if level == 1:
        assert set(profile.comm["kind"]) == {"allreduce"}
        assert set(profile.links["src"]) <= {0, 1, 2, 3} and len(profile.links)
        assert set(profile.meta.comm_source.values()) == {hccl_rows.LEVEL1_CLUSTER}
    else:
        assert profile.comm is None and profile.links is None
        assert any("Level0" in note for note in profile.meta.notes)
    report = analyze(folder.parent, jobs=1)  # the folder msprof-analyze was given as -o
    assert report.verdict.status in ("problems", "inconclusive")
    if level == 1:
        assert any(f.rule == "exposed-allreduce" for f in report.all_findings())


def _matrix_fixture(folder: Path) -> None:
    """cluster_communication_matrix.json as comm_matrix_analysis.py dumps it
    (module doc), with its -total and -top1 entries repeating one transfer."""
    link = {"Transport Type": "HCCS", "Transit Time(ms)": 2.0, "Transit Size(MB)": 36.0, "Op Name": "",
            "Bandwidth(GB/s)": 18.0}
    slow = {**link, "Transit Time(ms)": 9.0, "Bandwidth(GB/s)": 4.0}
    doc = {"(0, 1, 2, 3)": {f"step{s}": {
        f"allreduce-{role}@1234567": {"0-1": link, "1-2": link, "2-3": slow, "3-0": link}
        for role in ("top1", "total")} for s in (1, 2)}}
    (folder / "cluster_communication_matrix.json").write_bytes(orjson.dumps(doc))
    (folder / "communication_group.json").write_bytes(orjson.dumps({"collective": [[0, 1, 2, 3]], "p2p": []}))


def test_matrix_alone_is_read_with_global_ranks(tmp_path: Path) -> None:
    folder = tmp_path / "cluster_analysis_output"
    folder.mkdir()
    _matrix_fixture(folder)
    profile = collector.read(folder)
    assert profile.meta.ranks == [0, 1, 2, 3]
    links = profile.links.set_index(["src", "dst"])
    assert links.loc[(2, 3), "bandwidth_gbps"].min() == pytest.approx(4.0)
    assert set(profile.links["rank"]) == {0, 1, 2, 3}  # a link's rank is its source


def test_matrix_beside_the_corpus_cluster_files(corpus, tmp_path: Path) -> None:
    """The real msprof-analyze summary of the corpus with the matrix added:
    the crash was reading them together."""
    folder = tmp_path / "cluster_analysis_output"
    shutil.copytree(corpus / "mstt/test/resource/advisor/cluster_analysis_output", folder)
    _matrix_fixture(folder)
    report = analyze(folder, jobs=1)
    assert report.metrics["cluster.slowest_link"].value == "2-3"
