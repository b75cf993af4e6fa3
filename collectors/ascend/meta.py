"""Run metadata of an Ascend rank folder: framework, rank id, version, world size.

Sources, in order of trust: the folder name (``*_ascend_pt`` is torch_npu,
``*_ascend_ms`` MindSpore; MindSpore names non-zero ranks ``rank-N_...``),
``profiler_info_{rank}.json`` file names, then the contents of
``profiler_info*.json`` and ``profiler_metadata.json`` (``rank_id``,
``distributed_args`` with rank / world_size / tp / pp / dp, version keys).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from advisor.collectors.ascend import fields
from advisor.collectors.ascend.link_ranks import global_ranks, group_ranks
from advisor.collectors.io import listing
from advisor.collectors.io.files import load_json
from advisor.collectors.vocab import TORCH_NAMESPACES
from advisor.errors import InputError
from advisor.profile import Profile

_INFO_NAME = re.compile(r"^profiler_info_(\d+)\.json$")
_RANK_IN_FOLDER = re.compile(r"(?:^|_)rank[-_]?(\d+)(?=_|$)", re.IGNORECASE)
_KEYS = fields.text("profiler_metadata.json").fields
_VERSION_KEYS = fields.text("profiler_info.json versions").fields
_PARALLEL_KEYS = {short: _KEYS[short] for short in ("tp", "pp", "dp", "cp", "ep")}
_CORE_KEYS = fields.text("info.json DeviceInfo").fields
#: Every key ``_merge`` looks up in a metadata document.
_WANTED = frozenset([*_KEYS["rank"], *_KEYS["world_size"], *(k for keys in _VERSION_KEYS.values() for k in keys),
                     *(k for keys in _PARALLEL_KEYS.values() for k in keys)])


def framework_of(folder: Path) -> tuple[str, str]:
    """(framework, source_format) from a rank folder's name suffix."""
    name = folder.name.lower()
    if name.endswith("_ascend_pt"):
        return "torch_npu", "ascend_pt"
    if name.endswith("_ascend_ms"):
        return "mindspore", "ascend_ms"
    return "unknown", "ascend"


#: Files under a rank folder's ``FRAMEWORK/`` that only one framework writes:
#: torch_npu's host records (``torch.op_range``, ``torch.op_mark``, ...),
#: MindSpore's host operator tables (``cpu_op_*``).
_FRAMEWORK_FILES = (("torch_npu", "torch.*"), ("mindspore", "cpu_op_*"))


def framework_from_files(folder: Path | None) -> str:
    """The framework that wrote a rank folder, from the files under its
    ``FRAMEWORK/`` (``_FRAMEWORK_FILES``); "unknown" where none tells. The
    ``ASCEND_PROFILER_OUTPUT/`` files themselves do not: torch_npu and
    MindSpore 2.3+ both write them."""
    if folder is None:
        return "unknown"
    for framework, pattern in _FRAMEWORK_FILES:
        if listing.glob(folder / "FRAMEWORK", pattern):
            return framework
    return "unknown"


def framework_from_host_calls(host_calls) -> str:
    """"torch_npu" when the ``host_calls`` table (``host_calls.read``,
    a DataFrame or None) names a PyTorch call (``vocab.TORCH_NAMESPACES``);
    else "unknown"."""
    if host_calls is None or "name" not in host_calls.columns:
        return "unknown"
    return "torch_npu" if host_calls["name"].astype(str).str.startswith(TORCH_NAMESPACES).any() else "unknown"


def rank_from_info_names(folder: Path | None) -> int | None:
    """Rank from a ``profiler_info_{N}.json`` file name in ``folder``."""
    if folder is None:
        return None
    for name in listing.names(folder):
        m = _INFO_NAME.match(name)
        if m:
            return int(m.group(1))
    return None


#: ``{worker}_{timestamp}_ascend_pt|ms``, the worker being ``{host}_{pid}``
#: unless the user named it (torch_npu ``tensorboard_trace_handler``,
#: MindSpore's profiler): the host is all before the pid, underscores kept.
_HOST_IN_FOLDER = re.compile(r"^(?P<host>.+?)_\d+_\d{14,20}_ascend_(?:pt|ms)$", re.IGNORECASE)


def host_from_folder_name(folder: Path | None) -> str | None:
    """The host in a worker folder's default name (``_HOST_IN_FOLDER``), or
    None where the name does not follow it or its "host" is a ``rank-N``."""
    m = _HOST_IN_FOLDER.match(folder.name) if folder is not None else None
    if m is None or _RANK_IN_FOLDER.search(m.group("host")):
        return None
    return m.group("host")


def rank_from_folder_name(folder: Path | None) -> int | None:
    """Rank from ``rank-N`` in a folder name (MindSpore names rank N > 0 so)."""
    if folder is None:
        return None
    m = _RANK_IN_FOLDER.search(folder.name)
    return int(m.group(1)) if m else None


@dataclass
class MetaFacts:
    """What the metadata JSON files say (None where they are silent)."""

    rank: int | None = None
    world_size: int | None = None
    version: str | None = None
    framework: str | None = None
    parallel: dict = field(default_factory=dict)
    #: communication group id -> its global ranks, sorted (``link_ranks.group_ranks``)
    groups: dict[str, list[int]] = field(default_factory=dict)
    #: the global ranks, sorted, of the pipeline-parallel group the metadata lists
    pp_group: list[int] | None = None
    #: ``ENV_VARIABLES`` of profiler_metadata.json: the environment torch_npu recorded (name -> value)
    env: dict[str, str] = field(default_factory=dict)


