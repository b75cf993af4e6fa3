"""MindSpore / MindInsight ``memory_usage_summary_{rank}.json`` -> ``memory_summary``
and the device-memory metrics.

Written as MindSpore's ``MemoryUsageParser.write_memory_files``
(``mindspore/profiler/parser/memory_usage_parser.py``) writes it: one object
``{"capacity", "allocations", "deallocations", "peak_mem", "static_mem"}``,
sizes in GiB (``memory_proto.total_mem / GIGABYTES``, ``GIGABYTES = 1024**3``),
beside the step trace of the same rank (``cluster_fixture``).
"""

from __future__ import annotations

import json

import pytest

from advisor.collectors import load_profile
from advisor.metrics import evaluate
from tests.collectors.mindinsight import cluster_fixture as fx

def _metrics(profile) -> tuple[dict, dict]:
    """Metric id -> Metric, and metric id -> the reason it was not evaluated."""
    values, skipped = evaluate(profile)
    return values, {s.what.removeprefix("metric "): s.reason for s in skipped}


#: rank -> (capacity, peak_mem) GiB: a 4-rank pipeline whose stage 0 (ranks 0, 1) holds more
PEAKS = {0: (30.0, 27.0), 1: (30.0, 26.5), 2: (30.0, 12.0), 3: (30.0, 11.0)}


def _summary(folder, rank: int, **fields) -> None:
    capacity, peak = PEAKS[rank]
    data = {"capacity": capacity, "allocations": 1200 + rank, "deallocations": 1200 + rank,
            "peak_mem": peak, "static_mem": 4.5, **fields}
    (folder / f"memory_usage_summary_{rank}.json").write_text(json.dumps({k: v for k, v in data.items()
                                                                          if v is not None}))


def _cluster(tmp_path, **fields):
    folder = fx.write_cluster(tmp_path / "profiler", cluster_files=False, hccl=False)
    for rank in PEAKS:
        _summary(folder, rank, **fields)
    return folder


def test_summary_is_read_per_rank(tmp_path):
    table = load_profile(_cluster(tmp_path)).memory_summary.set_index("rank").sort_index()
    assert table.index.tolist() == [0, 1, 2, 3]
    assert table["capacity_gib"].tolist() == [30.0] * 4
    assert table["peak_gib"].tolist() == [p for _, p in PEAKS.values()]
    assert table.loc[2, "static_gib"] == 4.5 and table.loc[3, "allocations"] == 1203


def test_metrics_name_the_peak_share_and_the_rank(tmp_path):
    values, _ = _metrics(load_profile(_cluster(tmp_path)))
    share = values["memory.device_peak_share"]
    assert share.value == pytest.approx(27.0 / 30.0)
    assert share.evidence["rank"] == 0
    assert values["memory.device_peak_rank"].value == 0


def test_without_the_file_the_metrics_are_not_evaluated(tmp_path):
    folder = fx.write_cluster(tmp_path / "profiler", cluster_files=False, hccl=False)
    profile = load_profile(folder)
    assert profile.memory_summary is None
    values, reasons = _metrics(profile)
    assert "memory.device_peak_share" not in values and "memory.device_peak_rank" not in values
    assert "memory_summary" in reasons["memory.device_peak_share"]


def test_a_partial_file_is_a_skip_naming_what_is_missing(tmp_path):
    """No ``capacity`` (a file cut short, or an older writer): skipped with the reason, no traceback."""
    folder = fx.write_cluster(tmp_path / "profiler", cluster_files=False, hccl=False)
    _summary(folder, 0, capacity=None)
    (folder / "memory_usage_summary_1.json").write_text('{"capacity": 30.0, "peak_')
    for rank in (2, 3):
        _summary(folder, rank)
    profile = load_profile(folder)
    assert sorted(profile.memory_summary["rank"]) == [2, 3]
    skips = {s.what.rsplit("/", 1)[-1]: s.reason for s in profile.skipped}
    assert "'capacity'" in skips["memory_usage_summary_0.json"]
    assert "memory_usage_summary_1.json" in skips
    assert _metrics(profile)[0]["memory.device_peak_rank"].value == 2


def test_one_rank_gives_the_share_but_no_peak_rank(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    fx.write_step_trace(folder, 2)
    _summary(folder, 2)
    values, reasons = _metrics(load_profile(folder))
    assert values["memory.device_peak_share"].value == pytest.approx(12.0 / 30.0)
    assert "memory.device_peak_rank" not in values
    assert "fewer than two ranks" in reasons["memory.device_peak_rank"]


def _details(folder, rank: int, text: str | None = None) -> None:
    """``memory_usage_details_{rank}.json`` as ``MemoryUsageParser`` writes it: graph id -> graph dict
    (``MemoryGraph.to_dict``), ``lines`` the memory (GiB) after each node; graph 3 holds the peak."""
    graphs = {"1": {"graph_id": 1, "static_mem": 4.5, "nodes": [], "fp_start": None, "bp_end": None,
                    "lines": [4.5, 9.0, 6.0], "breakdowns": []},
              "3": {"graph_id": 3, "static_mem": 4.5, "nodes": [], "fp_start": 0, "bp_end": 2,
                    "lines": [4.5, PEAKS[rank][1], 5.0], "breakdowns": [[], [], []]}}
    (folder / f"memory_usage_details_{rank}.json").write_text(text if text is not None else json.dumps(graphs))


def test_details_name_the_graph_that_peaks(tmp_path):
    folder = _cluster(tmp_path)
    _details(folder, 0)
    _details(folder, 1, '{"1": {"lines": [1.0, ')  # cut short: skipped alone, the summary counts
    profile = load_profile(folder)
    table = profile.memory_summary.set_index("rank")
    assert table.loc[0, "peak_graph"] == 3 and table.loc[0, "graphs"] == 2
    assert table.loc[1, "peak_gib"] == 26.5 and table["peak_graph"].isna()[1]
    assert any(s.what.endswith("memory_usage_details_1.json") for s in profile.skipped)
    assert _metrics(profile)[0]["memory.device_peak_share"].evidence["peak_graph"] == 3
