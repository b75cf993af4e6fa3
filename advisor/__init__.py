"""advisor: a rule-based performance advisor for deep-learning training.

Python API (imports stay lazy so ``import advisor`` is fast)::

    import advisor
    report = advisor.analyze("path/to/profiler_output", lang="en")
    report.findings, report.metrics, report.run     # the data the CLI renders
    report.frame("step_breakdown")                  # a table as a DataFrame
    report                                          # in Jupyter: the HTML report
    print(report)                                   # one line: verdict and top finding
    report.save("out/"), report.to_markdown()       # report.html/.md/.json; the Markdown
    advisor.compare("before/", "after/")            # what ``advisor compare`` computes
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.collectors import KERNEL_RANKS

__version__ = "0.1.0"
__all__ = ["__version__", "analyze", "compare"]

if TYPE_CHECKING:  # pragma: no cover
    from advisor.model import Report
    from advisor.regression.compare import Comparison


def analyze(
    path: Any,
    *,
    rules: Any = (),
    overrides: dict[str, dict[str, float]] | None = None,
    lang: str = "en",
    use_config: bool = True,
    jobs: int | None = None,
    dask_address: str | None = None,
    kernel_ranks: int | None = KERNEL_RANKS,
) -> Report:
    """Analyze the profiler output at ``path`` and return the Report, the
    same object ``advisor report`` renders.

    ``rules``: extra rule files or folders; ``overrides``: ``{rule: {param:
    value}}`` (like ``--set``); ``lang``: ``"en"`` or ``"zh"`` for the rule
    texts and the HTML shown in Jupyter. ``kernel_ranks``: read kernel files
    on at most this many ranks of a large cluster (default
    ``advisor.collectors.parallel.kernel_sample.DEFAULT_LIMIT``), None on every rank. With
    ``use_config`` the rules and
    thresholds of the config file found from the current directory
    (``advisor.settings``) apply first, as in the CLI. Raises
    ``advisor.errors.AdvisorError`` (InputError, ConfigError) with one-line
    messages.
    """
    from pathlib import Path

    from advisor.pipeline import analyze as _analyze
    from advisor.settings import Settings, load_settings

    if isinstance(rules, (str, Path)):
        rules = [rules]
    settings = load_settings() if use_config else Settings()
    rule_paths, merged = settings.with_command_line(list(rules), overrides)
    report = _analyze(
        path, rule_paths=rule_paths, overrides=merged, jobs=jobs, dask_address=dask_address, lang=lang,
        kernel_ranks=kernel_ranks,
    )
    report.lang = lang
    return report


def compare(baseline: Any, current: Any, *, alpha: float | None = None, use_config: bool = True,
            jobs: int | None = None) -> Comparison:
    """Compare two runs as ``advisor compare`` does and return the
    Comparison (what compare.json holds: metric changes beyond noise,
    new and resolved findings, what grew and shrank).

    ``baseline`` and ``current``: a Report (from ``analyze``), a
    report.json file, a folder holding one, or profiler output (analyzed
    with the config file's rules and thresholds when ``use_config``).
    ``alpha``: the significance level (default 0.01). Raises
    ``advisor.errors.AdvisorError`` with one-line messages, InputError when
    the two runs profile different models.
    """
    from advisor.model import Report
    from advisor.regression.compare import DEFAULT_ALPHA, check_alpha, load_report, side_from_reports
    from advisor.regression.compare import compare as _compare
    from advisor.settings import Settings, load_settings

    check_alpha(alpha)
    settings = load_settings() if use_config else Settings()
    rule_paths, overrides = settings.with_command_line()

    def side(run: Any):
        if isinstance(run, Report):
            return side_from_reports([run], run.run.source_path)
        report = load_report(run, jobs=jobs, rule_paths=rule_paths, overrides=overrides, config=settings.used())
        return side_from_reports([report], str(run))

    return _compare(side(baseline), side(current), alpha=alpha or DEFAULT_ALPHA)
