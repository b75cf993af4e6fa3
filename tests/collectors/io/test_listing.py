"""Cached folder listings answer exactly as pathlib does, and only inside their scope."""

from __future__ import annotations

import os
from pathlib import Path

from advisor.collectors.io import listing


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "rank_ascend_pt"
    (root / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    for name in ("profiler_info_3.json", "profiler_metadata.json", "notes.txt"):
        (root / name).write_text("{}")
    (root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_text("a\n")
    os.symlink(root / "notes.txt", root / "link.txt")
    os.symlink(root / "missing", root / "broken")
    return root


def _answers(root: Path) -> list:
    out = root / "ASCEND_PROFILER_OUTPUT"
    paths = [root, out, out / "kernel_details.csv", out / "nothing.csv", root / "link.txt", root / "broken",
             root / "notes.txt" / "below_a_file", root.parent / "elsewhere"]
    return ([(listing.is_file(p), listing.is_dir(p)) for p in paths]
            + [listing.glob(root, "profiler_info*.json"), listing.glob(out, "*.db"),
               sorted(listing.names(root)), listing.glob(root / "absent", "*")])


def test_cached_answers_equal_direct_ones(tmp_path):
    root = _tree(tmp_path)
    direct = _answers(root)
    with listing.cached(root):
        assert _answers(root) == direct
    assert direct[:3] == [(False, True), (False, True), (True, False)]
    assert direct[4:6] == [(True, False), (False, False)]  # symlinks followed, a broken one is nothing
    assert [p.name for p in direct[8]] == ["profiler_info_3.json"]


def test_scans_once_inside_scope_only(tmp_path):
    root = _tree(tmp_path)
    with listing.cached(root):
        assert not listing.is_file(root / "later.json")
        (root / "later.json").write_text("{}")
        assert not listing.is_file(root / "later.json")  # the folder was scanned once
        (tmp_path / "sibling.json").write_text("{}")
        assert listing.is_file(tmp_path / "sibling.json")  # outside the scope: asked directly
    assert listing.is_file(root / "later.json")


def test_files_answer_as_is_file_does(tmp_path):
    """``files`` is the set of names ``is_file`` says yes to, inside the
    scope and outside it (a symlink to a file counts, a broken one and a
    folder do not), and empty for a folder that is not there."""
    root = _tree(tmp_path)
    expected = {p.name for p in root.iterdir() if listing.is_file(p)}
    assert expected == {"profiler_info_3.json", "profiler_metadata.json", "notes.txt", "link.txt"}
    assert listing.files(root) == expected
    with listing.cached(root):
        assert listing.files(root) == expected
        assert listing.files(root / "ASCEND_PROFILER_OUTPUT") == {"kernel_details.csv"}
    assert listing.files(root / "absent") == frozenset()
