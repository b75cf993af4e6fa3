"""The collector contract: what a collector module provides and what it may do.

A collector is a module that reads one profiler format. It provides:

``discover(root: Path) -> list[Path]``
    The rank units under ``root`` that this collector reads (``root``
    itself when it is one): an ``*_ascend_pt`` folder, a Kineto trace file,
    an msprof ``cluster_analysis_output`` folder, ... Returns [] when the
    layout is not this collector's. Must be cheap (names, not contents).

``read(unit: Path) -> Profile``
    One unit -> a Profile whose tables carry a ``rank`` column. Raises
    ``InputError`` when the unit is unusable; records partial problems with
    ``Profile.skip``. Never writes anything under ``unit``.

``CAPABILITIES: Capabilities``
    What else it offers the cluster engine
    (``advisor.collectors.parallel.rank_reader``), each capability with the
    function it promises:

    * ``arrow``: ``read_arrow(unit, kernels=True) -> Profile`` -- ``read``
      with the tables as ``pyarrow.Table`` (or ``batch_tables.PendingTable``),
      which the engine ships between processes and converts to pandas once
      (``arrow_frames``).
    * ``batch``: ``read_arrow_batch(units, kernels=None) -> list[Profile |
      InputError]`` -- ``read_arrow`` of several units at once, per-call
      costs shared (one result per unit, in order; ``kernels`` one flag per
      unit). Needs ``arrow``.
    * ``skips_kernels``: ``read_arrow(unit, kernels=False)`` leaves the
      unit's kernel files out, so a large cluster's kernels are read on a
      sample of ranks (``kernel_sample``). Needs ``arrow``.
    * ``splits_unit``: ``read_alone(unit, jobs) -> Profile`` -- ``read`` of
      the only unit of a run, spread over up to ``jobs`` processes.
    * ``shared_ranks``: several units may hold the same rank on purpose
      (capture windows of one rank), so the engine keeps them all instead of
      dropping the repeats; ``rank_notes(units) -> list[str]`` says, for
      the units read together, which of them share a rank and why (the
      engine adds these notes to the merged Profile).

    ``label`` names the collector's units in the report's "also found ..."
    note when another format was read.

Optional, with no capability: ``runs(units) -> list[list[Path]]``, the
units split into the separate runs they belong to, where the collector can
tell from its files (``advisor.collectors.search.separate`` asks it when
the units lie in several folders; several runs are listed, never merged).

``check`` verifies a module against this contract: the functions its
capabilities promise are there, and no optional function is there without
its capability (the engine would never call it).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from advisor.profile import Profile


@dataclass(frozen=True)
class Capabilities:
    """What a collector offers beyond ``discover`` and ``read`` (module doc)."""

    label: str
    arrow: bool = False
    batch: bool = False
    skips_kernels: bool = False
    splits_unit: bool = False
    shared_ranks: bool = False

    def __post_init__(self) -> None:
        for needs_arrow in ("batch", "skips_kernels"):
            if getattr(self, needs_arrow) and not self.arrow:
                raise ValueError(f"capability {needs_arrow} needs arrow (read_arrow)")


#: The function each capability promises.
FUNCTIONS = {"arrow": "read_arrow", "batch": "read_arrow_batch", "splits_unit": "read_alone",
             "shared_ranks": "rank_notes"}


class Collector(Protocol):
    """A collector module, as a static type."""

    CAPABILITIES: Capabilities

    def discover(self, root: Path) -> list[Path]: ...

    def read(self, unit: Path) -> Profile: ...


def check(module: ModuleType) -> Capabilities:
    """The capabilities ``module`` declares; TypeError when it breaks the
    contract (module doc)."""
    caps = getattr(module, "CAPABILITIES", None)
    if not isinstance(caps, Capabilities):
        raise TypeError(f"{module.__name__}: no CAPABILITIES = Capabilities(...)")
    for name in ("discover", "read"):
        if not callable(getattr(module, name, None)):
            raise TypeError(f"{module.__name__}: no {name}()")
    for field in fields(Capabilities):
        function = FUNCTIONS.get(field.name)
        if function is None:
            continue
        declared, present = getattr(caps, field.name), callable(getattr(module, function, None))
        if declared != present:
            raise TypeError(f"{module.__name__}: capability {field.name}={declared} "
                            f"but {function}() is {'present' if present else 'missing'}")
    return caps


@functools.lru_cache(maxsize=None)
def load(module_name: str) -> tuple[ModuleType, Capabilities]:
    """The collector module named ``module_name`` and its checked capabilities."""
    module = importlib.import_module(module_name)
    return module, check(module)
