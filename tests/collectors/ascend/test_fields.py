"""The raw-field table (``advisor.collectors.ascend.fields``): the one place
Ascend field names live, so a new profiler spelling is a data change."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from advisor.collectors.ascend import fields
from advisor.collectors.ascend.tables import read_kernel_details
from advisor.errors import InputError

ASCEND = Path(fields.__file__).parent
#: Raw names that are not also a column name (``step``, ``name``, ``stage``... are both).
RAW_NAMES = ({raw for layout in fields.FIELDS.values() for source in layout.values()
              for raw in (*(r for rs in source.fields.values() for r in rs), *source.known)}
             - {column for layout in fields.FIELDS.values() for source in layout.values() for column in source.fields})


def _raw_tables(path: Path) -> list[str]:
    """Literal dicts, tuples, lists and sets in ``path`` holding two or more
    raw field names, nested ones included: a field map of its own."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            raws = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and c.value in RAW_NAMES]
            if len(raws) >= 2:
                found.append(f"{path.name}:{node.lineno}: {raws}")
    return found


def test_no_other_ascend_module_keeps_a_field_map(tmp_path):
    modules = sorted(p for p in ASCEND.glob("*.py") if p.name != "fields.py")
    assert len(modules) >= 10
    assert [hit for path in modules for hit in _raw_tables(path)] == []
    private = tmp_path / "example.py"  # the check finds a map like those the table replaced
    private.write_text('_KERNELS = {"duration_us": ("Duration(us)",), "start_us": ("Start Time(us)",)}\n')
    assert _raw_tables(private)


def test_a_new_spelling_is_read_once_the_table_lists_it(tmp_path, monkeypatch):
    path = tmp_path / "kernel_details.csv"
    path.write_text("Step Id,Name,Type,Accelerator Core,Start Time(us),Task Duration(us)\n"
                    "1,MatMul_1,MatMul,AI_CORE,10.0,4.0\n1,Add_2,Add,AI_VECTOR_CORE,15.0,1.0\n")
    with pytest.raises(InputError, match="missing required column"):
        read_kernel_details(path)
    kernels = fields.text("kernel_details.csv").fields
    monkeypatch.setitem(kernels, "duration_us", (*kernels["duration_us"], "Task Duration(us)"))
    assert read_kernel_details(path)["duration_us"].tolist() == [4.0, 1.0]


def test_the_typed_decoder_takes_the_first_spelling_and_the_known_fields():
    from advisor.collectors.ascend import comm_typed

    time = fields.text("Communication Time Info")
    encoded = set(comm_typed._TimeInfo.__struct_encode_fields__)
    assert encoded == {raws[0] for raws in time.fields.values()} | set(time.known)
    assert "Idel Time(ms)" not in encoded  # other spellings go to the generic walk
