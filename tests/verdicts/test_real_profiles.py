"""Every real profile of the corpus gets the verdict a careful expert
reaches on it (bench/real_profiles.yaml, from the corpus README): present
and absent findings, the run verdict, the figures behind them."""

from __future__ import annotations

import pytest

from advisor.engine.loader import load_rules
from bench import real_profiles as rp

ENTRIES = rp.expectations()


def _id(entry: dict) -> str:
    return entry["input"] + ("/" + ",".join(entry["files"]) if entry.get("files") else "")


@pytest.mark.parametrize("entry", ENTRIES, ids=[_id(e) for e in ENTRIES])
def test_real_profile_gets_the_experts_verdict(corpus, entry):
    outcome = rp.run_entry(entry, corpus)
    assert outcome.right, f"{outcome.label}: advisor says {outcome.advisor}; " + "; ".join(outcome.problems)


def _entry(name: str, files: list[str] | None = None) -> dict:
    return next(e for e in ENTRIES if e["input"] == name and e.get("files") == files)


def test_the_judge_calls_another_profiles_verdict_wrong(corpus):
    """The checks can fail: the data-starved run judged by the healthy
    control's conclusion, and one MindData file by another's."""
    starved = rp.run_entry({**_entry("kineto-tb-plugin/resnet50_num_workers_4"),
                            "input": "kineto-tb-plugin/resnet50_num_workers_0"}, corpus)
    assert not starved.right
    assert any(p.startswith("input-bound fired at") for p in starved.problems)
    assert any(p.startswith("step.data_wait_ratio = ") for p in starved.problems)
    swapped = rp.run_entry({**_entry("mindinsight-minddata", ["minddata_pipeline_raw_1.csv"]),
                            "files": ["minddata_pipeline_raw_0.csv"]}, corpus)
    assert swapped.problems == ["data.bottleneck_op = 'Shuffle_4', expected 'Shuffle_1'"]


def test_the_expectations_name_real_inputs_and_known_checks(corpus):
    """An absent-rule check on a misspelt rule would always hold."""
    rules = {r.name for r in load_rules([])}
    for entry in ENTRIES:
        named = {*entry.get("present", []), *entry.get("absent", []), *entry.get("absent_serious", []),
                 *entry.get("scope_ranks", {}), *entry.get("says", {}), *([entry["lead"]] if "lead" in entry else [])}
        assert named <= rules, named - rules
        assert (corpus / entry["input"]).exists(), entry["input"]
        for name in entry.get("files", []):
            assert (corpus / entry["input"] / name).is_file(), name
        assert entry["expert"].strip()
