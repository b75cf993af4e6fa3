"""Verdicts on real CPU training loops whose time goes outside the operators
(``advisor run``, PyTorch's profiler, OMP_NUM_THREADS=1).

On a CPU run the processor that runs the operators also runs the Python
between them, and no device-idle rule applies, so such a loop used to be
called clean. host-time-outside-ops reads the free time that recurs at
the same places in every step (``step.recurring_free_ms``); measured on a
loaded 2-core host:

* ``torch.save`` of the model and optimizer every step: serialising and
  writing the file runs no operator (27 ms of a 56 ms step, high), and
  the gain counts those silent stretches whole;
* a small MLP's batch run sample by sample, one forward per row: its
  one-row operators take microseconds, and the Python that calls them
  takes 31% of the step (medium);
* a 32-wide ``nn.LSTMCell`` called once per time step over 128 steps: 26-27%
  (medium; 23-24% for a 64-wide cell over 64 steps, near the rule's 20%);
* a larger MLP trained on whole batches, checkpointing never: about 10%,
  and the rule stays quiet;
* a metric computed in Python over the batch every step: with Python
  stacks recorded (``ADVISOR_WITH_STACK=1``) the finding names the
  function the time runs in and rests on that; without, it is inferred
  and says how to see it;
* examples/train_ddp.py's healthy two ranks (bench/repeatability.py's
  ``healthy-2``): 1.1-1.4 ms of a 10-11 ms step recurs (5 runs), under the
  rule's 4 ms; the rest of their free time is the ranks waiting for a CPU
  at random places, which got the rule at high in one of three runs when
  it read the median step's free time.

A per-sample loop over a larger MLP, whose one-row operators take tens
of microseconds, spends its extra time inside the operators instead: in
matrix products one row thick, which memory, not arithmetic, paces.
thin-matmul reads that time from the recorded shapes
(``ops.thin_matmul_ratio``): 68% of the step there, 0-1.5% in the batched
and DDP loops.
"""

from __future__ import annotations


import pytest

from bench import repeatability
from tests._profiled import profiled, value
from tests.e2e._teardown import advisor_run_report

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

SCRIPT = """
import sys, torch
from torch import nn

kind, path = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
# the per-sample loop runs a small MLP, whose one-row operators take microseconds
width, hidden, rows = (64, 128, 64) if kind == "per-sample" else (256, 512, 128)
if kind == "rows":  # the larger MLP, one row at a time: its one-row products take tens of microseconds
    rows = 48
model = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                      nn.Linear(hidden, 10))
if kind == "tiny-layers":  # 150 16-wide layers of 8 rows: calling them, not their arithmetic, takes the time
    width, rows = 16, 8
    model = nn.Sequential(*[m for _ in range(150) for m in (nn.Linear(16, 16), nn.Tanh())])
if kind == "lstmcell":  # 128 time steps of 16 sequences, one cell call each
    model = nn.LSTMCell(32, 32)
    x, target = torch.randn(128, 16, 32), torch.randn(16, 32)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
loss_fn = nn.CrossEntropyLoss()
if kind != "lstmcell":
    x, y = torch.randn(rows, width), torch.randint(0, 10, (rows,))
for step in range(11):
    opt.zero_grad(set_to_none=True)
    if kind == "lstmcell":
        h = c = torch.zeros(16, 32)
        for t in range(len(x)):
            h, c = model(x[t], (h, c))
        loss = nn.functional.mse_loss(h, target)
    elif kind in ("per-sample", "rows"):
        loss = sum(loss_fn(model(x[i:i + 1]), y[i:i + 1]) for i in range(len(x))) / len(x)
    else:
        loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if kind == "save":
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    elif kind == "metric":  # a rank-based AUC written in Python over the batch, every step
        labels, scores = y.tolist(), model(x)[:, 1].detach().tolist()
        score = ranked_pairs(labels, scores)
    elif kind == "ranged-metric":  # the same, inside a record_function range of the program's
        with torch.profiler.record_function("compute_auc"):
            labels, scores = y.tolist(), model(x)[:, 1].detach().tolist()
            score = ranked_pairs(labels, scores)
"""
METRIC = """
def ranked_pairs(labels, scores):
    pairs = won = 0
    n = len(labels)
    for i in range(4 * n):
        for j in range(n):
            if labels[i % n] > labels[j]:
                pairs += 1
                won += scores[i % n] > scores[j]
    return won / max(pairs, 1)
"""
SERIOUS = {"medium", "high", "critical"}
RULE = "host-time-outside-ops"


