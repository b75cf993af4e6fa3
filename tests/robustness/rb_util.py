"""Helpers for the robustness tests: tree snapshots and CLI batches."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BATCH = HERE / "_cli_batch.py"

#: A tiny real training loop for ``advisor run`` (the real torch profiler records it).
TINY_LOOP = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(8):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (symlinks not followed): kind, mode, size,
    mtime_ns, and a content hash for files / the target for symlinks."""
    out: dict[str, tuple] = {}
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                digest = ""
                if st.st_mode & stat.S_IRUSR or os.geteuid() == 0:
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = ("file", stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, digest)
    return out


@dataclass
class CliResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_batch(jobs: list[dict], workdir: Path, timeout: float = 600) -> list[CliResult]:
    """Run ``advisor`` command lines (dicts with argv, cwd) through the fork
    batch driver; returns one CliResult per job, in order."""
    workdir.mkdir(parents=True, exist_ok=True)
    for i, job in enumerate(jobs):
        job.setdefault("cwd", str(workdir))
        job["out"] = str(workdir / f"job{i:03d}")
    spec = workdir / "jobs.json"
    spec.write_text(json.dumps(jobs))
    proc = subprocess.run([sys.executable, str(BATCH), str(spec)], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"batch driver failed:\n{proc.stdout}\n{proc.stderr}"
    results = []
    for job in jobs:
        prefix = Path(job["out"])
        results.append(CliResult(
            argv=job["argv"],
            returncode=int(Path(f"{prefix}.rc").read_text()),
            stdout=Path(f"{prefix}.stdout").read_text(errors="replace"),
            stderr=Path(f"{prefix}.stderr").read_text(errors="replace"),
        ))
    return results


def run_cli(*args: str, cwd: Path, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real command line: ``python -m advisor ARGS``."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "advisor", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=full_env)
