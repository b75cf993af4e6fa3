"""Communication operators beside compute and alone (collectors/ascend/contention.py,
the ``comm_contention`` table) from one rank written in both Ascend layouts
(bench.scenarios.ascend: communication.json as the MindSpore profiling
guide's reference and the corpus's cluster_communication.json lay it out,
Start Timestamp(us) / Elapse Time(ms) per operator and Transit Size(MB) /
Transit Time(ms) per transport; kernel_details.csv's Start Time(us) /
Duration(us) on the same clock; the database layout's CommAnalyzer tables
and TASK rows)."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.collectors import load_profile
from advisor.collectors.kineto import intervals as iv
from bench.scenarios.ascend import T0_NS, RankSpec, write_db, write_text

MS = 1_000_000  # ns


def _rank() -> RankSpec:
    """One 10 ms step: a MatMul computing 0-4 ms; operator A at 1-3 ms (all
    of it beside the MatMul), B at 6-8 ms (alone), C at 3.5-5 ms (a third
    beside it: neither). Each moves 64 MB over SDMA; A at half B's speed."""
    spec = RankSpec(rank=0)
    spec.steps.append((1, 0, 10 * MS))
    spec.tasks.append(("MatMul_1", "MatMul", "AI_CORE", "DT_BF16;DT_BF16", "4096,4096;4096,4096", 0, 4 * MS))
    spec.breakdown[1] = (4000.0, 3500.0, 1500.0, 5000.0, 2500.0, 10000.0, 0.0, 3500.0)
    for name, start, end, time_ms in (("hcom_allReduce__1_0_1", 1, 3, 4.0), ("hcom_allReduce__1_0_2", 6, 8, 2.0),
                                      ("hcom_allReduce__1_0_3", 3.5, 5, 2.0)):
        spec.comm_ops.append((name, "hcom_allReduce_", "g1", int(start * MS), int(end * MS)))
        spec.comm_time.append((1, name, "g1", (T0_NS + start * MS) / 1000, end - start, 0.9 * (end - start),
                               0.0, 0.0, 0.1 * (end - start)))
        for transport in ("HCCS", "SDMA"):
            spec.comm_band.append((1, name, "g1", transport, 64.0, time_ms, 64.0 / time_ms, 1.0, {}))
    return spec


def test_covered_time_of_spans():
    starts, ends = np.array([0.0, 10.0]), np.array([4.0, 12.0])
    got = iv.covered_between((starts, ends), np.array([1.0, 3.0, 5.0, -2.0, 11.0]), np.array([3.0, 11.0, 9.0, 20.0, 30.0]))
    assert got.tolist() == [2.0, 2.0, 0.0, 6.0, 1.0]


@pytest.mark.parametrize("writer", [write_text, write_db])
def test_operators_beside_compute_and_alone(tmp_path, writer):
    profile = load_profile(writer(tmp_path, _rank()))
    table = profile.comm_contention
    sdma = table[table["transport"] == "SDMA"].set_index("beside_compute")
    # C (a third of its span beside the MatMul) is neither: one operator each side
    assert sdma["ops"].tolist() == [1, 1]
    assert sdma.loc[True, "time_ms"] == pytest.approx(4.0) and sdma.loc[False, "time_ms"] == pytest.approx(2.0)
    assert (sdma["size_class"] == 6).all()
    # A's span 1-3 ms is all beside the MatMul; B's 6-8 ms is all without compute
    assert sdma.loc[True, "exposed_us"] == pytest.approx(0.0, abs=1e-3)
    assert sdma.loc[False, "exposed_us"] == pytest.approx(2000.0, abs=1e-3)


def test_no_table_without_compute_kernels(tmp_path):
    spec = _rank()
    spec.tasks.clear()
    profile = load_profile(write_text(tmp_path, spec))
    assert profile.comm_contention is None


def test_rows_of_several_ranks_keep_their_types(tmp_path):
    # each rank's rows are built in Arrow and converted once merged
    # (arrow_frames): the integer columns stay int64 (step nullable Int64)
    for rank in (0, 1):
        spec = _rank()
        spec.rank = rank
        write_text(tmp_path, spec)
    table = load_profile(tmp_path, jobs=1).comm_contention
    assert sorted(table["rank"].unique().tolist()) == [0, 1]
    assert {c: str(t) for c, t in table.dtypes.items() if c != "transport"} == {
        "rank": "int64", "step": "Int64", "size_class": "int64", "beside_compute": "bool", "ops": "int64",
        "size_mb": "float64", "time_ms": "float64", "exposed_us": "float64"}
