"""MindInsight cluster files: the cluster analysis (stage / receive / pure
communication per step), ``hccl_raw`` links and waits, FLOPs, the step
trace's per-stream columns and summary rows, and the r1.3 cluster folder
(hccl.json, host_ips_mapping.txt). Fixtures are written to the documented
formats (``cluster_fixture`` cites each writer's source)."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

import advisor
from advisor.collectors import load_profile
from tests.collectors.mindinsight import cluster_fixture as fx


def _findings(report) -> dict:
    return {f.rule: f for f in report.all_findings()}


def _folder(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    return folder


# ------------------------------------------------------------- reading


def test_cluster_analyse_columns_and_layout(tmp_path):
    profile = load_profile(fx.write_cluster(tmp_path / "profiler"))
    steps = profile.steps
    assert sorted(steps["rank"].unique()) == [0, 1, 2, 3]
    assert steps.groupby("rank").size().tolist() == [fx.STEPS] * 4  # the row of means is not a step
    assert profile.meta.parallel.get("pp") == 2 and profile.meta.world_size == 4
    assert profile.meta.stages == {0: 0, 1: 0, 2: 1, 3: 1}
    r2 = steps[steps["rank"] == 2].set_index("step")
    t = fx._timing(2, 3)
    assert r2.loc[3, "receive_us"] == pytest.approx(t["receive"] * 1000, abs=1)
    assert r2.loc[3, "stage_us"] == pytest.approx((fx.STEP_MS - t["receive"]) * 1000, abs=1)
    assert r2.loc[3, "exposed_comm_us"] == pytest.approx((t["receive"] + t["allreduce"]) * 1000, abs=1)
    # computation less the iteration interval: device time outside exposed communication
    assert r2.loc[3, "computing_us"] == pytest.approx(
        (fx.STEP_MS - t["receive"] - t["allreduce"] - t["interval"]) * 1000, abs=1)


def test_step_trace_receive_columns_give_the_pipeline_wait(tmp_path):
    """Without the cluster analysis file the per-stream Receive columns of
    the step trace give the stage's wait and the stage time."""
    profile = load_profile(fx.write_cluster(tmp_path / "profiler", cluster_files=False, hccl=False))
    steps = profile.steps.set_index(["rank", "step"])
    assert steps.loc[(3, 2), "receive_us"] == pytest.approx(fx._timing(3, 2)["receive"] * 1000, abs=1)
    assert steps.loc[(3, 2), "stage_us"] == pytest.approx(
        (fx.STEP_MS - fx._timing(3, 2)["receive"]) * 1000, abs=1)
    kinds = set(profile.comm["kind"])
    assert kinds == {"receive", "allreduce"}
    assert "pp" not in profile.meta.parallel  # nothing names the layout


def test_hccl_raw_links_and_waits(tmp_path):
    profile = load_profile(fx.write_cluster(tmp_path / "profiler"))
    links = profile.links
    assert set(links["transport"]) == {"SDMA"}
    assert links["step"].notna().all() and set(links["step"]) == set(range(1, fx.STEPS + 1))  # '-' row dropped
    slow = links[(links["src"] == 1) & (links["dst"] == 0)]
    assert len(slow) == fx.STEPS
    assert slow["size_mb"].iloc[0] == pytest.approx(200.0)  # 200000 KB
    assert slow["bandwidth_gbps"].iloc[0] == pytest.approx(5.0)  # 200 MB in 40 ms
    fast = links[(links["src"] == 0) & (links["dst"] == 1)]
    assert fast["bandwidth_gbps"].iloc[0] == pytest.approx(20.0)
    comm = profile.comm
    allreduce = comm[(comm["rank"] == 1) & (comm["kind"] == "allreduce")]
    assert allreduce["wait_us"].notna().all() and allreduce["wait_us"].iloc[0] == pytest.approx(500.0)


