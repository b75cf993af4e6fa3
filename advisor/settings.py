"""The user's configuration: extra rule files, threshold overrides and the
regression gate, from one file.

Which file: ``--config PATH`` -- that file only, nothing else is merged;
otherwise the first of ``CONFIG_FILES`` found in the current folder, then in
each parent folder up to and including the repository root (the folder
holding ``.git``), never above it; outside a git repository, in the current
folder only. An ``advisor.toml`` always counts; a ``pyproject.toml`` only
with a ``[tool.advisor]`` table. Without a file, nothing is overridden.

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
``thresholds``, ``--max-decompressed`` / ``--max-expansion`` over ``limits``. A bad file raises
``ConfigError`` with one line naming the file and the entry; thresholds must be finite numbers.

**Trust.** The *working tree under test* is the repository holding the
current folder (outside a repository: the current folder). A config file
found there, or given with ``--config`` but lying there, belongs to the
code under test: in CI it comes from the pull request. With strict config
(``--strict-config``; the default where ``STRICT_ENV`` says so, or on CI,
see :func:`strict_default`) such a file may not weaken what advisor
checks: its ``thresholds`` and ``limits`` are refused here (a threshold can
silence a rule, and which way silences is the rule's business; a raised
input bound lets a bomb run), and ``advisor.regression.budgets`` refuses a
``[gate]`` table that loosens the gate's defaults. A ``--config`` file
outside the working tree and the command line are the CI job's own and
are trusted. Whatever the mode, :meth:`Settings.used` records what was
applied, and reports and gate verdicts name it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomllib

from advisor.collectors.io import limits as input_limits
from advisor.errors import ConfigError
from advisor.reports.i18n import Message

#: Config file names, in the order they are looked for in each folder.
CONFIG_FILES = ("advisor.toml", "pyproject.toml")
#: The table of ``pyproject.toml`` (and optionally ``advisor.toml``) that holds the settings.
TOOL_TABLE = ("tool", "advisor")
#: Environment variable that sets strict config on ("1", "true", "yes") or
#: off ("0", "false", "no") when the command line does not say.
STRICT_ENV = "ADVISOR_STRICT_CONFIG"
#: Set to "true" (or "1") by GitHub Actions, GitLab CI, Travis, CircleCI,
#: Buildkite and most other CI systems: strict config is then the default,
#: because there the working tree is the code under review.
CI_ENV = "CI"
#: Variables that CI systems which do not set ``CI_ENV`` set on every job
#: (their documented build variables): Azure Pipelines, Jenkins, TeamCity,
#: AWS CodeBuild. Any of them set makes strict config the default too.
CI_MARKERS = ("TF_BUILD", "JENKINS_URL", "TEAMCITY_VERSION", "CODEBUILD_BUILD_ID")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def strict_default(environ=None) -> bool:
    """Whether strict config is on when the command line does not say:
    ``STRICT_ENV`` when set, else whether ``CI_ENV`` is true or one of
    ``CI_MARKERS`` is set. ConfigError for a ``STRICT_ENV`` value that is
    neither yes nor no."""
    environ = os.environ if environ is None else environ
    value = environ.get(STRICT_ENV)
    if value is not None:
        if value.strip().lower() in _TRUE:
            return True
        if value.strip().lower() in _FALSE:
            return False
        raise ConfigError(f"{STRICT_ENV}={value!r}: expected 1 or 0")
    return environ.get(CI_ENV, "").strip().lower() in _TRUE[:2] or any(environ.get(v) for v in CI_MARKERS)


def working_tree(start: Path | None = None) -> Path:
    """The working tree under test seen from ``start`` (default: the
    current folder): the repository root holding it, else ``start`` itself."""
    here = Path(start or Path.cwd()).resolve()
    return next((folder for folder in (here, *here.parents) if (folder / ".git").exists()), here)


@dataclass
class Settings:
    """What a config file says (empty without one). ``gate`` is the raw
    ``[gate]`` table, read by ``advisor.regression.budgets``; ``gate_table``
    is its dotted name in the file, for messages. ``origin``: how the file
    was chosen ("found" by the lookup, "given" with ``--config``, "none");
    ``in_working_tree``: it lies in the working tree under test;
    ``strict``: strict config is on (see the module doc)."""

    rules: list[Path] = field(default_factory=list)
    overrides: dict[str, dict[str, float]] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    gate_table: str = "gate"
    max_decompressed: int | None = None
    max_expansion: float | None = None
    source: Path | None = None
    origin: Literal["none", "found", "given"] = "none"
    in_working_tree: bool = False
    strict: bool = False

    @property
    def untrusted(self) -> bool:
        """Strict config is on and the file belongs to the code under test:
        it may not weaken what advisor checks."""
        return self.strict and self.source is not None and self.in_working_tree

    def used(self, rule_paths=(), overrides: dict[str, dict[str, float]] | None = None, *,
             gate: bool = False) -> dict[str, Any]:
        """What was applied, for ``advisor.model.ConfigUsed``: the file, how
        it was chosen, its rules and thresholds, the command line's
        ``rule_paths`` and ``overrides`` (``--rules``, ``--set``), and with
        ``gate`` the file's ``[gate]`` table."""
        return {
            "file": None if self.source is None else str(self.source),
            "origin": self.origin,
            "in_working_tree": self.in_working_tree,
            "strict": self.strict,
            "rules": [str(p) for p in [*self.rules, *rule_paths]],
            "thresholds": dotted(self.overrides),
            "overrides": dotted(overrides or {}),
            "gate": dict(self.gate) if gate else {},
        }

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


