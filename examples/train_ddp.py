"""Two-process DistributedDataParallel on gloo (CPU): the multi-rank sample.

Under torchrun each process reads RANK / WORLD_SIZE from the environment:

    torchrun --standalone --nproc_per_node 2 examples/train_ddp.py --steps 20
    advisor run --steps 5 -- torchrun --standalone --nproc_per_node 2 examples/train_ddp.py

Run directly (``python examples/train_ddp.py``) it starts its own ranks with
``torch.multiprocessing.spawn``.

Variants for the advisor's cluster and communication rules:

* ``--slow-rank R --slow-ms MS``: rank R sleeps MS milliseconds in every
  step (between the batch fetch and forward), a straggler the others wait
  for at the gradient all-reduce (``slow-rank`` should name R).
* ``--accum N``: gradient accumulation over N micro-batches per optimizer
  step, the first N - 1 under ``model.no_sync()`` (one all-reduce per
  step); with ``--sync-every-micro-batch`` without it, so DDP all-reduces
  after each (``grad-sync-per-microbatch`` should fire).
* ``--heavy-rank R --heavy-factor F``: rank R's batches are F times the
  others', an uneven split of the work (``slow-rank`` should name R and
  say it executes F times the FLOPs).
* ``--allreduce after-backward``: no DDP; gradients are averaged by one
  ``all_reduce`` per parameter *after* ``backward()`` returns, so nothing
  overlaps (``exposed-allreduce`` should fire). ``--allreduce ddp`` (the
  default) uses DDP's bucketed all-reduce, which overlaps backward;
  ``--bucket-cap-mb`` sets DDP's bucket size (a bucket larger than the
  model also leaves the whole all-reduce after backward).
* ``--hidden`` / ``--layers`` size the MLP so that all-reduce time is
  visible on gloo (default: a small model); ``--conv-channels`` adds a
  compute-heavy, parameter-light conv stem in front of it, which gives
  DDP's buckets backward work to overlap with.
* ``--vary-batch``: each rank draws its batch size per step from 1/4, 1/2,
  1 and 2 times ``--batch-size`` (its own random sequence), as
  variable-length samples padded per batch give: the rank given most work
  changes from step to step (``uneven-step-work`` should fire).
* ``--allreduce fsdp``: no DDP; the model sharded by
  FullyShardedDataParallel, one unit per Linear layer: each layer's
  parameters are all-gathered before it runs (forward and backward) and
  its gradients reduce-scattered after (gloo runs the reduce-scatter as an
  all-reduce; ``exposed-allgather`` should name both).
* ``--exchange alltoall``: a DLRM-style sparse part in front of the MLP.
  Each rank owns an embedding table (model parallel, outside DDP); every
  step an all-to-all sends each table's ids to the rank that owns it, and a
  second sends the looked-up rows back to the ranks that own the samples
  (and their gradients back in backward), as TorchRec's table-wise sharding
  does; forward and backward must wait for both. The exposed communication is that exchange, not
  the gradient all-reduce.

Loops users write, for the verdict audit of multi-rank runs:

* ``--rank0-extra checkpoint|log``: rank 0 alone does host work in every
  step after ``opt.step()``: ``torch.save`` of the model's state to a
  file, or a line of text per parameter tensor (its norm) appended to a
  log file. The others wait for it at the next all-reduce; its FLOPs equal
  theirs.
* ``--slow-data-rank R --slow-data-ms MS``: rank R's Dataset sleeps MS
  milliseconds per batch in ``__getitem__`` (a slow read or transform; no
  DataLoader workers), so that rank waits for its data in every step.
* ``--find-unused-parameters``: DDP(find_unused_parameters=True) although
  every parameter is used (DDP walks the autograd graph every step).
* ``--norm batch``: a BatchNorm1d after each hidden Linear (SyncBatchNorm
  is GPU-only under DDP). ``--no-broadcast-buffers`` passes ``broadcast_buffers=False`` to DDP
  (by default DDP broadcasts rank 0's buffers before every forward).
* ``--log-loss``: the loss is all-reduced and read (``.item()``) every
  step for logging: one more collective, and a wait for it.
* ``--busy-rank R --busy-ms MS``: rank R spins the CPU for MS
  milliseconds in every step (a busy loop, not a sleep: a host busy with
  other work for that rank).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import random
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def train(rank: int, world_size: int, args) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        torch.manual_seed(0)
        heavy = args.heavy_factor if rank == args.heavy_rank else 1
        widest = 2 if args.vary_batch else 1              # --vary-batch slices up to twice the batch
        n = args.steps * args.batch_size * world_size * max(args.heavy_factor, 1) * widest
        if args.conv_channels:                         # images for the conv stem
            x = torch.randn(n, 3, args.image_size, args.image_size)
            y = x.mean(dim=(1, 2, 3)).unsqueeze(1)
        else:
            x = torch.randn(n, args.features)
            y = x.sum(dim=1, keepdim=True)
        slow_data = args.slow_data_ms / 1000.0 if rank == args.slow_data_rank else 0.0
        data = _SlowDataset(x, y, slow_data) if slow_data else TensorDataset(x, y)
        sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True)
        loader = DataLoader(data, batch_size=args.batch_size * heavy * widest, sampler=sampler, drop_last=True)
        sizes = random.Random(1000 + rank)                 # each rank draws its own batch sizes
        model = _model(args)
        exchange = _Exchange(args, world_size) if args.exchange == "alltoall" else None
        if args.allreduce == "ddp":
            kw = {} if args.bucket_cap_mb is None else {"bucket_cap_mb": args.bucket_cap_mb}
            model = DDP(model, find_unused_parameters=args.find_unused_parameters,
                        broadcast_buffers=not args.no_broadcast_buffers, **kw)
        elif args.allreduce == "fsdp":
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy

            model = FSDP(model, device_id=torch.device("cpu"), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
        else:                                          # one broadcast so ranks start equal
            for prm in model.parameters():
                dist.broadcast(prm.data, src=0)
        params = list(model.parameters()) + (list(exchange.parameters()) if exchange else [])
        opt = torch.optim.SGD(params, lr=0.01)
        loss_fn = nn.MSELoss()
        slow = args.slow_ms / 1000.0 if rank == args.slow_rank else 0.0
        busy = args.busy_ms / 1000.0 if rank == args.busy_rank else 0.0
        extra = args.rank0_extra if rank == 0 else "none"
        extra_path = os.path.join(tempfile.mkdtemp(prefix="train_ddp_"), "rank0." + extra)
        t0 = time.perf_counter()
        for step, (xb, yb) in zip(range(args.steps), loader):
            opt.zero_grad(set_to_none=True)
            if args.vary_batch:                        # this step's batch on this rank: 1/4 to 2x the batch
                n = sizes.choice([args.batch_size // 4, args.batch_size // 2, args.batch_size, 2 * args.batch_size])
                xb, yb = xb[:n], yb[:n]
            if slow:
                time.sleep(slow)                       # the straggler's extra host time
            if busy:
                _spin(busy)                            # a rank whose host is busy
            if exchange is not None:
                xb = exchange(xb)
            for i, (xm, ym) in enumerate(zip(xb.chunk(args.accum), yb.chunk(args.accum))):
                last = i == args.accum - 1
                quiet = args.allreduce == "ddp" and not last and not args.sync_every_micro_batch
                with model.no_sync() if quiet else contextlib.nullcontext():
                    loss = loss_fn(model(xm), ym) / args.accum
                    loss.backward()
            if args.allreduce == "after-backward":
                _allreduce_after_backward(model, world_size)
            opt.step()
            if args.log_loss:                          # the mean loss over ranks, for the log
                logged = loss.detach().clone()
                dist.all_reduce(logged)
                logged = logged.item() / world_size
            if extra != "none":
                _rank0_extra(extra, model, extra_path)
            if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
                print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
        dist.barrier()  # no rank tears gloo down while a peer still has traffic in flight
        if rank == 0:
            print(f"{args.steps} steps on {world_size} ranks in "
                  f"{time.perf_counter() - t0:.2f}s", flush=True)
    finally:
        dist.destroy_process_group()


def _mlp(features: int, hidden: int, layers: int, norm: bool = False) -> nn.Module:
    def block(n_in: int) -> list[nn.Module]:
        return [nn.Linear(n_in, hidden)] + ([nn.BatchNorm1d(hidden)] if norm else []) + [nn.ReLU()]

    mods: list[nn.Module] = block(features)
    for _ in range(layers - 1):
        mods += block(hidden)
    mods.append(nn.Linear(hidden, 1))
    return nn.Sequential(*mods)


def _model(args) -> nn.Module:
    """The MLP, optionally behind a conv stem. The stem has few parameters
    but most of the compute, and its gradients come last in backward: DDP
    reduces the big MLP buckets while the stem's backward still runs."""
    if not args.conv_channels:
        return _mlp(args.features, args.hidden, args.layers, args.norm != "none")
    c = args.conv_channels
    stem = nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1), nn.ReLU(),
        nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(),
    )
    return nn.Sequential(stem, _mlp(c * 16, args.hidden, args.layers, args.norm != "none"))