def test_hccl_raw_alone_gives_operators(tmp_path):
    """A step trace without reduce columns: the operators come from hccl_raw."""
    folder = tmp_path / "profiler"
    folder.mkdir()
    with open(folder / "step_trace_raw_0_detail_time.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step_num", "start_point", "end_point", "total", "fp_point", "bp_point",
                     "iteration_interval", "fp_and_bp", "tail"])
        for step in (1, 2):
            w.writerow([step, step * 1e7, step * 1e7 + 1e7, 1e7, 0, 0, 1e5, 8e6, 1.9e6])
        w.writerow(["-", 1.5e7, 2.5e7, 1e7, 0, 0, 1e5, 8e6, 1.9e6])
    fx.write_hccl_raw(folder, 0)
    text = (folder / "hccl_raw_0.csv").read_text()
    (folder / "hccl_raw_0.csv").write_text(text.replace("\n3,", "\nX,", 1))
    comm = load_profile(folder).comm
    assert set(comm["kind"]) == {"allreduce", "send"}
    assert (comm["elapse_us"] == comm["transit_us"] + comm["wait_us"]).all()


def test_flops_summary_both_eras(tmp_path):
    profile = load_profile(fx.write_cluster(tmp_path / "profiler"))
    flops = profile.flops.set_index("rank")
    assert flops.loc[0, "mflops"] == 3_000_000.0 and flops.loc[3, "mflops"] == 1_000_000.0
    assert flops.loc[0, "utilization"] == pytest.approx(0.4)
    # newer MindSpore (ascend_flops_generator.py): cube + vector
    folder = tmp_path / "new"
    folder.mkdir()
    fx.write_step_trace(folder, 0)
    (folder / "flops_summary_0.json").write_text(json.dumps(
        {"cube_FLOPs": 100.0, "cube_FLOPS": 2.0, "vec_FLOPs": 20.0, "vec_FLOPS": 1.0}))
    row = load_profile(folder).flops.iloc[0]
    assert row["mflops"] == 120.0 and row["gflops_per_s"] == 3.0 and "utilization" not in row.index


def test_flops_per_operator_file(tmp_path):
    folder = _folder(tmp_path)
    fx.write_step_trace(folder, 0)
    (folder / "flops_0.txt").write_text(
        "op_full_name,MFLOPs(10^6 cube),GFLOPS(10^9 cube),MFLOPs(10^6 vector),GFLOPS(10^9 vector)\n"
        "Default/MatMul-op1,30.0,1.0,2.0,0.1\nDefault/Add-op2,0.0,0.0,3.0,0.2\n")
    assert load_profile(folder).flops.iloc[0]["mflops"] == 35.0


@pytest.mark.parametrize("summary", ["-", "0"])
def test_summary_row_is_not_a_step(tmp_path, summary):
    """MindSpore ends the step trace with a row of means numbered '-'
    (older releases: 0); it is never read as a step."""
    folder = _folder(tmp_path)
    fx.write_step_trace(folder, 0, summary=summary)
    steps = load_profile(folder).steps
    assert steps["step"].tolist() == list(range(1, fx.STEPS + 1))
    assert steps["duration_us"].min() == pytest.approx(fx.STEP_MS * 1000)


def test_a_last_row_of_zeros_is_not_a_step(tmp_path):
    folder = _folder(tmp_path)
    path = folder / "step_trace_raw_0_detail_time.csv"
    path.write_text("step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,fp_and_bp,tail\n"
                    "1,0,2000000,2000000,0,0,100000,1800000,100000\n"
                    "2,2000000,4000000,2000000,0,0,100000,1800000,100000\n"
                    "0,0,0,0,0,0,0,0,0\n")
    steps = load_profile(folder).steps
    assert steps["step"].tolist() == [1, 2]
    assert steps["duration_us"].mean() == pytest.approx(20000.0)


# ------------------------------------------------------------- the r1.3 cluster folder