def in_working_tree(path: Path, start: Path | None = None) -> bool:
    """Whether ``path`` lies in the working tree under test seen from
    ``start``: where it is written (its path made absolute without following
    links) or where it leads (resolved). A link in the tree is the tree's
    content: pointing it at a file outside (one the code under test wrote
    into /tmp) does not make that file the CI job's own."""
    tree = working_tree(start)
    written = Path(os.path.normpath(Path.cwd().resolve() / Path(path)))
    return written.is_relative_to(tree) or Path(path).resolve().is_relative_to(tree)


def find_config(start: Path | None = None) -> Path | None:
    """The config file that applies in ``start`` (default: the current
    folder), or None (see the module doc for where it is looked for)."""
    here = Path(start or Path.cwd()).resolve()
    root = working_tree(here)
    for folder in (here, *here.parents[: len(here.parts) - len(root.parts)]):
        for name in CONFIG_FILES:
            path = folder / name
            if path.is_file() and _advisor_table(path) is not None:
                return path
    return None


def load_settings(path: Path | None = None, *, start: Path | None = None, strict: bool = False) -> Settings:
    """The settings of ``path`` (ConfigError when it does not exist), else of
    the config file found from ``start``, else empty ones. ``strict``:
    refuse thresholds from a file in the working tree (see the module doc)."""
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"{path}: no such config file")
    origin = "given" if path is not None else "found"
    path = Path(path) if path is not None else find_config(start)
    if path is None:
        return Settings(strict=strict)
    in_tree = origin == "found" or in_working_tree(path, start)
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
    settings = Settings(
        rules=[path.parent / r for r in rules],
        overrides=parse_thresholds(thresholds, str(path)),
        gate=gate,
        gate_table=_key(prefix, "gate"),
        max_decompressed=(input_limits.parse_size(bounds["max_decompressed"], f"{where}.max_decompressed")
                          if "max_decompressed" in bounds else None),
        max_expansion=(input_limits.parse_ratio(bounds["max_expansion"], f"{where}.max_expansion")
                       if "max_expansion" in bounds else None),
        source=path,
        origin=origin,
        in_working_tree=in_tree,
        strict=strict,
    )
    if settings.untrusted and thresholds:
        key = next(iter(thresholds))
        raise ConfigError(f"{path}: {_key(prefix, 'thresholds')}.{key}: {untrusted_refusal('threshold overrides')}")
    if settings.untrusted and bounds:
        key = next(iter(bounds))
        raise ConfigError(f"{path}: {_key(prefix, 'limits')}.{key}: {untrusted_refusal('input bounds')}")
    return settings


def untrusted_refusal(what: str) -> str:
    """The reason a setting from the working tree is refused under strict config."""
    return (f"{what} from the working tree under test are refused under strict config "
            f"(--strict-config, {STRICT_ENV}=1 or {CI_ENV}=true): put them in a --config file outside the "
            "working tree, or turn strict config off with --no-strict-config")


def parse_thresholds(items: dict, where: str) -> dict[str, dict[str, float]]:
    """``{"rule.param": value}`` -> ``{rule: {param: value}}``; every value a
    finite number (a NaN threshold makes every comparison false and so
    silences its rule)."""
    out: dict[str, dict[str, float]] = {}
    for key, value in items.items():
        rule, dot, param = str(key).partition(".")
        if not dot or not rule or not param:
            raise ConfigError(f"{where}: thresholds key {key!r}: expected \"rule.param\"")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: thresholds {key!r}: {value!r} is not a number")
        if not math.isfinite(value):
            raise ConfigError(f"{where}: thresholds {key!r}: {value!r} is not a finite number")
        out.setdefault(rule, {})[param] = float(value)
    return out


def dotted(overrides: dict[str, dict[str, float]]) -> dict[str, float]:
    """``{rule: {param: value}}`` -> ``{"rule.param": value}``."""
    return {f"{rule}.{param}": value for rule, params in overrides.items() for param, value in params.items()}


def is_default(used: dict[str, Any] | None) -> bool:
    """Whether a ``Settings.used`` record applied nothing: no file, no
    ``--set``, no extra rules."""
    return used is not None and not (used.get("file") or used.get("overrides") or used.get("rules"))


def describe(used: dict[str, Any] | None, *, strict: bool = True) -> Message:
    """One line naming what a ``Settings.used`` record applied (``strict``:
    and whether strict config was on); a Message, English as a ``str``."""
    if used is None:
        return Message("cfg_not_recorded")
    parts: list[str] = []
    if used.get("file"):
        where = Message("cfg_in_tree" if used.get("in_working_tree") else "cfg_outside_tree")
        how = Message("cfg_found" if used.get("origin") == "found" else "cfg_given")
        parts.append(Message("cfg_file", file=str(used["file"]), how=how, where=where))
    else:
        parts.append(Message("cfg_defaults"))
    if used.get("gate"):
        parts.append("[gate] " + ", ".join(f"{k} = {_toml(v)}" for k, v in used["gate"].items()))
    if used.get("thresholds"):
        parts.append(Message("cfg_thresholds", items=", ".join(f"{k}={v:g}" for k, v in used["thresholds"].items())))
    if used.get("overrides"):
        parts.append("--set " + ", ".join(f"{k}={v:g}" for k, v in used["overrides"].items()))
    if used.get("rules"):
        parts.append(Message("cfg_extra_rules", items=", ".join(used["rules"])))
    if strict:
        parts.append(Message("cfg_strict_on" if used.get("strict") else "cfg_strict_off"))
    line = parts[-1]
    for part in reversed(parts[:-1]):
        line = Message("cfg_and", first=part, rest=line)
    return line


def _toml(value: Any) -> str:
    """A config value as it would be written in TOML (for messages)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


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
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise ConfigError(f"{path}: not valid TOML (arrays or tables nested too deeply to read)") from None
