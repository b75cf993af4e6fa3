"""``advisor rules``, ``advisor metrics`` and ``advisor schema``: what
advisor knows -- its rules (list, explain, document, validate), its metrics
and the JSON Schemas of report.json and rule files."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from advisor.cli.console import EXIT_BAD_INPUT
from advisor.cli.options import lang_option, rules_option, user_rules
from advisor.errors import ConfigError
from advisor.settings import load_settings

_LANG_OPTION = lang_option("Language of the rule texts.")


@click.group()
def rules() -> None:
    """List, explain and validate rules."""


def _rule_set(rule_paths, lang: str):
    """Built-in rules, the config file's rules, then ``--rules``."""
    from advisor.engine.loader import load_rules

    paths, _, _ = user_rules(load_settings(), rule_paths)
    return load_rules(paths, lang=lang)


@rules.command("list")
@rules_option()
@_LANG_OPTION
def rules_list(rule_paths, lang: str) -> None:
    """One line per rule: id, name, group, status, title."""
    from advisor.reports.sanitize import clean

    for r in sorted(_rule_set(rule_paths, lang), key=lambda r: r.id):  # user rules' titles: their text
        click.echo(f"{r.id}  {r.name:<20} {r.group:<14} {r.status:<10} {clean(r.title)}")


@rules.command("explain")
@click.argument("name")
@rules_option()
@_LANG_OPTION
def rules_explain(name: str, rule_paths, lang: str) -> None:
    """What a rule detects, why it matters, how to fix it, thresholds, examples."""
    from advisor.cli.suggest import did_you_mean
    from advisor.engine.docs import explain_rule
    from advisor.reports.sanitize import clean

    rule_set = _rule_set(rule_paths, lang)
    for r in rule_set:
        if name in (r.name, r.id):
            click.echo(clean(explain_rule(r, lang), multiline=True))
            return
    hint = did_you_mean(name, [n for r in rule_set for n in (r.name, r.id)])
    raise ConfigError(f"no rule named {name!r}{hint} (see `advisor rules list`)")


@rules.command("docs")
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), default=None,
              help="Write to this file instead of standard output (e.g. docs/rules.md).")
@_LANG_OPTION
def rules_docs(out, lang: str) -> None:
    """The built-in rules as a Markdown reference (docs/rules.md)."""
    from advisor.engine.docs import rules_markdown
    from advisor.runtime.files import write_text

    text = rules_markdown(lang)
    if out is None:
        click.echo(text, nl=False)
    else:
        write_text(out, text)
        click.echo(f"wrote {out}")


@rules.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
def rules_validate(paths) -> None:
    """Check rule files: schema, CEL, known metric ids, and their examples."""
    from advisor.engine.check import check_rules
    from advisor.reports.sanitize import clean

    problems, count = check_rules(list(paths))
    for p in problems:  # they quote the files' values
        click.echo(clean(p), err=True)
    if problems:
        sys.exit(EXIT_BAD_INPUT)
    click.echo(f"{count} rule(s) valid")


@click.group()
def metrics() -> None:
    """List and explain metrics."""


@metrics.command("list")
def metrics_list() -> None:
    """Every metric id with its unit and one-line definition."""
    from advisor.metrics import REGISTRY

    for spec in REGISTRY.values():
        click.echo(f"{spec.id:<34} {spec.unit:<6} {spec.summary}")


@metrics.command("explain")
@click.argument("metric_id")
def metrics_explain(metric_id: str) -> None:
    """A metric's full definition."""
    from advisor.cli.suggest import did_you_mean
    from advisor.metrics import REGISTRY

    spec = REGISTRY.get(metric_id)
    if spec is None:
        hint = did_you_mean(metric_id, REGISTRY)
        raise ConfigError(f"no metric {metric_id!r}{hint} (see `advisor metrics list`)")
    needs = ", ".join(spec.needs) or "-"
    click.echo(f"{spec.id}  [{spec.unit}, scope {spec.scope}]\nneeds: {needs}\n\n{spec.doc}")


@click.command()
@click.option("--rules", "rules_schema", is_flag=True, help="The rule-file schema instead of report.json's.")
def schema(rules_schema: bool) -> None:
    """Print the JSON Schema of report.json (or of rule files)."""
    import json

    from advisor.engine.schema import Rule
    from advisor.model import Report

    model = Rule if rules_schema else Report
    click.echo(json.dumps(model.model_json_schema(), indent=2))
