"""Run history: one SQLite file (default ``.advisor/history.db``).

Keep the file as a CI cache or artifact. Each run stores its metrics,
findings, commit, branch, time, environment and the whole report (zlib
compressed JSON, so a history baseline has the per-step samples and operator
tables a single report.json has). A stored report is decompressed under the
bounds on decompressed input (``advisor.collectors.io.limits.inflate``):
a history file is input, and a few MB of zlib can hold gigabytes. The
schema version is SQLite's ``user_version``; a file of another version is
refused with a one-line error.

A file that is not a history, has tables of another shape, damaged pages
(checked with ``PRAGMA quick_check`` before a run is added, so nothing is
written into a damaged file), a stored report that does not decode, or
that cannot be written (read-only) is an ``InputError`` naming the file:
exit 2, never a traceback. The schema is created in one ``BEGIN
IMMEDIATE`` transaction (``CREATE ... IF NOT EXISTS``): two processes
creating one history at once serialize on SQLite's write lock, waiting up
to ``BUSY_TIMEOUT_S``, and the second finds the tables the first made.

Baseline: :meth:`History.baseline_side` -- the median of the last N runs on
a branch (``advisor.regression.compare.side_from_reports``).

Anomaly model (:func:`history_anomaly`): the robust covariance fit of
``advisor.metrics.robust_fit`` (the one the anomaly model of steps and ranks
uses) over the run-level metrics in ``ANOMALY_FEATURES`` of the history runs (features
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
import zlib
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from advisor.collectors.io.limits import inflate
from advisor.errors import InputError
from advisor.model import Report
from advisor.regression.compare import Side, check_values, side_from_reports
from advisor.reports.i18n import Message

SCHEMA_VERSION = 1
DEFAULT_DB = Path(".advisor/history.db")
#: Seconds a process waits for another's write lock (a CI job adding a run
#: while another creates or reads the file) before the file counts as busy.
BUSY_TIMEOUT_S = 30.0
MIN_ANOMALY_RUNS = 8
ANOMALY_FEATURES = (
    "step.time_ms", "step.computing_ms", "step.data_wait_ms", "step.exposed_comm_ms",
    "step.free_ms", "step.time_cv",
)
#: CI variables recorded with each run when set.
CI_VARIABLES = ("GITHUB_RUN_ID", "GITHUB_WORKFLOW", "GITHUB_REF_NAME", "CI_PIPELINE_ID",
                "CI_JOB_ID", "CI_COMMIT_REF_NAME", "RUNNER_NAME", "CI_RUNNER_DESCRIPTION")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
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
CREATE INDEX IF NOT EXISTS runs_branch ON runs(branch, recorded_at);
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    metric TEXT NOT NULL,
    value REAL,
    unit TEXT,
    PRIMARY KEY (run_id, metric)
);
CREATE TABLE IF NOT EXISTS findings (
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


def _columns(schema: str) -> dict[str, set[str]]:
    """table -> column names of ``schema`` (created in a scratch in-memory database)."""
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.executescript(schema)
        tables = [r[0] for r in scratch.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                                "AND name NOT LIKE 'sqlite_%'")]
        return {t: {r[1] for r in scratch.execute(f"PRAGMA table_info({t})")} for t in tables}
    finally:
        scratch.close()


#: The columns each table must have (read from ``_SCHEMA``).
COLUMNS = _columns(_SCHEMA)


def _problem(exc: BaseException) -> str:
    """A one-line reason for an SQLite error on a history file."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "readonly" in text or "read-only" in text:
        return f"cannot write the history ({text})"
    if "locked" in text or "busy" in text:
        return f"the history is busy in another process ({text}); try again"
    if isinstance(exc, sqlite3.OperationalError) and "no such" not in text and "has no column" not in text:
        return f"cannot use the history ({text})"
    return f"damaged or not an advisor history file ({text})"


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
        self.db = None
        try:
            self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            if create:
                self._create()
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise InputError(self.path, f"not an advisor history file of schema version {SCHEMA_VERSION} "
                                 f"(found version {version})")
            self._check_tables()
        except sqlite3.Error as exc:
            self.close()
            raise InputError(self.path, _problem(exc)) from None
        except InputError:
            self.close()
            raise

    def _create(self) -> None:
        """The schema, in one write transaction, when the file has no tables
        yet (see module doc)."""
        with self._transaction():
            tables = self.db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
            if tables == 0:
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        self.db.execute(stmt)
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _check_tables(self) -> None:
        """InputError unless every table has the columns this version reads and writes."""
        for table, wanted in COLUMNS.items():
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            missing = sorted(wanted - have)
            if missing:
                raise InputError(self.path, f"not an advisor history file (table {table} "
                                 f"{'is missing' if not have else 'lacks ' + ', '.join(missing)})")

    @contextmanager
    def _transaction(self):
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): the write lock is
        taken at once, so a second writer waits instead of failing midway."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

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
        try:
            return self._add(report, run, branch, commit, when, blob, env)
        except sqlite3.Error as exc:
            raise InputError(self.path, _problem(exc)) from None

    def _add(self, report: Report, run, branch, commit, when, blob, env) -> int:
        damage = self.db.execute("PRAGMA quick_check").fetchall()
        if damage != [("ok",)]:
            raise InputError(self.path, "damaged (PRAGMA quick_check: " + "; ".join(str(r[0]) for r in damage[:2])
                             + "); nothing was written")
        with self._transaction():
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
        try:
            return self._runs(branch, last)
        except sqlite3.Error as exc:
            raise InputError(self.path, _problem(exc)) from None

    def _runs(self, branch: str, last: int | None) -> pd.DataFrame:
        limit = f" LIMIT {int(last)}" if last else ""
        rows = self.db.execute(
            "SELECT id, commit_sha, recorded_at, environment FROM runs WHERE branch = ?"
            f" ORDER BY recorded_at DESC, id DESC{limit}", (branch,)).fetchall()
        frame = pd.DataFrame(rows, columns=["id", "commit", "recorded_at", "environment"]).iloc[::-1]
        if frame.empty:
            return frame
        ids = tuple(int(i) for i in frame["id"])
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(f"SELECT run_id, metric, value FROM metrics WHERE run_id IN ({marks})", ids).fetchall()
        for run_id, metric, value in rows:  # the column is REAL, but SQLite stores whatever it is given
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise InputError(self.path, f"run {run_id}: metric {metric} holds {str(value)[:40]!r}, not a number "
                                 "(damaged history)")
        metrics = pd.DataFrame(rows, columns=["id", "metric", "value"]).astype({"value": float})
        if not metrics.empty:
            frame = frame.merge(metrics.pivot(index="id", columns="metric", values="value"),
                                left_on="id", right_index=True, how="left")
        found: dict[int, list[str]] = {}
        for run_id, rule, sev in self.db.execute(
                f"SELECT run_id, rule, severity FROM findings WHERE run_id IN ({marks})", ids):
            found.setdefault(run_id, []).append(f"{rule}:{sev}")
        frame["findings"] = [found.get(int(i), []) for i in frame["id"]]
        return frame.reset_index(drop=True)

    def unit(self, metric: str) -> str:
        """The unit ``metric`` was recorded with (its latest run's), "" when
        none was."""
        try:
            row = self.db.execute("SELECT unit FROM metrics WHERE metric = ? AND unit IS NOT NULL "
                                  "ORDER BY run_id DESC LIMIT 1", (metric,)).fetchone()
        except sqlite3.Error as exc:
            raise InputError(self.path, _problem(exc)) from None
        return str(row[0]) if row else ""

    def reports(self, branch: str, last: int | None = None) -> list[Report]:
        """The stored reports of the last ``last`` runs of ``branch``, oldest
        first; InputError naming the run whose report does not decode or
        holds impossible step times."""
        limit = f" LIMIT {int(last)}" if last else ""
        try:
            rows = self.db.execute(
                "SELECT id, report FROM runs WHERE branch = ? ORDER BY recorded_at DESC, id DESC" + limit,
                (branch,)).fetchall()
        except sqlite3.Error as exc:
            raise InputError(self.path, _problem(exc)) from None
        out = []
        for run_id, blob in reversed(rows):
            try:
                report = Report.model_validate_json(inflate(blob, f"{self.path} (run {run_id})"))
            except (zlib.error, TypeError, ValueError) as exc:
                why = " ".join(str(exc).split())[:200]
                raise InputError(self.path, f"run {run_id}: the stored report is damaged ({type(exc).__name__}: "
                                 f"{why})") from None
            check_values(report, f"{self.path} (run {run_id})")
            out.append(report)
        return out

    def baseline_side(self, branch: str, last: int) -> Side:
        """The median of the last ``last`` runs on ``branch``."""
        reports = self.reports(branch, last)
        if not reports:
            raise InputError(self.path, f"no runs recorded on branch {branch!r}")
        return side_from_reports(reports, f"{self.path} ({branch}, median of last {len(reports)} run(s))")


