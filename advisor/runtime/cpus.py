"""How many CPUs this process may use: the default number of readers.

``os.cpu_count()`` is the machine's count. In a container (a Kubernetes pod
with a CPU limit, ``docker run --cpus``) or under ``taskset`` the process may
use far fewer, and one reader per host CPU would start dozens of workers that
share a few CPUs, each with its own memory. This count is the smallest of:

* the CPU affinity mask (``taskset``, ``numactl``, cpusets);
* the cgroup CPU quota, rounded up: cgroup v2 ``cpu.max`` ("QUOTA PERIOD",
  or "max" for none) or v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``
  (-1 for none), read for this process's own cgroup and its mount root.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def usable_cpus(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """CPUs this process may use (at least 1); see the module docstring."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        count = os.cpu_count() or 1
    quota = cgroup_cpu_limit(root, proc_cgroup)
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return max(1, count)


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """The cgroup CPU quota in CPUs (e.g. 2.5), or None when there is none
    or it cannot be read. The tightest of this process's cgroup and the
    mount root (inside a container the root is usually its own cgroup)."""
    limits = [limit for folder in _cgroup_folders(root, proc_cgroup)
              if (limit := _limit_in(folder)) is not None]
    return min(limits, default=None)


def _cgroup_folders(root: Path, proc_cgroup: Path) -> list[Path]:
    """Folders that may hold this process's CPU quota, v2 then v1."""
    folders = [root, root / "cpu", root / "cpu,cpuacct"]
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return folders
    for line in lines:  # "0::/kubepods/pod1/c1" (v2), "4:cpu,cpuacct:/docker/c1" (v1)
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        rel = path.strip().lstrip("/")
        if not rel:
            continue
        if controllers == "":
            folders.append(root / rel)
        elif "cpu" in controllers.split(","):
            folders.extend([root / controllers / rel, root / "cpu" / rel])
    return folders


def _limit_in(folder: Path) -> float | None:
    """The quota of one cgroup folder in CPUs, None when it sets none."""
    try:
        quota, _, period = (folder / "cpu.max").read_text().partition(" ")
        if quota.strip() == "max":
            return None
        return int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:
        quota_us = int((folder / "cpu.cfs_quota_us").read_text())
        period_us = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None