def _run(tmp_path, kind: str, env: dict | None = None) -> dict:
    script = SCRIPT.replace("kind, path = sys.argv[1], sys.argv[2]", METRIC + "kind, path = sys.argv[1], sys.argv[2]")
    return profiled(tmp_path, script, kind, tmp_path / "checkpoint.pt", steps=6, warmup=3, env=env)[0]


@pytest.mark.parametrize("kind", ["save", "per-sample", "lstmcell"])
def test_time_outside_the_operators_is_a_problem_not_clean(tmp_path, kind):
    report = _run(tmp_path, kind)
    found = {f["rule"]: f for f in report["findings"]}
    assert RULE in found and found[RULE]["severity"] in SERIOUS, list(found)
    assert report["verdict"]["status"] == "problems"
    f = found[RULE]
    # the gain is bounded by the free time every step pays, itself within the step
    assert f["estimated_gain_ms"] <= f["time_at_stake_ms"] == pytest.approx(value(report, "step.recurring_free_ms"), rel=1e-3)
    assert f["time_at_stake_ms"] <= value(report, "step.time_ms")
    assert value(report, "step.recurring_free_ratio") >= 0.2
    # its share is of a step rebuilt from recurring times, not of the mean step printed beside it: said so
    ratio, share = value(report, "step.recurring_free_ratio"), f["time_at_stake_ms"] / value(report, "step.time_ms")
    assert f"{ratio:.1%} of a step built from the times that recur" in f["message"] or abs(ratio - share) < 5e-4
    if kind == "save":  # the file write runs no operator on any thread: long silent stretches
        assert value(report, "host.silent_gap_ms") >= 0.5 * value(report, "step.recurring_free_ms")
    # the silent stretches' work (the write) leaves the step whole when moved out of it; half of the rest
    silent = min(value(report, "host.silent_gap_ms"), f["time_at_stake_ms"])
    assert f["estimated_gain_ms"] == pytest.approx(silent + 0.5 * (f["time_at_stake_ms"] - silent), abs=2e-3)


def test_many_tiny_operators_are_named_as_the_gaps_between_them(tmp_path):
    # the operators run back to back, so no stretch of a millisecond goes without one: the message says so
    # instead of giving the silent stretches as "0.00 ms of the mean step", and the gain is half the free time
    report = _run(tmp_path, "tiny-layers")
    f = {f["rule"]: f for f in report["findings"]}.get(RULE)
    assert f is not None and f["severity"] in SERIOUS, [x["rule"] for x in report["findings"]]
    silent = value(report, "host.silent_gap_ms")
    assert silent < 0.25 * f["time_at_stake_ms"]
    if silent == 0:
        assert "No stretch of 1 ms or more goes without a recorded operator or range" in f["message"]
        assert "Stretches of 1 ms" not in f["message"] and "silent stretches" not in f["message"]
        assert f["estimated_gain_ms"] == pytest.approx(0.5 * f["time_at_stake_ms"], abs=2e-3)
    else:
        assert "Stretches of 1 ms or more with no operator on any thread take" in f["message"]


