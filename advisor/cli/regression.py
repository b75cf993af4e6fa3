"""``advisor compare``, ``advisor gate`` and ``advisor history``.

Exit codes: 0 pass, 1 regression (``gate`` only), 2 bad input or config
(one line on stderr, via ``advisor.cli.main``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from advisor.cli.console import console
from advisor.cli.options import config_options, lang_option, refuse_inside, settings_for
from advisor.errors import ConfigError
from advisor.i18n import DEFAULT_LANG
from advisor.settings import Settings, describe, dotted

DEFAULT_GATE_DIR = Path("advisor_gate")
TREND_METRIC = "step.time_ms"


def _load(path: Path, settings: Settings, lang: str = DEFAULT_LANG):
    """A Report; profile folders are analyzed with the rule files,
    thresholds and input bounds of ``settings`` (as ``advisor report``
    does), which the report then records (``run.config``), and their
    findings written in ``lang``."""
    from advisor.regression.compare import load_report

    settings.apply_limits()
    rule_paths, overrides = settings.with_command_line()
    return load_report(path, rule_paths=rule_paths, overrides=overrides, config=settings.used(), lang=lang)


def _refuse_other_thresholds(reports, labels, settings: Settings) -> None:
    """Strict config: a saved report analyzed with thresholds other than the
    gate's own cannot be gated (ConfigError naming it)."""
    mine = dotted(settings.overrides)
    for report, label in zip(reports, labels):
        cfg = report.run.config
        if cfg is None:
            continue
        theirs = {**cfg.thresholds, **cfg.overrides}
        if theirs and theirs != mine:
            raise ConfigError(f"{label}: analyzed with thresholds the gate does not set ({describe(cfg.model_dump())}); "
                              "under strict config give the profile folder, or the same thresholds in the gate's "
                              "--config")


def _side(path: Path, settings: Settings, lang: str):
    from advisor.regression.compare import side_from_reports

    return side_from_reports([_load(path, settings, lang)], str(path))


def _how(g, lang: str) -> str:
    """A contributor's change: "new", "gone", or as ``change_text`` gives it."""
    from advisor.regression.compare import change_text
    from advisor.reports.i18n import t

    if g.baseline_ms is None:
        return t(lang, "cmp_status_new")
    if g.current_ms is None:
        return t(lang, "cmp_how_gone")
    return change_text(g.baseline_ms, g.current_ms, "ms")


_LANG_HELP = "Language of the terminal output, {files} and the findings of profile folders: en, or zh (Chinese)."


@click.command()
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("current", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=Path("advisor_compare"),
              show_default=True, help="Folder for compare.html, compare.md and compare.json.")
@click.option("--alpha", type=float, default=None, help="Significance level (default: 0.01).")
@config_options
@lang_option(_LANG_HELP.format(files="compare.html, compare.md"))
@click.option("--no-color", is_flag=True)
def compare(baseline: Path, current: Path, out_dir: Path, alpha, config_path, strict_config, lang: str,
            no_color: bool) -> None:
    """Compare two runs (profile folders, report folders or report.json files)."""
    from advisor.regression.compare import DEFAULT_ALPHA, check_alpha
    from advisor.regression.compare import compare as do_compare
    from advisor.reports.comparison import kind_text, name_text, severity_text, write_compare
    from advisor.reports.i18n import say, t
    from advisor.reports.sanitize import clean

    check_alpha(alpha)
    refuse_inside(out_dir, baseline, current)
    settings = settings_for(config_path, strict_config)
    result = do_compare(_side(baseline, settings, lang), _side(current, settings, lang), alpha=alpha or DEFAULT_ALPHA)
    paths = write_compare(result, out_dir, lang)
    out = console(no_color)
    out.print(say(lang, result.step_line()), markup=False)
    for name, ref in (("baseline", result.baseline), ("current", result.current)):
        out.print(t(lang, "cmp_term_run", side=t(lang, f"cmp_{name}"), framework=clean(ref.framework),
                    where=clean(say(lang, ref.where)), steps=str(ref.steps)), markup=False)
    for g in result.changes[:5]:  # operator names from the profiles: printed without control characters
        out.print(t(lang, "cmp_term_change", direction=t(lang, "cmp_grew" if g.change_ms > 0 else "cmp_shrank"),
                    kind=clean(kind_text(lang, g.kind)), name=clean(name_text(lang, g)), ms=f"{g.change_ms:+.4g}",
                    how=_how(g, lang)), markup=False)
    for f in result.findings:
        if f.status in ("new", "resolved", "worse"):
            out.print(t(lang, "cmp_term_finding", status=t(lang, f"cmp_status_{f.status}"), rule=clean(f.rule),
                        severity=severity_text(lang, f.current_severity or f.baseline_severity)), markup=False)
    for note in result.notes:
        out.print(t(lang, "term_note", text=clean(say(lang, note))), markup=False)
    out.print(t(lang, "cmp_term_path", path=str(paths["html"])), markup=False)