class _Scalars:
    """Where each key (of ``wanted``, if given) first holds a scalar in a JSON document,
    depth-first (a node's own keys before its children's), found in one
    walk. JSON null counts as absent. Only the wanted keys are recorded and
    only objects are entered (directly or as JSON text): metadata documents
    carry large lists and objects (communication groups, environment) whose
    other keys nobody asks about.

    ``find(keys)`` is the value of the earliest of ``keys``: at the same
    node, the one listed first wins.
    """

    def __init__(self, doc, wanted: frozenset[str] | None = None):
        self.first: dict[str, tuple[int, object]] = {}
        self._count = 0
        self._wanted = wanted
        self._walk(doc)

    def _walk(self, node) -> None:
        if not isinstance(node, dict):
            return
        here = self._count
        self._count += 1
        first = self.first
        for key in node if self._wanted is None else self._wanted.intersection(node):
            value = node[key]
            if value is not None and not isinstance(value, (dict, list)) and key not in first:
                first[key] = (here, value)
        for value in node.values():
            if isinstance(value, dict):
                self._walk(value)
            elif isinstance(value, str) and value[:1] in "{[":
                self._walk(_maybe_json(value))

    def find(self, keys: tuple[str, ...]):
        hits = [(self.first[k][0], i, self.first[k][1]) for i, k in enumerate(keys) if k in self.first]
        return min(hits)[2] if hits else None


def _maybe_json(value):
    """Metadata values are sometimes JSON text (``add_metadata_json``)."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _int(value) -> int | None:
    """A non-negative int from a JSON value, else None (-1 means "unset")."""
    if value is None:  # the common case (a key the document lacks), without raising
        return None
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def read_meta(folder: Path | None, profile: Profile) -> MetaFacts:
    """Collect MetaFacts from the JSON files in ``folder``; broken files are skipped."""
    facts = MetaFacts()
    if folder is None:
        return facts
    files = listing.glob(folder, "profiler_info*.json") + listing.glob(folder, "profiler_metadata.json")
    for path in files:
        try:
            data = load_json(path)
        except InputError as exc:
            profile.skip(str(path), exc.problem)
            continue
        _merge(facts, data)
    return facts


def add_groups(facts: MetaFacts, parallel_group_info) -> None:
    """Take the communication groups of a ``parallel_group_info`` document
    (group name -> ``global_ranks``, ``group_name``) unless some are known."""
    if not facts.groups:
        facts.groups = group_ranks(parallel_group_info)
        facts.pp_group = _pp_group(parallel_group_info)


def _pp_group(parallel_group_info) -> list[int] | None:
    """The sorted global ranks of the pipeline-parallel group (``group_name``
    starting with "pp", as msprof-analyze takes it) in ``parallel_group_info``."""
    if not isinstance(parallel_group_info, dict):
        return None
    for info in parallel_group_info.values():
        if isinstance(info, dict) and str(info.get("group_name", "")).lower().startswith("pp"):
            ranks = global_ranks(info)
            if ranks is not None and len(ranks) > 1:
                return ranks
    return None


def pipeline_stage(facts: MetaFacts, rank: int) -> int | None:
    """The rank's pipeline stage: its place in its pipeline group (stage k of
    a pipeline is the k-th of the group's ranks in every Megatron-LM rank
    order), or None when the metadata lists no group holding it."""
    if facts.pp_group is None or rank not in facts.pp_group:
        return None
    return facts.pp_group.index(rank)


def _merge(facts: MetaFacts, data) -> None:
    """Fill the MetaFacts fields still unknown from one JSON document."""
    doc = _Scalars(data, _WANTED)
    if facts.rank is None:
        facts.rank = _int(doc.find(_KEYS["rank"]))
    if facts.world_size is None:
        facts.world_size = _int(doc.find(_KEYS["world_size"]))
        if facts.world_size == 0:
            facts.world_size = None
    if facts.version is None:
        for framework, keys in _VERSION_KEYS.items():
            value = doc.find(keys)
            if value:
                facts.version, facts.framework = str(value), framework
                break
    if isinstance(data, dict):
        add_groups(facts, data.get("parallel_group_info"))
        env = data.get("ENV_VARIABLES")
        if isinstance(env, dict) and not facts.env:
            facts.env = {str(k): "" if v is None else str(v) for k, v in env.items()}
    for short, keys in _PARALLEL_KEYS.items():
        if short not in facts.parallel:
            value = _int(doc.find(keys))
            if value:
                facts.parallel[short] = value


def _device_infos(folder: Path) -> list[Path]:
    """``PROF_*/device_*/info.json.*`` under a rank folder, the ``.done``
    markers left out (msprof writes ``info.json.{id}`` and ``info.json.{id}.done``)."""
    found = []
    for prof in listing.glob(folder, "PROF_*"):
        for device in listing.glob(prof, "device_*"):
            if listing.is_dir(device):
                found += [f for f in listing.glob(device, "info.json.*") if not f.name.endswith(".done")]
    return found


def read_core_counts(folder: Path | None, profile: Profile) -> dict[str, int]:
    """The device's core counts (``ai_core_num``, ``aiv_num``) from the first
    ``info.json.*`` of the rank folder whose ``DeviceInfo`` entry gives its
    AI Core count; {} where none does (the count is never guessed from the
    chip name). Unreadable files are skipped with their reason."""
    if folder is None:
        return {}
    for path in _device_infos(folder):
        try:
            data = load_json(path)
        except InputError as exc:
            profile.skip(str(path), exc.problem)
            continue
        infos = data.get("DeviceInfo") if isinstance(data, dict) else None
        for info in infos if isinstance(infos, list) else []:
            if not isinstance(info, dict):
                continue
            counts = {name: _int(next((info[k] for k in keys if k in info), None))
                      for name, keys in _CORE_KEYS.items()}
            if counts["ai_core_num"]:
                return {name: n for name, n in counts.items() if n}
    return {}
