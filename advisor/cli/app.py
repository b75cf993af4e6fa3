"""The `advisor` command line.

Exit codes: 0 success, 1 a gate failed (reserved), 2 unusable input or
configuration (one line on stderr naming the file and the problem).
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
from pathlib import Path

import click

from advisor import __version__
from advisor.errors import AdvisorError, ConfigError
from advisor.i18n import LANGS
from advisor.runtime.stream_guard import guarded_output

EXIT_BAD_INPUT = 2
#: ``--kernel-ranks``'s default as its help states it; the value is
#: ``advisor.collectors.parallel.kernel_sample.DEFAULT_LIMIT`` (imported with pandas,
#: which the CLI loads only for commands that analyze).
KERNEL_RANKS_HELP = "128"


def _console(no_color: bool):
    from rich.console import Console

    return Console(stderr=False, no_color=no_color or bool(os.environ.get("NO_COLOR")), highlight=False)


def _parse_overrides(items: tuple[str, ...]) -> dict[str, dict[str, float]]:
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


def _kernel_ranks(value: str | None) -> int | str | None:
    """``--kernel-ranks``: "sample" when not given (``advisor.pipeline.analyze``'s
    default), None for all, else the limit."""
    if value is None:
        return "sample"
    if value.strip().lower() == "all":
        return None
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit < 1:
        raise click.BadParameter(f"{value!r}: a number of ranks (1 or more) or all")
    return limit


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def cli() -> None:
    """Rule-based performance advisor for deep-learning training profiles."""


def _user_rules(rule_paths, overrides: tuple[str, ...]):
    """Rule paths and overrides: the config file's (found from the current
    folder, ``advisor.settings``), then the command line's on top."""
    from advisor.settings import load_settings

    return load_settings().with_command_line(rule_paths, _parse_overrides(overrides))


def _report_options(func):
    func = click.option("--no-color", is_flag=True, help="Plain terminal output.")(func)
    func = click.option("--lang", type=click.Choice(list(LANGS)), default="en", show_default=True,
                        help="Report language: en, or zh (Chinese) for the whole report.")(func)
    func = click.option(
        "--set", "overrides", multiple=True, metavar="RULE.PARAM=VALUE",
        help="Override a rule threshold, e.g. input-bound.min_data_wait_ratio=0.2 (repeatable).",
    )(func)
    func = click.option(
        "--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
        help="Extra rule file or folder (repeatable).",
    )(func)
    return func


@cli.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=Path("advisor_report"),
              show_default=True, help="Folder that receives report.html, report.md and report.json.")
@click.option("-j", "--jobs", type=int, default=None,
              help="Worker processes for reading ranks, or the parts of one large trace "
                   "(default: the CPUs this process may use, container limits included; 1 = in process).")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="Read ranks on an existing Dask cluster, e.g. tcp://scheduler:8786.")
@click.option("--kernel-ranks", default=None, metavar="N|all", callback=lambda ctx, param, value: _kernel_ranks(value),
              help="Read kernel files (operators, device idle) on at most N ranks of a larger "
                   f"cluster, spread over hosts and stages (default: {KERNEL_RANKS_HELP}); all: on every "
                   "rank. Step-trace and communication files are read on every rank.")
@_report_options
def report(path: Path, out_dir: Path, jobs, dask_address, kernel_ranks, rule_paths, overrides, lang: str,
           no_color: bool) -> None:
    """Analyze profiler output at PATH (a folder or a trace file) and write the report."""
    from advisor.pipeline import analyze

    _refuse_inside(out_dir, path)
    rule_paths, parsed = _user_rules(rule_paths, overrides)
    console = _console(no_color)
    with _reading(console, lang):
        result = analyze(path, rule_paths=rule_paths, overrides=parsed, jobs=jobs,
                         dask_address=dask_address, lang=lang, kernel_ranks=kernel_ranks)
    _emit(result, out_dir, lang, no_color)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", default=5, show_default=True, help="Steps to record.")
@click.option("--warmup", default=3, show_default=True, help="Steps to skip before recording.")
@click.option("--timeout", type=float, default=None, help="Kill the job after this many seconds.")
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=Path("advisor_run"),
              show_default=True, help="Folder for the traces (trace/) and the report.")
@_report_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run(steps, warmup, timeout, out_dir: Path, rule_paths, overrides, lang, no_color, command) -> None:
    """Run a training script under the profiler and report on it.

    \b
    advisor run train.py --lr 0.1
    advisor run --steps 20 -o out -- torchrun --nproc_per_node 4 train.py
    """
    from advisor.collectors.live.runner import run_profiled
    from advisor.pipeline import analyze

    rule_paths, parsed = _user_rules(rule_paths, overrides)
    result = run_profiled(list(command), out_dir, steps=steps, warmup=warmup, timeout=timeout)
    for note in result.notes:
        click.echo(f"advisor: {note}", err=True)
    report_obj = analyze(result.trace_dir, rule_paths=rule_paths, overrides=parsed, lang=lang)
    _emit(report_obj, out_dir, lang, no_color)
    if result.exit_code != 0:
        click.echo(f"advisor: the training command exited with code {result.exit_code}", err=True)
        sys.exit(result.exit_code)


