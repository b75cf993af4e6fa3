"""Shared fixtures: a generated cluster of Ascend rank folders (text layout)."""

from __future__ import annotations

import pytest

from bench.scenarios.ascend import sample_rank, write_text

RANKS = 8
SLOW_RANK = 5


@pytest.fixture(scope="session")
def cluster_dir(tmp_path_factory):
    """8 rank folders; rank 5 computes 40% longer."""
    root = tmp_path_factory.mktemp("cluster")
    for rank in range(RANKS):
        write_text(root, sample_rank(rank, slow=1.4 if rank == SLOW_RANK else 1.0))
    return root
