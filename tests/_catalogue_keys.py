"""Catalogue keys of the English texts a module writes, read from its source:
what the tests of the translation catalogues (``advisor.i18n.Catalogue``)
check every text against."""

from __future__ import annotations

import ast
import string
from collections.abc import Callable, Iterable
from pathlib import Path

from advisor.i18n import DEFAULT_LANG, LANGS, VALUE

#: The languages texts are translated into.
OTHER_LANGS = [lang for lang in LANGS if lang != DEFAULT_LANG]


def module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """The module-level ``NAME = value`` assignments of ``tree``."""
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


def keys(node: ast.expr, constants: dict[str, ast.expr]) -> list[str]:
    """The catalogue keys (each value ``{}``, literal braces doubled) of the
    texts ``node`` can evaluate to: a literal, an f-string, a module
    constant, a concatenation, either branch of ``a if c else b``, the
    values of ``{...}[key]``; [] for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value.replace("{", "{{").replace("}", "}}")]
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value.replace("{", "{{").replace("}", "}}") if isinstance(v, ast.Constant) else VALUE
                        for v in node.values)]
    if isinstance(node, ast.Name) and node.id in constants:
        return keys(constants[node.id], constants)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [a + b for a in keys(node.left, constants) for b in keys(node.right, constants)]
    if isinstance(node, ast.IfExp):
        return keys(node.body, constants) + keys(node.orelse, constants)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
        return [k for v in node.value.values for k in keys(v, constants)]
    return []


def places_every_value_once(key: str, translation: str) -> bool:
    """Whether ``translation`` names each of ``key``'s values, ``{0}`` ...
    ``{n-1}``, exactly once."""
    n = key.replace("{{", "").replace("}}", "").count(VALUE)
    fields = [f for _, f, _, _ in string.Formatter().parse(translation) if f is not None]
    return sorted(fields) == [str(i) for i in range(n)]


def texts_written(paths: Iterable[Path], pick: Callable[[ast.AST, str, Path], list[ast.expr]]) -> dict[str, str]:
    """Key -> "file:line" of every text the modules at ``paths`` write:
    ``pick(node, source, path)`` gives the expressions of a node that are
    such texts (module doc)."""
    found: dict[str, str] = {}
    for path in sorted(paths):
        src = path.read_text(encoding="utf-8")
        tree = ast.parse(src)
        constants = module_constants(tree)
        for node in ast.walk(tree):
            for expr in pick(node, src, path):
                for key in keys(expr, constants):
                    found.setdefault(key, f"{path.name}:{expr.lineno}")
    return found
