"""The damaged-input corpus: case name -> (builder, expectation).

A builder gets a fresh scratch folder and the real corpus, builds a damaged
copy of a valid profile, and returns the path to give ``advisor report``.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from rb_damage import (
    binary_junk, copy_tree, cut, cut_gzip, data_bound, drop_columns, edit_trace, empty, error, gunzip,
    hta2, header_only, inject_bytes, keep_rows, mindinsight8, ms_cpu, msprof_cluster, npu_cluster,
    ok, only, partial, rename_column, scale_durations, set_column, symlink, tb_plugin,
)

ST = "step_trace_raw_{}_detail_time.csv"


def _mi(damage):
    """A builder over the 8-rank MindInsight example."""
    def build(tmp: Path, corpus: Path) -> Path:
        root = mindinsight8(tmp / "in")
        damage(root / "profiler")
        return root
    return build


def _npu(damage):
    """A builder over 4 torch_npu rank folders."""
    def build(tmp: Path, corpus: Path) -> Path:
        root = npu_cluster(corpus, tmp / "in")
        damage(root)
        return root
    return build


def _hta(damage):
    def build(tmp: Path, corpus: Path) -> Path:
        root = hta2(corpus, tmp / "in")
        return damage(root) or root
    return build


def _rank_out(root: Path, rank: int) -> Path:
    return root / f"node0_{1000 + rank}_20240101_ascend_pt" / "ASCEND_PROFILER_OUTPUT"


def _dup_mindinsight(tmp: Path, corpus: Path) -> Path:
    """The same rank's files in two folders (a copy left next to the run)."""
    root = mindinsight8(tmp / "in")
    copy = root / "copy_of_rank3" / "profiler"
    copy.mkdir(parents=True)
    for name in (ST.format(3), "profiler_info_3.json"):
        (copy / name).write_bytes((root / "profiler" / name).read_bytes())
    return root


def _dup_npu(tmp: Path, corpus: Path) -> Path:
    """Two torch_npu folders that both declare rank 2."""
    root = npu_cluster(corpus, tmp / "in")
    src = root / "node0_1002_20240101_ascend_pt"
    dst = root / "node9_9002_20240102_ascend_pt"
    import shutil
    shutil.copytree(src, dst)
    return root


def _mixed(tmp: Path, corpus: Path) -> Path:
    """MindInsight profiler folder and a Kineto trace side by side."""
    root = mindinsight8(tmp / "in")
    trace = sorted((corpus / "hta" / "trace_filter").glob("*.json.gz"))[0]
    (root / "worker0.1.pt.trace.json.gz").write_bytes(trace.read_bytes())
    return root


def _mixed_npu_kineto(tmp: Path, corpus: Path) -> Path:
    root = npu_cluster(corpus, tmp / "in", ranks=2)
    trace = sorted((corpus / "hta" / "trace_filter").glob("*.json.gz"))[0]
    (root / "extra.pt.trace.json.gz").write_bytes(trace.read_bytes())
    return root


def _loop(tmp: Path, corpus: Path) -> Path:
    """Symlink loops: a folder linking to itself and two links to each other."""
    root = mindinsight8(tmp / "in")
    symlink(root / "profiler" / "again", ".")
    symlink(root / "loop_a", "loop_b")
    symlink(root / "loop_b", "loop_a")
    symlink(root / "up", "..")
    return root


def _loop_kineto(tmp: Path, corpus: Path) -> Path:
    root = hta2(corpus, tmp / "in")
    symlink(root / "self", ".")
    symlink(root / "x.pt.trace.json", "y.pt.trace.json")
    symlink(root / "y.pt.trace.json", "x.pt.trace.json")
    return root


def _dangling(tmp: Path, corpus: Path) -> Path:
    """A rank's step trace is a symlink to nothing (copied without its target)."""
    root = mindinsight8(tmp / "in")
    path = root / "profiler" / ST.format(6)
    path.unlink()
    symlink(path, "/nonexistent/step_trace.csv")
    return root


def _dir_as_file(tmp: Path, corpus: Path) -> Path:
    """A folder where a rank's CSV file should be (unreadable as a file)."""
    root = mindinsight8(tmp / "in")
    path = root / "profiler" / ST.format(2)
    path.unlink()
    path.mkdir()
    return root


