"""Damaged inputs, built by the tests from valid ones.

Every case starts from a real profile -- the examples in ``examples/`` or the
real corpus (``../shared/corpus``) -- copied into a scratch folder, then
damaged in one way. ``CASES`` maps a case name to (builder, expectation):

* ``partial(*fragments)``: exit 0, a report.json that validates, and each
  fragment (a file name, usually) appears in a ``skipped`` entry (what or
  reason), so the report says what was left out and why;
* ``ok()``: exit 0 and a valid report (weird values, nothing to skip);
* ``error(fragment)``: exit 2 with exactly one stderr line
  ``advisor: error: ...`` containing ``fragment`` (the file).

No case may print a traceback or write under its input.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

# --------------------------------------------------------------- expectation


@dataclass(frozen=True)
class Expect:
    kind: str  # "partial" | "ok" | "error"
    fragments: tuple[str, ...] = ()


def partial(*fragments: str) -> Expect:
    return Expect("partial", fragments)


def ok() -> Expect:
    return Expect("ok")


def error(fragment: str) -> Expect:
    return Expect("error", (fragment,))


# ------------------------------------------------------------------- sources

def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def mindinsight8(dst: Path) -> Path:
    """8 ranks, MindSpore step trace with all-reduce columns (example)."""
    return copy_tree(EXAMPLES / "resnet50_8p_allreduce_tail", dst)


def data_bound(dst: Path) -> Path:
    """1 rank with dataset pipeline and queue files (example)."""
    return copy_tree(EXAMPLES / "resnet50_data_bound", dst)


def hta2(corpus: Path, dst: Path) -> Path:
    """Two real Kineto traces, ranks 0 and 1 (HTA test data)."""
    return copy_tree(corpus / "hta" / "trace_filter", dst)


def tb_plugin(corpus: Path, dst: Path) -> Path:
    """Two real Kineto capture windows of one worker (TensorBoard plugin data)."""
    return copy_tree(corpus / "kineto-tb-plugin" / "resnet50_num_workers_0", dst)


def ms_cpu(corpus: Path, dst: Path) -> Path:
    """A real MindSpore *_ascend_ms folder (trace_view.json + FRAMEWORK CSVs)."""
    return copy_tree(corpus / "mindspore-cpu", dst)


def msprof_cluster(corpus: Path, dst: Path) -> Path:
    """A real msprof-analyze cluster_analysis_output."""
    dst.mkdir(parents=True)
    copy_tree(corpus / "mstt/test/resource/advisor/cluster_analysis_output", dst / "cluster_analysis_output")
    return dst


STEP_HEADER = "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free\n"


def npu_cluster(corpus: Path, dst: Path, ranks: int = 4) -> Path:
    """torch_npu rank folders: step_trace_time.csv written here, the real
    kernel_details.csv from the corpus, a communication.json built from the
    real cluster_communication.json's per-rank records."""
    kernels = corpus / "mstt/test/ut/advisor/compute_advice/data/kernel_details.csv"
    cluster = json.loads((corpus / "mstt/test/resource/advisor/cluster_analysis_output/"
                          "cluster_communication.json").read_text())
    ops = next(iter(next(iter(cluster.values())).values()))
    for rank in range(ranks):
        root = dst / f"node0_{1000 + rank}_20240101_ascend_pt"
        out = root / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True)
        (root / f"profiler_info_{rank}.json").write_text(json.dumps({"config": {"common_config": {}},
                                                                       "rank_id": rank}))
        rows = [STEP_HEADER]
        for step in range(1, 7):
            comp = 8000.0 + 100 * rank + 10 * step
            rows.append(f"{step},{comp},{1500.0},{500.0},{2000.0},{500.0 + 5 * rank}\n")
        (out / "step_trace_time.csv").write_text("".join(rows))
        shutil.copyfile(kernels, out / "kernel_details.csv")
        per_rank = {name: by_rank.get(str(rank % 2), next(iter(by_rank.values())))
                    for name, by_rank in ops.items()}
        (out / "communication.json").write_text(json.dumps({"step1": {"collective": per_rank}}))
    return dst


# ---------------------------------------------------------------- mutations

def cut(path: Path, fraction: float = 0.5) -> None:
    """Truncate a file to ``fraction`` of its bytes (mid-row, mid-token)."""
    data = path.read_bytes()
    path.write_bytes(data[: max(1, int(len(data) * fraction))])


def cut_gzip(path: Path, fraction: float = 0.5) -> None:
    """A gzip stream cut mid-way (the download or copy was interrupted)."""
    cut(path, fraction)


def header_only(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n")


def empty(path: Path) -> None:
    path.write_bytes(b"")


def rename_column(path: Path, old: str, new: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[0] = ",".join(new if c.strip() == old else c for c in lines[0].rstrip("\n").split(",")) + "\n"
    path.write_text("".join(lines))


def drop_columns(path: Path, names: set[str]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    head = lines[0].split(",")
    keep = [i for i, c in enumerate(head) if c.strip() not in names]
    out = [",".join(row.split(",")[i] for i in keep if i < len(row.split(","))) for row in lines]
    path.write_text("\n".join(out) + "\n")


def set_column(path: Path, column: str, value: str, rows: slice = slice(None)) -> None:
    """Overwrite one column's cells (data rows in ``rows``) with ``value``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    head = [c.strip() for c in lines[0].split(",")]
    idx = head.index(column)
    body = lines[1:]
    for i in range(len(body))[rows]:
        cells = body[i].split(",")
        if idx < len(cells):
            cells[idx] = value
        body[i] = ",".join(cells)
    path.write_text("\n".join([lines[0], *body]) + "\n")


def keep_rows(path: Path, n: int) -> None:
    """Keep the header and the first ``n`` data rows (fewer steps)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[: 1 + n]))


def inject_bytes(path: Path, junk: bytes = b"\xff\xfe\xfa\x80", at: float = 0.5) -> None:
    """Non-UTF-8 bytes in the middle of the file."""
    data = path.read_bytes()
    i = int(len(data) * at)
    path.write_bytes(data[:i] + junk + data[i:])


def binary_junk(path: Path, size: int = 4096) -> None:
    path.write_bytes(bytes((i * 131 + 7) % 256 for i in range(size)))


def gunzip(path: Path) -> Path:
    """Replace ``x.json.gz`` by ``x.json`` (decompressed), return the new path."""
    out = path.with_suffix("")
    out.write_bytes(gzip.decompress(path.read_bytes()))
    path.unlink()
    return out


def edit_trace(path: Path, change) -> None:
    """Load a (gzipped) Chrome trace, ``change(doc)`` in place, write back."""
    raw = path.read_bytes()
    zipped = raw[:2] == b"\x1f\x8b"
    doc = json.loads(gzip.decompress(raw) if zipped else raw)
    change(doc)
    text = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(text, mtime=0) if zipped else text)


def scale_durations(factor_or_value, kinds=("X",)):
    """A trace edit: every complete event's ``dur`` set by a function."""
    def change(doc):
        for ev in doc.get("traceEvents", []) if isinstance(doc, dict) else doc:
            if isinstance(ev, dict) and ev.get("ph") in kinds and "dur" in ev:
                ev["dur"] = factor_or_value(ev["dur"])
    return change


def symlink(link: Path, target: str) -> None:
    os.symlink(target, link)


def only(path: Path, pattern: str) -> Path:
    """The single file under ``path`` matching ``pattern`` (a builder helper)."""
    hits = sorted(path.rglob(pattern))
    assert len(hits) == 1, (pattern, hits)
    return hits[0]