def test_r13_cluster_folder_maps_devices_to_ranks_and_hosts(tmp_path):
    """MindInsight r1.3 cluster guide: run/hccl.json, host_ips_mapping.txt,
    cluster_profiler/{mapping id}/profiler/ with files named by device id."""
    run = tmp_path / "run"
    hosts = {"1": "10.0.0.1", "2": "10.0.0.2"}
    server_list = []
    for mapping, ip in hosts.items():
        devices = [{"device_id": str(d), "device_ip": f"192.{d}.0.{mapping}",
                    "rank_id": str((int(mapping) - 1) * 2 + d)} for d in (0, 1)]
        server_list.append({"server_id": ip, "device": devices, "host_nic_ip": "reserve"})
        folder = run / "cluster_profiler" / mapping / "profiler"
        folder.mkdir(parents=True)
        for d in (0, 1):
            fx.write_step_trace(folder, d)
    (run / "hccl.json").write_text(json.dumps({"version": "1.0", "server_count": "2",
                                               "server_list": server_list, "status": "completed"}))
    (run / "host_ips_mapping.txt").write_text("".join(f"{ip} {m}\n" for m, ip in hosts.items()))
    profile = load_profile(run)
    assert profile.meta.ranks == [0, 1, 2, 3]
    assert profile.meta.hosts == {0: "10.0.0.1", 1: "10.0.0.1", 2: "10.0.0.2", 3: "10.0.0.2"}


# ------------------------------------------------------------- verdicts


@pytest.mark.parametrize("wait_ms", [70.0, 40.0])
def test_heavy_stage_gives_slow_pipeline_stage_and_spares_the_waiting_stage(tmp_path, monkeypatch, wait_ms):
    """Stage 1 waits 70 ms (most of its step: its ranks are victims) or
    40 ms (a third: compared within their stage, not with stage 0)."""
    monkeypatch.setattr(fx, "WAIT_MS", wait_ms)
    report = advisor.analyze(fx.write_cluster(tmp_path / "profiler"), use_config=False)
    found = _findings(report)
    stage = found["slow-pipeline-stage"]
    assert report.metrics["pipeline.slowest_stage"].value == 0
    assert sorted(stage.scope.ranks) == [0, 1]
    assert "stage 0 (ranks 0-1)" in stage.message and "3.0 times the FLOPs" in stage.message
    # 115 ms of stage time against 120 - wait
    assert stage.estimated_gain_ms == pytest.approx(wait_ms - 5.0, abs=0.5)
    # ranks are compared within their stage, where they are balanced: the
    # heavy stage is slow-pipeline-stage's finding, not a slow rank
    assert "slow-rank" not in found


def test_victims_are_not_named_without_stage_layout(tmp_path):
    """Only the step trace (Receive columns, no pp): ranks 2 and 3 spend
    most of the step in Receive and have the longest forward/backward, but
    they wait for stage 0: slow-rank does not name them."""
    folder = fx.write_cluster(tmp_path / "profiler", cluster_files=False, hccl=False)
    report = advisor.analyze(folder, use_config=False)
    steps = load_profile(folder).steps
    fp_bp = steps.groupby("rank")["fp_bp_us"].median()
    assert fp_bp[2] > fp_bp[0]  # the waiting ranks look slowest by forward/backward
    assert fp_bp[2] - fp_bp[0] > 0.1 * fx.STEP_MS * 1000  # by far more than slow-rank's 5% of the step
    rank = _findings(report).get("slow-rank")
    assert rank is None or not set(rank.scope.ranks) & {2, 3}
    spread = report.metrics["cluster.component_spread"].value
    assert spread and all(v["max_rank"] not in (2, 3) for v in spread.values())
    # no layout names the stages: the pipeline finding speaks of ranks
    stage = _findings(report)["slow-pipeline-stage"]
    assert report.metrics["pipeline.grouped_by"].value == "rank"
    assert stage.message.startswith("Rank ") and "no pipeline layout" in stage.message
    assert set(stage.scope.ranks) <= {0, 1}