def _unreadable(tmp: Path, corpus: Path) -> Path:
    root = mindinsight8(tmp / "in")
    (root / "profiler" / ST.format(4)).chmod(0)
    return root


def _all_empty(tmp: Path, corpus: Path) -> Path:
    root = mindinsight8(tmp / "in")
    for p in (root / "profiler").iterdir():
        empty(p)
    return root


def _empty_trace_events(tmp: Path, corpus: Path) -> Path:
    root = tmp / "in"
    root.mkdir()
    (root / "w.pt.trace.json").write_text('{"schemaVersion": 1, "traceEvents": []}')
    return root / "w.pt.trace.json"


def _renamed_trace_key(tmp: Path, corpus: Path) -> Path:
    root = hta2(corpus, tmp / "in")
    path = sorted(root.glob("*.json.gz"))[0]

    def change(doc):
        doc["traceEventz"] = doc.pop("traceEvents")
    edit_trace(path, change)
    return path


def _not_gzip(tmp: Path, corpus: Path) -> Path:
    root = hta2(corpus, tmp / "in")
    path = sorted(root.glob("*.json.gz"))[1]
    path.write_bytes(gzip.decompress(path.read_bytes()))  # plain JSON under a .gz name
    return root


def _single_trace_cut(tmp: Path, corpus: Path) -> Path:
    root = hta2(corpus, tmp / "in")
    path = sorted(root.glob("*.json.gz"))[0]
    cut_gzip(path, 0.4)
    return path


def _kineto_json_cut(tmp: Path, corpus: Path) -> Path:
    root = hta2(corpus, tmp / "in")
    plain = gunzip(sorted(root.glob("*.json.gz"))[1])
    cut(plain, 0.6)
    return root


def _kineto_non_utf8(tmp: Path, corpus: Path) -> Path:
    root = hta2(corpus, tmp / "in")
    plain = gunzip(sorted(root.glob("*.json.gz"))[1])
    data = plain.read_bytes()
    i = data.find(b'"name": "') + 9
    plain.write_bytes(data[:i] + b"\xff\xfe\x80" + data[i:])
    return root


def _kineto_empty_extra(tmp: Path, corpus: Path) -> Path:
    root = hta2(corpus, tmp / "in")
    (root / "worker2.pt.trace.json").write_bytes(b"")  # a trace by its name
    return root


def _ab_pair(tmp: Path, corpus: Path) -> Path:
    """Two runs of rank 1 (HTA's A/B pair), a folder each, under one folder."""
    return copy_tree(corpus / "hta" / "trace_compare", tmp / "in")


def _rank_copied(tmp: Path, corpus: Path) -> Path:
    """Rank 1's trace copied beside itself under another name: the same steps twice."""
    root = hta2(corpus, tmp / "in")
    trace = sorted(root.glob("*.json.gz"))[1]
    (root / "sampled_rank-1-again.json.gz").write_bytes(trace.read_bytes())
    return root


def _trace(fn):
    def damage(root: Path):
        edit_trace(sorted(root.glob("*.json.gz"))[1], scale_durations(fn))
    return _hta(damage)


def _nan_trace(tmp: Path, corpus: Path) -> Path:
    """NaN literals in a trace (Python's json writes them; JSON does not allow them)."""
    root = hta2(corpus, tmp / "in")
    plain = gunzip(sorted(root.glob("*.json.gz"))[1])
    data = plain.read_bytes()
    plain.write_bytes(data.replace(b'"dur": 1,', b'"dur": NaN,', 50))
    return root


def _damage(root: Path, name: str, func) -> Path:
    func(only(root, name))
    return root


def _damage_data(tmp: Path, func) -> Path:
    root = data_bound(tmp / "in")
    func(root / "profiler")
    return root


def _damage_tb(tmp: Path, corpus: Path) -> Path:
    root = tb_plugin(corpus, tmp / "in")
    cut_gzip(root / "worker0.1623143566756.pt.trace.json.gz", 0.5)
    return root


def _cut_pipeline(tmp: Path, corpus: Path) -> Path:
    """The pipeline JSON is the only pipeline file (the CSV is preferred when present)."""
    def damage(p: Path) -> None:
        (p / "minddata_pipeline_raw_0.csv").unlink()
        cut(p / "pipeline_profiling_0.json", 0.5)
    return _damage_data(tmp, damage)



