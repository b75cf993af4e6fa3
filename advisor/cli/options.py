"""Options several commands share, and what they mean: the report language,
the config file and strict config, extra rule files and threshold
overrides (on top of the config file's, ``advisor.settings``), and the
output folder that must not be an input."""

from __future__ import annotations

import math
from pathlib import Path

import click

from advisor.collectors.io import limits
from advisor.errors import ConfigError
from advisor.i18n import DEFAULT_LANG, LANGS
from advisor.settings import CI_ENV, CI_MARKERS, CONFIG_FILES, STRICT_ENV, Settings, load_settings, strict_default


def lang_option(help: str):
    """``--lang``: one of ``advisor.i18n.LANGS``."""
    return click.option("--lang", type=click.Choice(list(LANGS)), default=DEFAULT_LANG, show_default=True, help=help)


def rules_option(help: str | None = None):
    """``--rules PATH`` (repeatable): extra rule files or folders."""
    return click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path), help=help)


def config_options(func):
    """``--config PATH`` (that file only) and ``--strict-config`` /
    ``--no-strict-config`` (default: ``advisor.settings.strict_default``)."""
    func = click.option(
        "--strict-config/--no-strict-config", "strict_config", default=None,
        help=f"Refuse settings from the working tree that weaken checks: thresholds, a loosened [gate] "
             f"(default: on when {STRICT_ENV}=1, {CI_ENV}=true or one of {', '.join(CI_MARKERS)} is set).")(func)
    return click.option(
        "--config", "config_path", type=click.Path(path_type=Path), default=None,
        help=f"Config file, and only it (default: {CONFIG_FILES[0]} or {CONFIG_FILES[1]} [tool.advisor] "
             "found from here up to the repository root).")(func)


def settings_for(config_path: Path | None, strict_config: bool | None) -> Settings:
    """The settings the options name (``advisor.settings.load_settings``)."""
    strict = strict_default() if strict_config is None else strict_config
    return load_settings(config_path, strict=strict)


def report_options(func):
    """The options of the commands that write a report."""
    func = config_options(func)
    func = click.option("-v", "--verbose", is_flag=True,
                        help="Print every finding's fix on the terminal (default: the top finding's).")(func)
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
        if not math.isfinite(value):
            raise ConfigError(f"--set {item!r}: {raw!r} is not a finite number")
        out.setdefault(rule, {})[param] = value
    return out


def user_rules(settings: Settings, rule_paths=(), overrides: tuple[str, ...] = (), max_decompressed=None,
               max_expansion=None):
    """Rule paths, overrides and what was applied (``Settings.used``): the
    config file's, then the command line's on top. Puts the input bounds in
    force the same way."""
    settings.apply_limits(max_decompressed, max_expansion)
    parsed = parse_overrides(overrides)
    paths, merged = settings.with_command_line(rule_paths, parsed)
    return paths, merged, settings.used(rule_paths, parsed)


def refuse_inside(out: Path, *sources: Path, what: str = "the output folder", option: str = "-o") -> None:
    """Never write into an input folder: ConfigError when the folder ``out``
    is one of ``sources`` or inside one, or, for a source that is a file,
    the folder holding it."""
    o = Path(out).resolve()
    for src in sources:
        s = Path(src).resolve()
        if s.is_dir() and (o == s or s in o.parents):
            raise ConfigError(f"{out}: {what} is inside the input {src}; choose another {option}")
        if s.is_file() and o == s.parent:
            raise ConfigError(f"{out}: {what} is the folder of the input {src}; choose another {option}")
