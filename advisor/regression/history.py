"""Run history: one SQLite file (default ``.advisor/history.db``).

Keep the file as a CI cache or artifact. Each run stores its metrics,
findings, commit, branch, time, environment and the whole report (zlib
compressed JSON, so a history baseline has the per-step samples and operator
tables a single report.json has). The schema version is SQLite's
``user_version``; a file of another version is refused with a one-line error.

Baseline: :meth:`History.baseline_side` -- the median of the last N runs on
a branch (``advisor.regression.compare.side_from_reports``).

Anomaly model (:func:`history_anomaly`): scikit-learn ``MinCovDet`` over
the run-level metrics in ``ANOMALY_FEATURES`` of the history runs (the same
robust-covariance model as ``advisor.metrics.anomaly`` uses for steps; features
that do not vary are dropped, at most ``(runs - 1) // 2`` are used). A run is
flagged when its squared robust Mahalanobis distance exceeds the chi-square
quantile ``1 - advisor.metrics.anomaly.ALPHA`` *and* at least one metric's robust
z-score (against the history) reaches ``advisor.metrics.anomaly.DRIVER_Z``; those
metrics are named. (With ten runs the covariance is rough; the second
condition keeps the model from flagging runs that are only unusual in
combination by a small margin.) Needs ``MIN_ANOMALY_RUNS``.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
import warnings
import zlib
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from advisor.errors import InputError
from advisor.model import Report
from advisor.regression.compare import Side, side_from_reports

SCHEMA_VERSION = 1
DEFAULT_DB = Path(".advisor/history.db")
MIN_ANOMALY_RUNS = 8
ANOMALY_FEATURES = (
    "step.time_ms", "step.computing_ms", "step.data_wait_ms", "step.exposed_comm_ms",
    "step.free_ms", "step.time_cv",
)
#: CI variables recorded with each run when set.
CI_VARIABLES = ("GITHUB_RUN_ID", "GITHUB_WORKFLOW", "GITHUB_REF_NAME", "CI_PIPELINE_ID",
                "CI_JOB_ID", "CI_COMMIT_REF_NAME", "RUNNER_NAME", "CI_RUNNER_DESCRIPTION")

_SCHEMA = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    branch TEXT NOT NULL,
    commit_sha TEXT,
    recorded_at TEXT NOT NULL,
    source TEXT,
    framework TEXT,
    device TEXT,
    environment TEXT NOT NULL,
    report BLOB NOT NULL
);
CREATE INDEX runs_branch ON runs(branch, recorded_at);
CREATE TABLE metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    metric TEXT NOT NULL,
    value REAL,
    unit TEXT,
    PRIMARY KEY (run_id, metric)
);
CREATE TABLE findings (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    rule TEXT NOT NULL,
    rule_id TEXT,
    severity TEXT,
    time_at_stake_ms REAL,
    message TEXT
);
"""


def environment() -> dict[str, str]:
    """What the run was measured on (recorded with it)."""
    env = {"python": platform.python_version(), "platform": platform.platform(),
           "machine": platform.machine(), "cpus": str(os.cpu_count()), "host": platform.node()}
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = str(getattr(torch, "__version__", "?"))
    for var in CI_VARIABLES:
        if os.environ.get(var):
            env[var] = os.environ[var]
    return env


