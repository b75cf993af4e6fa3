"""``advisor run``'s output folder: never delete what advisor did not write.

A run writes into ``-o OUT``: the traces under ``OUT/trace``, the profiled
processes' status files under ``OUT/.advisor-run``, the report beside them.
A new run into the same folder must first remove the previous run's traces
(else the report would mix two runs) -- and nothing else. So advisor keeps
a marker in the folder (``advisor.runtime.files.MARKER``) that lists, after
each run, the entries of those two subfolders; before a run:

* a folder that does not exist, or is empty, is used (and marked);
* a folder with the marker is advisor's: the entries the marker lists are
  removed; any other entry of ``trace/`` or ``.advisor-run/`` (a trace the
  user copied in, the output of a run advisor did not see to its end) stops
  the run with a one-line error naming it, and is left alone;
* any other non-empty folder is not advisor's: the run stops with a
  one-line error before anything is written.

Files the user puts beside ``trace/`` are never touched (the report set is
then written file by file, ``advisor.runtime.files.write_set``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from advisor.errors import ConfigError, InputError
from advisor.runtime.files import MARKER, read_marker, safe_folder, write_marker

TRACE_SUBDIR = "trace"
STATUS_SUBDIR = ".advisor-run"
#: The subfolders a run writes, and the marker's key for each one's listing.
_SUBDIRS = {TRACE_SUBDIR: "trace", STATUS_SUBDIR: "status"}


def _listing(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise InputError(folder, f"cannot list the folder ({exc.strerror or exc})") from None


def prepare(out_dir: Path) -> int:
    """Make ``out_dir`` ready for a run (see the module doc); returns how many
    traces of the previous run were removed. ConfigError (one line, naming
    the folder or entry) when the folder holds what advisor did not write."""
    out_dir = safe_folder(out_dir)
    present = _listing(out_dir) if out_dir.is_dir() else []
    marker = read_marker(out_dir) if present else {}
    if present and marker is None:
        raise ConfigError(f"{out_dir}: the output folder is not empty and advisor did not make it "
                          f"(no {MARKER}); advisor run writes into an empty folder or one of its own, "
                          "so that it never deletes what it did not write: choose another -o")
    stale: list[Path] = []
    for sub, key in _SUBDIRS.items():
        recorded = set(map(str, marker.get(key, []))) if marker else set()
        for name in _listing(out_dir / sub):
            if name not in recorded:
                raise ConfigError(f"{out_dir / sub / name}: not written by advisor's last run into {out_dir}; "
                                  "advisor does not delete it: move it away or choose another -o")
            stale.append(out_dir / sub / name)
    try:
        for sub in _SUBDIRS:
            (out_dir / sub).mkdir(parents=True, exist_ok=True)
        write_marker(out_dir, _SUBDIRS, **{key: [] for key in _SUBDIRS.values()})
    except OSError as exc:
        raise InputError(out_dir, f"cannot create output folder ({exc.strerror or exc})") from None
    for path in stale:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return sum(1 for p in stale if p.parent.name == TRACE_SUBDIR)


def record(out_dir: Path) -> None:
    """After a run: list what it wrote, so that the next run may remove it."""
    out_dir = safe_folder(out_dir)
    listings = {key: _listing(out_dir / sub) for sub, key in _SUBDIRS.items()}
    try:
        write_marker(out_dir, _SUBDIRS, **listings)
    except OSError:
        pass  # the next run then refuses the unlisted entries, naming them
