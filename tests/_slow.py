"""The ``slow`` marker, set by rule, so that ``pytest -m "not slow"`` is a
quick loop and the full suite (``python -m pytest -q -n 2``) still runs everything.

A test is slow when

* it is an end-to-end test (under ``tests/e2e/``);
* it uses one of ``SLOW_FIXTURES``: the real-profile corpus (``corpus``),
  a browser (``browser``), or a large generated cluster;
* it starts processes or the real profiler: its code, the code of a
  fixture it uses, or of a function of the test suite they call names one
  of ``PROCESS_NAMES`` (``subprocess``, ``os.fork``, a Dask
  ``LocalCluster``, ``advisor run``'s ``run_profiled``);
* or it is one of ``MEASURED``: tests that do none of the above and still
  take seconds.

A test that is not marked slow and takes longer than ``QUICK_BUDGET_S`` is
named at the end of the run, so the lists above stay true as tests are
added.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from _machine import MACHINE_WAIT

TESTS = Path(__file__).resolve().parent
E2E = TESTS / "e2e"

#: names in a test's code (or what it calls) that start processes or the profiler
PROCESS_NAMES = frozenset({"subprocess", "Popen", "fork", "LocalCluster", "run_profiled"})

#: fixtures whose tests are slow, and why
SLOW_FIXTURES = {
    "corpus": "reads real profiler outputs",
    "browser": "drives Chromium",
    "slow_rank_run": "a 24-rank generated cluster in two layouts, analyzed in full and sampled",
    "cluster_1024": "a 1024-rank profile through the metrics and rules",
}

#: node ids (a module, a test function or one case) of slow tests no rule
#: above finds, with what they do; timed with ``--durations`` on a shared
#: 2-core machine, where each took 1.5-7 s
MEASURED = {
    # the real profiler records a trace in process (importing torch takes most of it)
    "tests/collectors/kineto/test_work.py",
    # pool workers started by a fork server and by spawning (fresh interpreters)
    "tests/collectors/parallel/test_rank_reader.py::test_start_methods_other_than_fork_give_the_same_result",
    # every damaged-index case against a depth-first search over the tree
    "tests/collectors/ascend/test_ascend_meta.py::test_index_matches_depth_first_search",
    # generated clusters written in two layouts and analyzed, fault by fault
    "tests/collectors/ascend/test_layouts_agree.py",
    # MindSpore GPU folders through the full analysis (the first analysis in a process imports the engine)
    "tests/collectors/mindspore_gpu/test_gpu_verdicts.py",
    # every file of a MindSpore GPU folder damaged in five ways, the folder read after each
    "tests/collectors/mindspore_gpu/test_gpu_robustness.py::test_every_damaged_file_is_an_input_error_or_a_skip",
    # a generated 8-rank cluster written at profiler Level0 and Level1 in two layouts and analyzed
    "tests/collectors/ascend/test_level0_runs.py",
    # a Level0 rank read from trace_view.json and analyzed (the first analysis in a process imports the engine)
    "tests/collectors/ascend/test_level0_trace_view.py::test_exposed_allreduce_fires_from_the_trace_and_names_it",
    "tests/collectors/ascend/test_level0_trace_view.py::test_zh_message_words_the_source_in_chinese",
    # the examples and generated runs of every kind and layout analyzed, and random metric sets
    "tests/robustness/test_gains_and_evidence.py",
    # the ResNet-50 examples analyzed in process: the verdict's story, a gate, the heatmap's scale
    "tests/reports/test_verdict_story.py",
    "tests/reports/test_heatmap_scale.py",
    # written Kineto traces with silent pauses through the full analysis (the first imports the engine)
    "tests/collectors/kineto/test_host_gaps.py::test_conjectured_gc_fires_on_pauses_that_slow_their_steps",
    "tests/collectors/kineto/test_host_gaps.py::test_recorded_collections_leave_the_finding_to_gc_pause",
    "tests/collectors/kineto/test_host_gaps.py::test_steady_steps_without_pauses_keep_it_quiet",
    "tests/collectors/kineto/test_host_gaps.py::test_two_steps_cannot_show_a_slow_one",
    "tests/collectors/kineto/test_free_gaps.py::test_the_recurring_free_time_leaves_out_waits_at_random_places",
    # written Kineto traces and a torch_npu folder with memory records through the full analysis
    "tests/collectors/test_device_memory_peak.py",
    # written torch_npu timelines through the full analysis
    "tests/collectors/ascend/test_ascend_gaps.py::test_conjectured_gc_fires_on_a_torch_npu_timeline",
    "tests/collectors/ascend/test_ascend_gaps.py::test_a_steady_torch_npu_timeline_keeps_it_quiet",
    "tests/collectors/ascend/test_ascend_dispatch.py::test_launch_bound_fires_on_ascend_and_names_task_queue_level_2",
    "tests/collectors/ascend/test_ascend_dispatch.py::test_with_the_queue_at_level_2_the_fix_keeps_it",
    # the MindSpore guide's example profiles through the full analysis
    "tests/test_api.py",
    "tests/engine/test_verdict.py::test_the_guide_cases_after_their_fix_are_not_problems",
    "tests/engine/test_verdict.py::test_the_guide_cases_have_problems",
    "tests/engine/test_pools.py::test_resnet50_data_bound_claims_its_data_wait_once",
    "tests/engine/test_direct_evidence.py::test_exposed_allreduce_from_the_step_tail_is_inferred",
    # generated pipeline-parallel clusters in two layouts, analyzed
    "tests/collectors/ascend/test_link_ranks.py::"
    "test_a_slow_link_in_the_second_pipeline_stage_is_named_by_its_global_ranks",
    "tests/metrics/test_late_rank.py::test_a_straggler_is_the_last_to_arrive_at_the_all_reduce",
    # 64-rank generated clusters through the full analysis
    "tests/metrics/test_slow_group.py::test_a_data_starved_host_is_named_whole",
    "tests/metrics/test_slow_group.py::test_a_lone_straggler_stays_alone",
    "tests/metrics/test_slow_group.py::test_a_compute_straggler_is_pointed_at_its_device",
    "tests/metrics/test_slow_group.py::test_a_slower_device_is_told_from_more_work",
    "tests/metrics/test_slow_group.py::test_kernels_without_shapes_are_not_compared_per_call",
    "tests/collectors/parallel/test_kernel_sample.py::test_the_slowest_rank_in_compute_has_its_kernels_read",
    "tests/metrics/test_slow_group.py::test_healthy_hosts_have_no_slow_group",
    "tests/metrics/test_slow_group.py::test_a_slow_port_is_named_not_one_link",
    "tests/metrics/test_slow_group.py::test_one_slow_link_is_not_blamed_on_a_port",
    "tests/metrics/test_slow_group.py::test_the_anomaly_model_flags_the_slow_ranks_and_why",
    "tests/metrics/test_slow_group.py::test_the_anomaly_model_flags_no_rank_without_a_slow_one",
    # the anomaly model on healthy runs of 10 to 100 steps, many seeds
    "tests/metrics/test_anomaly.py::test_false_positive_rate_on_healthy_runs",
    # hypothesis: hundreds of random metric values through every rule
    "tests/robustness/test_properties.py::test_engine_on_random_metric_values",
    # hypothesis: each collector on many mutated copies of its files
    "tests/robustness/test_properties.py::test_ascend_collector_on_mutated_files",
    "tests/robustness/test_properties.py::test_ascend_database_layout_on_damaged_tables",
    "tests/robustness/test_properties.py::test_mindinsight_collector_on_mutated_files",
    "tests/robustness/test_properties.py::test_kineto_collector_on_mutated_traces",
    # 200 MinCovDet fits beside the robust fit (scikit-learn's first import)
    "tests/metrics/test_robust_fit.py::test_its_calls_are_as_good_as_mincovdets",
    # the MindSpore ResNet-50 examples analyzed and gated in process, case by case
    "tests/regression/test_gate_unmeasurable.py",
    "tests/regression/test_gate_config_trust.py",
    "tests/regression/test_gate_junit_wellformed.py::test_a_control_character_in_an_op_name_leaves_junit_well_formed",
    # generated Kineto runs and Ascend clusters, and the ResNet-50 example, reported in process
    "tests/robustness/test_crashes_are_exit_2.py",
    # pairs of processes creating one history file; the example analyzed
    "tests/regression/test_history_writes.py",
    # the ResNet-50 examples (one rank, eight ranks) analyzed and compared in process
    "tests/regression/test_compare_examples.py",
    # the ResNet-50 examples analyzed, compared and gated in English and in Chinese, in process
    "tests/regression/test_compare_gate_zh.py",
    # the ResNet-50 example analyzed in Chinese
    "tests/reports/test_zh_fixed_texts.py",
    # every built-in rule validated (its examples evaluated) before the overlay cases
    "tests/i18n/test_zh.py::test_validate_checks_overlays",
    # every built-in rule validated as a set, examples evaluated
    "tests/engine/test_rule_files.py::test_builtin_rules_validate_as_a_set",
    # a 2000-step trace written, refused, then analyzed through the CLI
    "tests/collectors/io/test_limits.py::test_total_size_bound_and_flag_to_raise_it",
    # a template stopped only at its sandbox's time bound, through the CLI
    "tests/robustness/test_trust_rule_bounds.py::test_a_template_that_builds_too_much_is_stopped_and_the_finding_stands",
    # a generated 16-rank Kineto cluster analyzed
    "tests/metrics/test_slow_group.py::test_one_host_of_two_is_named",
    # three examples analyzed in two languages
    "tests/metrics/test_reasons.py::test_real_profiles_show_their_reasons_in_chinese",
    # MindInsight pipeline-parallel clusters written file by file and analyzed
    "tests/collectors/mindinsight/test_cluster.py",
    # generated Ascend runs (a healthy one; three faults of a 4-rank cluster) analyzed
    "tests/metrics/test_kernels.py::test_dynamic_shape_quiet_on_a_fixed_shape_run_of_dynamic_kernels",
    "tests/metrics/test_transfer.py",
    # torch_npu rank folders with repeated operator chains, analyzed
    "tests/metrics/test_mte_sequences.py",
    # Kineto traces and Ascend kernel files with and without a repeated kernel chain, analyzed in full
    "tests/metrics/test_sequences.py::test_eager_rmsnorm_chain_fires_with_its_pattern_and_api",
    "tests/metrics/test_sequences.py::test_the_same_layers_compiled_stay_quiet",
    "tests/metrics/test_sequences.py::test_long_kernels_queued_back_to_back_stay_quiet",
    "tests/metrics/test_sequences.py::test_ascend_chain_with_launch_gaps_fires_and_names_npu_rms_norm",
    "tests/metrics/test_sequences.py::test_ascend_fused_rmsnorm_stays_quiet",
    # a Kineto trace and a ResNet-50 example analyzed in full for the critical path in the verdict box
    "tests/reports/test_critical_path_report.py",
}

#: seconds a test outside the slow set may take before it is named
QUICK_BUDGET_S = 1.5


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m "not slow"``, tests/e2e is not even imported (every test
    in it is slow; importing it loads torch)."""
    if config.option.markexpr.strip() == "not slow" and collection_path == E2E:
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)


