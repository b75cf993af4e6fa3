"""``profiler_info_{rank}.json`` -> run metadata: world size, parallel mode, MindSpore version."""

from __future__ import annotations

from pathlib import Path

from advisor.collectors.io.files import load_json
from advisor.errors import InputError
from advisor.profile import Profile


def read_profiler_info(profile: Profile, path: Path) -> None:
    """World size, parallel mode and MindSpore version from profiler_info."""
    if not path.is_file():
        return
    try:
        info = load_json(path)
        if not isinstance(info, dict):
            raise InputError(path, "expected a JSON object")
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return
    size = info.get("rank_size")
    if isinstance(size, int) and size > 0:
        profile.meta.world_size = size
        if str(info.get("parallel_mode", "")).lower() == "data_parallel":
            profile.meta.parallel = {"dp": size, "tp": 1, "pp": 1}
    version = info.get("ms_version")
    if isinstance(version, str) and version:
        profile.meta.source_version = version

