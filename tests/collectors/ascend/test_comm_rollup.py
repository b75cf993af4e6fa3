"""Bandwidth and link records are kept as sums per rank, step and kind of
transfer (``comm_rollup``): the sums equal those of the files' own records,
and the metrics read from them equal those read from the records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pytest

from advisor.collectors import load_profile
from advisor.collectors.ascend import collector as ascend
from advisor.collectors.ascend import comm_rollup
from advisor.collectors.ascend.comm import read_communication, read_matrix
from advisor.collectors.ascend.comm_keys import OP_INSTANCE_SUFFIX
from advisor.metrics import evaluate
from advisor.profile import Profile


from bench.scenarios import ascend as scen_ascend
from bench.scenarios import Spec, build, write

OUT = "ASCEND_PROFILER_OUTPUT"
LINK_KEYS = ["rank", "step", "src", "dst", "transport", "size_class"]
BANDWIDTH_KEYS = ["rank", "step", "kind", "transport", "size_class"]


@pytest.fixture(scope="module")
def scenario():
    """Two gradient buckets a step (plus a small all-reduce), a slow link."""
    return build(Spec(ranks=8, steps=4, fault="slow-link", seed=5, kernels_per_step=5, collectives=2))


@pytest.fixture(scope="module")
def integrated(scenario, tmp_path_factory) -> Path:
    """The run as the profilers write it: matrices of totals and samples."""
    return write(scenario, tmp_path_factory.mktemp("integrated") / "s")


@pytest.fixture(scope="module")
def cluster(scenario, tmp_path_factory) -> Path:
    """The same run with a matrix entry per operator (no totals, no samples)."""
    data = write(scenario, tmp_path_factory.mktemp("per_op") / "s")
    for unit in ascend.discover(data):
        rank = int(next(unit.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        records = scen_ascend.link_records(scenario, rank)
        (unit / OUT / "communication_matrix.json").write_bytes(orjson.dumps(scen_ascend.matrix(records)))
    return data


def _records(data: Path, read) -> pd.DataFrame:
    """The files' own records (one row per operator), every rank."""
    frames = []
    for rank, unit in enumerate(ascend.discover(data)):
        name = "communication_matrix.json" if read is read_matrix else "communication.json"
        table = read(unit / OUT / name, rank)
        frames.append((table if read is read_matrix else table[1]).to_pandas())
    records = pd.concat(frames, ignore_index=True)
    return records[(records["size_mb"] > 0) & (records["time_ms"] > 0)]


def _comm_records(data: Path) -> pd.DataFrame:
    """The operator records of every rank's communication.json."""
    return pd.concat([read_communication(unit / OUT / "communication.json", rank)[0].to_pandas()
                      for rank, unit in enumerate(ascend.discover(data))], ignore_index=True)


