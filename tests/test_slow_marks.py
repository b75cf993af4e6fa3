"""The rules of tests/_slow.py mark what they say, on stand-in test items."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import _slow

TESTS = Path(__file__).resolve().parent


@dataclass
class Item:
    """The attributes of a pytest item the rules read."""

    function: object
    nodeid: str = "tests/test_x.py::test_x"
    path: Path = TESTS / "test_x.py"
    fixturenames: list[str] = field(default_factory=list)
    _fixtureinfo: object = None


def _starts_a_process():
    subprocess.run(["true"], check=True)


def _calls_a_helper_that_starts_a_process():
    _starts_a_process()


def _computes():
    return sum(range(10))


#: stand-ins for test functions, reached through a dict so that the tests
#: below do not name them (the rule follows names)
STAND_INS = {"process": _calls_a_helper_that_starts_a_process, "plain": _computes}


def test_a_plain_test_is_quick():
    assert not _slow._is_slow(Item(STAND_INS["plain"]))


def test_a_test_whose_helper_starts_a_process_is_slow():
    assert _slow._is_slow(Item(STAND_INS["process"]))


def test_corpus_and_browser_tests_are_slow():
    for fixture in ("corpus", "browser"):
        assert _slow._is_slow(Item(STAND_INS["plain"], fixturenames=["tmp_path", fixture]))


def test_end_to_end_tests_are_slow():
    assert _slow._is_slow(Item(STAND_INS["plain"], path=TESTS / "e2e" / "test_x.py"))


def test_measured_tests_and_their_cases_are_slow():
    node = "tests/metrics/test_anomaly.py::test_false_positive_rate_on_healthy_runs"
    assert node in _slow.MEASURED
    assert _slow._is_slow(Item(STAND_INS["plain"], nodeid=node + "[10]"))
    assert not _slow._is_slow(Item(STAND_INS["plain"], nodeid=node + "_and_more"))