@pytest.mark.parametrize("transport", ["SDMA", "RDMA"])
def test_slow_link_in_hccl_raw(tmp_path, transport):
    report = advisor.analyze(fx.write_cluster(tmp_path / "profiler", transport=transport), use_config=False)
    link = _findings(report)["slow-link"]
    assert report.metrics["cluster.slowest_link"].value == "1-0"
    assert "1-0" in link.message
    assert report.metrics["cluster.slowest_link_ratio"].value == pytest.approx(0.25, abs=0.01)


def test_balanced_links_give_no_slow_link(tmp_path):
    report = advisor.analyze(fx.write_cluster(tmp_path / "profiler", slow_link="none"), use_config=False)
    assert "slow-link" not in _findings(report)


def test_balanced_pipeline_gives_no_slow_stage(tmp_path, monkeypatch):
    monkeypatch.setattr(fx, "_timing", lambda rank, step: {"receive": 5.0, "allreduce": 10.0, "interval": 2.0,
                                                           "tail": 8.0})
    report = advisor.analyze(fx.write_cluster(tmp_path / "profiler"), use_config=False)
    found = _findings(report)
    assert "slow-pipeline-stage" not in found
    assert report.metrics["pipeline.slowest_stage_excess_ms"].value == pytest.approx(0.0, abs=0.1)


def test_steps_table_from_cluster_file_alone(tmp_path):
    """A rank folder with the cluster analysis file but no step trace (an
    anchor from the dataset files): steps = computation + communication alone."""
    folder = _folder(tmp_path)
    fx.write_cluster_analyse(folder, 2)
    (folder / "minddata_pipeline_raw_2.csv").write_text(
        "op_id,op_type,num_workers,output_queue_size,output_queue_average_size,output_queue_length,"
        "output_queue_usage_rate,sample_interval,parent_id,children_id\n0,Batch,4,,,,,10,,\n")
    steps = load_profile(folder).steps
    assert len(steps) == fx.STEPS  # the row of means (over steps 2..5) dropped
    assert steps["duration_us"].tolist() == pytest.approx([fx.STEP_MS * 1000] * fx.STEPS, abs=1)


def test_a_slow_rank_inside_a_stage_is_named(tmp_path, monkeypatch):
    """Rank 1 computes 18 ms more per step than rank 0 of its stage, which
    waits for it at the all-reduce: slow-rank names rank 1 (compared within
    stage 0), never the ranks of the waiting stage."""
    timing = fx._timing

    def slow_one(rank, step):
        t = dict(timing(rank, step))
        if rank in (0, 1):
            t["allreduce"] = 20.0 if rank == 0 else 2.0
        return t

    monkeypatch.setattr(fx, "_timing", slow_one)
    report = advisor.analyze(fx.write_cluster(tmp_path / "profiler"), use_config=False)
    rank = _findings(report)["slow-rank"]
    assert rank.scope.ranks == [1]
    assert report.metrics["cluster.slow_component"].value == "compute"
    assert report.metrics["cluster.slow_rank_excess_ms"].value == pytest.approx(18.0, abs=0.5)
    # both ranks of stage 0 do the same work: the message says so
    assert report.metrics["cluster.slow_rank_flops_ratio"].value == pytest.approx(1.0)
    assert "slower at the same work" in rank.message


# ------------------------------------------------------------- MindData


