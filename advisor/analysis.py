"""Metrics -> findings -> Report for a loaded Profile: the stages after
reading (``advisor.pipeline`` runs them), and the Report an analysis
returns."""

from __future__ import annotations

from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from advisor import __version__
from advisor.chart_tables import build_tables
from advisor.engine.evaluation import evaluate_run, run_context
from advisor.engine.verdict import judge
from advisor.metrics import evaluate as evaluate_metrics
from advisor.metrics.registry import computes_apart
from advisor.model import Report, RunInfo
from advisor.profile import Profile
from advisor.runtime import forking


class AnalysisReport(Report):
    """The Report an analysis returns: the same data, and it renders itself
    as the HTML report (``to_html``), which Jupyter shows. A Report read back
    from report.json is plain data."""

    def to_html(self, lang: str | None = None) -> str:
        """The self-contained HTML report (what report.html holds)."""
        from advisor.reports import render_html

        return render_html(self, lang or self.lang)

    def to_markdown(self, lang: str | None = None) -> str:
        """The Markdown report (what report.md holds)."""
        from advisor.reports import render_markdown

        return render_markdown(self, lang or self.lang)

    def save(self, out_dir: str | Path, lang: str | None = None) -> dict[str, Path]:
        """Write report.html, report.md and report.json into ``out_dir``, as
        ``advisor report -o`` does; returns ``{"html": path, "markdown":
        path, "json": path}``. ConfigError when ``out_dir`` is inside the
        profile that was analyzed (input folders are never written to)."""
        from advisor.cli.options import refuse_inside
        from advisor.reports import write_reports

        if self.run.source_path:
            refuse_inside(Path(out_dir), Path(self.run.source_path), what="the folder to save into",
                          option="folder")
        return write_reports(self, Path(out_dir), lang=lang or self.lang)

    def _repr_html_(self) -> str:
        """Jupyter display: the HTML report in an iframe (``srcdoc``), so its
        scripts and styles run isolated from the notebook's."""
        from html import escape

        doc = escape(self.to_html(), quote=True)
        return (
            f'<iframe srcdoc="{doc}" sandbox="allow-scripts allow-popups" '
            'style="width:100%;height:900px;border:1px solid #e5e7eb;border-radius:8px" '
            'title="advisor report"></iframe>'
        )


def build_report(profile: Profile, compiled: list, lang: str, jobs: int = 1) -> AnalysisReport:
    """Metrics of ``profile``, the ``compiled`` rules over them, and the
    Report. Where the metrics are computed in two processes
    (``advisor.metrics.registry.computes_apart``), the chart tables are
    built in a forked process while the rules run here."""
    metrics, metric_skips = evaluate_metrics(profile, jobs=jobs)
    if computes_apart(profile, jobs):
        tables = forking.beside(build_tables, profile, metrics)
    else:
        tables = partial(build_tables, profile, metrics)
    meta = profile.meta
    platform = run_context(meta.framework, meta.device, meta.device_model, meta.compute_capability,
                           meta.bf16_tensor_cores)
    rules = evaluate_run(compiled, metrics, framework=meta.framework, device=meta.device, lang=lang, run=platform)
    verdict = judge(
        rules.outcomes,
        rules.findings,
        meta=meta,
        collectives=profile.has("comm"),
        metric_values={mid: m.value for mid, m in metrics.items()},
        metric_reasons={s.what.removeprefix("metric "): s.reason for s in metric_skips},
        lang=lang,
    )
    steps_found = int(metrics["step.count"].value) if "step.count" in metrics else 0
    run = RunInfo(
        framework=meta.framework,
        device=meta.device,
        device_model=meta.device_model,
        source_format=meta.source_format,
        source_version=meta.source_version,
        source_path=meta.source_path,
        ranks=meta.ranks,
        world_size=meta.world_size,
        steps_found=steps_found,
        notes=list(dict.fromkeys(meta.notes)),  # merged units' notes are deduplicated, one unit's are not
        advisor_version=__version__,
        generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    report = AnalysisReport(
        run=run,
        verdict=verdict,
        findings=rules.findings,
        metrics=metrics,
        skipped=[*profile.skipped, *metric_skips, *rules.skipped],
        tables=tables(),
    )
    report.lang = lang
    return report
