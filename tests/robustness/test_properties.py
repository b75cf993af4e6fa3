"""Property-based tests (hypothesis).

Collectors: real files from the examples and the corpus, mutated at random
(cut, bytes inserted, cells replaced by random text or numbers, random JSON
values), are read by their collector: the result is a Profile or an
``InputError`` -- no other exception escapes -- and a Profile analyzes into
a Report that validates and survives a JSON round trip.

Engine: random metric values (NaN, inf, negative, huge, wrong types) for the
registry's metric ids, through every shipped rule: findings validate against
the Report schema.

Example counts are modest (``EXAMPLES`` per test) to fit the suite's time
budget on a small shared machine; raise ``ADVISOR_HYPOTHESIS_EXAMPLES`` for a
longer hunt.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rb_damage import EXAMPLES
from reports_schema import report_schema

from advisor.collectors.ascend import collector as ascend
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.mindinsight import collector as mindinsight
from advisor.engine.evaluation import compile_rule, evaluate
from advisor.engine.loader import load_rules
from advisor.errors import InputError
from advisor.metrics import REGISTRY
from advisor.model import Metric, Report, RunInfo
from advisor.profile import Profile

EXAMPLES_PER_TEST = int(os.environ.get("ADVISOR_HYPOTHESIS_EXAMPLES", "8"))
SETTINGS = settings(max_examples=EXAMPLES_PER_TEST, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CORPUS = Path(os.environ.get("ADVISOR_CORPUS", Path(__file__).resolve().parents[3] / "shared" / "corpus"))

_RULES = None


def _compiled():
    global _RULES
    if _RULES is None:
        _RULES = [compile_rule(r) for r in load_rules([])]
    return _RULES


def _check_profile(profile: Profile) -> None:
    """A Profile from a collector analyzes into a valid, round-trippable Report
    (the analysis pipeline with the shipped rules compiled once)."""
    from advisor.chart_tables import build_tables
    from advisor.metrics import evaluate as evaluate_metrics

    metrics, metric_skips = evaluate_metrics(profile)
    findings, rule_skips = evaluate(_compiled(), metrics, framework=profile.meta.framework,
                                    device=profile.meta.device)
    meta = profile.meta
    report = Report(
        run=RunInfo(framework=meta.framework, device=meta.device, source_format=meta.source_format,
                    source_path=meta.source_path, ranks=meta.ranks, steps_found=0, notes=meta.notes,
                    advisor_version="0", generated_at="-"),
        findings=findings, metrics=metrics, skipped=[*profile.skipped, *metric_skips, *rule_skips],
        tables=build_tables(profile, metrics),
    )
    text = report.model_dump_json()
    again = Report.model_validate_json(text)
    assert again.model_dump_json() == text
    jsonschema.validate(json.loads(text), report_schema())


# ------------------------------------------------------------- mutations

cells = st.one_of(
    st.sampled_from(["nan", "NaN", "-1", "-0", "inf", "-inf", "1e308", "1e-320", "", "N/A", "\"", "\t",
                     "999999999999999999999999", "0x10", "1,2", "\"a\nb\""]),
    st.text(max_size=12),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@st.composite
def mutate_text(draw, data: bytes) -> bytes:
    """One or two damages to a text file: cut, junk bytes, a cell replaced."""
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["cut", "bytes", "cell", "line"]))
        if not data:
            break
        at = draw(st.integers(0, len(data)))
        if kind == "cut":
            data = data[:at]
        elif kind == "bytes":
            data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
        elif kind == "line":
            lines = data.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = lines[i] * draw(st.integers(0, 2))
            data = b"\n".join(lines)
        else:
            lines = data.decode("utf-8", "replace").split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            parts = lines[i].split(",")
            j = draw(st.integers(0, len(parts) - 1))
            parts[j] = draw(cells)
            lines[i] = ",".join(parts)
            data = "\n".join(lines).encode("utf-8", "surrogatepass")
    return data


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def mutate_json(draw, doc):
    """Replace one random node of a JSON document by a random value."""
    doc = json.loads(json.dumps(doc))
    node, key = None, None
    cur = doc
    for _ in range(draw(st.integers(1, 5))):
        if isinstance(cur, dict) and cur:
            k = draw(st.sampled_from(sorted(cur)))
        elif isinstance(cur, list) and cur:
            k = draw(st.integers(0, min(len(cur), 50) - 1))
        else:
            break
        node, key, cur = cur, k, cur[k]
    if node is None:
        return draw(json_values)
    node[key] = draw(json_values)
    return doc


def _read(module, unit: Path):
    try:
        return module.read(unit)
    except InputError as exc:
        assert str(exc).strip() and "\n" not in str(exc)
        return None


# ------------------------------------------------------------ collectors

MI_FILES = ["step_trace_raw_0_detail_time.csv", "minddata_pipeline_raw_0.csv", "device_queue_profiling_0.txt",
            "minddata_aicpu_0.txt", "profiler_info_0.json"]


@SETTINGS
@given(st.data())
def test_mindinsight_collector_on_mutated_files(data):
    src = EXAMPLES / "resnet50_data_bound" / "profiler"
    name = data.draw(st.sampled_from(MI_FILES), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(shutil.copytree(src, Path(tmp) / "profiler"))
        path = folder / name
        path.write_bytes(data.draw(mutate_text(path.read_bytes()), label="mutated"))
        units = mindinsight.discover(folder)
        assert units
        profile = _read(mindinsight, units[0])
        if profile is not None:
            _check_profile(profile)


def _npu_unit(tmp: Path) -> Path:
    from rb_damage import npu_cluster
    return npu_cluster(CORPUS, tmp / "in", ranks=1) / "node0_1000_20240101_ascend_pt"


@SETTINGS
@given(st.data())
def test_ascend_collector_on_mutated_files(data):
    name = data.draw(st.sampled_from(["step_trace_time.csv", "kernel_details.csv", "communication.json"]),
                     label="file")
    with tempfile.TemporaryDirectory() as tmp:
        unit = _npu_unit(Path(tmp))
        path = unit / "ASCEND_PROFILER_OUTPUT" / name
        if name.endswith(".json") and data.draw(st.booleans(), label="structural"):
            doc = json.loads(path.read_text())
            path.write_text(json.dumps(data.draw(mutate_json(doc), label="doc"), allow_nan=True))
        else:
            path.write_bytes(data.draw(mutate_text(path.read_bytes()), label="mutated"))
        profile = _read(ascend, unit)
        if profile is not None:
            _check_profile(profile)


db_cells = st.one_of(st.none(), st.text(max_size=6), st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(-2**63, 2**63 - 1), st.sampled_from(["abc", "", -1, 1e30, "1e308"]))


@SETTINGS
@given(st.data())
def test_ascend_database_layout_on_damaged_tables(data):
    """The database layout (profiler db + analysis.db) with one table
    damaged as SQLite allows: cells of any type (a column's declared type
    does not bind them), rows deleted or repeated, a column renamed, a table
    dropped."""
    import sqlite3

    from bench.scenarios.ascend import sample_rank, write_db

    with tempfile.TemporaryDirectory() as tmp:
        unit = write_db(Path(tmp) / "in", sample_rank(0))
        dbs = sorted((unit / "ASCEND_PROFILER_OUTPUT").glob("*.db"))
        con = sqlite3.connect(data.draw(st.sampled_from(dbs), label="db"))
        tables = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'"))
        table = data.draw(st.sampled_from(tables), label="table")
        columns = [r[1] for r in con.execute(f"PRAGMA table_info('{table}')")]
        column = data.draw(st.sampled_from(columns), label="column")
        damage = data.draw(st.sampled_from(["cell", "cell", "delete", "repeat", "rename", "drop"]), label="damage")
        statement, values = {
            "cell": (f"UPDATE '{table}' SET '{column}' = ? WHERE rowid % {data.draw(st.integers(1, 3))} = 0",
                     (data.draw(db_cells, label="value"),)),
            "delete": (f"DELETE FROM '{table}' WHERE rowid % 2 = 0", ()),
            "repeat": (f"INSERT INTO '{table}' SELECT * FROM '{table}'", ()),
            "rename": (f"ALTER TABLE '{table}' RENAME COLUMN '{column}' TO 'x_{column}'", ()),
            "drop": (f"DROP TABLE '{table}'", ()),
        }[damage]
        try:
            con.execute(statement, values)
            con.commit()
        except sqlite3.Error:  # a damage SQLite refuses (a key column keeps its integers)
            return
        finally:
            con.close()
        profile = _read(ascend, unit)
        if profile is not None:
            _check_profile(profile)


def _small_trace() -> dict:
    """The first events of a real HTA trace (small enough for many examples)."""
    raw = gzip.decompress((CORPUS / "hta" / "trace_filter" / "sampled_rank-0.json.gz").read_bytes())
    doc = json.loads(raw)
    doc["traceEvents"] = doc["traceEvents"][:400]
    return doc


@SETTINGS
@given(st.data())
def test_kineto_collector_on_mutated_traces(data):
    doc = _small_trace()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank-0.pt.trace.json"
        if data.draw(st.booleans(), label="structural"):
            events = doc["traceEvents"]
            for _ in range(data.draw(st.integers(1, 4), label="edits")):
                ev = events[data.draw(st.integers(0, len(events) - 1), label="event")]
                field = data.draw(st.sampled_from(["dur", "ts", "ph", "name", "cat", "args", "pid", "tid"]))
                ev[field] = data.draw(json_values | st.sampled_from([float("nan"), float("inf"), -1, 1e300]),
                                      label="value")
            path.write_text(json.dumps(doc, allow_nan=True))
        else:
            path.write_bytes(data.draw(mutate_text(json.dumps(doc).encode()), label="mutated"))
        if data.draw(st.booleans(), label="gzip"):
            gz = path.with_suffix(".json.gz")
            gz.write_bytes(gzip.compress(path.read_bytes()))
            path.unlink()
            path = gz
        if not kineto.discover(path):
            return
        profile = _read(kineto, path)
        if profile is not None:
            _check_profile(profile)


# ---------------------------------------------------------------- engine

def _value_for(unit: str):
    numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**12),
                        st.sampled_from([0.0, -0.0, 1e308, -1e308, 1e-308]))
    if unit in ("text", "stage"):
        return st.text(max_size=10) | numbers
    if unit in ("list", "steps"):
        return st.lists(st.integers(-5, 2000) | st.text(max_size=5), max_size=5)
    if unit == "map":
        return st.dictionaries(st.text(max_size=5), numbers, max_size=4)
    return numbers | st.none() | st.booleans()


@st.composite
def metric_sets(draw):
    ids = draw(st.lists(st.sampled_from(sorted(REGISTRY)), unique=True, min_size=1, max_size=len(REGISTRY)))
    out = {}
    for mid in ids:
        spec = REGISTRY[mid]
        value = draw(_value_for(spec.unit))
        if value is None:
            continue
        if isinstance(value, float) and not math.isfinite(value) and draw(st.booleans()):
            value = None  # the registry turns non-finite into "no value"; feed both
            continue
        out[mid] = Metric(id=mid, value=value, unit=spec.unit, scope=spec.scope)
    return out


@settings(max_examples=EXAMPLES_PER_TEST * 5, deadline=None, derandomize=True)
@given(metric_sets(), st.sampled_from(["mindspore", "pytorch", "torch_npu", "unknown"]),
       st.sampled_from(["ascend", "gpu", "cpu", "unknown"]))
def test_engine_on_random_metric_values(metrics, framework, device):
    findings, skipped = evaluate(_compiled(), metrics, framework=framework, device=device)
    report = Report(
        run=RunInfo(framework=framework, device=device, source_format="test", source_path="-", ranks=[0],
                    steps_found=1, advisor_version="0", generated_at=datetime.now(timezone.utc).isoformat()),
        findings=findings, metrics=metrics, skipped=skipped,
    )
    text = report.model_dump_json()
    doc = json.loads(text)  # strict JSON (no NaN/Infinity)
    jsonschema.validate(doc, report_schema())
    Report.model_validate(doc)
    for f in findings:
        assert f.severity in ("info", "low", "medium", "high", "critical")
        if f.estimated_gain_ms is not None and f.time_at_stake_ms is not None:
            assert f.estimated_gain_ms <= f.time_at_stake_ms or math.isnan(f.time_at_stake_ms)


@settings(max_examples=EXAMPLES_PER_TEST, deadline=None, derandomize=True)
@given(st.data())
def test_metrics_on_random_step_tables(data):
    """Every metric over a valid steps table of random values (durations
    positive, each component a share of its step), in strict mode: no metric
    raises anything but NotEvaluated, each step component present is
    evaluated (its ms and share metrics), shares lie in [0, 1] and times
    between 0 and the longest step."""
    from unittest import mock

    import numpy as np
    import pandas as pd

    from advisor.metrics import evaluate as evaluate_metrics
    from advisor.profile import RunMeta

    n_ranks = data.draw(st.integers(1, 4), label="ranks")
    n_steps = data.draw(st.integers(1, 6), label="steps")
    cols = ["computing_us", "communication_us", "overlapped_us", "exposed_comm_us", "free_us",
            "data_wait_us", "iteration_interval_us", "fp_bp_us", "tail_us", "stage_us", "bubble_us"]
    chosen = data.draw(st.lists(st.sampled_from(cols), unique=True), label="columns")
    durations = st.floats(1.0, 1e7, allow_nan=False, allow_infinity=False)
    shares = st.floats(0.0, 1.0, allow_nan=False)
    rows = []
    for r in range(n_ranks):
        for s in range(n_steps):
            duration = data.draw(durations)
            rows.append({"rank": r, "step": s + 1, "duration_us": duration,
                         **{c: data.draw(shares) * duration for c in chosen}})
    steps = pd.DataFrame(rows)
    steps["step"] = steps["step"].astype("Int64")
    profile = Profile(meta=RunMeta(ranks=list(range(n_ranks))), steps=steps)
    with mock.patch.dict(os.environ, {"ADVISOR_STRICT": "1"}):
        metrics, skipped = evaluate_metrics(profile)
    reasons = {s.what: s.reason for s in skipped}
    longest_ms = steps["duration_us"].max() / 1000.0
    expected = ["step.time_ms"] + [f"step.{c.removesuffix('_us')}_{kind}" for c in chosen for kind in ("ms", "ratio")]
    for mid in (m for m in expected if m in REGISTRY):
        assert mid in metrics, (mid, reasons.get(f"metric {mid}"))
        value = metrics[mid].value
        if mid.endswith("_ratio"):
            assert 0.0 <= value <= 1.0 + 1e-9, (mid, value)
        else:
            assert 0.0 <= value <= longest_ms * (1 + 1e-9), (mid, value)
    for m in metrics.values():
        for v in (m.value if isinstance(m.value, list) else [m.value]):
            assert not (isinstance(v, float) and not np.isfinite(v)), m
