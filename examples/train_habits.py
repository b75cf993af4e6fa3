"""A small MLP whose training loop has (or avoids) common host-side habits.

Each flag turns one habit on; with none the loop is clean. Runs on CPU in
a few seconds, under ``advisor run`` (``ADVISOR_WITH_STACK=1`` records the
Python stacks and garbage collections that some of these need):

    --gc-every N       gc.collect() every N steps over a heap of long-lived
                       Python objects (a full collection walks them all)
    --freeze           gc.freeze() after setup: collections skip that heap
    --item-every N     loss.item() every N steps (a host/device sync on GPU/NPU)
    --empty-cache      torch.cuda.empty_cache() (torch.npu on Ascend) every step
    --optimizer KIND   fused | foreach | plain (AdamW's implementation)

    ADVISOR_WITH_STACK=1 advisor run --steps 5 -- python examples/train_habits.py --gc-every 1
"""

from __future__ import annotations

import argparse
import gc
import time

import torch
from torch import nn


def _empty_cache() -> None:
    """The device's caching-allocator ``empty_cache()`` (a no-op on CPU)."""
    npu = getattr(torch, "npu", None)
    (npu if npu is not None else torch.cuda).empty_cache()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=8, help="hidden layers (2 parameter tensors each)")
    ap.add_argument("--gc-every", type=int, default=0, metavar="N")
    ap.add_argument("--heap", type=int, default=2_000_000,
                    help="long-lived Python objects a full collection walks (with --gc-every)")
    ap.add_argument("--freeze", action="store_true", help="gc.freeze() after setup (the fix for --gc-every)")
    ap.add_argument("--item-every", type=int, default=0, metavar="N")
    ap.add_argument("--empty-cache", action="store_true")
    ap.add_argument("--optimizer", choices=("fused", "foreach", "plain"), default="fused")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(args.features, args.hidden), nn.ReLU()]
    for _ in range(args.layers):
        layers += [nn.Linear(args.hidden, args.hidden), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(args.hidden, 1))
    impl = {"fused": {"fused": True}, "foreach": {"foreach": True}, "plain": {"foreach": False}}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **impl[args.optimizer])
    loss_fn = nn.MSELoss()
    x = torch.randn(args.batch_size, args.features)
    y = torch.randn(args.batch_size, 1)
    # a heap of container objects, as a program holding parsed samples or
    # metadata would have; only a full collection (gc.collect()) walks it
    heap = [[i] for i in range(args.heap)] if args.gc_every else []
    if args.freeze:
        gc.collect()
        gc.freeze()                      # setup objects leave every later collection

    t0 = time.perf_counter()
    running = torch.zeros(())
    for step in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        running += loss.detach()
        if args.item_every and step % args.item_every == 0:
            print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)
        if args.gc_every and step % args.gc_every == 0:
            gc.collect()
        if args.empty_cache:
            _empty_cache()
    print(f"{args.steps} steps in {time.perf_counter() - t0:.2f}s, mean loss "
          f"{running.item() / args.steps:.4f}, heap {len(heap)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