@click.command()
@click.argument("current", type=click.Path(path_type=Path))
@click.option("--baseline", "baselines", type=click.Path(path_type=Path), multiple=True,
              help="Baseline run: profile folder, report folder or report.json. Repeat it for several "
                   "runs (3 or more measure the run-to-run noise, as a history does).")
@click.option("--history", "history_db", type=click.Path(path_type=Path), default=None,
              help="History file; the baseline is the median of the last N runs of --branch.")
@click.option("--branch", default="main", show_default=True, help="History branch to gate against.")
@click.option("--last", type=int, default=None, help="N for the history baseline (default: config baseline_runs, 10).")
@config_options
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=DEFAULT_GATE_DIR,
              show_default=True, help="Folder for gate.md, junit.xml, gate.json and compare.html.")
@lang_option(_LANG_HELP.format(files="gate.md, compare.html") + " junit.xml and gate.json stay English.")
@click.option("--no-color", is_flag=True)
def gate(current: Path, baselines, history_db, branch, last, config_path, strict_config, out_dir: Path,
         lang: str, no_color) -> None:
    """Fail (exit 1) when CURRENT regressed against the baseline; exit 2
    when a budget cannot be evaluated (``on_unmeasurable = "fail"``: exit 1).

    \b
    advisor gate out/ --baseline main-report.json
    advisor gate out/ --baseline main1/ --baseline main2/ --baseline main3/
    advisor gate out/ --history .advisor/history.db --branch main
    """
    from advisor.model import ConfigUsed
    from advisor.regression.budgets import gate_config
    from advisor.regression.compare import side_from_reports
    from advisor.regression.gate import run_gate
    from advisor.reports.gate_verdict import print_gate, write_gate
    from advisor.reports.i18n import say, t

    if bool(baselines) == (history_db is not None):
        raise ConfigError("give one kind of baseline: --baseline PATH (repeatable) or --history FILE [--branch NAME]")
    if last is not None and last < 1:
        raise ConfigError("--last must be at least 1")
    settings = settings_for(config_path, strict_config)
    config = gate_config(settings)
    refuse_inside(out_dir, current, *baselines, *([history_db] if history_db is not None else []))
    anomaly = None
    cur_report = _load(current, settings, lang)
    cur = side_from_reports([cur_report], str(current))
    if history_db is not None:
        from advisor.regression.history import History, history_anomaly

        with History(history_db) as hist:
            base = hist.baseline_side(branch, last or config.baseline_runs)
        anomaly = history_anomaly(base, cur_report)
        labels = [f"{history_db} (branch {branch})"] * base.runs
    else:
        base = side_from_reports([_load(b, settings, lang) for b in baselines], " + ".join(map(str, baselines)))
        labels = [str(b) for b in baselines]
    if settings.strict:
        _refuse_other_thresholds([cur_report, *base.reports], [str(current), *labels], settings)
    used = ConfigUsed.model_validate(settings.used(gate=True))
    result, comparison = run_gate(base, cur, config, anomaly=anomaly, used=used)
    paths = write_gate(result, comparison, out_dir, lang)
    print_gate(result, console(no_color), lang)
    click.echo(t(lang, "gate_term_files", markdown=str(paths["markdown"]), junit=str(paths["junit"])))
    if result.unmeasured and not result.failed:  # the reasons quote the runs' skip notes: their text
        from advisor.reports.sanitize import clean

        what = "; ".join(t(lang, "gate_unmeasured_item", name=say(lang, c.name), why=say(lang, c.message.values["why"]))
                         for c in result.unmeasured)
        click.echo(clean("advisor: error: " + t(lang, "gate_cannot_measure_error", current=str(current), what=what)),
                   err=True)
    if result.exit_code:
        sys.exit(result.exit_code)


