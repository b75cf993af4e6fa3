"""The default number of readers follows the CPUs this process may use."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.runtime.cpus import cgroup_cpu_limit, usable_cpus


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(("files", "cgroup", "limit"), [
    # cgroup v2, quota on the container's own cgroup (the namespace root)
    ({"cpu.max": "250000 100000\n"}, "0::/\n", 2.5),
    ({"cpu.max": "max 100000\n"}, "0::/\n", None),
    # cgroup v2 without a namespace: the quota sits on the process's cgroup
    ({"cpu.max": "max 100000\n", "kubepods/pod1/c1/cpu.max": "400000 100000\n"},
     "0::/kubepods/pod1/c1\n", 4.0),
    # cgroup v1 (docker --cpus=1.5), both mount spellings
    ({"cpu,cpuacct/docker/c1/cpu.cfs_quota_us": "150000\n", "cpu,cpuacct/docker/c1/cpu.cfs_period_us": "100000\n"},
     "4:cpu,cpuacct:/docker/c1\n", 1.5),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "1:cpu:/\n", None),
    # unreadable or junk: no limit rather than a failure
    ({"cpu.max": "lots\n"}, "0::/\n", None),
    ({}, "", None),
])
def test_cgroup_cpu_limit(tmp_path, files, cgroup, limit):
    root = _tree(tmp_path / "cgroup", files)
    proc = tmp_path / "proc_cgroup"
    proc.write_text(cgroup)
    assert cgroup_cpu_limit(root, proc) == limit
    expected = usable_cpus(tmp_path / "none", tmp_path / "none")
    if limit is not None:
        expected = min(expected, -(-limit // 1))
    assert usable_cpus(root, proc) == expected


def test_the_tightest_limit_wins(tmp_path):
    root = _tree(tmp_path / "cgroup", {"cpu.max": "300000 100000\n", "a/cpu.max": "100000 100000\n"})
    proc = tmp_path / "proc_cgroup"
    proc.write_text("0::/a\n")
    assert cgroup_cpu_limit(root, proc) == 1.0
    assert usable_cpus(root, proc) == 1


@pytest.mark.skipif(shutil.which("taskset") is None or not hasattr(__import__("os"), "sched_getaffinity"),
                    reason="needs Linux taskset")
def test_affinity_mask_caps_the_count():
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c",
                          "from advisor.runtime.cpus import usable_cpus; print(usable_cpus())"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
