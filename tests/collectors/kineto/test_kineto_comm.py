"""The Kineto comm table: message sizes, each step's exposed communication
split among its collectives, and which row stands for a collective.

Corpus traces are read twice: by the collector, and here with plain json
from the trace's own args, to check the collector against the file.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.vocab import dtype_bytes

from test_kineto import X, step_row, write


def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def _input_bytes(args: dict) -> int:
    """Bytes of the tensor inputs an op records (Input Dims x Input type)."""
    return sum(math.prod(d) * dtype_bytes(t) for t, d in zip(args["Input type"], args["Input Dims"])
               if d and all(isinstance(x, int) for x in d) and dtype_bytes(t))


# ------------------------------------------------------------------ sizes


def test_kernel_sizes_are_their_message_args(corpus):
    path = corpus / "hta" / "nccl_parser_config" / "nccl_data.json.gz"
    kernels = sorted((e for e in _events(path) if e.get("cat") == "kernel" and "In msg nelems" in e.get("args", {})),
                     key=lambda e: float(e["ts"]))
    assert kernels
    want = [e["args"]["In msg nelems"] * dtype_bytes(e["args"]["dtype"]) / 1e6 for e in kernels]
    comm = load_profile(path).comm.sort_values("start_us")
    assert comm["size_mb"].to_list() == pytest.approx(want)


def test_kernels_without_args_take_the_size_of_the_collective_op_around_their_launch(corpus):
    # trace_filter's NCCL kernels carry no message args; the nccl:* user
    # annotation around the launch records its buffer (Input Dims / type).
    path = corpus / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
    events = _events(path)
    ops = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("nccl:")]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    want = []
    for k in sorted((e for e in events if e.get("cat") == "kernel" and "ncclKernel" in e["name"]),
                    key=lambda e: float(e["ts"])):
        call = launches[k["args"]["correlation"]]
        around = [o for o in ops if o["tid"] == call["tid"]
                  and float(o["ts"]) <= float(call["ts"]) <= float(o["ts"]) + float(o["dur"])]
        inner = min(around, key=lambda o: float(o["dur"]))
        want.append(_input_bytes(inner["args"]) / 1e6)
    comm = load_profile(path).comm.sort_values("start_us")
    assert len(want) == len(comm) > 0
    assert comm["size_mb"].to_list() == pytest.approx(want)


def test_gloo_op_size_and_kernel_dtype_spellings(tmp_path):
    events = [
        X("user_annotation", "ProfilerStep#1", 0, 100),
        X("cpu_op", "c10d::allreduce_", 10, 5, **{"Input type": ["TensorList", ""], "Input Dims": [[[4353]], []]}),
        X("user_annotation", "gloo:all_reduce", 12, 30, tid=2, **{"Input type": ["float"], "Input Dims": [[4353]]}),
        X("user_annotation", "gloo:all_to_all", 50, 10, tid=3,
          **{"Input type": ["c10::BFloat16"], "Input Dims": [[32, 32]]}),
    ]
    comm = kineto.read(write(tmp_path / "cpu.pt.trace.json", events)).comm.set_index("name")
    assert comm.loc["gloo:all_reduce", "size_mb"] == pytest.approx(4353 * 4 / 1e6)
    assert comm.loc["gloo:all_to_all", "size_mb"] == pytest.approx(32 * 32 * 2 / 1e6)
    # a c10d front end records a tensor list (no element type): no size
    assert np.isnan(comm.loc["c10d::allreduce_", "size_mb"])


def test_a_0_dim_tensor_all_reduced_is_one_element(tmp_path):
    # dist.all_reduce(loss.detach()) of a scalar loss: torch 2.13's gloo op
    # records the 0-dim tensor as Input Dims [[]] (a real gloo trace's args)
    events = [
        X("user_annotation", "ProfilerStep#1", 0, 100),
        X("user_annotation", "gloo:all_reduce", 12, 30, tid=2,
          **{"Concrete Inputs": [""], "Input type": ["float"], "Input Strides": [[]], "Input Dims": [[]]}),
    ]
    comm = kineto.read(write(tmp_path / "cpu.pt.trace.json", events)).comm.set_index("name")
    assert comm.loc["gloo:all_reduce", "size_mb"] == pytest.approx(4 / 1e6)


# ------------------------------------------------------- exposed, by row


@pytest.mark.parametrize("trace", ["trace_filter", "nccl_parser_config/nccl_data.json.gz"])
def test_exposed_shares_add_up_to_each_steps_exposed_communication(corpus, trace):
    p = load_profile(corpus / "hta" / trace)
    shares = p.comm.dropna(subset=["step"]).groupby(["rank", "step"])["exposed_share_us"].sum()
    steps = p.steps.set_index(["rank", "step"])["exposed_comm_us"]
    assert (shares > 0).any()
    assert shares.to_dict() == pytest.approx(steps.reindex(shares.index).to_dict(), rel=1e-9, abs=1e-6)
    # a row's share is part of its own exposed time
    assert (p.comm["exposed_share_us"] <= p.comm["exposed_us"] + 1e-6).all()


def _cpu_exchange_trace(tmp_path) -> Path:
    """One step of a CPU (gloo) rank, times in us: backward's DDP hook
    enqueues a bucket all-reduce (c10d::allreduce_ inside AccumulateGrad,
    [20, 22]) that gloo runs on thread 2 over [22, 60]; meanwhile
    _AlltoAllSingleBackward [30, 70] enqueues an all-to-all
    (c10d::alltoall_base_ [31, 33]) that gloo runs on thread 3 over
    [34, 66], and waits for it; the thread then computes [70, 90]."""
    return write(tmp_path / "rank0.pt.trace.json", [
        X("user_annotation", "ProfilerStep#1", 0, 100),
        X("cpu_op", "aten::mm", 0, 20),
        X("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 20, 3),
        X("cpu_op", "c10d::allreduce_", 20, 2, **{"Input type": ["TensorList"], "Input Dims": [[[100]]]}),
        X("user_annotation", "gloo:all_reduce", 22, 38, tid=2, **{"Input type": ["float"], "Input Dims": [[100]]}),
        X("cpu_op", "autograd::engine::evaluate_function: _AlltoAllSingleBackward", 30, 40),
        X("cpu_op", "c10d::alltoall_base_", 31, 2),
        X("user_annotation", "gloo:all_to_all", 34, 32, tid=3, **{"Input type": ["float"], "Input Dims": [[8, 8]]}),
        X("cpu_op", "aten::add", 70, 20),
    ])


def test_a_synchronous_collective_waited_for_inside_an_op_is_communication(tmp_path):
    p = kineto.read(_cpu_exchange_trace(tmp_path))
    r = step_row(p, 1)
    # The training thread is blocked in a collective from its call to the end
    # of the op around it or of the backend op, whichever is first: the
    # all-to-all [31,66]; the hook's all-reduce [20,23] (its op returns 1 us
    # after the call, while the all-reduce runs). Compute: [0,20] + [30,31]
    # + [66,90] = 45.
    assert r["computing_us"] == pytest.approx(45)
    # communication: the gloo spans and the blocked calls, [20,66]
    assert r["communication_us"] == pytest.approx(46)
    assert r["exposed_comm_us"] == pytest.approx(45)  # [20,66] minus compute [30,31]
    by_kind = p.comm.groupby("kind")["exposed_share_us"].sum()
    # the blocked calls' exposed time is theirs: all-to-all 35, all-reduce 3;
    # the rest, [23,30], is the gloo all-reduce's (the only one in flight): 7
    assert by_kind.to_dict() == pytest.approx({"alltoall": 35.0, "allreduce": 10.0})
    assert by_kind.sum() == pytest.approx(r["exposed_comm_us"])


def test_the_backend_op_stands_for_the_collective(tmp_path):
    p = kineto.read(_cpu_exchange_trace(tmp_path))
    front = p.comm.set_index("name")["front_end"].to_dict()
    assert front == {"c10d::allreduce_": 1, "c10d::alltoall_base_": 1, "gloo:all_reduce": 0, "gloo:all_to_all": 0}
    # a trace with the front ends only: they stand for the collectives
    only = [X("user_annotation", "ProfilerStep#1", 0, 100), X("cpu_op", "c10d::allreduce_", 10, 30)]
    q = kineto.read(write(tmp_path / "only.pt.trace.json", only))
    assert q.comm["front_end"].to_list() == [0]


def test_gpu_rows_split_shared_exposed_time_evenly(tmp_path):
    # two NCCL kernels on two streams overlap over [40,60] with no compute:
    # each gets half of it
    events = [
        X("user_annotation", "ProfilerStep#1", 0, 100),
        X("kernel", "gemm", 0, 20, pid=0, tid=7),
        X("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 40, pid=0, tid=20),
        X("kernel", "ncclDevKernel_SendRecv", 40, 40, pid=0, tid=21),
    ]
    p = kineto.read(write(tmp_path / "g.pt.trace.json", events))
    shares = p.comm.set_index("kind")["exposed_share_us"].to_dict()
    assert shares == pytest.approx({"allreduce": 20 + 10, "sendrecv": 10 + 20})
    assert sum(shares.values()) == pytest.approx(step_row(p, 1)["exposed_comm_us"])
    assert isinstance(p.comm, pd.DataFrame) and (p.comm["front_end"] == 0).all()


def _gloo_collectives(tmp_path, pairs, name="t"):
    """A CPU trace of one step with each (front end, backend) pair issued
    in turn: the front end on the training thread, the backend on gloo's."""
    events = [X("user_annotation", "ProfilerStep#1", 0, 1000)]
    for i, (front, back) in enumerate(pairs):
        events += [X("cpu_op", front, 10 + 100 * i, 5), X("user_annotation", back, 12 + 100 * i, 50, tid=2)]
    return kineto.read(write(tmp_path / f"{name}.pt.trace.json", events)).comm


