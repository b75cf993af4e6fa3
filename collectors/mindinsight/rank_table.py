"""The MindInsight r1.3 cluster folder: which rank and host a device's files
belong to.

MindInsight's cluster guide (up to r1.3) describes the layout its
collection script builds::

    run/
      hccl.json               the rank table: server_list[].server_id (host IP),
                              .device[] {device_id, device_ip, rank_id}
      host_ips_mapping.txt    lines "host_ip mapping_id"
      cluster_profiler/{mapping_id}/profiler/step_trace_raw_{device_id}_detail_time.csv ...

Files there are named by device id, one folder per host
(``ClusterAnalyser._get_host_device_rank_relation`` in MindInsight r1.3's
``mindinsight/profiler/analyser/cluster_analyser.py`` joins the three:
mapping id -> host IP -> (host IP, device id) -> rank id; it takes the
first ``*.json`` of ``run/`` as the rank table).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from advisor.collectors.io.files import load_json, read_bytes
from advisor.errors import InputError

MAPPING_FILE = "host_ips_mapping.txt"
RANK_TABLE_FILE = "hccl.json"


def lookup(folder: Path, device_id: int) -> tuple[int, str] | None:
    """(rank, host IP) of ``device_id``'s files in ``folder`` when it is a
    ``cluster_profiler/{mapping_id}/profiler`` folder of a run with a rank
    table and a host mapping; None otherwise (or when they do not say)."""
    folder = Path(folder)
    if folder.name != "profiler" or folder.parent.parent.name != "cluster_profiler":
        return None
    run = folder.parent.parent.parent
    hosts = _hosts(str(run))
    host = hosts.get(folder.parent.name) if hosts else None
    if host is None:
        return None
    return _ranks(str(run)).get((host, str(device_id)))


@lru_cache(maxsize=16)
def _hosts(run: str) -> dict[str, str]:
    """mapping id -> host IP from ``host_ips_mapping.txt`` ({} when absent)."""
    path = Path(run) / MAPPING_FILE
    if not path.is_file():
        return {}
    try:
        text = read_bytes(path).decode("utf-8", errors="replace")
    except (OSError, InputError):
        return {}
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 1:
            out[fields[1]] = fields[0]
    return out


@lru_cache(maxsize=16)
def _ranks(run: str) -> dict[tuple[str, str], tuple[int, str]]:
    """(host IP, device id) -> (rank, host IP) from the rank table:
    ``hccl.json``, else the first ``*.json`` with a ``server_list``."""
    folder = Path(run)
    candidates = [folder / RANK_TABLE_FILE, *sorted(p for p in folder.glob("*.json") if p.name != RANK_TABLE_FILE)]
    for path in candidates:
        if not path.is_file():
            continue
        try:
            table = load_json(path)
        except InputError:
            continue
        servers = table.get("server_list") if isinstance(table, dict) else None
        if not isinstance(servers, list):
            continue
        out = {}
        for server in servers:
            if not isinstance(server, dict):
                continue
            host = str(server.get("server_id", ""))
            for device in server.get("device") or []:
                if isinstance(device, dict) and str(device.get("rank_id", "")).isdigit():
                    out[(host, str(device.get("device_id")))] = (int(device["rank_id"]), host)
        return out
    return {}
