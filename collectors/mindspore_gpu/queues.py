"""Data queues of a MindSpore GPU profile -> ``data_queue``.

The host queue (``device_queue_profiling_{dev}.txt`` /
``dataset_iterator_profiling_{dev}.txt``) is written by MindData alike on
Ascend and GPU and read by the MindInsight reader. The device queue on GPU
is ``minddata_getnext_profiling_{dev}.txt`` (``GetNextProfiling`` in
``mindspore/ccsrc/.../gpu/data/dataset_profiling.cc``): one line per batch
the network takes, ``GetNext start_ns end_ns queue_size``, the size of the
GPU data queue at that moment, timestamps in nanoseconds of the system
clock. It has the layout of Ascend's ``minddata_aicpu`` GetNext lines
(MindInsight's ``MinddataAnalyser`` reads either), so the same reader
parses it and only the time unit differs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from advisor.collectors.mindinsight import queues as ascend_queues
from advisor.collectors.mindinsight.frames import drop_empty
from advisor.collectors.mindspore_gpu.layout import GETNEXT_FILE
from advisor.errors import InputError
from advisor.profile import Profile

#: GetNext timestamps are nanoseconds.
NS_PER_US = 1000.0


def data_queue(profile: Profile, folder: Path, dev: int, rank: int) -> pd.DataFrame | None:
    """Host queue samples (MindInsight reader) and device queue samples (GetNext)."""
    parts = []
    host = ascend_queues.data_queue(profile, folder, dev, rank)
    if host is not None:
        parts.append(host)
    path = folder / GETNEXT_FILE.format(dev)
    if path.is_file():
        try:
            device = ascend_queues._device_queue(path)
        except InputError as exc:
            profile.skip(exc.path, exc.problem)
        else:
            if "time_us" in device:
                device["time_us"] = device["time_us"] / NS_PER_US
            device.insert(0, "rank", rank)
            parts.append(device)
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    return drop_empty(pd.concat(parts, ignore_index=True))
