"""Kernel files read on a sample of a large cluster's ranks
(``advisor.collectors.parallel.kernel_sample``): which ranks, and that the report
from the sample is the report from every rank, in both Ascend layouts."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import textwrap

import pytest


from advisor.collectors import load_profile
from advisor.collectors.parallel.kernel_sample import DEFAULT_LIMIT, chosen, slowest, slowest_count
from advisor.errors import ConfigError
from advisor.pipeline import analyze
from bench.scenarios import Spec, generate


@pytest.mark.parametrize("count,limit", [(1024, 128), (1000, 128), (129, 128), (4096, 128), (1024, 64), (37, 5),
                                         (10, 1)])
def test_the_sample_takes_one_rank_per_block_at_a_rotating_position(count, limit):
    picks = [i for i, read in enumerate(chosen(count, limit)) if read]
    spread = limit - slowest_count(limit)  # the rest of the sample: the ranks slowest in compute
    k = math.ceil(count / spread)
    assert len(picks) <= spread
    assert [p // k for p in picks] == list(range(math.ceil(count / k)))  # one in every block
    full_blocks = count // k
    positions = {p % k for p in picks[:full_blocks]}
    assert positions == set(range(min(k, full_blocks)))  # every local position, so every card of a host


def test_the_slowest_in_compute_are_those_furthest_above_their_stage():
    """Two stages, stage 1 computing twice as long: its ranks are not slow,
    rank 6 (20% above its stage) and rank 1 (10% above) are; ranks already
    in the spread, below their median or without steps are never picked."""
    compute = [100, 110, 100, 100, 200, 200, 240, 200, float("nan"), 100]
    stages = [0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    read = [False] * 10
    assert slowest(compute, stages, read, 64) == [6, 1]
    read[6] = True
    assert slowest(compute, stages, read, 64) == [1]
    assert slowest(compute, stages, read, 8) == [1]
    assert slowest(compute, stages, read, 7) == []  # a sample of 7: no room beside the spread
    assert slowest([100.0] * 10, [None] * 10, [False] * 10, 64) == []  # a uniform run has no slowest


def test_small_runs_and_no_limit_read_every_rank():
    assert chosen(DEFAULT_LIMIT, DEFAULT_LIMIT) == [True] * DEFAULT_LIMIT
    assert chosen(5000, None) == [True] * 5000


def test_stages_alternating_rank_by_rank_are_all_sampled():
    """Megatron-LM orders where the pipeline stage is rank % pp: a plain
    stride of k (a multiple of pp) would read stage 0 only."""
    for pp in (2, 4, 8, 3):
        picks = [i for i, read in enumerate(chosen(1024, 128)) if read]
        assert {p % pp for p in picks} == set(range(pp)), pp


#: ``chosen(24, 6)``: blocks of 4 ranks, positions 0, 1, 2, 3, 0, 1.
SAMPLE_OF_24 = [0, 5, 10, 15, 16, 21]


def _findings(report) -> list[tuple]:
    return [(f.rule, f.severity, f.scope.ranks, f.scope.steps) for f in report.findings]


@pytest.fixture(scope="module", params=["ascend-text", "ascend-db"])
def slow_rank_run(request, tmp_path_factory):
    """24 ranks on 3 hosts, two pipeline stages, rank-level slowness."""
    spec = Spec(ranks=24, steps=8, fault="slow-rank", seed=5, kernels_per_step=6, pp=2, ranks_per_host=8)
    data, labels = generate(spec, tmp_path_factory.mktemp(request.param), request.param)
    return data, labels


def test_a_sampled_report_is_the_full_report(slow_rank_run, tmp_path):
    """Everything not drawn from kernels is the full read's; what is, is
    the full read of the sampled ranks alone."""
    data, labels = slow_rank_run
    full = analyze(data, jobs=2, kernel_ranks=None)
    sampled = analyze(data, jobs=2, kernel_ranks=6)
    assert full.findings and _findings(sampled) == _findings(full)
    assert sampled.findings[0].scope.ranks == labels["ranks"]
    assert set(sampled.metrics) == set(full.metrics)
    # the metrics of the tables read from kernel files: operators, their sequences, transfers beside compute
    from_kernels = {mid for mid in full.metrics
                    if mid.startswith(("ops.", "kernels.", "sequences.", "transfer.contention_",
                                       "cluster.slow_rank_kernel_"))
                    or mid == "step.device_idle_ratio"}
    # a link type is judged on the operators that ran alone where the kernels tell them apart (the
    # sampled ranks), on all operators elsewhere: neither the full read's nor the sample's alone
    mixed = {mid for mid in full.metrics if mid.startswith(("transfer.link_type_", "transfer.slow_link_type"))}
    for mid in set(full.metrics) - from_kernels - mixed:
        assert sampled.metrics[mid].model_dump() == full.metrics[mid].model_dump(), mid
    alone = tmp_path / "sampled-ranks"
    alone.mkdir()
    folders = sorted(p for p in data.iterdir() if p.is_dir())
    for rank in SAMPLE_OF_24:
        shutil.copytree(folders[rank], alone / folders[rank].name, copy_function=os.link)
    of_sample = analyze(alone, jobs=1, kernel_ranks=None)
    assert from_kernels
    for mid in from_kernels:
        assert sampled.metrics[mid].value == of_sample.metrics[mid].value, mid
    assert "kernel files of 6 of 24 ranks" in " ".join(sampled.run.notes)
    assert not any("kernel files" in n for n in full.run.notes + of_sample.run.notes)


def test_only_the_sampled_ranks_have_operators(slow_rank_run):
    data, _ = slow_rank_run
    profile = load_profile(data, jobs=1, kernel_ranks=6)
    assert sorted(profile.ops["rank"].unique()) == SAMPLE_OF_24
    read = profile.steps.groupby("rank")["device_busy_us"].apply(lambda s: s.notna().any())
    assert sorted(read[read].index) == SAMPLE_OF_24
    assert sorted(profile.steps["rank"].unique()) == list(range(24))  # steps from every rank
    assert profile.skipped == []


def test_a_rank_whose_steps_come_from_its_kernels_is_read_whole(tmp_path):
    """Without a step trace, a db rank's steps are computed from its tasks,
    and a text rank's from trace_view.json or nothing: its kernels are read
    whatever the sample says."""
    spec = Spec(ranks=8, steps=4, seed=1, kernels_per_step=4)
    data, _ = generate(spec, tmp_path / "run", "ascend-text")
    rank3 = sorted(p for p in data.iterdir() if p.is_dir())[3]
    (rank3 / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").unlink()
    profile = load_profile(data, jobs=1, kernel_ranks=2)
    assert 3 in set(profile.ops["rank"])
    assert sorted(profile.ops["rank"].unique()) == [0, 3, 5]


def test_the_pool_and_in_process_reads_sample_alike(slow_rank_run):
    data, _ = slow_rank_run
    one = load_profile(data, jobs=1, kernel_ranks=6)
    two = load_profile(data, jobs=2, kernel_ranks=6)
    from .test_rank_reader import assert_same_profile

    assert_same_profile(one, two)


def test_a_bad_limit_is_a_config_error(tmp_path):
    spec = Spec(ranks=2, steps=2, seed=1, kernels_per_step=2)
    data, _ = generate(spec, tmp_path / "run", "ascend-text")
    with pytest.raises(ConfigError, match="--kernel-ranks 0"):
        load_profile(data, kernel_ranks=0)


def test_other_formats_read_every_rank(tmp_path):
    """Kineto traces hold kernels and steps in one file: nothing to leave out."""
    spec = Spec(ranks=4, steps=3, seed=2, kernels_per_step=2)
    data, _ = generate(spec, tmp_path / "run", "kineto")
    profile = load_profile(data, jobs=1, kernel_ranks=1)
    assert sorted(profile.ops["rank"].unique()) == [0, 1, 2, 3]
    assert not any("kernel files" in n for n in profile.meta.notes)
    shutil.rmtree(data)


def test_the_cli_samples_and_the_reports_say_so(slow_rank_run, tmp_path):
    import subprocess

    data, _ = slow_rank_run
    out = tmp_path / "report"
    run = subprocess.run([sys.executable, "-m", "advisor", "report", str(data), "--kernel-ranks", "6",
                          "-o", str(out), "--no-color"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    md = (out / "report.md").read_text()
    notes = md.split("### Notes\n", 1)[1]
    assert "kernel files of 6 of 24 ranks" in notes and "--kernel-ranks all reads every rank" in notes
    assert "kernel files of 6 of 24 ranks" in (out / "report.html").read_text()
    assert "note: operators and device idle from the kernel files of 6 of 24 ranks (one in every 4; " \
           "--kernel-ranks all reads every rank)" in " ".join(run.stdout.split())  # the terminal says it too (wrapped)
    for bad in ("0", "some"):
        run = subprocess.run([sys.executable, "-m", "advisor", "report", str(data), "--kernel-ranks", bad,
                              "-o", str(tmp_path / "never")], capture_output=True, text=True)
        assert run.returncode == 2 and "--kernel-ranks" in run.stderr and "Traceback" not in run.stderr
        assert not (tmp_path / "never").exists()


def test_the_default_is_the_limit_everywhere_and_cheap_to_import():
    """``advisor.analyze``, the pipeline and the CLI default to
    ``DEFAULT_LIMIT``, and taking it imports neither pandas nor NumPy
    (``import advisor`` and ``advisor --help`` stay fast)."""
    code = textwrap.dedent("""
        import inspect, sys
        import advisor, advisor.cli.app, advisor.cli.report
        print(inspect.signature(advisor.analyze).parameters["kernel_ranks"].default,
              "pandas" in sys.modules or "numpy" in sys.modules)
        import advisor.pipeline
        print(inspect.signature(advisor.pipeline.analyze).parameters["kernel_ranks"].default)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(DEFAULT_LIMIT), "False", str(DEFAULT_LIMIT)]
    help_text = subprocess.run([sys.executable, "-m", "advisor", "report", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert f"(default: {DEFAULT_LIMIT})" in " ".join(help_text.split())


def test_the_public_api_takes_the_limit(slow_rank_run):
    import advisor

    data, _ = slow_rank_run
    sampled = advisor.analyze(data, kernel_ranks=6, use_config=False, jobs=1)
    every = advisor.analyze(data, kernel_ranks=None, use_config=False, jobs=1)
    assert any("kernel files of 6 of 24 ranks" in n for n in sampled.run.notes)
    assert not any("kernel files" in n for n in every.run.notes)


def test_the_slowest_rank_in_compute_has_its_kernels_read(tmp_path):
    """64 ranks, 16 kernel files at most: a spread of 13 and the 2 ranks slowest in
    compute, the straggler among them although the spread passes it by; its
    kernels beside its peers' tell that its device is slower. Read in the
    pool and in this process alike."""
    data, labels = generate(Spec(ranks=64, steps=6, fault="slow-rank", seed=0, severity=0.15, kernels_per_step=4),
                            tmp_path / "run", "ascend-text")
    straggler = labels["ranks"][0]
    spread = [i for i, read in enumerate(chosen(64, 16)) if read]
    assert len(spread) == 13 and straggler not in spread
    one = load_profile(data, jobs=1, kernel_ranks=16)
    read = set(one.ops["rank"].unique())
    assert straggler in read and read > set(spread) and len(read) == 15
    assert "kernel files of 15 of 64 ranks (one in every 5, and the 2 slowest in compute" in " ".join(one.meta.notes)
    from .test_rank_reader import assert_same_profile

    assert_same_profile(one, load_profile(data, jobs=2, kernel_ranks=16))
    report = analyze(data, jobs=1, kernel_ranks=16)
    assert "its device is slower at the same work" in {f.rule: f for f in report.findings}["slow-rank"].message
    assert "另加计算最慢的 2 张卡" in report.to_markdown(lang="zh")
