"""The repository's own text: no file holds an unresolved merge, and the
README's table of rules lists every rule."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: A line git writes around the two sides of a conflict it could not resolve.
CONFLICT_LINE = re.compile(rb"^(<{7}|>{7})( |$)", re.MULTILINE)


def _tracked() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_holds_conflict_markers():
    marked = [str(p.relative_to(ROOT)) for p in _tracked()
              if p.is_file() and CONFLICT_LINE.search(p.read_bytes())]
    assert marked == []


def test_the_readme_lists_every_rule():
    from advisor.engine.loader import load_rules

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", readme, re.MULTILINE))
    assert {r.name for r in load_rules()} - listed == set()
