"""Chinese forms of the phrases advisor's metrics and collectors write into
metric values (idle-time labels, shape remarks), beside the profile's own
names: the zh rule texts print such a value through the ``zh`` template
filter (``advisor.engine.render``), which rewrites these phrases and leaves
everything else as it is. ``tests/engine/test_labels_zh.py`` builds each
phrase with the code that writes it."""

from __future__ import annotations

import re

#: (English phrase, its Chinese form), applied in order.
LABELS_ZH: tuple[tuple[re.Pattern[str], str], ...] = (
    # collectors/kineto/idle.py: why launched work waited, what a sync waited on
    (re.compile(r"\(no recorded wait\)"), "（无等待记录）"),
    (re.compile(r"\(waits on stream (-?\d+)\)"), r"（等待 stream \1）"),
    (re.compile(r"\(waits on an event of an unknown stream\)"), "（等待未知 stream 上的事件）"),
    (re.compile(r"\(Python between host ops\)"), "（Host 算子之间的 Python 代码）"),
    # advisor/metrics/kernels.py: unaligned_reason
    (re.compile(r"\bquery last axis (\d+) not a multiple of (\d+)"), r"query 最后一维 \1 不是 \2 的倍数"),
    (re.compile(r"\binner axis ([\d, ]+?) not a multiple of (\d+)"), r"内轴 \1 不是 \2 的倍数"),
)


def to_zh(text: object) -> str:
    """``text`` with advisor's own phrases in Chinese (``LABELS_ZH``)."""
    out = str(text)
    for pattern, chinese in LABELS_ZH:
        out = pattern.sub(chinese, out)
    return out
