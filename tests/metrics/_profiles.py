"""Build small CPU-trace Profiles from worked timelines, for metric tests."""

from __future__ import annotations

import pandas as pd

from advisor.metrics import evaluate
from advisor.profile import Profile, RunMeta


def cpu_profile(comm: list[dict], steps: list[dict], ranks: list[int], source: str) -> Profile:
    """A Profile with ``comm`` and ``steps`` rows (step ids nullable Int64),
    as a Kineto CPU trace of ``ranks`` gives it."""
    frames = {"comm": pd.DataFrame(comm), "steps": pd.DataFrame(steps)}
    for df in frames.values():
        df["step"] = df["step"].astype("Int64")
    return Profile(meta=RunMeta(ranks=ranks, device="cpu", framework="pytorch", source_format=source),
                   **frames)


def metrics_of(p: Profile) -> dict:
    """Every evaluated metric of ``p`` by name."""
    metrics, _ = evaluate(p)
    return metrics
