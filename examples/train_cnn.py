"""A tiny conv net on synthetic 3x32x32 images: the input-bound sample.

Runs on CPU in a few seconds. ``--slow-data`` adds a sleep to every
``__getitem__`` (an expensive decode/augmentation stand-in), so with
``--num-workers 0`` the training loop waits for its batches and the
advisor's ``input-bound`` rule fires; without it the run is compute-bound.

    advisor run --steps 5 examples/train_cnn.py --slow-data 0.002 --num-workers 0
    python examples/train_cnn.py --slow-data 0.002 --num-workers 2 --steps 20
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SyntheticImages(Dataset):
    """Random 3x32x32 images with 10 classes; optionally slow to load."""

    def __init__(self, length: int, slow: float, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.x = torch.randn(length, 3, 32, 32, generator=gen)
        self.y = torch.randint(0, 10, (length,), generator=gen)
        self.slow = slow

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, idx: int):
        if self.slow:
            time.sleep(self.slow)
        return self.x[idx], self.y[idx]


def tiny_cnn(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),          # 16x16
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 8x8
        nn.Flatten(), nn.Linear(2 * width * 8 * 8, 10),
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="training steps (batches)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--width", type=int, default=16, help="channels of the first conv")
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--slow-data", type=float, default=0.0, metavar="SECONDS",
                    help="sleep this long in every __getitem__ (input-bound run)")
    ap.add_argument("--lr", type=float, default=0.01)
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    data = SyntheticImages(args.steps * args.batch_size, args.slow_data)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers, drop_last=True)
    model = tiny_cnn(args.width)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

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