class _SlowDataset(torch.utils.data.Dataset):
    """``TensorDataset`` whose every batch takes ``delay_s`` longer to load
    (the DataLoader calls ``__getitems__`` once per batch when it exists)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, delay_s: float):
        self.x, self.y, self.delay_s = x, y, delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __getitems__(self, idx):
        time.sleep(self.delay_s)
        return [(self.x[i], self.y[i]) for i in idx]


def _spin(seconds: float) -> None:
    """Keep the CPU busy for ``seconds`` (host work, not a sleep)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _rank0_extra(kind: str, model: nn.Module, path: str) -> None:
    """Rank 0's host work of every step: a checkpoint or a log line per tensor."""
    if kind == "checkpoint":
        torch.save(model.state_dict(), path)
    elif kind == "log":
        with open(path, "a") as fh:
            for name, prm in model.named_parameters():
                fh.write(f"{name} {prm.detach().norm().item():.6f} "
                         f"{prm.detach().abs().max().item():.6f}\n")


class _Exchange(nn.Module):
    """The sparse half of a DLRM-style model, sharded table-wise: rank r owns
    table r, which every sample looks up with its own ids (hashed from the
    dense features with a salt per table). The input distribution sends each
    table's ids to its rank (an all-to-all of ids), the table looks up every
    sample of the global batch, and the output distribution sends each rank
    the rows of its own samples (an all-to-all of rows, which
    ``torch.distributed.nn`` carries the gradients back through); the rows
    of all tables are added to the sample's features."""

    def __init__(self, args, world_size: int):
        super().__init__()
        self.world_size = world_size
        self.table = nn.EmbeddingBag(args.embedding_rows, args.features, mode="mean")

    def forward(self, xb: torch.Tensor) -> torch.Tensor:
        from torch.distributed.nn.functional import all_to_all_single

        batch = xb.shape[0]
        rows_per_table = self.table.num_embeddings
        ids = torch.stack([(xb * 1000 * (table + 1)).long().abs() % rows_per_table
                           for table in range(self.world_size)])          # (table, my samples, features)
        every_sample = torch.empty_like(ids)
        dist.all_to_all_single(every_sample, ids)                        # my table's ids, every sample
        rows = self.table(every_sample.view(batch * self.world_size, -1))
        mine = all_to_all_single(torch.empty_like(rows), rows)           # my samples, every table
        return xb + mine.view(self.world_size, batch, -1).sum(dim=0)