def test_a_reduce_scatter_gloo_runs_as_an_all_reduce_keeps_its_kind(tmp_path):
    # FSDP on gloo: c10d::_reduce_scatter_base_ runs as gloo:all_reduce (the PyTorch
    # profiler's names, as a 2-rank FSDP run here records them)
    comm = _gloo_collectives(tmp_path, [("c10d::allgather_", "gloo:all_gather"),
                                        ("c10d::_reduce_scatter_base_", "gloo:all_reduce")])
    assert comm.set_index("name")["kind"].to_dict() == {
        "c10d::allgather_": "allgather", "gloo:all_gather": "allgather",
        "c10d::_reduce_scatter_base_": "reducescatter", "gloo:all_reduce": "reducescatter"}
    # pairs that do not line up (a front end without its backend row, or kinds that
    # are no emulation) leave the backend's own kind
    odd = _gloo_collectives(tmp_path, [("c10d::_reduce_scatter_base_", "gloo:all_reduce"),
                                       ("c10d::allgather_", "gloo:all_to_all")], "odd")
    assert odd.set_index("name")["kind"]["gloo:all_reduce"] == "allreduce"
    plain = _gloo_collectives(tmp_path, [("c10d::allreduce_", "gloo:all_reduce")], "plain")
    assert set(plain["kind"]) == {"allreduce"}
