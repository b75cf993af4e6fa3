"""Every import under collectors/ is absolute (``advisor.collectors...``):
a module's imports read the same wherever it moves."""

from __future__ import annotations

import ast
from pathlib import Path

from advisor.collectors import vocab

COLLECTORS = Path(vocab.__file__).parent


def test_no_relative_imports():
    relative = [f"{path.relative_to(COLLECTORS)}:{node.lineno}"
                for path in sorted(COLLECTORS.rglob("*.py"))
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.ImportFrom) and node.level > 0]
    assert relative == []
