"""One list of languages (``advisor.i18n.LANGS``): no other module spells
one, and every per-language table has exactly those languages."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from advisor.i18n import LANGS

REPO = Path(__file__).resolve().parents[2]
#: Source folder -> the package it is installed as.
PACKAGES = {"advisor": "advisor", "collectors": "advisor.collectors", "reports": "advisor.reports"}


def _is_lang_code(node: ast.AST | None) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)
            and len(node.value) == 2 and node.value.isalpha() and node.value.islower())


def _scan():
    """(module, line, what) of every literal that lists two or more language
    codes with English among them: a sequence of codes, or a dict keyed by them."""
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            module = ".".join([package, *rel.parts]).removesuffix(".__init__")
            tree = ast.parse(path.read_text(encoding="utf-8"))
            owner = {}
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            owner[id(node.value)] = t.id
            for node in ast.walk(tree):
                if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                    codes = node.elts
                elif isinstance(node, ast.Dict):
                    codes = node.keys
                else:
                    continue
                if len(codes) >= 2 and all(_is_lang_code(c) for c in codes) and "en" in {c.value for c in codes}:
                    yield module, node, owner.get(id(node))


def test_languages_are_listed_once_and_tables_have_exactly_them():
    sequences, tables = [], []
    for module, node, name in _scan():
        if isinstance(node, ast.Dict):
            tables.append((module, name))
        elif module != "advisor.i18n":
            sequences.append(f"{module}:{node.lineno}")
    assert sequences == [], "list languages with advisor.i18n.LANGS"
    assert {"advisor.reports.i18n", "advisor.engine.evaluation", "advisor.engine.docs"} <= {m for m, _ in tables}
    for module, name in tables:
        assert name is not None, f"{module}: a per-language dict literal must be a named table"
        table = getattr(importlib.import_module(module), name)
        assert tuple(table) == LANGS, f"{module}.{name} has {tuple(table)}, advisor.i18n.LANGS is {LANGS}"


def test_every_lang_option_offers_the_languages():
    import click

    from advisor.cli import cli

    def commands(group, prefix=()):
        for name, cmd in group.commands.items():
            yield (*prefix, name), cmd
            if isinstance(cmd, click.Group):
                yield from commands(cmd, (*prefix, name))

    offered = {" ".join(path): tuple(p.type.choices) for path, cmd in commands(cli)
               for p in cmd.params if p.name == "lang"}
    assert set(offered) == {"report", "run", "rules list", "rules explain", "rules docs", "compare", "gate", "history show"}
    assert set(offered.values()) == {LANGS}