def _allreduce_after_backward(model: nn.Module, world_size: int) -> None:
    """Average the gradients with one all-reduce per parameter, all of them
    after backward has finished (what DDP avoids by overlapping buckets)."""
    for prm in model.parameters():
        if prm.grad is not None:
            dist.all_reduce(prm.grad)
            prm.grad.div_(world_size)


def _spawned(rank: int, world_size: int, args) -> None:
    train(rank, world_size, args)
    exit_without_teardown(0)


def exit_without_teardown(code: int) -> None:
    """End the process after its exit handlers (a profiler's flush among
    them) without finalizing the interpreter. With gloo, the process group
    outlives destroy_process_group() (PyTorch holds it from C++), and its
    run-loop thread may free its last finished work while the interpreter
    is being torn down; freeing the tensors that work holds then takes the
    GIL of a dying interpreter and aborts the rank ("terminate called
    without an active exception") after training has finished."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=1, help="hidden layers of the MLP")
    ap.add_argument("--conv-channels", type=int, default=0,
                    help="put a two-layer conv stem with this many channels before the MLP "
                         "(inputs become 3 x --image-size x --image-size images)")
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--allreduce", choices=("ddp", "after-backward", "fsdp"), default="ddp",
                    help="DDP's bucketed all-reduce, a plain all-reduce loop after backward, or FSDP sharding")
    ap.add_argument("--exchange", choices=("none", "alltoall"), default="none",
                    help="add an embedding exchange by all-to-all in front of the MLP (DLRM-style)")
    ap.add_argument("--embedding-rows", type=int, default=4096, help="rows of each rank's embedding table")
    ap.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP bucket size (default 25)")
    ap.add_argument("--slow-rank", type=int, default=-1, help="rank that sleeps --slow-ms every step")
    ap.add_argument("--slow-ms", type=float, default=0.0)
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step (gradient accumulation)")
    ap.add_argument("--sync-every-micro-batch", action="store_true",
                    help="with --accum: all-reduce after every micro-batch (no model.no_sync())")
    ap.add_argument("--heavy-rank", type=int, default=-1, help="rank whose batches are --heavy-factor times larger")
    ap.add_argument("--heavy-factor", type=int, default=1)
    ap.add_argument("--vary-batch", action="store_true",
                    help="each rank draws its batch size per step (1/4 to 2x --batch-size), as variable-length batches")
    ap.add_argument("--rank0-extra", choices=("none", "checkpoint", "log"), default="none",
                    help="host work rank 0 alone does every step: torch.save of the model, or a log line per tensor")
    ap.add_argument("--slow-data-rank", type=int, default=-1, help="rank whose Dataset sleeps --slow-data-ms per batch")
    ap.add_argument("--slow-data-ms", type=float, default=0.0)
    ap.add_argument("--find-unused-parameters", action="store_true", help="DDP(find_unused_parameters=True)")
    ap.add_argument("--norm", choices=("none", "batch"), default="none",
                    help="BatchNorm1d after each hidden Linear")
    ap.add_argument("--no-broadcast-buffers", action="store_true", help="DDP(broadcast_buffers=False)")
    ap.add_argument("--log-loss", action="store_true", help="all-reduce the loss and read it every step")
    ap.add_argument("--busy-rank", type=int, default=-1, help="rank that spins the CPU --busy-ms every step")
    ap.add_argument("--busy-ms", type=float, default=0.0)
    ap.add_argument("--nprocs", type=int, default=2, help="ranks to spawn without torchrun")
    args = ap.parse_args(argv)
    if "RANK" in os.environ:                       # launched by torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
    else:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        torch.multiprocessing.spawn(_spawned, args=(args.nprocs, args), nprocs=args.nprocs)
    return 0


if __name__ == "__main__":
    exit_without_teardown(main())