def _data_bound_rank(folder, pipeline_csv: str) -> None:
    """One rank: the dataset pipeline file given, a step trace whose steps
    wait 40 of 100 ms for data (iteration interval), and the MindData CPU
    sampling (``cpu_util`` cites its writer) with each reader's workers
    at 95% of a core."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "minddata_pipeline_raw_0.csv").write_text(pipeline_csv)
    rows = ["step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,fp_and_bp,tail"]
    for step in range(1, 7):
        start = step * 1e7
        rows.append(f"{step},{start:.0f},{start + 1e7:.0f},10000000,{start + 4e6:.0f},{start + 9e6:.0f},"
                    "4000000,5000000,1000000")
    rows.append("-,0,0,10000000,0,0,4000000,5000000,1000000")
    (folder / "step_trace_raw_0_detail_time.csv").write_text("\n".join(rows) + "\n")
    ops = [{"op_id": i, "op_type": t, "metrics": {"user_utilization": [u, u], "sys_utilization": [5, 5]}}
           for i, t, u in ((2, "TFReader", 375), (3, "TFReader", 375), (1, "Shuffle", 20), (4, "Shuffle", 20))]
    (folder / "minddata_cpu_utilization_0.json").write_text(json.dumps({
        "sampling_interval": 10, "cpu_processor_num": 32, "time_stamp": [1, 2],
        "device_info": {"user_utilization": [50, 50], "sys_utilization": [5, 5], "io_utilization": [0, 0],
                        "idle_utilization": [45, 45], "runable_processes": [3, 3]},
        "process_info": {"user_utilization": [40, 40], "sys_utilization": [5, 5]},
        "op_info": ops + [{"op_id": -1, "metrics": {"user_utilization": [1, 1], "sys_utilization": [0, 0]}}]}))


def test_minddata_cpu_utilization_per_op(tmp_path, corpus):
    _data_bound_rank(tmp_path / "p", (corpus / "mindinsight-minddata" / "minddata_pipeline_raw_3.csv").read_text())
    ops = load_profile(tmp_path / "p").data_ops.set_index("op_id")
    assert ops.loc[2, "cpu_pct"] == pytest.approx(380.0)  # user 375 + sys 5
    assert pd.isna(ops.loc[0, "cpu_pct"])  # the root was not sampled


def test_every_queue_empty_names_the_readers(tmp_path, corpus):
    """The corpus pipeline whose queues are all 16% full, on a rank that
    waits for data: slow-dataset-op names the two readers, as sources, and
    says their workers are CPU-bound (380% over 4 workers)."""
    _data_bound_rank(tmp_path / "p", (corpus / "mindinsight-minddata" / "minddata_pipeline_raw_3.csv").read_text())
    report = advisor.analyze(tmp_path / "p", use_config=False)
    finding = _findings(report)["slow-dataset-op"]
    assert report.metrics["data.bottleneck_op"].value == "TFReader_2, TFReader_3"
    assert report.metrics["data.bottleneck_is_source"].value is True
    assert "reading the data from storage" in finding.message
    assert report.metrics["data.bottleneck_cpu_per_worker"].value == pytest.approx(95.0)
    assert "CPU-bound" in finding.message


def test_a_full_queue_after_the_readers_clears_them(tmp_path, corpus):
    """The corpus pipeline _0: the readers' queue is 31% full but the one
    after Shuffle_1 is 94% full: Shuffle_4 is named, not the readers."""
    _data_bound_rank(tmp_path / "p", (corpus / "mindinsight-minddata" / "minddata_pipeline_raw_0.csv").read_text())
    report = advisor.analyze(tmp_path / "p", use_config=False)
    finding = _findings(report)["slow-dataset-op"]
    assert report.metrics["data.bottleneck_op"].value == "Shuffle_4"
    assert report.metrics["data.bottleneck_is_source"].value is False
    assert finding.scope.ops == ["Shuffle_4"]
    # Shuffle_1's output queue (60 of 64) feeds it; its own holds 10 of 64
    assert report.metrics["data.bottleneck_input_usage"].value == pytest.approx(60 / 64)
    assert report.metrics["data.bottleneck_output_usage"].value == pytest.approx(10 / 64)
    assert "the queue feeding it is 93.8% full on average" in finding.message
    assert "its own output queue only 15.6%" in finding.message


def test_every_queue_full_gives_no_slow_dataset_op(tmp_path, corpus):
    _data_bound_rank(tmp_path / "p", (corpus / "mindinsight-minddata" / "minddata_pipeline_raw_2.csv").read_text())
    report = advisor.analyze(tmp_path / "p", use_config=False)
    assert "slow-dataset-op" not in _findings(report)
    assert report.metrics["data.bottleneck_usage_drop"].value < 0.1
