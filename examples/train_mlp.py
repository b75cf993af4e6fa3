"""A tiny MLP trained on synthetic data: the sample script for ``advisor run``.

Runs on CPU in a few seconds. ``--slow-data`` adds a sleep to every
``__getitem__`` so the run becomes input-bound (the advisor's ``input-bound``
rule should fire); ``--num-workers`` moves loading to DataLoader workers.

    advisor run --steps 5 examples/train_mlp.py --slow-data 0.002
    python examples/train_mlp.py --num-workers 2 --slow-data 0.01 --steps 20
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SyntheticData(Dataset):
    """Random features and a learnable target; optionally slow to load."""

    def __init__(self, length: int, features: int, slow: float, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.x = torch.randn(length, features, generator=gen)
        w = torch.randn(features, 1, generator=gen)
        self.y = self.x @ w + 0.1 * torch.randn(length, 1, generator=gen)
        self.slow = slow

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, idx: int):
        if self.slow:
            time.sleep(self.slow)
        return self.x[idx], self.y[idx]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="training steps (batches)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--slow-data", type=float, default=0.0, metavar="SECONDS",
                    help="sleep this long in every __getitem__ (input-bound run)")
    ap.add_argument("--lr", type=float, default=0.01)
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    data = SyntheticData(args.steps * args.batch_size, args.features, args.slow_data)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers, drop_last=True)
    model = nn.Sequential(
        nn.Linear(args.features, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, 1),
    )
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.MSELoss()

    t0 = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    print(f"{args.steps} steps in {time.perf_counter() - t0:.2f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
