"""The pipeline: source -> Profile -> Metrics -> Findings -> Report.

Reading is the long part of a large run, and worker processes do it while
this one waits: meanwhile this process imports the stages that follow
(``advisor.analysis``: metrics, rules, verdict, the Report) and compiles the
built-in rules, instead of doing it before the first rank is read. Rules the
user gave (files, threshold overrides) are compiled before reading, so a bad
one fails at once with no reader process started.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.collectors import KERNEL_RANKS, load_profile
from advisor.errors import ConfigError
from advisor.i18n import LANGS

if TYPE_CHECKING:  # pragma: no cover
    from advisor.analysis import AnalysisReport
    from advisor.profile import Profile


def analyze(
    path: str | Path,
    *,
    rule_paths: tuple[Path, ...] | list[Path] = (),
    overrides: Mapping[str, Mapping[str, float]] | None = None,
    jobs: int | None = None,
    dask_address: str | None = None,
    lang: str = "en",
    kernel_ranks: int | None = KERNEL_RANKS,
) -> AnalysisReport:
    """Analyze the profiler output at ``path`` and return the Report.

    ``rule_paths``: extra rule files or folders. ``overrides``: rule name ->
    {param: value}. ``jobs`` / ``dask_address``: how ranks are read in
    parallel (see ``advisor.collectors.load_profile``); ``jobs`` above 1
    (default: the usable CPUs) also computes the metrics in two processes. ``kernel_ranks``:
    read kernel files on at most this many ranks, None on all
    (``advisor.collectors.parallel.kernel_sample``). ``lang``: language of
    the rule texts in the findings (``en``, ``zh``). Raises InputError /
    ConfigError with one-line messages.

    A bad rule file or override fails before any rank is read (module doc).
    """
    check_lang(lang)
    rules = _Rules(rule_paths, overrides, lang)
    profile = load_profile(path, jobs=jobs, dask_address=dask_address, kernel_ranks=kernel_ranks,
                           meanwhile=rules.ready)
    from advisor.analysis import build_report
    from advisor.runtime.cpus import usable_cpus

    return build_report(profile, rules.ready(), lang, jobs=jobs or usable_cpus())


def check_lang(lang: str) -> None:
    """ConfigError unless ``lang`` is a language the rules are written in."""
    if lang not in LANGS:
        raise ConfigError(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")


def analyze_profile(
    profile: Profile,
    *,
    rule_paths: tuple[Path, ...] | list[Path] = (),
    overrides: Mapping[str, Mapping[str, float]] | None = None,
    lang: str = "en",
) -> AnalysisReport:
    """Metrics, rules and report for an already loaded Profile."""
    from advisor.analysis import build_report

    check_lang(lang)
    return build_report(profile, compile_rules_for(rule_paths, overrides, lang), lang)


def compile_rules_for(rule_paths, overrides: Mapping[str, Mapping[str, float]] | None, lang: str) -> list:
    """The built-in rules plus ``rule_paths``, in ``lang``, with ``overrides``
    applied, compiled; ConfigError for a bad rule or an unknown override.
    The built-in rules (``load_rules`` lists them first) are compiled lazily
    (``compile_rule``): ``advisor rules validate`` and the test suite check
    them, and a run evaluates only some of them. Under ``ADVISOR_STRICT``
    every rule is compiled and checked at once."""
    from advisor.engine.evaluation import compile_rule
    from advisor.engine.loader import builtin_rule_files, load_rules
    from advisor.profile import strict_mode

    rules = load_rules(list(rule_paths), lang=lang)
    overrides = dict(overrides or {})
    unknown = set(overrides) - {r.name for r in rules}
    if unknown:
        raise ConfigError(f"threshold override for unknown rule(s): {', '.join(sorted(unknown))}")
    builtin = 0 if strict_mode() else len(builtin_rule_files())
    return [compile_rule(r, overrides.get(r.name), lazy=i < builtin) for i, r in enumerate(rules)]


class _Rules:
    """The compiled rules of one analysis: those the user gave (files or
    overrides) compiled when made, a bad one failing then; the built-in
    ones when first ``ready()``, with the stages after reading imported and
    the CEL parser loaded (``ready`` runs while the workers read the ranks)."""

    def __init__(self, rule_paths, overrides: Mapping[str, Mapping[str, float]] | None, lang: str):
        self._args = (rule_paths, overrides, lang)
        self._compiled = compile_rules_for(rule_paths, overrides, lang) if rule_paths or overrides else None

    def ready(self) -> list:
        """The compiled rules, the stages after reading imported."""
        if self._compiled is None:
            self._compiled = compile_rules_for(*self._args)
        import advisor.analysis  # noqa: F401 -- its imports are most of the wait this saves
        from advisor.engine import cel

        cel.environment()  # the CEL parser: loaded while the ranks are read, not after
        return self._compiled
