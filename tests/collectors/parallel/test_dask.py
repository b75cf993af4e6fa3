"""The same per-unit reads on a real Dask cluster (loopback only)."""

from __future__ import annotations

import pytest

from advisor.collectors import load_profile
from advisor.pipeline import analyze

from .test_rank_reader import assert_same_profile, assert_same_report

distributed = pytest.importorskip(
    "distributed", reason="the 'dask' extra (dask[distributed]) is not installed")


@pytest.fixture(scope="module")
def local(cluster_dir):
    """The process-pool results (every rank's kernels, and a sample's), read
    before the Dask cluster's threads exist."""
    return (load_profile(cluster_dir, jobs=2), analyze(cluster_dir, jobs=2),
            load_profile(cluster_dir, jobs=2, kernel_ranks=3))


@pytest.fixture(scope="module")
def dask_address():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address=None)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def test_dask_gives_the_process_pool_result(cluster_dir, local, dask_address):
    profile, report, _ = local
    assert_same_profile(profile, load_profile(cluster_dir, dask_address=dask_address))
    assert_same_report(report, analyze(cluster_dir, dask_address=dask_address))


def test_dask_reads_the_same_sample_of_kernel_files(cluster_dir, local, dask_address):
    sampled = local[2]
    assert sorted(sampled.ops["rank"].unique()) == [0, 4, 6]  # 8 ranks, blocks of 3: positions 0, 1, 0
    assert_same_profile(sampled, load_profile(cluster_dir, dask_address=dask_address, kernel_ranks=3))