@click.group()
def history() -> None:
    """Record runs and show the trend (SQLite file, default .advisor/history.db)."""


_db_option = click.option("--db", type=click.Path(path_type=Path), default=None,
                          help="History file (default .advisor/history.db).")


@history.command("add")
@click.argument("current", type=click.Path(path_type=Path))
@click.option("--branch", default=None, help="Branch (default: $GITHUB_REF_NAME, $CI_COMMIT_REF_NAME, or main).")
@click.option("--commit", default=None, help="Commit (default: $GITHUB_SHA or $CI_COMMIT_SHA).")
@click.option("--time", "when", default=None, help="ISO-8601 time of the run (default: now).")
@_db_option
@config_options
def history_add(current: Path, branch, commit, when, db, config_path, strict_config) -> None:
    """Record a run (profile folder, report folder or report.json)."""
    from datetime import datetime

    from advisor.regression.history import DEFAULT_DB, History

    if when is not None:
        try:
            datetime.fromisoformat(when)
        except ValueError:
            raise ConfigError(f"--time {when!r}: not an ISO-8601 time") from None
    refuse_inside(Path(db or DEFAULT_DB).parent, current, what="the history file's folder", option="--db")
    branch = branch or os.environ.get("GITHUB_REF_NAME") or os.environ.get("CI_COMMIT_REF_NAME") or "main"
    commit = commit or os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA")
    report = _load(current, settings_for(config_path, strict_config))
    with History(db or DEFAULT_DB, create=True) as hist:
        run_id = hist.add(report, branch=branch, commit=commit, recorded_at=when)
    from advisor.reports.sanitize import clean

    click.echo(clean(f"recorded run {run_id} on {branch}" + (f" ({commit})" if commit else "") + f" in {db or DEFAULT_DB}"))


@history.command("show")
@click.option("--branch", default="main", show_default=True)
@click.option("--last", type=int, default=30, show_default=True, help="Runs to show.")
@click.option("--metric", default=TREND_METRIC, show_default=True, help="Metric to chart.")
@click.option("-o", "--chart", type=click.Path(path_type=Path), default=None,
              help="Write an SVG trend chart of the metric to this file (default: no chart).")
@_db_option
@lang_option("Language of the table and the chart: en, or zh (Chinese).")
@click.option("--no-color", is_flag=True)
def history_show(branch, last, metric, chart: Path | None, db, lang: str, no_color) -> None:
    """Trend table of the last runs on a branch (and, with --chart FILE, an
    SVG chart); runs the anomaly model flags (against the runs before them)
    are marked."""
    from advisor.regression.history import DEFAULT_DB, MIN_ANOMALY_RUNS, History, anomaly_flags
    from advisor.reports.gate_verdict import print_history, render_trend_svg
    from advisor.reports.i18n import t
    from advisor.runtime.files import write_text

    if last < 1:
        raise ConfigError("--last must be at least 1")
    with History(db or DEFAULT_DB) as hist:
        runs = hist.runs(branch, last)
        reports = hist.reports(branch, last) if len(runs) > MIN_ANOMALY_RUNS else []
        unit = hist.unit(metric)
    if runs.empty:
        raise ConfigError(f"{db or DEFAULT_DB}: no runs recorded on branch {branch!r}")
    if metric not in runs.columns:
        raise ConfigError(f"no run on {branch!r} has the metric {metric!r}")
    flags = anomaly_flags(runs, reports)
    out = console(no_color)
    print_history(runs, metric, out, flags, unit, lang)
    if chart is not None:
        write_text(chart, render_trend_svg(runs, metric, unit, flags, lang))
        out.print(t(lang, "hist_chart", path=chart), markup=False, soft_wrap=True)
