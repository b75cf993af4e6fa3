"""CEL for rules: the environment, compiling an expression, and the values
that cross into and out of it.

Rule expressions are Google CEL (cel-python), never Python ``eval``. Every
metric number enters CEL as a double, so rules compare freely; results come
back as plain Python values.
"""

from __future__ import annotations

import io
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import celpy
from celpy import celtypes

from advisor.runtime import cache


@lru_cache(maxsize=1)
def environment() -> celpy.Environment:
    """The CEL environment, built on first use. celpy builds its CEL parser
    (a lark LALR parser: computing its tables takes about 0.3 s) once per
    process; it comes from advisor's cache (:mod:`advisor.runtime.cache`) when a copy
    made by the same celpy, lark and Python is there, and is stored there
    otherwise."""
    from celpy.celparser import CELParser

    entry = None
    if getattr(CELParser, "CEL_PARSER", False) is None:  # not built yet (and a celpy that keeps it there)
        entry = _parser_entry()
        data = cache.read(entry) if entry else None
        if data is not None:
            import lark

            try:
                CELParser.CEL_PARSER = lark.Lark.load(io.BytesIO(data))
                entry = None
            except Exception:  # noqa: BLE001 -- a damaged entry: build the parser and store it again
                CELParser.CEL_PARSER = None
    env = celpy.Environment()
    if entry and CELParser.CEL_PARSER is not None:
        buf = io.BytesIO()
        try:
            CELParser.CEL_PARSER.save(buf)
        except Exception:  # noqa: BLE001 -- no cache entry then
            return env
        cache.write(entry, buf.getvalue())
    return env


def _parser_entry() -> str | None:
    """The cache entry name of the CEL parser of this celpy, lark and Python."""
    import lark
    from celpy import celparser

    try:
        source = Path(celparser.__file__)
        name = cache.key(source.read_bytes(), (source.parent / "cel.lark").read_bytes(),
                         lark.__version__, sys.version)
    except (OSError, TypeError, AttributeError):
        return None
    return f"cel-parser-{name}.pickle"


#: Longest expression a rule may have. A rule file may come from the
#: repository under test; the built-in rules' longest expression is about
#: 330 characters, so this leaves user rules six times that.
MAX_EXPRESSION_CHARS = 2000
#: The CEL macros that loop over a list or map.
LOOP_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
#: Deepest nesting of loops in one expression. One loop costs the length of
#: its list; each loop inside another multiplies it (seven nested loops over
#: ten items are ten million evaluations, hours of cel-python). Two allow
#: "for each rank, any of its operators"; the built-in rules need none.
MAX_LOOP_DEPTH = 2


def loop_depth(tree: Any) -> int:
    """The deepest nesting of ``LOOP_MACROS`` calls in a parsed expression
    (celpy's lark tree; walked without recursion)."""
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        children = getattr(node, "children", None)
        if children is None:
            continue
        if getattr(node, "data", None) == "member_dot_arg" and any(
                getattr(c, "type", None) is not None and str(c) in LOOP_MACROS for c in children):
            depth += 1
            deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def compile_program(expr: str) -> Any:
    """A runnable program for ``expr``; celpy's own error when it does not
    parse, ValueError when it is longer than ``MAX_EXPRESSION_CHARS`` or
    nests loops deeper than ``MAX_LOOP_DEPTH``."""
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"{len(expr)} characters, more than the {MAX_EXPRESSION_CHARS} an expression may have")
    env = environment()
    tree = env.compile(expr)
    depth = loop_depth(tree)
    if depth > MAX_LOOP_DEPTH:
        raise ValueError(f"loops ({', '.join(sorted(LOOP_MACROS))}) nested {depth} deep, more than "
                         f"{MAX_LOOP_DEPTH}: each nested loop multiplies the evaluation's cost")
    return env.program(tree)


def run(program: Any, activation: dict) -> Any:
    """``program`` over ``activation`` as a plain Python value; raises the
    CEL evaluation error (no such member, bad operand types, ...)."""
    result = program.evaluate(activation)
    if isinstance(result, celpy.CELEvalError):
        raise result
    return to_python(result)


def activation(names: dict[str, Any]) -> dict:
    """Plain Python values (nested dicts and lists) -> a CEL activation."""
    return {key: celpy.json_to_cel(_doubles(value)) for key, value in names.items()}


def _doubles(value: Any) -> Any:
    """Every number a double (booleans stay booleans)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_doubles(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _doubles(v) for k, v in value.items()}
    return value


def to_python(value: Any) -> Any:
    """A CEL value as a plain Python value."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, (list, celtypes.ListType)):
        return [to_python(v) for v in value]
    if isinstance(value, (dict, celtypes.MapType)):
        return {str(k): to_python(v) for k, v in value.items()}
    return value
