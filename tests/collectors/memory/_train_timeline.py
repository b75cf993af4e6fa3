"""Train a small CNN on CPU under torch.profiler (profile_memory=True) and
write its raw memory timeline: ``python _train_timeline.py OUT.raw.json.gz
[--leak] [--steps N] [--trace TRACE.pt.trace.json]`` (``--trace``: also the
Kineto trace of the same run). With ``--leak`` every step keeps its loss, and with
it the step's autograd graph and activations, in a list (the classic
``losses.append(loss)`` leak)."""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--leak", action="store_true")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--trace")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    kept = []

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if args.leak:
            kept.append(model[0](x))  # an output with its graph, never freed
        else:
            kept[:] = [loss.item()]

    for _ in range(2):  # optimizer state and allocator warm-up before recording
        step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for _ in range(args.steps):
            step()
    prof.export_memory_timeline(args.out, device="cpu")
    if args.trace:
        prof.export_chrome_trace(args.trace)


if __name__ == "__main__":
    main()