def _sums(records: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return (records.groupby(keys).agg(ops=("size_mb", "size"), size_mb=("size_mb", "sum"),
                                      time_ms=("time_ms", "sum"))
            .sort_index())


@pytest.mark.parametrize("jobs", [1, 2])
def test_links_are_the_sums_of_the_matrix_records(cluster, jobs):
    records = _records(cluster, read_matrix)
    records["size_class"] = np.floor(np.log2(records["size_mb"])).astype("int64")
    links = load_profile(cluster, jobs=jobs).links
    assert len(records) > len(links) and links["ops"].max() == 2  # the two buckets of a step: one row
    got = links.astype({"step": "int64", "size_class": "int64"}).set_index(LINK_KEYS).sort_index()
    want = _sums(records, LINK_KEYS)
    assert got.index.equals(want.index)
    assert got["ops"].tolist() == want["ops"].tolist()
    assert got[["size_mb", "time_ms"]].to_numpy() == pytest.approx(want[["size_mb", "time_ms"]].to_numpy())
    assert got["bandwidth_gbps"].to_numpy() == pytest.approx((want["size_mb"] / want["time_ms"]).to_numpy())


def test_bandwidth_is_the_sums_of_the_operator_records(cluster):
    records = _records(cluster, read_communication)
    records["size_class"] = np.floor(np.log2(records["size_mb"])).astype(int)  # each operator's record
    bandwidth = load_profile(cluster, jobs=2).bandwidth
    got = bandwidth.astype({"step": "int64", "size_class": "int64"}).set_index(BANDWIDTH_KEYS).sort_index()
    want = _sums(records, BANDWIDTH_KEYS)
    assert got.index.equals(want.index) and got["ops"].tolist() == want["ops"].tolist()
    assert got[["size_mb", "time_ms"]].to_numpy() == pytest.approx(want[["size_mb", "time_ms"]].to_numpy())
    weighted = (records["large_packet_ratio"] * records["size_mb"]).groupby(
        [records[k] for k in BANDWIDTH_KEYS]).sum().sort_index()
    assert got["large_packet_ratio"].to_numpy() == pytest.approx((weighted / want["size_mb"]).to_numpy())


def test_comm_is_the_sums_of_the_operator_records(cluster):
    ops = _comm_records(cluster)
    ops["name"] = ops["name"].str.replace(OP_INSTANCE_SUFFIX, "_", regex=True)  # the operator type
    keys = ["rank", "step", "kind", "group", "name"]
    comm = load_profile(cluster, jobs=2).comm
    got = comm.astype({"step": "int64"}).set_index(keys).sort_index()
    want = ops.groupby(keys).agg(ops=("elapse_us", "size"), elapse_us=("elapse_us", "sum"),
                                 wait_us=("wait_us", "sum"), start_us=("start_us", "min")).sort_index()
    assert got.index.equals(want.index) and len(ops) > len(comm)
    assert got["ops"].tolist() == want["ops"].tolist()
    for col in ("elapse_us", "wait_us", "start_us"):
        assert got[col].to_numpy() == pytest.approx(want[col].to_numpy()), col


def _close(a, b) -> bool:
    """Metric values equal, floats to 1e-6 relative, inside lists and maps too."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-6)
    return a == b


def test_metrics_from_sums_equal_metrics_from_records(cluster):
    """Every metric the communication tables feed (slow link, its ratio and
    excess, bandwidth per transport, wait ratio, exposed all-reduce, the
    straggler in collectives, ...) comes out the same from the sums as
    from every operator record."""
    summed = load_profile(cluster, jobs=1)
    records = Profile(meta=summed.meta, steps=summed.steps, comm=_comm_records(cluster),
                      links=_records(cluster, read_matrix),
                      bandwidth=_records(cluster, read_communication))
    got, want = evaluate(summed)[0], evaluate(records)[0]
    compared = [mid for mid in want if mid.startswith(("comm.", "cluster."))]
    assert {"cluster.slowest_link_excess_ms", "comm.bandwidth_gbps", "comm.wait_ratio",
            "comm.exposed_allreduce_ms"} <= set(compared)
    for mid in compared:
        assert mid in got and _close(got[mid].value, want[mid].value), (mid, got.get(mid), want[mid])
    assert want["cluster.slowest_link_ratio"].value < 0.7  # the injected slow link, found both ways


def test_rollup_is_idempotent_and_drops_what_moved_nothing():
    table = pa.table({
        "rank": [0, 0, 0, 0, 0], "step": pa.array([1, 1, 1, 2, None], pa.int64()),
        "src": [0, 0, 0, 0, 0], "dst": [1, 1, 1, 1, 1], "transport": ["HCCS"] * 5,
        "size_mb": [32.0, 40.0, 0.5, 0.0, 8.0], "time_ms": [1.0, 3.0, 0.1, 1.0, None],
    })
    once = comm_rollup.rollup("links", table)
    # 32 and 40 MB share class 5 and sum; 0.5 MB is class -1; no size or no time: left out
    assert once.column("size_class").to_pylist() == [-1, 5]
    assert once.column("ops").to_pylist() == [1, 2]
    assert once.column("bandwidth_gbps").to_pylist() == [5.0, 18.0]
    assert comm_rollup.rollup("links", once).equals(once)
    both = comm_rollup.rollup_units("links", [table, table.slice(0, 2)])
    assert both[0].equals(once) and both[1].column("ops").to_pylist() == [2]


def test_samples_beside_a_total_are_not_summed_twice(cluster, integrated):
    """Summing -top1/-middle/-bottomN with -total counted each transfer up to
    five times; only the totals are kept, so the links carry every
    operator's bytes and time once."""
    keys = ["rank", "step", "src", "dst", "transport"]
    per_op = load_profile(cluster, jobs=1).links.groupby(keys)[["size_mb", "time_ms"]].sum()
    links = load_profile(integrated, jobs=2).links
    got = links.groupby(keys)[["size_mb", "time_ms"]].sum()
    assert got.index.equals(per_op.index)
    assert got.to_numpy() == pytest.approx(per_op.to_numpy())
    assert set(links["ops"]) == {1}  # one total per step, type and link
    ids = ["cluster.slowest_link", "cluster.slowest_link_ranks"]
    got_m, want_m = evaluate(load_profile(integrated, jobs=1))[0], evaluate(load_profile(cluster, jobs=1))[0]
    for mid in ids:
        assert got_m[mid].value == want_m[mid].value, mid
    assert got_m["cluster.slowest_link_excess_ms"].value == pytest.approx(
        want_m["cluster.slowest_link_excess_ms"].value, rel=0.1)
