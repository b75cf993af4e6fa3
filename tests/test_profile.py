"""The Profile's column schema (advisor.profile.SCHEMA): what strict mode
refuses, that metrics need only known columns, and that every collector
emits only known columns on the examples, the corpus and generated runs."""

from __future__ import annotations

import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.metrics import REGISTRY, evaluate, registry
from advisor.profile import (
    SCHEMA,
    Profile,
    ProfileSchemaError,
    RunMeta,
    check_table,
    merge_profiles,
    strict_mode,
)
from bench.scenarios import Spec, generate


def _steps(**columns) -> pd.DataFrame:
    base = {"rank": [0, 0], "step": pd.array([1, 2], dtype="Int64"), "duration_us": [100.0, 110.0]}
    return pd.DataFrame({**base, **columns})


def test_a_good_table_passes():
    check_table("steps", _steps(free_us=[10.0, 12.0]))


@pytest.mark.parametrize(
    "table,df,fragment",
    [
        ("steps", _steps(duraton_us=[1.0, 2.0]), "profile table steps: unknown column 'duraton_us'"),
        ("steps", _steps(free_us=["10", "12"]), "profile table steps, column free_us: "),
        ("steps", _steps(step=["1", "2"]), "profile table steps, column step: "),
        ("steps", _steps(step=[1.5, 2.0]), "profile table steps, column step: "),
        ("steps", _steps().drop(columns="duration_us"), "profile table steps: missing required column(s) duration_us"),
        ("ops", pd.DataFrame({"rank": [0], "name": [3], "type": ["x"], "core": ["GPU"], "count": [1],
                              "total_us": [1.0]}), "profile table ops, column name: "),
        ("kernels", _steps(), "unknown profile table 'kernels'"),
    ],
)
def test_check_names_table_and_column(table, df, fragment):
    with pytest.raises(ProfileSchemaError) as err:
        check_table(table, df)
    assert fragment in str(err.value)


def test_step_ids_read_as_floats_pass_when_whole():
    check_table("steps", _steps(step=[float("nan"), float("nan")]))
    check_table("steps", _steps(step=[1.0, 2.0]))


def test_strict_mode_checks_where_the_profile_is_handed_over(monkeypatch):
    part = Profile(meta=RunMeta(ranks=[0]), steps=_steps(duraton_us=[1.0, 2.0]))
    monkeypatch.delenv("ADVISOR_STRICT", raising=False)
    merge_profiles([part], RunMeta())
    evaluate(part)
    monkeypatch.setenv("ADVISOR_STRICT", "1")
    with pytest.raises(ProfileSchemaError, match="duraton_us"):
        merge_profiles([part], RunMeta())
    with pytest.raises(ProfileSchemaError, match="duraton_us"):
        evaluate(part)


def test_metric_needs_are_schema_columns():
    for spec in REGISTRY.values():
        for need in spec.needs:
            table, _, column = need.partition(".")
            assert table in SCHEMA and (not column or column in SCHEMA[table]), (spec.id, need)


def test_a_misspelt_need_fails_at_registration():
    with pytest.raises(ValueError, match="test.typo: needs 'steps.duraton_us'"):
        registry.metric("test.typo", unit="ms", needs=["steps.duraton_us"])
    assert "test.typo" not in REGISTRY


EXAMPLES = ["resnet50_8p_allreduce_tail", "resnet50_8p_overlapped", "resnet50_data_bound", "resnet50_data_fixed",
            "vgg16_fp16", "vgg16_fp32"]
CORPUS = [
    "kineto-tb-plugin/resnet50_num_workers_0", "hta/trace_filter", "hta/nccl_parser_config/nccl_data.json.gz",
    "hta/distributed_info_unavailable", "hta/critical_path/cuda_event_sync_multi_stream",
    "hta/critical_path/simple_add", "hta/call_stack/backward_thread.json", "mindinsight-minddata",
    "mindspore-cpu", "mstt/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv",
    "mstt/test/ut/advisor/compute_advice/data/kernel_details.csv",
    "mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json",
    "mstt/test/resource/advisor/cluster_analysis_output", "hta/memory_analysis/memory_timeline.raw.gz",
]


def test_corpus_tests_run_strict(corpus):
    assert strict_mode()


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_emit_schema_columns(examples, name):
    load_profile(examples / name, jobs=1).check()


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_emits_schema_columns(corpus, name):
    load_profile(corpus / name, jobs=1).check()


@pytest.mark.parametrize("fmt", ["ascend-text", "ascend-db", "kineto"])
def test_generated_runs_emit_schema_columns(tmp_path, fmt):
    for fault in ("slow-stage", "slow-link"):
        data, _ = generate(Spec(ranks=4, steps=6, fault=fault, seed=1), tmp_path / f"{fault}-{fmt}", fmt)
        for jobs in (1, 2):
            load_profile(data, jobs=jobs).check()


def test_a_view_the_profile_cannot_give_is_computed_once_and_raised_each_time():
    """``Profile.memo`` keeps the NotEvaluated a view raises: the metrics that
    share the view do not compute it again (eight slow-link metrics on a
    cluster without slow links did), and each gets the reason."""
    from advisor.metrics.registry import NotEvaluated

    calls = []

    def view():
        calls.append(1)
        raise NotEvaluated("no point-to-point links with traffic")

    p = Profile(meta=RunMeta())
    for _ in range(3):
        with pytest.raises(NotEvaluated, match="no point-to-point links"):
            p.memo("links", view)
    assert len(calls) == 1
    assert p.memo("other", lambda: 42) == 42
