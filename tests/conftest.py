"""Shared test fixtures: where the real profiler corpus and examples live."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import _machine
import _netguard
from _strict import strict

pytest_plugins = ["_slow"]  # the `slow` marker, set by rule (tests/_slow.py)

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CORPUS = Path(os.environ.get("ADVISOR_CORPUS", REPO.parent / "shared" / "corpus"))


@pytest.fixture(scope="module")
def corpus() -> Iterator[Path]:
    """The read-only corpus of real profiler outputs (../shared/corpus).

    Tests that need it are skipped, with the reason, where it is absent
    (a user's fresh clone); CI has it beside the checkout. A module that
    reads it runs in strict mode (tests/_strict.py).
    """
    if not CORPUS.is_dir():
        pytest.skip(f"real-profile corpus not found at {CORPUS} (set ADVISOR_CORPUS)")
    with strict():
        yield CORPUS


@pytest.fixture(scope="session")
def examples() -> Path:
    return EXAMPLES


@pytest.fixture(scope="session", autouse=True)
def _config_not_strict_by_environment():
    """Strict config defaults to on under ``CI=true`` (advisor.settings): the
    suite sets it where a test means it, so it runs the same on a CI runner."""
    saved = {k: os.environ.pop(k) for k in ("CI", "ADVISOR_STRICT_CONFIG") if k in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def _machine_shared(request):
    """Every test holds the machine shared; a multi-rank run takes it alone
    (tests/_machine.py). The wait is not the test's time (tests/_slow.py)."""
    with _machine.shared() as waited:
        request.node.user_properties.append((_machine.MACHINE_WAIT, waited))
        yield


@pytest.fixture(autouse=True)
def _no_network():
    """Every test runs with sockets blocked except loopback and AF_UNIX
    (see tests/_netguard.py): a test fails if advisor reaches the network."""
    undo = _netguard.block()
    try:
        yield
    finally:
        undo()


class Done:
    """What a command did: exit code, standard output, standard error."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """The real CLI entry point, in process (a subprocess costs seconds of
    imports each), plain (``NO_COLOR``), from ``cwd`` when given."""
    from advisor.cli import main

    def run(*args: str, cwd: Path | None = None) -> Done:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        monkeypatch.setenv("NO_COLOR", "1")
        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return Done(code, out.out, out.err)

    return run
