"""Reading rank folders as a batch gives exactly what reading each alone
gives, for ranks whose kernel files differ in columns and spelling."""

from __future__ import annotations

from pathlib import Path

import pyarrow.csv as pacsv
import pytest

from advisor.collectors.ascend import collector as ascend
from advisor.errors import InputError
from advisor.profile import TABLES


from bench.scenarios import Spec, generate


def _kernels(unit: Path) -> Path:
    return unit / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"


@pytest.fixture(scope="module")
def units(tmp_path_factory) -> list[Path]:
    data, _ = generate(Spec(ranks=6, steps=4, seed=3, kernels_per_step=300), tmp_path_factory.mktemp("b") / "s")
    found = ascend.discover(data)
    # rank 1: no wait column; rank 2: names spelled with spaces and DT_ dtypes both ways;
    # rank 3: a broken kernel file (skipped, other files still read); rank 4: no folder at all
    table = pacsv.read_csv(_kernels(found[1]))
    pacsv.write_csv(table.drop_columns(["Wait Time(us)"]), _kernels(found[1]))
    text = _kernels(found[2]).read_text().splitlines(keepends=True)
    text[1::2] = [line.replace("DT_BF16", "BF16").replace(",aclnn", ", aclnn", 1) for line in text[1::2]]
    _kernels(found[2]).write_text("".join(text))
    _kernels(found[3]).write_text("Step Id,Name\n1,x\n")
    return [*found, found[0].parent / "missing_ascend_pt"]


def _same(a, b) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a.equals(b))


def test_batch_equals_one_by_one(units):
    batch = ascend.read_arrow_batch(units)
    assert len(batch) == len(units)
    for unit, got in zip(units, batch):
        try:
            alone = ascend.read_arrow(unit)
        except InputError as exc:
            assert isinstance(got, InputError) and str(got) == str(exc)
            continue
        assert not isinstance(got, InputError), got
        for name in TABLES:
            assert _same(getattr(got, name), getattr(alone, name)), (unit.name, name)
        assert got.skipped == alone.skipped and got.meta == alone.meta
    assert isinstance(batch[-1], InputError)
    assert "wait_us" not in batch[1].ops.column_names and "wait_us" in batch[0].ops.column_names
    assert batch[2].ops.num_rows == batch[0].ops.num_rows  # spellings merged back into one operator each
    assert batch[3].ops is None and batch[3].steps is not None and batch[3].skipped