CASES = {
    # --- MindInsight / MindSpore text layout, 8 ranks: one rank damaged
    "mi: truncated step trace CSV (rank 3)": (_mi(lambda p: cut(p / ST.format(3), 0.55)), partial()),
    "mi: empty step trace CSV (rank 5)": (_mi(lambda p: empty(p / ST.format(5))), partial(ST.format(5))),
    "mi: header-only step trace CSV (rank 2)": (_mi(lambda p: header_only(p / ST.format(2))), partial(ST.format(2))),
    "mi: renamed column total->totl (rank 1)": (_mi(lambda p: rename_column(p / ST.format(1), "total", "totl")), partial(ST.format(1))),
    "mi: missing columns fp/bp/tail (rank 0)": (
        _mi(lambda p: drop_columns(p / ST.format(0), {"fp_point", "bp_point", "fp_and_bp", "tail"})), ok()),
    "mi: NaN durations (rank 4)": (_mi(lambda p: set_column(p / ST.format(4), "total", "nan", slice(0, -1))), partial(ST.format(4))),
    "mi: negative durations (rank 4)": (_mi(lambda p: set_column(p / ST.format(4), "total", "-2366092", slice(0, -1))), ok()),
    "mi: huge durations (rank 4)": (_mi(lambda p: set_column(p / ST.format(4), "total", "1e300", slice(0, -1))), ok()),
    "mi: inf durations everywhere (rank 4)": (
        _mi(lambda p: [set_column(p / ST.format(4), c, "inf", slice(0, -1)) for c in ("total", "fp_and_bp", "tail", "iteration_interval")]), ok()),
    "mi: non-UTF-8 bytes (rank 6)": (_mi(lambda p: inject_bytes(p / ST.format(6))), partial(ST.format(6))),
    "mi: binary junk as CSV (rank 7)": (_mi(lambda p: binary_junk(p / ST.format(7))), partial(ST.format(7))),
    "mi: ranks with different step counts": (
        _mi(lambda p: [keep_rows(p / ST.format(r), n) for r, n in ((1, 3), (2, 12), (5, 1))]), ok()),
    "mi: truncated framework_raw CSV": (_mi(lambda p: cut(p / "framework_raw_0.csv", 0.3)), partial("framework_raw_0.csv")),
    "mi: truncated profiler_info JSON (rank 0)": (_mi(lambda p: cut(p / "profiler_info_0.json", 0.5)), partial("profiler_info_0.json")),
    "mi: duplicated rank in a copied folder": (_dup_mindinsight, partial("rank 3")),
    "mi: mixed formats (Kineto trace beside)": (_mixed, partial("Kineto")),
    "mi: symlink loops in the tree": (_loop, ok()),
    "mi: dangling symlink as a rank's CSV": (_dangling, partial(ST.format(6))),
    "mi: a folder where a CSV should be": (_dir_as_file, partial(ST.format(2))),
    "mi: unreadable file (chmod 000)": (_unreadable, partial(ST.format(4))),
    "mi: every file empty": (_all_empty, error("profiler")),
    # --- MindSpore dataset pipeline files (1 rank)
    "data: truncated pipeline JSON": (_cut_pipeline, partial("pipeline_profiling_0.json")),
    "data: garbage device queue file": (
        lambda tmp, c: _damage_data(tmp, lambda p: binary_junk(p / "minddata_aicpu_0.txt")), partial("minddata_aicpu_0.txt")),
    "data: header-only pipeline CSV": (
        lambda tmp, c: _damage_data(tmp, lambda p: header_only(p / "minddata_pipeline_raw_0.csv")), ok()),
    "data: renamed queue column": (
        lambda tmp, c: _damage_data(tmp, lambda p: (p / "device_queue_profiling_0.txt").write_text(
            "garbage line\n" + (p / "device_queue_profiling_0.txt").read_text()[:200])), ok()),
    # --- torch_npu rank folders (4 ranks)
    "npu: truncated kernel_details.csv (rank 1)": (_npu(lambda r: cut(_rank_out(r, 1) / "kernel_details.csv", 0.5)), partial("kernel_details.csv")),
    "npu: communication.json cut mid-way (rank 2)": (_npu(lambda r: cut(_rank_out(r, 2) / "communication.json", 0.5)), partial("communication.json")),
    "npu: header-only step_trace_time.csv (rank 3)": (_npu(lambda r: header_only(_rank_out(r, 3) / "step_trace_time.csv")), partial("step_trace_time.csv")),
    "npu: renamed kernel column Duration(us)": (
        _npu(lambda r: rename_column(_rank_out(r, 0) / "kernel_details.csv", "Duration(us)", "Dur")), partial("kernel_details.csv")),
    "npu: NaN/negative/huge step times": (
        _npu(lambda r: [set_column(_rank_out(r, 1) / "step_trace_time.csv", "Computing", v, slice(i, i + 2))
                        for i, v in ((0, "nan"), (2, "-5000"), (4, "1e308"))]), ok()),
    "npu: every file of one rank empty (rank 0)": (
        _npu(lambda r: [empty(p) for p in _rank_out(r, 0).iterdir()]), partial("node0_1000_20240101_ascend_pt")),
    "npu: duplicated rank folder": (_dup_npu, partial("rank 2")),
    "npu: mixed formats (Kineto trace beside)": (_mixed_npu_kineto, partial("Kineto")),
    # --- real MindSpore *_ascend_ms folder and msprof cluster output
    "ms: truncated trace_view.json": (
        lambda tmp, c: _damage(ms_cpu(c, tmp / "in"), "trace_view.json", lambda p: cut(p, 0.5)), partial("trace_view.json")),
    "ms: non-UTF-8 cpu_op_detail CSV": (
        lambda tmp, c: _damage(ms_cpu(c, tmp / "in"), "cpu_op_detail_info_0.csv", inject_bytes), partial("cpu_op_detail_info_0.csv")),
    "cluster: truncated cluster_communication.json": (
        lambda tmp, c: _damage(msprof_cluster(c, tmp / "in"), "cluster_communication.json", lambda p: cut(p, 0.5)),
        partial("cluster_communication.json")),
    "cluster: renamed columns in cluster_step_trace_time.csv": (
        lambda tmp, c: _damage(msprof_cluster(c, tmp / "in"), "cluster_step_trace_time.csv",
                               lambda p: rename_column(p, "Index", "Idx")),
        partial("cluster_step_trace_time.csv")),
    # --- Kineto traces (real HTA traces, ranks 0 and 1)
    "kineto: gzip cut mid-stream (rank 1)": (_hta(lambda r: cut_gzip(sorted(r.glob("*.json.gz"))[1], 0.5)), partial("sampled_rank-1.json.gz")),
    "kineto: JSON cut mid-way (rank 1)": (_kineto_json_cut, partial("sampled_rank-1.json")),
    "kineto: non-UTF-8 bytes (rank 1)": (_kineto_non_utf8, partial("sampled_rank-1.json")),
    "kineto: empty trace file beside good ones": (_kineto_empty_extra, partial("worker2.pt.trace.json")),
    "kineto: two runs of rank 1 in two folders": (_ab_pair, partial("test.json.gz", "repeats step(s) 1009-1010")),
    "kineto: a rank's trace copied beside it": (_rank_copied, partial("repeats step(s)")),
    "kineto: plain JSON under a .gz name": (_not_gzip, ok()),
    "kineto: NaN literals in dur": (_nan_trace, ok()),
    "kineto: negative durations (rank 1)": (_trace(lambda d: -abs(d) - 1), ok()),
    "kineto: huge durations (rank 1)": (_trace(lambda d: 1e300), ok()),
    "kineto: zero durations (rank 1)": (_trace(lambda d: 0), ok()),
    "kineto: symlink loops beside traces": (_loop_kineto, ok()),
    "kineto: single trace cut mid-stream": (_single_trace_cut, error("sampled_rank-0.json.gz")),
    "kineto: traceEvents key renamed": (_renamed_trace_key, error("sampled_rank-0.json.gz")),
    "kineto: empty traceEvents": (_empty_trace_events, error("w.pt.trace.json")),
    "kineto: two capture windows, one cut": (
        lambda tmp, c: _damage_tb(tmp, c), partial("worker0.1623143566756.pt.trace.json.gz")),
}


#: Cases that need a non-root user (root reads files whatever their mode).
NEEDS_NON_ROOT = {"mi: unreadable file (chmod 000)"}
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
