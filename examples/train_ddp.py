"""Two-process DistributedDataParallel on gloo (CPU): the multi-rank sample.

Under torchrun each process reads RANK / WORLD_SIZE from the environment:

    torchrun --standalone --nproc_per_node 2 examples/train_ddp.py --steps 20
    advisor run --steps 5 -- torchrun --standalone --nproc_per_node 2 examples/train_ddp.py

Run directly (``python examples/train_ddp.py``) it starts its own ranks with
``torch.multiprocessing.spawn``.
"""

from __future__ import annotations

import argparse
import os
import socket
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
        n = args.steps * args.batch_size * world_size
        x = torch.randn(n, args.features)
        y = x.sum(dim=1, keepdim=True)
        data = TensorDataset(x, y)
        sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True)
        loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True)
        model = DDP(nn.Sequential(nn.Linear(args.features, 128), nn.ReLU(), nn.Linear(128, 1)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = nn.MSELoss()
        t0 = time.perf_counter()
        for step, (xb, yb) in enumerate(loader):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
                print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
        if rank == 0:
            print(f"{args.steps} steps on {world_size} ranks in "
                  f"{time.perf_counter() - t0:.2f}s", flush=True)
    finally:
        dist.destroy_process_group()


def _spawned(rank: int, world_size: int, args) -> None:
    train(rank, world_size, args)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--features", type=int, default=32)
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
    raise SystemExit(main())
