"""User rule files and threshold overrides from a config file.

Read-only and separate from the gate's configuration (``advisor.settings``):
this module only looks up two entries, in the first of these files found
in the given folder (the current directory for the CLI):

* ``advisor.toml``: top-level ``rules`` and ``thresholds``, or the same
  under a ``[tool.advisor]`` table;
* ``pyproject.toml``: ``[tool.advisor]``.

``rules`` is a list of rule files or folders (relative paths are relative
to the config file); ``thresholds`` maps ``"rule.param"`` to a number, the
same as ``--set rule.param=value``. The CLI loads these first and then its
own ``--rules`` and ``--set`` on top.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from advisor.errors import ConfigError

CONFIG_FILES = ("advisor.toml", "pyproject.toml")


@dataclass
class UserRules:
    """Rule paths and overrides ({rule: {param: value}}) from a config file."""

    rules: list[Path] = field(default_factory=list)
    overrides: dict[str, dict[str, float]] = field(default_factory=dict)
    source: Path | None = None


def _section(path: Path) -> dict | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    tool = data.get("tool", {}).get("advisor") if isinstance(data.get("tool"), dict) else None
    if path.name == "advisor.toml":
        return tool if isinstance(tool, dict) else data
    return tool if isinstance(tool, dict) else None


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


def find_config(folder: Path | None = None) -> Path | None:
    """The config file that holds advisor settings in ``folder`` (default:
    the current directory), or None."""
    folder = Path.cwd() if folder is None else Path(folder)
    for name in CONFIG_FILES:
        path = folder / name
        if path.is_file() and _section(path) is not None:
            return path
    return None


def load_user_rules(folder: Path | None = None) -> UserRules:
    """Rule paths and threshold overrides from the config in ``folder``;
    empty when there is none. ConfigError names the file and the entry."""
    path = find_config(folder)
    if path is None:
        return UserRules()
    section = _section(path) or {}
    rules = section.get("rules", [])
    if isinstance(rules, str):
        rules = [rules]
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise ConfigError(f"{path}: rules: expected a list of paths")
    thresholds = section.get("thresholds", {})
    if not isinstance(thresholds, dict):
        raise ConfigError(f"{path}: thresholds: expected a table of \"rule.param\" = number")
    base = path.parent
    return UserRules(
        rules=[(base / r) if not Path(r).is_absolute() else Path(r) for r in rules],
        overrides=parse_thresholds(thresholds, str(path)),
        source=path,
    )


def merge(config: UserRules, rule_paths, overrides: dict[str, dict[str, float]]):
    """Config first, command line on top: (rule paths, overrides)."""
    merged = {rule: dict(params) for rule, params in config.overrides.items()}
    for rule, params in overrides.items():
        merged.setdefault(rule, {}).update(params)
    return [*config.rules, *[Path(p) for p in rule_paths]], merged
