"""Framework selection for ``advisor run``: which profiler a job needs.

The decision itself (:func:`select_backend`) lives in the bootstrap module
that runs inside the profiled process, so the parent's guess and the child's
choice can never disagree on the rules; this module adds what only the
parent can do: read the script's imports without running it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from advisor.collectors.live.bootstrap._advisor_live import FRAMEWORKS, importable, mindspore_options, select_backend  # noqa: F401  (re-exported)

_FRAMEWORK_MODULES = {"torch", "torch_npu", "mindspore"}


def script_imports(script: Path, *, follow_local: int = 1) -> set[str]:
    """Top-level module names imported anywhere in ``script``.

    Modules that sit beside the script (``helpers.py``, ``model/``) are read
    too, ``follow_local`` levels deep, so a script whose model code lives in
    a sibling file is still recognised. Unreadable or non-Python files give
    an empty set: the bootstrap then decides at import time.
    """
    seen: set[Path] = set()
    found: set[str] = set()
    _scan(Path(script), found, seen, follow_local)
    return found


def _scan(path: Path, found: set[str], seen: set[Path], depth: int) -> None:
    try:
        path = path.resolve()
    except OSError:
        return
    if path in seen:
        return
    seen.add(path)
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value.split(".")[0])
    found.update(names)
    if depth <= 0:
        return
    base = path.parent
    for name in names - _FRAMEWORK_MODULES:
        for candidate in (base / f"{name}.py", base / name / "__init__.py"):
            if candidate.is_file():
                _scan(candidate, found, seen, depth - 1)


def guess_framework(script: Path | None, forced: str | None = None) -> str:
    """The parent's guess: from the script's imports and what this
    interpreter can import. The child reports what it actually used."""
    imports = script_imports(script) if script is not None else set()
    return select_backend(imports, importable, forced)
