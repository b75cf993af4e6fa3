"""The Ascend inputs of the block-dim check: the device's core counts from
``PROF_*/device_{id}/info.json.{id}`` ("DeviceInfo" list with ``ai_core_num``
and ``aiv_num``, as msprof writes it: msprof's profiling_bean/basic_info
test_device_info.py ``info_json``; msprof-analyze reads it in
advisor/dataset/profiling/device_info.py, skipping ``info.json.{id}.done``),
and each operator's Block Dim from kernel_details.csv (its ``Block Dim`` /
``Mix Block Dim`` columns, the fixture rows of tests/metrics/test_kernels.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa

from advisor.collectors import load_profile
from advisor.collectors.ascend.meta import read_core_counts
from advisor.collectors.ascend.tables import ops_from_kernels
from advisor.profile import Profile, RunMeta
from tests.metrics.test_kernels import HEADER, _row


def _device(root: Path, name: str, text: str) -> Path:
    device = root / "PROF_000001_20250101000000000_ABCDEFGHIJ" / "device_3"
    device.mkdir(parents=True, exist_ok=True)
    (device / name).write_text(text)
    return device


def _counts(root: Path) -> tuple[dict, Profile]:
    profile = Profile(meta=RunMeta())
    return read_core_counts(root, profile), profile


def test_core_counts_from_the_device_info_the_done_marker_skipped(tmp_path):
    _device(tmp_path, "info.json.3.done", "")
    _device(tmp_path, "info.json.3", json.dumps({"DeviceInfo": [{"id": 3, "ai_core_num": 24, "aiv_num": 48,
                                                                 "aic_frequency": "1800"}]}))
    counts, profile = _counts(tmp_path)
    assert counts == {"ai_core_num": 24, "aiv_num": 48}
    assert profile.skipped == []


def test_no_core_count_without_an_ai_core_num(tmp_path):
    assert _counts(tmp_path)[0] == {}
    _device(tmp_path, "info.json.3", json.dumps({"DeviceInfo": [{"id": 3, "aiv_num": 48}]}))
    assert _counts(tmp_path)[0] == {}


def test_a_damaged_info_json_is_skipped_with_its_file_named(tmp_path):
    _device(tmp_path, "info.json.3", '{"DeviceInfo": [')
    counts, profile = _counts(tmp_path)
    assert counts == {}
    assert [Path(s.what).name for s in profile.skipped] == ["info.json.3"]


def test_an_operator_takes_its_most_common_block_dim(tmp_path):
    root = tmp_path / "w_1_20250101000000000_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    add = ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", 30.0, "64,64;64,64", "DT_BF16;DT_BF16")
    blocks = [(20, 0), (40, 0), (40, 0)]
    rows = [_row(1, 1736413971558972.0 + 100 * i, *add, block=b) for i, b in enumerate(blocks)]
    (out / "kernel_details.csv").write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    _device(root, "info.json.3", json.dumps({"DeviceInfo": [{"id": 3, "ai_core_num": 20, "aiv_num": 40}]}))
    profile = load_profile(root)
    (op,) = profile.ops.to_dict("records")
    assert (op["count"], op["block_dim"], op["mix_block_dim"]) == (3, 40, 0)
    rank = profile.meta.ranks[0]
    assert profile.meta.ai_core_num == {rank: 20} and profile.meta.aiv_num == {rank: 40}


def test_block_dim_modes_break_ties_to_the_smaller_and_leave_missing_ones_null():
    """An operator's block dim is its launches' most common one, the smaller
    on a tie, null when no launch gives one; keys with nulls are groups of
    their own (as Arrow groups them), and a NaN block dim is counted as a
    value like any other."""
    kernels = pa.table({
        "name": ["a", "a", "a", "a", None, None, "b", "c", "c"],
        "duration_us": [1.0] * 9,
        "block_dim": [8, 4, 4, 8, 2, None, None, 6, 6],
        "mix_block_dim": [1.0, 1.0, 3.0, None, None, None, None, None, None],
    })

    def modes(table, column):
        ops = ops_from_kernels(table, rank=0)
        return dict(zip(ops.column("name").to_pylist(), ops.column(column).to_pylist()))

    assert modes(kernels, "block_dim") == {"a": 4.0, None: 2.0, "b": None, "c": 6.0}
    assert modes(kernels, "mix_block_dim") == {"a": 1.0, None: None, "b": None, "c": None}
    with_nan = kernels.set_column(3, "mix_block_dim", pa.array([math.nan, math.nan, 3.0] + [None] * 6))
    assert math.isnan(modes(with_nan, "mix_block_dim")["a"])
