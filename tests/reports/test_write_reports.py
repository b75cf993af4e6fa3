"""write_reports writes the three files, or fails with one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from advisor.errors import AdvisorError
from advisor.model import Report
from advisor.reports import write_reports


def test_writes_three_files(report: Report, tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    paths = write_reports(report, out)
    assert set(paths) == {"html", "markdown", "json"}
    assert {p.name for p in paths.values()} == {"report.html", "report.md", "report.json"}
    assert sorted(os.listdir(out)) == ["report.html", "report.json", "report.md"]  # no temp files left
    assert paths["html"].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert Report.model_validate_json(paths["json"].read_text(encoding="utf-8")) == report
    assert paths["markdown"].read_text(encoding="utf-8").startswith("## advisor")


def test_unwritable_folder_is_one_line(report: Report, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(AdvisorError) as err:
        write_reports(report, blocker / "out")
    msg = str(err.value)
    assert "\n" not in msg and str(blocker / "out") in msg
