"""Options several commands share, and what they mean: the report language,
extra rule files and threshold overrides (on top of the config file's,
``advisor.settings``), and the output folder that must not be an input."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.collectors.io import limits
from advisor.errors import ConfigError
from advisor.i18n import DEFAULT_LANG, LANGS
from advisor.settings import load_settings


def lang_option(help: str):
    """``--lang``: one of ``advisor.i18n.LANGS``."""
    return click.option("--lang", type=click.Choice(list(LANGS)), default=DEFAULT_LANG, show_default=True, help=help)


def rules_option(help: str | None = None):
    """``--rules PATH`` (repeatable): extra rule files or folders."""
    return click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path), help=help)


def report_options(func):
    """The options of the commands that write a report."""
    func = click.option("--no-color", is_flag=True, help="Plain terminal output.")(func)
    func = click.option(
        "--max-decompressed", metavar="SIZE", default=None,
        callback=lambda ctx, param, v: None if v is None else limits.parse_size(v, "--max-decompressed"),
        help=f"Refuse a gzip input that decompresses to more than SIZE, e.g. 8G "
             f"(default {limits.MAX_DECOMPRESSED >> 30}G).")(func)
    func = click.option(
        "--max-expansion", metavar="RATIO", default=None,
        callback=lambda ctx, param, v: None if v is None else limits.parse_ratio(v, "--max-expansion"),
        help=f"Refuse a gzip input that expands more than RATIO times (default {limits.MAX_EXPANSION}).")(func)
    func = lang_option("Report language: en, or zh (Chinese) for the whole report.")(func)
    func = click.option(
        "--set", "overrides", multiple=True, metavar="RULE.PARAM=VALUE",
        help="Override a rule threshold, e.g. input-bound.min_data_wait_ratio=0.2 (repeatable).",
    )(func)
    return rules_option("Extra rule file or folder (repeatable).")(func)


def parse_overrides(items: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """``RULE.PARAM=VALUE`` strings -> {rule: {param: value}}."""
    out: dict[str, dict[str, float]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        rule, dot, param = key.partition(".")
        if not sep or not dot or not rule or not param:
            raise ConfigError(f"--set {item!r}: expected RULE.PARAM=VALUE, e.g. input-bound.min_data_wait_ratio=0.2")
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"--set {item!r}: {raw!r} is not a number") from None
        out.setdefault(rule, {})[param] = value
    return out


def user_rules(rule_paths=(), overrides: tuple[str, ...] = (), max_decompressed=None, max_expansion=None):
    """Rule paths and overrides: the config file's (found from the current
    folder, ``advisor.settings``), then the command line's on top. Puts the
    input bounds in force the same way."""
    settings = load_settings()
    settings.apply_limits(max_decompressed, max_expansion)
    return settings.with_command_line(rule_paths, parse_overrides(overrides))


def refuse_inside(out: Path, *sources: Path) -> None:
    """Never write into an input folder: ConfigError when the output folder
    ``out`` is one of ``sources`` or inside one."""
    o = Path(out).resolve()
    for src in sources:
        s = Path(src).resolve()
        if s.is_dir() and (o == s or s in o.parents):
            raise ConfigError(f"{out}: the output folder is inside the input {src}; choose another -o")
