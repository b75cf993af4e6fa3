"""advisor: a rule-based performance advisor for deep-learning training.

Python API (imports stay lazy so ``import advisor`` is fast)::

    import advisor
    report = advisor.analyze("path/to/profiler_output", lang="en")
    report.findings, report.metrics, report.run     # the data the CLI renders
    report.frame("step_breakdown")                  # a table as a DataFrame
    report                                          # in Jupyter: the HTML report
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.collectors import KERNEL_RANKS

__version__ = "0.1.0"
__all__ = ["__version__", "analyze"]

if TYPE_CHECKING:  # pragma: no cover
    from advisor.model import Report


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