def anomaly_flags(runs: pd.DataFrame, reports: list[Report]) -> dict[int, str]:
    """The runs of ``History.runs`` (with their ``reports``, oldest first)
    that the anomaly model flags against the runs before them: id -> reason
    (a message of the tables, ``advisor.reports.i18n.Message``)."""
    flags: dict[int, str] = {}
    for i in range(MIN_ANOMALY_RUNS, len(reports)):
        check = history_anomaly(side_from_reports(reports[:i], "history"), reports[i])
        if check is not None and check.status == "fail":
            flags[int(runs["id"].iloc[i])] = Message("hist_flag_reason", reason=check.message)
    return flags


def history_anomaly(baseline: Side, current: Report):
    """The anomaly check of ``current`` against the history runs (see module
    doc); None when the history is too short."""
    from advisor.metrics import robust_fit
    from advisor.metrics.anomaly import ALPHA, DRIVER_Z, _robust_z
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
    model = robust_fit.fit(hist[varying].to_numpy(float))
    distance = float(model.distances(frame[varying].to_numpy(float)[-1:])[0])
    limit = robust_fit.chi2_quantile(1 - ALPHA, len(varying))
    z = _robust_z(frame[varying]).iloc[-1]
    drivers = [f"{c} (z={z[c]:+.1f})" for c in varying if abs(z[c]) >= DRIVER_Z]
    flagged = distance > limit and bool(drivers)
    seen = {"runs": str(len(hist)), "distance": f"{distance:.1f}", "limit": f"{limit:.1f}"}
    msg = (Message("gate_anomaly_outside", drivers=drivers, **seen) if flagged else
           Message("gate_anomaly_within", z=f"{DRIVER_Z:g}", **seen))
    return Check(kind="anomaly", name=Message("gate_check_anomaly"), status="fail" if flagged else "pass",
                 message=msg, test="robust (MCD) Mahalanobis distance over " + ", ".join(varying))

