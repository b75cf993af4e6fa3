"""input-bound's fix on real CPU runs whose DataLoader builds batches with
60 tensor operations per sample (``advisor run``, PyTorch's profiler),
the job held to one CPU.

With ``num_workers=2`` on 2 CPUs the loader already had both and the loop
waited for data ~90% of the step; the fix asked for ``num_workers=16`` and
nothing else. ``advisor run`` records the CPUs the process may use
(``cpuProperties`` ``usable_cpus``). The trace cannot see inside the
workers, so the fix says both: with the loader already in worker
processes, cheaper batches when building them is CPU work, more workers
only when they wait on storage or the network; with the loader in the
training process of a GPU run, the CPUs the loop leaves (it keeps one
busy launching), and the suggested count for workers that wait. A CPU
run's operators use every CPU, so there the fix gives workers for a
loader that waits on storage or the network and cheaper batches for one
that computes, each with its condition.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests._profiled import ENV, needs_torch, value
from tests.e2e._teardown import advisor_run_report

SCRIPT = """
import sys, torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class Augmented(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        x = torch.randn(256)
        for _ in range(60):  # per-sample augmentation
            x = torch.tanh(x * 1.01 + 0.01)
        return x, i % 10


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(Augmented(), batch_size=64, num_workers=int(sys.argv[1]))
    for step, (x, y) in enumerate(loader):
        if step == 10:
            break
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
"""
#: Runs the command after it on one of this process's CPUs (the loader's
#: workers then share it with the loop, and a test beside this one keeps the other).
ONE_CPU = ("import os, sys; os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1]); "
           "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def _input_bound(tmp_path, workers: int) -> tuple[dict, dict]:
    """(report.json, its input-bound finding) of the loop with ``workers``."""
    script, out = tmp_path / "train_loop.py", tmp_path / "out"
    script.write_text(SCRIPT)
    argv = [sys.executable, "-c", ONE_CPU, "-m", "advisor", "run", "--steps", "6", "--warmup", "2", "-o", str(out),
            "--no-color", "--", sys.executable, str(script), str(workers)]
    report = advisor_run_report(argv, out, 6, cwd=tmp_path, env=ENV)
    found = {f["rule"]: f for f in report["findings"]}
    assert "input-bound" in found, list(found)
    return report, found["input-bound"]


@needs_torch
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_a_loader_that_already_has_the_cpus_is_told_to_build_cheaper_batches(tmp_path):
    report, finding = _input_bound(tmp_path, 2)
    assert value(report, "data.usable_cpus") == 1 and value(report, "data.worker_cpus") == 0
    assert value(report, "data.loader_workers") == "worker processes"
    assert value(report, "data.suggested_workers") > 0
    assert "may run on 1 CPU." in finding["fix"]["text"]
    fix = finding["fix"]
    assert "already builds batches in worker processes" in fix["text"] and "cheaper" in fix["text"]
    # more workers only where they wait on storage or the network, which this profile cannot see
    assert "storage or the network" in fix["text"]
    # the trace does not record the loader's worker count: no count is proposed as if it were one
    assert "raise num_workers to about" not in fix["text"] and "does not record how many" in fix["text"]
    # no CPU beside the loop: the loader builds in the process, without persistent_workers (which
    # DataLoader refuses without workers)
    assert "cached_dataset" in fix["code"] and "num_workers" not in fix["code"]
    assert "persistent_workers" not in fix["code"]


@needs_torch
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_a_loader_that_computes_in_the_training_process_on_one_cpu_is_told_to_build_cheaper_batches(tmp_path):
    report, finding = _input_bound(tmp_path, 0)
    assert value(report, "data.loader_workers") == "the training process"
    assert value(report, "data.worker_cpus") == 0
    fix = finding["fix"]
    # the fetch runs the samples' 60 tensor operations: the trace shows CPU work, and the one CPU runs the
    # step's operators too, so a worker would only share it: cheaper batches, no worker count
    assert value(report, "data.fetch_op_share") >= 0.5
    assert "builds its batches with operators" in fix["text"] and "CPU work" in fix["text"]
    assert "on a CPU run use the same 1 CPU" in fix["text"] and "cheaper" in fix["text"]
    assert "cached_dataset" in fix["code"] and "num_workers" not in fix["code"]
    assert "persistent_workers" not in fix["code"]  # DataLoader refuses it without workers


def _fix_of_example(name: str, device: str = "gpu", **metrics):
    """input-bound's finding on one of its examples on ``device``, with ``metrics`` changed."""
    from advisor.engine.evaluation import compile_rule, evaluate_rule, run_context
    from advisor.engine.loader import load_rules

    compiled = compile_rule(next(r for r in load_rules([]) if r.name == "input-bound"))
    example = {**next(e for e in compiled.rule.examples if e.name.startswith(name)).metrics, **metrics}
    finding, skip = evaluate_rule(compiled, example, framework="pytorch", device=device,
                                  run=run_context(framework="pytorch", device=device))
    assert skip is None and finding is not None
    return example, finding


#: A GPU or CPU run whose loader builds its batches in the training process, on 2 CPUs, waiting for
#: as much as 14 workers would deliver if they waited on storage.
IN_PROCESS_ON_2_CPUS = {"data.loader_workers": "the training process", "data.suggested_workers": 14,
                        "data.usable_cpus": 2, "data.worker_cpus": 1, "data.workers_beyond_cpus": True}


def test_a_loader_in_the_training_process_is_given_the_cpus_the_loop_leaves_in_its_code():
    # a GPU run's loop keeps one CPU busy launching: the code asks for the other, and the text gives the
    # count for workers that wait
    _, finding = _fix_of_example("PyTorch DataLoader with num_workers=0", **IN_PROCESS_ON_2_CPUS)
    assert "num_workers=1," in finding.fix.code and "num_workers=14" not in finding.fix.code
    assert "keep about 1 worker busy" in finding.fix.text and "about 14 of them help" in finding.fix.text
    # where the fetch's operators show CPU work, the count for workers that wait is left out
    _, computes = _fix_of_example("PyTorch DataLoader with num_workers=0", **IN_PROCESS_ON_2_CPUS,
                                  **{"data.fetch_op_share": 0.9})
    assert "Building a batch is CPU work here (its operators take 90.0% of the fetch)" in computes.fix.text
    assert "num_workers=1," in computes.fix.code and "14" not in computes.fix.text + computes.fix.code


def test_a_cpu_run_s_loader_in_the_training_process_gets_workers_if_it_waits_and_cheaper_batches_if_not():
    # a CPU run's operators use every CPU: a worker building batches by CPU work slows them (measured on
    # this 2-CPU host, a Python-built batch: num_workers=1 took the step from 10.7 to 17.4 ms, the
    # operators' time from 1.7 to 8.9 ms, and the data wait from 9.0 to 8.3 ms); a loader that waits on
    # storage (the bundled examples' sleep) gains from workers. The trace tells neither: both, each with its
    # condition, and no worker count for the CPUs the loop would leave
    _, finding = _fix_of_example("PyTorch DataLoader with num_workers=0", device="cpu", **IN_PROCESS_ON_2_CPUS)
    assert "on a CPU run use the same 2 CPUs" in finding.fix.text
    assert "about 14 worker processes help" in finding.fix.text
    assert "num_workers=14," in finding.fix.code and "num_workers=1," not in finding.fix.code
    assert "# if it is CPU work" in finding.fix.code and "cached_dataset" in finding.fix.code
    # where the fetch's recorded operators show CPU work (a sleeping dataset's fetch measures 0.8%), only that
    _, computes = _fix_of_example("PyTorch DataLoader with num_workers=0", device="cpu",
                                  **IN_PROCESS_ON_2_CPUS, **{"data.fetch_op_share": 0.9})
    assert "builds its batches with operators (90.0% of the fetch)" in computes.fix.text
    assert "num_workers" not in computes.fix.code and "cached_dataset" in computes.fix.code


def test_a_loader_in_worker_processes_with_cpus_to_spare_gets_more_workers_not_a_count():
    """A PyTorch trace shows that the loader runs in worker processes, not
    how many: with CPUs to spare the fix asks for more than it has, and the
    suggested count only as what one worker would need."""
    metrics, finding = _fix_of_example("PyTorch DataLoader already")
    assert "already builds batches in worker processes" in finding.fix.text
    assert "does not record how many" in finding.fix.text
    assert "num_workers=2 * num_workers" in finding.fix.code
    assert f"num_workers={metrics['data.suggested_workers']}," not in finding.fix.code
