"""The user's configuration: extra rule files, threshold overrides and the
regression gate, from one file.

Which file: ``--config PATH`` where a command has it; otherwise the first of
``CONFIG_FILES`` found in the current folder, then in each parent folder up
to and including the repository root (the folder holding ``.git``), never
above it; outside a git repository, in the current folder only. An
``advisor.toml`` always counts; a ``pyproject.toml`` only with a
``[tool.advisor]`` table. Without a file, nothing is overridden.

What it holds: in ``pyproject.toml`` the table ``[tool.advisor]``; in
``advisor.toml`` the top level (or the same ``[tool.advisor]`` table when
the file has one)::

    rules = ["team_rules"]                        # rule files or folders, relative to the file
    [thresholds]                                  # the same as --set rule.param=value
    "input-bound.min_data_wait_ratio" = 0.2
    [gate]                                        # advisor gate: advisor.regression.budgets
    fail_on = ["high"]
    [limits]                                      # bounds on decompressed input (collectors.io.limits)
    max_decompressed = "8G"                       # the same as --max-decompressed
    max_expansion = 200                           # the same as --max-expansion

The command line goes on top: ``--rules`` adds files, ``--set`` wins over
``thresholds``, ``--max-decompressed`` / ``--max-expansion`` over ``limits``. A bad file raises ``ConfigError`` with one line naming the
file and the entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from advisor.collectors.io import limits as input_limits
from advisor.errors import ConfigError

#: Config file names, in the order they are looked for in each folder.
CONFIG_FILES = ("advisor.toml", "pyproject.toml")
#: The table of ``pyproject.toml`` (and optionally ``advisor.toml``) that holds the settings.
TOOL_TABLE = ("tool", "advisor")


@dataclass
class Settings:
    """What a config file says (empty without one). ``gate`` is the raw
    ``[gate]`` table, read by ``advisor.regression.budgets``; ``gate_table``
    is its dotted name in the file, for messages."""

    rules: list[Path] = field(default_factory=list)
    overrides: dict[str, dict[str, float]] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    gate_table: str = "gate"
    max_decompressed: int | None = None
    max_expansion: float | None = None
    source: Path | None = None

    def with_command_line(self, rule_paths=(), overrides: dict[str, dict[str, float]] | None = None):
        """The config's rule paths and overrides with the command line's on
        top: (rule paths, {rule: {param: value}})."""
        merged = {rule: dict(params) for rule, params in self.overrides.items()}
        for rule, params in (overrides or {}).items():
            merged.setdefault(rule, {}).update(params)
        return [*self.rules, *[Path(p) for p in rule_paths]], merged

    def apply_limits(self, max_decompressed: int | None = None, max_expansion: float | None = None) -> None:
        """Put the input bounds in force (``advisor.collectors.io.limits``):
        the given ones (the command line's), else the config file's, else
        the defaults."""
        input_limits.configure(max_decompressed or self.max_decompressed or input_limits.MAX_DECOMPRESSED,
                               max_expansion or self.max_expansion or input_limits.MAX_EXPANSION)


def find_config(start: Path | None = None) -> Path | None:
    """The config file that applies in ``start`` (default: the current
    folder), or None (see the module doc for where it is looked for)."""
    here = Path(start or Path.cwd()).resolve()
    chain = (here, *here.parents)
    root = next((i for i, folder in enumerate(chain) if (folder / ".git").exists()), 0)
    for folder in chain[: root + 1]:
        for name in CONFIG_FILES:
            path = folder / name
            if path.is_file() and _advisor_table(path) is not None:
                return path
    return None


def load_settings(path: Path | None = None, *, start: Path | None = None) -> Settings:
    """The settings of ``path`` (ConfigError when it does not exist), else of
    the config file found from ``start``, else empty ones."""
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"{path}: no such config file")
    path = Path(path) if path is not None else find_config(start)
    if path is None:
        return Settings()
    table, prefix = _advisor_table(path) or ({}, ".".join(TOOL_TABLE))
    rules = table.get("rules", [])
    if isinstance(rules, str):
        rules = [rules]
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise ConfigError(f"{path}: {_key(prefix, 'rules')}: expected a list of paths")
    thresholds = table.get("thresholds", {})
    if not isinstance(thresholds, dict):
        raise ConfigError(f"{path}: {_key(prefix, 'thresholds')}: expected a table of \"rule.param\" = number")
    gate = table.get("gate", {})
    if not isinstance(gate, dict):
        raise ConfigError(f"{path}: [{_key(prefix, 'gate')}] must be a table")
    bounds = table.get("limits", {})
    where = f"{path}: {_key(prefix, 'limits')}"
    if not isinstance(bounds, dict) or set(bounds) - {"max_decompressed", "max_expansion"}:
        raise ConfigError(f"{where}: expected a table of max_decompressed and max_expansion")
    return Settings(
        rules=[path.parent / r for r in rules],
        overrides=parse_thresholds(thresholds, str(path)),
        gate=gate,
        gate_table=_key(prefix, "gate"),
        max_decompressed=(input_limits.parse_size(bounds["max_decompressed"], f"{where}.max_decompressed")
                          if "max_decompressed" in bounds else None),
        max_expansion=(input_limits.parse_ratio(bounds["max_expansion"], f"{where}.max_expansion")
                       if "max_expansion" in bounds else None),
        source=path,
    )


def parse_thresholds(items: dict, where: str) -> dict[str, dict[str, float]]:
    """``{"rule.param": value}`` -> ``{rule: {param: value}}``."""
    out: dict[str, dict[str, float]] = {}
    for key, value in items.items():
        rule, dot, param = str(key).partition(".")
        if not dot or not rule or not param:
            raise ConfigError(f"{where}: thresholds key {key!r}: expected \"rule.param\"")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: thresholds {key!r}: {value!r} is not a number")
        out.setdefault(rule, {})[param] = float(value)
    return out


def _key(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _advisor_table(path: Path) -> tuple[dict[str, Any], str] | None:
    """The settings table of ``path`` and its dotted name ("" for the top
    level); None for a ``pyproject.toml`` without ``[tool.advisor]``."""
    data = _read_toml(path)
    table: Any = data
    for part in TOOL_TABLE:
        table = table.get(part) if isinstance(table, dict) else None
    if isinstance(table, dict):
        return table, ".".join(TOOL_TABLE)
    return None if path.name == "pyproject.toml" else (data, "")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