def _is_slow(item: pytest.Item) -> bool:
    if SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
        return True
    path = Path(str(item.path))
    if path.is_relative_to(E2E):
        return True
    node = item.nodeid
    if any(node == m or node.startswith(m + "::") or node.startswith(m + "[") for m in MEASURED):
        return True
    return _starts_processes(item)


def _starts_processes(item: pytest.Item) -> bool:
    """Whether the test function, its fixtures, or test-suite functions they
    call (found by name, transitively) name a process-starting call."""
    roots = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        roots += [d.func for d in defs]
    seen: set = set()
    todo = [f for f in roots if isinstance(f, types.FunctionType) and _in_tests(f)]
    while todo:
        func = todo.pop()
        if func in seen:
            continue
        seen.add(func)
        for code in _codes(func.__code__):
            if PROCESS_NAMES & set(code.co_names):
                return True
            for name in code.co_names:
                called = func.__globals__.get(name)
                if isinstance(called, types.FunctionType) and _in_tests(called):
                    todo.append(called)
    return False


def _codes(code: types.CodeType):
    """A code object and the code of the functions nested in it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _in_tests(func: types.FunctionType) -> bool:
    source = func.__code__.co_filename
    return Path(source).resolve().is_relative_to(TESTS)


#: seconds each test outside the slow set took (setup, call and teardown),
#: without the wait for another worker's multi-rank run (tests/_machine.py)
_quick_times: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "slow" not in report.keywords:
        waited = dict(report.user_properties).get(MACHINE_WAIT, 0.0) if report.when == "setup" else 0.0
        _quick_times[report.nodeid] = _quick_times.get(report.nodeid, 0.0) + report.duration - waited


def pytest_terminal_summary(terminalreporter) -> None:
    over = sorted(((t, node) for node, t in _quick_times.items() if t > QUICK_BUDGET_S), reverse=True)
    if not over:
        return
    terminalreporter.section("tests outside the slow set over budget")
    terminalreporter.write_line(
        f"{len(over)} test(s) not marked slow took over {QUICK_BUDGET_S:g} s "
        "(make them faster, or add them to MEASURED in tests/_slow.py):")
    for seconds, node in over:
        terminalreporter.write_line(f"  {seconds:6.2f} s  {node}")