def test_with_python_stacks_the_finding_names_the_function_that_runs_there(tmp_path):
    # recorded with_stack=True, the trace holds the program's Python frames: the free time is seen in the
    # function that runs it, so the finding rests on direct evidence instead of asking for the stacks
    report = _run(tmp_path, "metric", env={"ADVISOR_WITH_STACK": "1"})
    found = {f["rule"]: f for f in report["findings"]}
    assert RULE in found, list(found)
    f = found[RULE]
    assert f["direct_evidence"] is True and "(inferred)" not in f["title"]
    frames = report["metrics"]["step.recurring_free_frames"]["evidence"]["frames"]
    top = next(iter(frames))
    assert top.endswith(": ranked_pairs") and top in f["message"] and "advisor run --stacks" not in f["message"]
    assert frames[top] >= 0.5 * value(report, "step.recurring_free_ms")


def test_without_python_stacks_the_finding_is_inferred_and_says_how_to_see_the_functions(tmp_path):
    report = _run(tmp_path, "metric")
    f = {f["rule"]: f for f in report["findings"]}[RULE]
    assert f["direct_evidence"] is False and f["title"].endswith("(inferred)")
    assert "advisor run --stacks" in f["message"] and "step.recurring_free_frames" not in report["metrics"]


def test_without_python_stacks_the_record_function_range_it_runs_in_is_named(tmp_path):
    # a range the program records around its metric holds the time: named without stacks, and the message
    # does not put that time in Python's cost per operator call alone
    report = _run(tmp_path, "ranged-metric")
    f = {f["rule"]: f for f in report["findings"]}[RULE]
    ranges = report["metrics"]["step.recurring_free_ranges"]["evidence"]["ranges"]
    assert next(iter(ranges)) == "compute_auc", ranges
    assert ranges["compute_auc"] >= 0.5 * value(report, "step.recurring_free_ms")
    assert "The record_function ranges it falls in: compute_auc (" in f["message"]
    if value(report, "host.silent_gap_ms") == 0:
        assert "in the record_function ranges named below or in Python's cost" in f["message"]


def test_a_batch_run_row_by_row_spends_its_step_in_thin_products(tmp_path):
    report = _run(tmp_path, "rows")
    found = {f["rule"]: f for f in report["findings"]}
    assert "thin-matmul" in found and found["thin-matmul"]["severity"] in SERIOUS, list(found)
    assert value(report, "ops.thin_matmul_ratio") >= 0.4
    f = found["thin-matmul"]
    assert f["estimated_gain_ms"] <= f["time_at_stake_ms"] <= value(report, "step.time_ms")
    assert "model(x)" in f["fix"]["code"]


def test_a_batched_loop_keeps_it_quiet(tmp_path):
    report = _run(tmp_path, "batched")
    assert RULE not in {f["rule"] for f in report["findings"]}
    assert value(report, "step.recurring_free_ratio") < 0.2
    # its narrowest product, the 10-class output layer, is wider than 8
    assert value(report, "ops.thin_matmul_ratio") < 0.05
    assert report["verdict"]["status"] == "clean"


def test_healthy_ddp_ranks_waiting_for_a_cpu_keep_it_quiet(tmp_path):
    # two gloo ranks of a small MLP on a 2-core host, as bench/repeatability.py runs its healthy-2 scenario:
    # their free time is mostly waits for a CPU at random places and the wake-up after each all-reduce
    steps, command = repeatability.SCENARIOS["healthy-2"]
    out = tmp_path / "out"
    report = advisor_run_report(repeatability.argv(steps, command, out), out, steps, cwd=tmp_path, timeout=600,
                                env={**repeatability.ENV, "ADVISOR_STRICT": "1"})
    found = {f["rule"]: f["severity"] for f in report["findings"]}
    assert found.get(RULE) not in SERIOUS, report["metrics"].get("step.recurring_free_ms")
    recurring = report["metrics"]["step.recurring_free_ms"]
    assert set(recurring["evidence"]["per_rank"]) == {"0", "1"}
    assert recurring["value"] < value(report, "step.free_ms")  # the waits at random places are left out
    # both ranks run the same operators on the same shapes: equal FLOPs, no rank given more work
    assert value(report, "cluster.slow_rank_flops_ratio") == 1.0