def _refuse_inside(out_dir: Path, source: Path) -> None:
    """Never write into the input folder."""
    src = source.resolve()
    out = out_dir.resolve()
    if src.is_dir() and (out == src or src in out.parents):
        raise ConfigError(f"{out_dir}: the output folder is inside the input {source}; choose another -o")


def _reading(console, lang: str):
    """A status line on stderr while a profile is read (terminals only;
    drawn without a thread, see ``advisor.runtime.progress``)."""
    import contextlib

    from advisor.reports.i18n import t
    from advisor.runtime.progress import status

    if not console.is_terminal or console.no_color:
        return contextlib.nullcontext()
    return status(t(lang, "term_reading"))


def _emit(result, out_dir: Path, lang: str, no_color: bool) -> None:
    from advisor.reports import write_reports
    from advisor.reports.i18n import t
    from advisor.reports.terminal import print_summary

    paths = write_reports(result, out_dir, lang=lang)
    console = _console(no_color)
    print_summary(result, console, lang=lang)
    console.print(t(lang, "term_report", path=paths["html"]), markup=False)


@cli.group()
def rules() -> None:
    """List, explain and validate rules."""


def _rule_set(rule_paths, lang: str = "en"):
    """Built-in rules, the config file's rules, then ``--rules``."""
    from advisor.engine.loader import load_rules

    paths, _ = _user_rules(rule_paths, ())
    return load_rules(paths, lang=lang)


_LANG_OPTION = click.option("--lang", type=click.Choice(list(LANGS)), default="en", show_default=True,
                            help="Language of the rule texts.")


@rules.command("list")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path))
@_LANG_OPTION
def rules_list(rule_paths, lang: str) -> None:
    """One line per rule: id, name, group, status, title."""
    for r in sorted(_rule_set(rule_paths, lang), key=lambda r: r.id):
        click.echo(f"{r.id}  {r.name:<20} {r.group:<14} {r.status:<10} {r.title}")


@rules.command("explain")
@click.argument("name")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path))
@_LANG_OPTION
def rules_explain(name: str, rule_paths, lang: str) -> None:
    """What a rule detects, why it matters, how to fix it, thresholds, examples."""
    from advisor.engine.docs import explain_rule

    for r in _rule_set(rule_paths, lang):
        if name in (r.name, r.id):
            click.echo(explain_rule(r, lang))
            return
    raise ConfigError(f"no rule named {name!r} (see `advisor rules list`)")


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

    problems, count = check_rules(list(paths))
    for p in problems:
        click.echo(p, err=True)
    if problems:
        sys.exit(EXIT_BAD_INPUT)
    click.echo(f"{count} rule(s) valid")


@cli.group()
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
    from advisor.metrics import REGISTRY

    spec = REGISTRY.get(metric_id)
    if spec is None:
        raise ConfigError(f"no metric {metric_id!r} (see `advisor metrics list`)")
    needs = ", ".join(spec.needs) or "-"
    click.echo(f"{spec.id}  [{spec.unit}, scope {spec.scope}]\nneeds: {needs}\n\n{spec.doc}")


@cli.command()
@click.option("--rules", "rules_schema", is_flag=True, help="The rule-file schema instead of report.json's.")
def schema(rules_schema: bool) -> None:
    """Print the JSON Schema of report.json (or of rule files)."""
    import json

    from advisor.engine.schema import Rule
    from advisor.model import Report

    model = Rule if rules_schema else Report
    click.echo(json.dumps(model.model_json_schema(), indent=2))


# Command groups that live in their own modules register themselves here.
PLUGINS = ("advisor.cli.regression",)
for _name in PLUGINS:
    try:
        importlib.import_module(_name).register(cli)
    except ModuleNotFoundError as _exc:  # a command module not shipped yet
        if _exc.name != _name:
            raise


#: Allocations between two collections of the youngest generation (Python's
#: default is 700). The imports and tables of one run leave ~10^6 objects
#: alive to the end, and at the default the cycle collector walks them again
#: and again; cycles are still collected, just in fewer, larger passes.
GC_THRESHOLD = 50_000


def main(argv: list[str] | None = None) -> None:
    """Entry point: AdvisorError -> one line on stderr and exit code 2.

    Garbage collection runs every ``GC_THRESHOLD`` allocations, and what is
    alive when the process exits is frozen first, so the interpreter's exit
    skips its last full collection over everything (~0.1 s of every run)."""
    if gc.get_threshold()[0] < GC_THRESHOLD:
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
        atexit.register(gc.freeze)
    with guarded_output():
        try:
            cli.main(args=argv, prog_name="advisor", standalone_mode=False)
        except click.exceptions.Abort:
            click.echo("advisor: aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            exc.show()
            sys.exit(EXIT_BAD_INPUT)
        except AdvisorError as exc:
            click.echo(f"advisor: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("advisor: interrupted", err=True)
            sys.exit(130)


if __name__ == "__main__":
    main()
