"""The gate tests' live runs (``conftest.live_runs``), in a module of their
own: ``tests/_once.py`` pickles them for the other worker, which finds the
classes by this module's name (every ``conftest`` module is "conftest")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Run:
    name: str
    trace: Path      # the profiler output folder
    report: Path     # its report.json


@dataclass
class Runs:
    healthy: list[Run]
    slow: Run
    seconds: float
