"""CPU time of ``advisor report`` phase by phase, in one process.

Times, in CPU seconds of this process (``time.process_time``; with
``--jobs`` above 1 the readers' own CPU is not in it), what ``advisor
report`` does in order: importing the pipeline (pandas, pyarrow, numpy,
the metrics), compiling the rules, reading and merging the ranks
(``load_profile``), the metrics, the rules and summary tables
(``analysis.build_report`` less the metrics) and writing the three report files.
The garbage collector is set as the CLI sets it (``cli.app.GC_THRESHOLD``).
``--read-only``: the CPU seconds of the Ascend ranks' read alone, as one
reader does it (``read_arrow_batch`` on chunks of ``MAX_CHUNK`` ranks, the
kernel files of the default sample, the collector paused), nothing merged.

    python -m bench.phases /tmp/sp1024/ascend/data --jobs 1
    python -m bench.phases /tmp/sp1024/ascend/data --read-only
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path


def _phases(path: Path, jobs: int, out: Path) -> dict[str, float]:
    """CPU seconds of each phase of one run (the imports count only in a
    fresh process)."""
    spent: dict[str, float] = {}
    mark = time.process_time()

    def tick(name: str) -> None:
        nonlocal mark
        now = time.process_time()
        spent[name] = spent.get(name, 0.0) + now - mark
        mark = now

    from advisor.collectors import load_profile
    from advisor.reports import write_reports

    from advisor import analysis, pipeline
    from advisor.cli.app import GC_THRESHOLD

    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    tick("imports")
    compiled = pipeline.compile_rules_for((), None, "en")
    tick("compiling the rules")
    profile = load_profile(path, jobs=jobs)
    tick("reading and merging the ranks")
    real_evaluate = analysis.evaluate_metrics

    def timed_evaluate(p, jobs=1):
        tick("engine, summary tables")
        result = real_evaluate(p, jobs=jobs)
        tick("metrics")
        return result

    analysis.evaluate_metrics = timed_evaluate
    try:
        report = analysis.build_report(profile, compiled, "en")
    finally:
        analysis.evaluate_metrics = real_evaluate
    tick("engine, summary tables")
    write_reports(report, out)
    tick("writing the report files")
    return spent


def _read_only(path: Path) -> float:
    """CPU seconds of reading the Ascend rank folders under ``path`` (module doc)."""
    from advisor.collectors.ascend import collector
    from advisor.collectors.parallel import kernel_sample, rank_reader

    units = collector.discover(path)
    kernels = kernel_sample.chosen(len(units), kernel_sample.DEFAULT_LIMIT)
    size = rank_reader.MAX_CHUNK
    start = time.process_time()
    for i in range(0, len(units), size):
        rank_reader.read_chunk("advisor.collectors.ascend.collector", [str(u) for u in units[i:i + size]],
                               frozenset(str(u) for u, k in zip(units[i:i + size], kernels[i:i + size]) if not k))
    return time.process_time() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--read-only", action="store_true")
    args = parser.parse_args(argv)
    if args.read_only:
        print(f"{'reading the ranks':32s} {_read_only(args.path):6.2f} s")
        return
    with tempfile.TemporaryDirectory() as out:
        spent = _phases(args.path, args.jobs, Path(out))
    total = sum(spent.values())
    for name, seconds in spent.items():
        print(f"{name:32s} {seconds:6.2f} s  {seconds / total * 100:4.0f}%")
    print(f"{'total':32s} {total:6.2f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
