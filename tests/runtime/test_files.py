"""advisor.runtime.files: the one atomic write -- the whole file or the old
one, and never a temporary file left behind; every writer uses it."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.errors import AdvisorError
from advisor.runtime.files import write_atomic, write_text

REPO = Path(__file__).resolve().parents[2]
#: Runs inside the user's training process and never imports advisor.
STDLIB_ONLY = "collectors/live/bootstrap/_advisor_live.py"


def _left_behind(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_text_and_bytes_replace_the_file(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    target.write_text("old")
    write_atomic(target, "new\nlines\n")
    assert target.read_bytes() == b"new\nlines\n"
    write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert _left_behind(tmp_path) == []


def test_the_mode_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("make_target, text", [
    (lambda folder: (folder / "is_a_folder").mkdir() or folder / "is_a_folder", "text"),   # the rename fails
    (lambda folder: folder / "report.md", "a lone surrogate \udc80"),                        # the write fails
])
def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, make_target, text: str) -> None:
    target = make_target(tmp_path)
    before = target.is_dir()
    with pytest.raises((OSError, UnicodeEncodeError)):
        write_atomic(target, text)
    assert _left_behind(tmp_path) == [] and target.is_dir() == before


def test_write_text_creates_the_folder_and_fails_in_one_line(tmp_path: Path) -> None:
    assert write_text(tmp_path / "a" / "b" / "gate.md", "x").read_text() == "x"
    (tmp_path / "file").write_text("")
    with pytest.raises(AdvisorError, match="cannot create folder"):
        write_text(tmp_path / "file" / "gate.md", "x")


def test_rules_docs_into_a_folder_is_one_line_and_leaves_no_temporary_file(tmp_path: Path, capsys) -> None:
    target = tmp_path / "docs"
    target.mkdir()
    with pytest.raises(SystemExit) as exit_:
        main(["rules", "docs", "-o", str(target)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("advisor: error: ") and err.count("\n") == 1, err
    assert _left_behind(tmp_path) == [] and list(target.iterdir()) == []


def test_every_writer_uses_the_one_atomic_write() -> None:
    """Only advisor.runtime.files renames a temporary file over a target
    (and the stdlib-only bootstrap, which cannot import it)."""
    renames = []
    for folder in ("advisor", "collectors", "reports"):
        for path in sorted((REPO / folder).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("replace", "rename") and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "os"):
                    renames.append(name)
    assert sorted(set(renames)) == sorted({"advisor/runtime/files.py", STDLIB_ONLY})
