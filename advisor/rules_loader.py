"""Finding, reading and validating rule files."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from advisor.errors import ConfigError
from advisor.rule_schema import Rule


def builtin_rule_files() -> list[Path]:
    """The rule files shipped with advisor (``advisor.rules`` package data)."""
    root = resources.files("advisor.rules")
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))


def _rule_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
    if path.is_file():
        return [path]
    raise ConfigError(f"{path}: no such rule file or folder")


def read_rule(path: Path) -> Rule:
    """Parse and validate one rule file; ConfigError names the file and field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a readable YAML file ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a rule file must hold a mapping")
    try:
        return Rule.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise ConfigError(f"{path}: {where}: {err['msg']}") from None


def load_rules(extra: list[Path] | tuple[Path, ...] = ()) -> list[Rule]:
    """Built-in rules plus user rule files/folders; ids and names must be unique."""
    files = builtin_rule_files()
    for path in extra:
        files.extend(_rule_files(Path(path)))
    rules: list[Rule] = []
    seen: dict[str, Path] = {}
    for path in files:
        rule = read_rule(path)
        for key in (rule.id, rule.name):
            if key in seen:
                raise ConfigError(f"{path}: {key} is already used by {seen[key]}")
            seen[key] = path
        rules.append(rule)
    return rules


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