class History:
    """The run-history file (see module doc)."""

    def __init__(self, path: str | Path, *, create: bool = False):
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise InputError(self.path, "no such history file (record runs with `advisor history add`)")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(self.path.parent, f"cannot create folder ({exc.strerror})") from None
        try:
            self.db = sqlite3.connect(self.path)
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            raise InputError(self.path, f"not an advisor history file ({exc})") from None
        if not tables and create:
            with self.db:
                self.db.executescript(_SCHEMA)
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif "runs" not in tables or version != SCHEMA_VERSION:
            self.db.close()
            raise InputError(self.path, f"not an advisor history file of schema version {SCHEMA_VERSION} "
                             f"(found version {version})")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, report: Report, *, branch: str, commit: str | None = None,
            recorded_at: str | None = None, env: dict[str, str] | None = None) -> int:
        """Store one run; returns its id."""
        when = recorded_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
        blob = zlib.compress(report.model_dump_json().encode("utf-8"), 6)
        run = report.run
        with self.db:
            cur = self.db.execute(
                "INSERT INTO runs (branch, commit_sha, recorded_at, source, framework, device, environment, report)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (branch, commit, when, run.source_path, run.framework, run.device,
                 json.dumps(env if env is not None else environment(), sort_keys=True), blob))
            run_id = int(cur.lastrowid)
            self.db.executemany(
                "INSERT INTO metrics (run_id, metric, value, unit) VALUES (?, ?, ?, ?)",
                [(run_id, mid, float(m.value), m.unit) for mid, m in report.metrics.items()
                 if isinstance(m.value, (int, float)) and not isinstance(m.value, bool)])
            self.db.executemany(
                "INSERT INTO findings (run_id, rule, rule_id, severity, time_at_stake_ms, message)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(run_id, f.rule, f.id, f.severity, f.time_at_stake_ms, f.message) for f in report.all_findings()])
        return run_id

    def runs(self, branch: str, last: int | None = None) -> pd.DataFrame:
        """The last ``last`` runs of ``branch``, oldest first: id, commit,
        recorded_at, environment, and one column per numeric metric, plus
        ``findings`` (``rule:severity`` list)."""
        limit = f" LIMIT {int(last)}" if last else ""
        rows = self.db.execute(
            "SELECT id, commit_sha, recorded_at, environment FROM runs WHERE branch = ?"
            f" ORDER BY recorded_at DESC, id DESC{limit}", (branch,)).fetchall()
        frame = pd.DataFrame(rows, columns=["id", "commit", "recorded_at", "environment"]).iloc[::-1]
        if frame.empty:
            return frame
        ids = tuple(int(i) for i in frame["id"])
        marks = ",".join("?" * len(ids))
        metrics = pd.DataFrame(self.db.execute(
            f"SELECT run_id, metric, value FROM metrics WHERE run_id IN ({marks})", ids).fetchall(),
            columns=["id", "metric", "value"])
        if not metrics.empty:
            frame = frame.merge(metrics.pivot(index="id", columns="metric", values="value"),
                                left_on="id", right_index=True, how="left")
        found: dict[int, list[str]] = {}
        for run_id, rule, sev in self.db.execute(
                f"SELECT run_id, rule, severity FROM findings WHERE run_id IN ({marks})", ids):
            found.setdefault(run_id, []).append(f"{rule}:{sev}")
        frame["findings"] = [found.get(int(i), []) for i in frame["id"]]
        return frame.reset_index(drop=True)

    def reports(self, branch: str, last: int | None = None) -> list[Report]:
        """The stored reports of the last ``last`` runs of ``branch``, oldest first."""
        limit = f" LIMIT {int(last)}" if last else ""
        rows = self.db.execute(
            "SELECT report FROM runs WHERE branch = ? ORDER BY recorded_at DESC, id DESC" + limit,
            (branch,)).fetchall()
        return [Report.model_validate_json(zlib.decompress(r[0])) for r in reversed(rows)]

    def baseline_side(self, branch: str, last: int) -> Side:
        """The median of the last ``last`` runs on ``branch``."""
        reports = self.reports(branch, last)
        if not reports:
            raise InputError(self.path, f"no runs recorded on branch {branch!r}")
        return side_from_reports(reports, f"{self.path} ({branch}, median of last {len(reports)} run(s))")


def anomaly_flags(runs: pd.DataFrame, reports: list[Report]) -> dict[int, str]:
    """The runs of ``History.runs`` (with their ``reports``, oldest first)
    that the anomaly model flags against the runs before them: id -> reason."""
    flags: dict[int, str] = {}
    for i in range(MIN_ANOMALY_RUNS, len(reports)):
        check = history_anomaly(side_from_reports(reports[:i], "history"), reports[i])
        if check is not None and check.status == "fail":
            flags[int(runs["id"].iloc[i])] = "anomaly: " + check.message
    return flags


def history_anomaly(baseline: Side, current: Report):
    """The anomaly check of ``current`` against the history runs (see module
    doc); None when the history is too short."""
    from scipy.stats import chi2
    from sklearn.covariance import MinCovDet

    from advisor.metrics.anomaly import ALPHA, DRIVER_Z, SEED, _robust_z
    from advisor.regression.gate import Check

    if baseline.runs < MIN_ANOMALY_RUNS:
        return None
    rows = []
    for rep in [*baseline.reports, current]:
        rows.append({k: rep.metrics[k].value for k in ANOMALY_FEATURES if k in rep.metrics
                     and isinstance(rep.metrics[k].value, (int, float))})
    frame = pd.DataFrame(rows).dropna(axis=1)
    hist = frame.iloc[:-1]
    varying = [c for c in frame.columns if hist[c].std(ddof=0) > 1e-9 * max(1.0, hist[c].abs().max())]
    varying = varying[: max(1, (len(hist) - 1) // 2)]
    if not varying:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mcd = MinCovDet(random_state=SEED).fit(hist[varying].to_numpy(float))
    distance = float(mcd.mahalanobis(frame[varying].to_numpy(float)[-1:])[0])
    limit = float(chi2.ppf(1 - ALPHA, df=len(varying)))
    z = _robust_z(frame[varying]).iloc[-1]
    drivers = [f"{c} (z={z[c]:+.1f})" for c in varying if abs(z[c]) >= DRIVER_Z]
    flagged = distance > limit and bool(drivers)
    msg = (f"run is outside what the last {len(hist)} runs have seen (robust distance {distance:.1f} > "
           f"{limit:.1f}): {', '.join(drivers)}" if flagged else
           f"run is within what the last {len(hist)} runs have seen (robust distance {distance:.1f}, "
           f"limit {limit:.1f}; no metric beyond z={DRIVER_Z:g})")
    return Check(kind="anomaly", name="history anomaly", status="fail" if flagged else "pass",
                 message=msg, test="MinCovDet robust Mahalanobis distance over " + ", ".join(varying))

