"""``advisor report`` and ``advisor run``: analyze a profile (or a training
run recorded under the profiler) and write report.html, report.md and
report.json, with a summary on the terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from advisor.cli.console import console, reading
from advisor.cli.options import refuse_inside, report_options, settings_for, user_rules
from advisor.collectors import KERNEL_RANKS


def _kernel_ranks(value: str | None) -> int | None:
    """``--kernel-ranks``: ``KERNEL_RANKS`` when not given, None for all,
    else the limit."""
    if value is None:
        return KERNEL_RANKS
    if value.strip().lower() == "all":
        return None
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit < 1:
        raise click.BadParameter(f"{value!r}: a number of ranks (1 or more) or all")
    return limit


@click.command()
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
                   f"cluster, spread over hosts and stages, the slowest in compute among them "
                   f"(default: {KERNEL_RANKS}); all: on every "
                   "rank. Step-trace and communication files are read on every rank.")
@report_options
def report(path: Path, out_dir: Path, jobs, dask_address, kernel_ranks, rule_paths, overrides, lang: str,
           no_color: bool, verbose: bool, config_path, strict_config, max_decompressed, max_expansion) -> None:
    """Analyze profiler output at PATH (a folder or a trace file) and write the report."""
    from advisor.pipeline import analyze

    refuse_inside(out_dir, path)
    rule_paths, parsed, used = user_rules(settings_for(config_path, strict_config), rule_paths, overrides,
                                          max_decompressed, max_expansion)
    with reading(lang, no_color):
        result = analyze(path, rule_paths=rule_paths, overrides=parsed, jobs=jobs,
                         dask_address=dask_address, lang=lang, kernel_ranks=kernel_ranks)
    _emit(result, out_dir, lang, no_color, used, verbose)


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", default=5, show_default=True, help="Steps to record.")
@click.option("--warmup", default=3, show_default=True, help="Steps to skip before recording.")
@click.option("--timeout", type=float, default=None, help="Kill the job after this many seconds.")
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=Path("advisor_run"),
              show_default=True, help="Folder for the traces (trace/) and the report.")
@click.option("--stacks", is_flag=True,
              help="Also record Python stacks and garbage collections (PyTorch): names the code between operators, "
                   "the call sites of syncs and allocations, GC pauses. Adds overhead to the profiled steps.")
@click.option("--memory", is_flag=True,
              help="Also record memory allocations and frees (PyTorch): memory growth between steps, the device's "
                   "peak against its capacity. Adds overhead to the profiled steps.")
@report_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run(steps, warmup, timeout, out_dir: Path, stacks, memory, rule_paths, overrides, lang, no_color, verbose,
        config_path, strict_config, max_decompressed, max_expansion, command) -> None:
    """Run a training script under the profiler and report on it.

    \b
    advisor run train.py --lr 0.1
    advisor run --steps 20 -o out -- torchrun --nproc_per_node 4 train.py
    """
    from advisor.collectors.live.runner import profiler_cost_note, run_profiled
    from advisor.pipeline import analyze

    rule_paths, parsed, used = user_rules(settings_for(config_path, strict_config), rule_paths, overrides,
                                          max_decompressed, max_expansion)
    result = run_profiled(list(command), out_dir, steps=steps, warmup=warmup, timeout=timeout, stacks=stacks,
                          memory=memory)
    from advisor.reports.sanitize import clean

    for note in result.notes:  # they name files of the job's output
        click.echo(f"advisor: {clean(note)}", err=True)
    if not result.trace_files:
        # nothing traced: why (the job's exit, or no training loop) is the news, not the empty folder
        if result.exit_code != 0:
            click.echo(f"advisor: error: nothing to report: the training command exited with code "
                       f"{result.exit_code} before any trace was written (its output above says why)", err=True)
            sys.exit(result.exit_code)
        click.echo("advisor: error: nothing to report: the command wrote no trace (see the note above)", err=True)
        sys.exit(2)
    report_obj = analyze(result.trace_dir, rule_paths=rule_paths, overrides=parsed, lang=lang)
    step = report_obj.metrics.get("step.time_ms")
    cost = profiler_cost_note(result, step.value if step is not None and isinstance(step.value, float) else None)
    if cost is not None:
        report_obj.run.notes.append(cost)
    _emit(report_obj, out_dir, lang, no_color, used, verbose)
    if result.exit_code != 0:
        click.echo(f"advisor: the training command exited with code {result.exit_code}", err=True)
        sys.exit(result.exit_code)


def _emit(result, out_dir: Path, lang: str, no_color: bool, used: dict, verbose: bool = False) -> None:
    """Record the config ``used`` in the report (``run.config``), write the
    report files and print the terminal summary (every finding's fix when
    ``verbose``); the config is named there when a file or override changed
    the rules. The report's path is one line however long, so a pipe's
    reader can take it whole."""
    from advisor.model import ConfigUsed
    from advisor.reports import write_reports
    from advisor.reports.i18n import t
    from advisor.reports.terminal import print_summary
    from advisor.settings import describe

    result.run.config = ConfigUsed.model_validate(used)
    paths = write_reports(result, out_dir, lang=lang)
    out = console(no_color)
    print_summary(result, out, lang=lang, verbose=verbose)
    if used["file"] or used["overrides"] or used["rules"]:
        out.print(f"config: {describe(used)}", markup=False, soft_wrap=True)
    out.print(t(lang, "term_report", path=paths["html"]), markup=False, soft_wrap=True)
