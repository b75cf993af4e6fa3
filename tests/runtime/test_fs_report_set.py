"""How the report set is written (advisor.runtime.files.write_set, through
``write_reports``).

* Symlinks planted in a shared output folder cannot redirect a write: not
  under the temporary names (once ``.report.md.<pid>.tmp``, predictable),
  not under the final names, not as the folder itself when someone else
  owns that symlink.
* A reader never sees a mix of two runs: the set is swapped in as one, and
  a failure to write leaves the previous set whole.
* What advisor did not write is left where it was; modes follow the umask.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import advisor
from advisor.errors import AdvisorError
from advisor.reports import FILES, write_reports

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet50_data_bound"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(scope="module")
def reports():
    """Two real reports of one example, told apart by ``generated_at``."""
    first = advisor.analyze(EXAMPLE)
    second = first.model_copy(deep=True)
    first.run.generated_at, second.run.generated_at = "run-one", "run-two"
    return first, second


def _run_of(texts: list[str]) -> set[str]:
    return {run for run in ("run-one", "run-two") for text in texts if run in text}


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("the victim's data\n")
    return victim


def test_planted_symlinks_never_redirect_a_write(tmp_path, reports):
    victim = _victim(tmp_path)
    out = tmp_path / "shared"
    out.mkdir()
    for name in FILES.values():  # the temporary names advisor once used, and the final names
        (out / f".{name}.{os.getpid()}.tmp").symlink_to(victim)
    (out / "report.md").symlink_to(victim)
    paths = write_reports(reports[0], out)
    assert victim.read_text() == "the victim's data\n"
    for path in paths.values():
        assert path.is_file() and not path.is_symlink() and _run_of([path.read_text()]) == {"run-one"}


@pytest.mark.skipif(not IS_ROOT, reason="planting a symlink owned by another user needs root")
def test_an_output_folder_that_is_another_users_symlink_is_refused(tmp_path, reports):
    victim = _victim(tmp_path)
    link = tmp_path / "advisor_report"
    link.symlink_to(victim.parent)
    os.lchown(link, 65534, 65534)
    with pytest.raises(AdvisorError, match="symlink owned by another user"):
        write_reports(reports[0], link)
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]
    own = tmp_path / "mine"
    own.symlink_to(victim.parent)  # the user's own symlink is followed
    write_reports(reports[0], own)
    assert (victim.parent / "report.json").is_file() and victim.read_text() == "the victim's data\n"


def test_a_failed_write_leaves_the_previous_set_whole(tmp_path, reports):
    out = tmp_path / "out"
    write_reports(reports[0], out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "report.md").unlink()
    (out / "report.md").mkdir()  # one file of the set cannot be replaced
    del before["report.md"]
    with pytest.raises(AdvisorError, match="report.md"):
        write_reports(reports[1], out)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_set_that_cannot_be_written_leaves_nothing_behind(tmp_path):
    from advisor.runtime.files import write_set

    with pytest.raises(UnicodeEncodeError):  # the second file cannot be written: no set at all
        write_set(tmp_path / "out2", {"report.html": "whole", "report.md": "a lone surrogate \udc80"})
    assert list(tmp_path.iterdir()) == []


def test_a_reader_never_sees_a_mix_of_two_runs(tmp_path, reports):
    """A reader that opens the folder, then its three files, while another
    thread writes the two reports in turn, sees one run's set (or a folder
    that has just been swapped out, and tries again)."""
    out = tmp_path / "out"
    write_reports(reports[0], out)
    stop = threading.Event()
    seen: list[set[str]] = []

    def read() -> None:
        while not stop.is_set():
            try:
                folder = os.open(out, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                texts = []
                for name in FILES.values():
                    with open(os.open(name, os.O_RDONLY, dir_fd=folder), encoding="utf-8") as fh:
                        texts.append(fh.read())
            except FileNotFoundError:
                continue
            finally:
                os.close(folder)
            seen.append(_run_of(texts))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(16):
            write_reports(reports[i % 2], out)
    finally:
        stop.set()
        reader.join()
    assert len(seen) > 10
    assert [s for s in seen if len(s) != 1] == []
    assert {frozenset(s) for s in seen} == {frozenset({"run-one"}), frozenset({"run-two"})}


def test_what_advisor_did_not_write_stays_where_it_was(tmp_path, reports):
    out = tmp_path / "out"
    write_reports(reports[0], out)
    assert sorted(os.listdir(out)) == sorted(FILES.values())
    (out / "notes.txt").write_text("mine")  # the user's file: the folder is no longer advisor's alone
    write_reports(reports[1], out)
    assert (out / "notes.txt").read_text() == "mine"
    assert _run_of([(out / n).read_text() for n in FILES.values()]) == {"run-two"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # nothing left beside it


def test_modes_follow_the_umask(tmp_path, reports):
    old = os.umask(0o027)
    try:
        write_reports(reports[0], tmp_path / "new")
        write_reports(reports[1], tmp_path / "new")
    finally:
        os.umask(old)
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o750
    assert {(tmp_path / "new" / n).stat().st_mode & 0o777 for n in FILES.values()} == {0o640}
