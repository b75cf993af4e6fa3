"""The normalized Profile: what every collector produces and every metric reads.

A Profile is run metadata plus a few long pandas tables. Every table has a
``rank`` column (int), so one Profile holds one rank or a whole cluster.
All times are **microseconds** (float64), sizes MB, bandwidths GB/s.
A table or column the source does not have is absent (None / missing
column), never filled with invented zeros; metrics that need it are then
"not evaluated" with the reason.

``SCHEMA`` is the column contract: table -> column -> kind (``int``,
``float``, ``text``), whether every table of that kind has it, and what it
holds. With ``ADVISOR_STRICT=1`` a Profile is checked against it where the
collectors hand it over (:func:`merge_profiles`, and metric evaluation):
an unknown column, a missing required one or values of the wrong kind
raise ``ProfileSchemaError`` naming the table and column. A metric's
``needs`` are checked against it when the metric is registered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd
from pandas.api import types as pdtypes
from pydantic import BaseModel, Field

Kind = Literal["int", "float", "text", "bool"]


@dataclass(frozen=True)
class Column:
    """One column of a Profile table."""

    kind: Kind
    doc: str
    required: bool = False


def _rank() -> Column:
    return Column("int", "rank id", required=True)


def _step(doc: str = "the profiler's step id (NA when the source has none)") -> Column:
    return Column("int", doc, required=True)


def _transfers(summed: str) -> dict[str, Column]:
    """The columns of transfer sums (``bandwidth`` and ``links``)."""
    return {
        "ops": Column("int", f"{summed} summed", required=True),
        "size_mb": Column("float", "data size", required=True),
        "time_ms": Column("float", "transfer time in milliseconds, as the profilers write it", required=True),
        "bandwidth_gbps": Column("float", "size_mb / time_ms", required=True),
    }


SCHEMA: dict[str, dict[str, Column]] = {
    "steps": {  # one row per (rank, step)
        "rank": _rank(),
        "step": _step(
            "the profiler's step id (nullable; NA when the source has only per-rank totals, as in a "
            "cluster summary, or no step markers)"),
        "duration_us": Column("float", "the step's wall time", required=True),
        "start_us": Column("float", "when the step starts"),
        "ddp_forwards": Column("float", "DistributedDataParallel forwards in the step (PyTorch traces)"),
        "ddp_synced_forwards": Column("float", "of those, the ones followed by a gradient all-reduce before the next "
                                      "(not under model.no_sync())"),
        "optimizer_steps": Column("float", "optimizer step() calls in the step (PyTorch traces)"),
        "loader_calls": Column("float", "PyTorch DataLoader __next__ calls in the step (collectors/kineto/loader_passes.py)"),
        "loader_us": Column("float", "their summed time"),
        "loader_end_us": Column("float", "in a step with two calls or more: the longest but the last, the call that "
                                "ended a pass over the loader"),
        "loader_between_us": Column("float", "in such a step: host time outside operators from that call's end to the "
                                    "next call's start (the new iterator's start, the loop's work between passes)"),
        "thin_matmul_us": Column("float", "CPU-only PyTorch traces: time in matrix products with rows or inner size of at "
                                 "most 8 (collectors/kineto/work.py THIN), bound by memory by their shape"),
        "bf16_matmul_us": Column("float", "CPU-only PyTorch traces: time in matrix products and convolutions whose "
                                 "operands are bfloat16 (recorded Input type)"),
        "fp16_matmul_us": Column("float", "CPU-only PyTorch traces: time in matrix products and convolutions whose "
                                 "operands are float16 (recorded Input type)"),
        "computing_us": Column("float", "device compute: union of compute kernels"),
        "communication_us": Column("float", "all communication time"),
        "overlapped_us": Column("float", "compute and communication at once"),
        "exposed_comm_us": Column("float", "communication not overlapped by compute"),
        "free_us": Column("float", "device neither computing nor communicating"),
        "stage_us": Column("float", "pipeline stage time: step time minus Receive time"),
        "bubble_us": Column("float", "pipeline bubble"),
        "receive_us": Column("float", "time only point-to-point Receive operators run"),
        "iteration_interval_us": Column(
            "float", "end of the previous step's last device op to the start of this step's first: "
            "host/data wait (MindSpore step trace)"),
        "fp_bp_us": Column("float", "forward + backward"),
        "tail_us": Column("float", "end of backward to end of step: gradient all-reduce and optimizer"),
        "data_wait_us": Column("float", "host time inside the dataloader (e.g. enumerate(DataLoader) in Kineto)"),
        "data_ops_us": Column("float", "the part of data_wait_us in which the fetching thread runs operators "
                              "(Kineto: a batch built in the training process, its transforms and collate)"),
        "device_busy_us": Column("float", "union of all device kernels, copies and sets"),
        "host_wait_us": Column("float", "device idle in gaps longer than 50 us: waiting for the host to issue work"),
        "kernel_gap_us": Column("float", "device idle in gaps of 50 us or less between device operations: "
                                "launch gaps"),
        "sync_wait_us": Column("float", "host time blocked in synchronizing calls"),
        "truncated": Column("bool", "the step's annotation lies mostly outside what the profiler recorded "
                            "(e.g. a last step running past the end of the trace): its duration is clipped "
                            "to the recorded span, and steady-state metrics leave it out when another step "
                            "is whole"),
        "warmup_us": Column("float", "one-time start-up inside the step: context creation and other start-up "
                            "calls, torch.compile compiling, slow first calls (autotuning, lazy loading), "
                            "first-use allocator growth (rows of the warmup table, overlaps counted once)"),
        "recompile_us": Column("float", "the part of warmup_us that is torch.compile compiling a frame it had "
                               "compiled before (a recompilation: compile id F/C with C of 1 or more)"),
        "device_ops": Column("int", "device events (kernels, copies, sets) starting in the step"),
        "device_ops_launched": Column("int", "device_ops whose launching runtime call is in the trace"),
        # What the host was doing while the device idled (GPU traces; collectors/kineto/idle.py):
        # disjoint parts of the device idle time duration_us - device_busy_us, summing to it.
        "idle_dependency_us": Column("float", "device idle while work launched earlier had not started, in "
                                     "idle stretches longer than the device's turnaround: waiting on another "
                                     "stream or an event (or on work the trace does not show)"),
        "idle_turnaround_us": Column("float", "device idle in short stretches (<= 20 us) while launched work was "
                                     "queued: the device's own step from one operation to the next"),
        "idle_sync_us": Column("float", "device idle, nothing queued, while a launching host thread was blocked "
                               "in a synchronizing call or op (cudaStreamSynchronize, aten::item, ...), or "
                               "right after one that emptied the queue, up to the time it had blocked"),
        "idle_alloc_us": Column("float", "device idle, nothing queued, while a launching thread was in an "
                                "allocation call (cudaMalloc, cudaFree, cudaHostAlloc, ...)"),
        "idle_init_us": Column("float", "device idle, nothing queued, while a launching thread was in start-up "
                               "calls (context creation, module loading) or torch.compile compilation"),
        "idle_data_us": Column("float", "device idle, nothing queued, while a launching thread was fetching "
                               "the next batch (enumerate(DataLoader))"),
        "idle_host_ops_us": Column("float", "device idle, nothing queued, while a launching thread ran other host "
                                   "ops or runtime calls, or the Python between them (gaps up to 100 us)"),
        "idle_unrecorded_us": Column("float", "device idle, nothing queued, with nothing recorded on the launching "
                                     "threads: the trace cannot say what the host did"),
        "dependency_recorded_us": Column("float", "the part of idle_dependency_us whose wait the trace records "
                                         "(a Stream Wait Event record names the stream and event waited on)"),
        "launch_queue_us": Column("float", "median over the step's kernels of kernel start minus the end of its "
                                  "launch call: how far the host runs ahead of the device"),
        "launch_interval_us": Column("float", "median time between consecutive kernel launches in the step: the "
                                     "host's time per launched kernel (Ascend trace_view.json launch flows)"),
        "kernel_median_us": Column("float", "median duration of the device tasks that start in the step (Ascend "
                                   "trace_view.json)"),
        "copy_h2d_us": Column("float", "host-to-device copy time (union of Memcpy HtoD)"),
        "copy_h2d_exposed_us": Column("float", "host-to-device copy time during which no kernel runs"),
        "copy_h2d_pageable_us": Column("float", "host-to-device copy time from pageable host memory "
                                       "(Memcpy HtoD (Pageable -> Device))"),
        "fp64_matmul_us": Column("float", "CPU-only PyTorch traces: time in matrix products and convolutions whose "
                                 "operands are float64 (recorded Input type double)"),
        "frozen_grads": Column("float", "CPU-only PyTorch traces: gradient accumulations in the step whose shape no "
                               "operator of its optimizer step takes (collectors/kineto/frozen_grads.py)"),
        "frozen_grad_us": Column("float", "time of those accumulations and of the backward products that make "
                                 "their 2-D gradients (collectors/kineto/frozen_grads.py)"),
        "dense_embed_tables": Column("float", "CPU-only PyTorch traces: embedding tables whose gradient the step "
                                     "builds dense (collectors/kineto/dense_embedding.py)"),
        "dense_embed_rows": Column("float", "rows of those tables, summed"),
        "dense_embed_lookups": Column("float", "rows their lookups asked for in the step (indices' elements), summed"),
        "dense_embed_backward_us": Column("float", "time of their dense backward ops (zero-fill and scatter)"),
        "dense_embed_optimizer_us": Column("float", "time of the step's optimizer ranges times the tables' share of "
                                           "the elements of the gradients accumulated in the step"),
        "dense_embed_us": Column("float", "dense_embed_backward_us + dense_embed_optimizer_us"),
        "param_tensors": Column("float", "CPU-only PyTorch traces: gradient accumulations in the step, one per parameter "
                                "tensor that gets a gradient (collectors/kineto/param_copies.py)"),
        "param_copies": Column("float", "clones (aten::clone) in the step shaped like those parameters, at most one per "
                               "accumulation of a shape, none made by autograd or an optimizer"),
        "param_copy_us": Column("float", "their time"),
    },
    "ops": {  # device operators aggregated per (rank, name, type, core, input_dtypes, input_shapes)
        "rank": _rank(),
        "name": Column("text", "operator or kernel name", required=True),
        "type": Column("text", "operator type; for GPU copies their direction: memcpy_h2d, memcpy_d2h, "
                       "memcpy_d2d, memcpy_p2p", required=True),
        "core": Column("text", "accelerator core: AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, HCCL, GPU, CPU, ...",
                       required=True),
        "count": Column("int", "launches", required=True),
        "total_us": Column("float", "total time over the profiled window", required=True),
        "short_count": Column("int", "launches shorter than 10 us"),
        "input_dtypes": Column("text", '";"-joined, normalized upper-case: FLOAT, FLOAT16, BF16, INT32 ...'),
        "input_shapes": Column("text", '";"-joined input shapes'),
        "max_us": Column("float", "longest launch"),
        "min_us": Column("float", "shortest launch"),
        "wait_us": Column("float", "time the operator waited before it ran"),
        "op_state": Column("text", "static or dynamic: whether the operator ran as a static- or a "
                           "dynamic-shape kernel (Ascend kernel_details.csv OP State; absent before CANN 8.0)"),
        "aicore_us": Column("float", "AI Core cube-part time summed over launches (Ascend PipeUtilization; "
                            "the base of the aic_* pipe times)"),
        "aic_mac_us": Column("float", "cube part: time the MAC (matrix) pipe was busy"),
        "aic_mte2_us": Column("float", "cube part: time the MTE2 pipe (global memory -> on-chip) was busy"),
        "aic_fixpipe_us": Column("float", "cube part: time the FIXPIPE (on-chip -> global memory) was busy"),
        "aiv_us": Column("float", "AI Core vector-part time summed over launches (the base of the aiv_* pipe "
                         "times)"),
        "aiv_vec_us": Column("float", "vector part: time the vector pipe was busy"),
        "aiv_mte2_us": Column("float", "vector part: time the MTE2 pipe (global memory -> on-chip) was busy"),
        "aiv_mte3_us": Column("float", "vector part: time the MTE3 pipe (on-chip -> global memory) was busy"),
        "steps": Column("int", "distinct steps the operator, with these input shapes, ran in (Ascend kernels "
                        "with a step id)"),
        "block_dim": Column("int", "cores the operator's kernel was launched on (Ascend kernel_details.csv "
                            "Block Dim, database COMPUTE_TASK_INFO blockNum; the most common value among its "
                            "launches)"),
        "mix_block_dim": Column("int", "a MIX_AIC kernel's vector-core blocks (Ascend Mix Block Dim; the most "
                                "common value among its launches)"),
    },
    "comm": {  # communication operators per rank: one row per operator (Kineto), or summed per
        # (rank, step, kind, group, operator type) on Ascend layouts, ``name`` then being the type
        "rank": _rank(),
        "name": Column("text", "operator name, e.g. hcom_allReduce__123_0", required=True),
        "kind": Column("text", "allreduce, allgather, broadcast, reducescatter, send, receive, sendrecv, alltoall, other (advisor.collectors.vocab)",
                       required=True),
        "elapse_us": Column("float", "elapsed time", required=True),
        "group": Column("text", "communication group"),
        "step": Column("int", "step id"),
        "start_us": Column("float", "start (the first start when summed)"),
        "ops": Column("int", "operators summed into the row"),
        "transit_us": Column("float", "transfer time"),
        "wait_us": Column("float", "time waiting for the peers"),
        "sync_us": Column("float", "synchronization time"),
        "idle_us": Column("float", "idle time"),
        "exposed_us": Column("float", "time within the operator's span when the rank communicates without "
                             "computing; operators in flight at once each count the time they share"),
        "front_end": Column("int", "1 for a collective's dispatcher front end (c10d::allreduce_ on the "
                            "training thread) whose backend op (gloo:all_reduce) is a row too: that row "
                            "stands for the collective; else 0"),
        "exposed_share_us": Column("float", "the operator's part of its step's exposed communication: exposed "
                                   "time several operators share is split evenly among them, so a step's "
                                   "rows add up to its exposed_comm_us"),
        "tensor_count": Column("int", "gradient tensors fused into one all-reduce, from its input list"),
        "size_mb": Column("float", "data size (Kineto: the collective's input message, In msg nelems x "
                          "dtype or its buffers' Input Dims x Input type)"),
    },
    "bandwidth": {  # transfers per rank, step, collective kind and transport, summed over operators
        "rank": _rank(),
        "step": _step(),
        "kind": Column("text", "collective kind", required=True),
        "transport": Column("text", "SDMA, RDMA, HCCS, PCIE, SIO, NVLINK, ...", required=True),
        **_transfers("operator records"),
        "large_packet_ratio": Column("float", "mean weighted by size"),
        "size_class": Column("int", "floor(log2(MB)) of each operator's transfer before summing (Ascend "
                             "communication.json / CommAnalyzerBandwidth)"),
    },
    "links": {  # point-to-point links (the totals of communication_matrix.json), summed per
        # rank, step, src, dst, transport and size_class
        "rank": _rank(),
        "step": _step(),
        "src": Column("int", "sending global rank", required=True),
        "dst": Column("int", "receiving global rank", required=True),
        "transport": Column("text", "link type", required=True),
        "size_class": Column("int", "floor(log2(MB)) of each record before summing", required=True),
        **_transfers("records"),
    },
    "data_queue": {  # samples of a data queue's fill level over time
        "rank": _rank(),
        "queue": Column("text", "device (the device data queue) or host (the host queue)", required=True),
        "index": Column("int", "sample number or step", required=True),
        "size": Column("float", "elements in the queue", required=True),
        "capacity": Column("float", "queue capacity"),
        "time_us": Column("float", "sample time"),
    },
    "warmup": {  # one-time start-up work found in the profiled window, one row per call or op
        "rank": _rank(),
        "step": _step("the step the work starts in (NA before the first step or without step markers)"),
        "name": Column("text", "the call or operator, e.g. cudaDeviceGetStreamPriorityRange, dynamo, "
                       "aten::cudnn_convolution", required=True),
        "kind": Column("text", "init (context creation, start-up calls), compile (torch.compile), first_call "
                       "(an op's first call far slower than its repeats: autotuning, lazy loading), alloc "
                       "(allocator growth later steps do not repeat)", required=True),
        "start_us": Column("float", "when it starts", required=True),
        "duration_us": Column("float", "how long it takes", required=True),
        "compile_id": Column("text", "for torch.compile rows, the compilation's id F/C as torch.compile records "
                             "it (frame F compiled for the C+1-th time; C of 1 or more is a recompilation), "
                             "where the trace names it"),
    },
    "data_ops": {  # dataset-pipeline operators
        "rank": _rank(),
        "name": Column("text", "operator name, e.g. MapOp", required=True),
        "op_id": Column("int", "pipeline id (absent in dataset.csv)"),
        "workers": Column("int", "num_parallel_workers"),
        "output_queue_usage": Column("float", "mean fill ratio 0..1 of the op's output connector queue"),
        "output_queue_size": Column("float", "mean elements in the output queue"),
        "output_queue_capacity": Column("float", "output queue capacity"),
        "parent_id": Column("int", "the op that consumes this op's output; NA for the root"),
        "avg_time_us": Column("float", "mean time per call"),
        "stage": Column("text", "pipeline stage"),
        "count": Column("int", "calls"),
        "cpu_pct": Column("float", "mean CPU use of the op's threads, percent of one core summed over them "
                          "(MindSpore minddata_cpu_utilization)"),
    },
    "idle_causes": {  # per (rank, step, cause): the host ops, calls or waits device-idle time went to
        "rank": _rank(),
        "step": _step(),
        "cause": Column("text", "the steps column idle_<cause>_us this time is part of: dependency, sync, alloc, "
                        "init, data, host_ops", required=True),
        "name": Column("text", "what the time went to: a host op or call (a call inside a top-level op as "
                       "'op > call'), with what a sync waits on when the trace records it; for dependency "
                       "the waiting stream and the stream it waited on", required=True),
        "idle_us": Column("float", "device idle time of that cause during it, in the step (the largest few "
                          "per step and cause)", required=True),
        "event_record": Column("int", "correlation id of the cudaEventRecord whose event the call or stream "
                               "waits on, where the trace's cuda_sync records give it"),
        "frame": Column("text", "the innermost Python frame of the profiled program (not the framework's or "
                        "the standard library's) the op or call ran in, when the trace has Python stacks "
                        "(with_stack=True), e.g. 'train.py(57): train_step'"),
    },
    "host_calls": {  # host events of known classes per (rank, step, class, name): collectors/kineto/host_calls.py,
        # collectors/ascend/host_calls.py
        "rank": _rank(),
        "step": _step("the step the events start in (NA outside every step or without step markers)"),
        "cls": Column("text", "gc (Python garbage collection), gc_call (the program's own gc.collect(), with "
                      "stacks), sync (host waits for the device: aten::item, "
                      "cudaStreamSynchronize, aclrtSynchronizeStream ...), alloc (device memory allocation or "
                      "release by the driver), empty_cache (the caching allocator's empty_cache() frame), "
                      "optimizer (an optimizer's step, Optimizer.step#AdamW.step), optimizer_fused / "
                      "optimizer_foreach / optimizer_op (fused, multi-tensor or per-parameter elementwise ops "
                      "inside one), syncbn "
                      "(SyncBatchNorm's cross-rank statistics), backward (autograd's backward nodes, "
                      "autograd::engine::evaluate_function: ...), nan_check (NaN checks inside a backward node: "
                      "aten::isnan, aten::_is_any_true and the aten::item that reads their answer, as anomaly "
                      "mode runs them), recompute (forward ops run again inside a backward node, as activation "
                      "checkpointing does: aten::linear, aten::layer_norm ..., collectors/kineto/calls.py "
                      "RECOMPUTE_OPS), data_loader (a PyTorch DataLoader's __next__: "
                      "enumerate(DataLoader)#..., its iterator's name saying whether worker processes build the "
                      "batches), silent_gap (stretches of at least 1 ms in a step "
                      "with no host op or runtime call on any thread: collectors/kineto/host_gaps.py), op_chain "
                      "(chains of forward ops a fused kernel replaces, named by pattern, one count per chain: "
                      "collectors/kineto/op_chains.py), op_chain_floor (the same chains' longest pass each)",
                      required=True),
        "name": Column("text", "the event's name as the profiler wrote it", required=True),
        "count": Column("int", "events", required=True),
        "total_us": Column("float", "their summed duration", required=True),
        "max_us": Column("float", "the longest one"),
        "device_us": Column("float", "recompute, rnn_cell and op_chain rows of a trace with device events: the "
                            "summed duration of the device work they launched (their host time is only the "
                            "launching); NaN elsewhere"),
        "frame": Column("text", "the innermost Python frame of the profiled program around them (sync and "
                        "empty_cache events, when the trace has Python stacks)"),
    },
    "memory": {  # memory events of one device, in time order (a PyTorch memory timeline; collectors/memory)
        "rank": _rank(),
        "time_us": Column("float", "when the event happened (NaN for memory that existed before recording "
                          "began)"),
        "action": Column("text", "preexisting (allocated before recording began), create (allocated), "
                         "increment_version (a tensor changed category: two rows at one time, minus the bytes "
                         "under the old category and plus them under the new), destroy (freed)", required=True),
        "bytes": Column("int", "signed bytes: positive when allocated, negative when freed; the running sum is "
                        "the live memory", required=True),
        "category": Column("text", "what the memory holds (PyTorch's memory profiler): parameter, "
                           "optimizer_state, input, temporary, activation, gradient, autograd_detail, unknown",
                           required=True),
    },
    "flops": {  # floating-point work per rank: over the profiled window (MindSpore flops_summary) or per step
        "rank": _rank(),
        "step": Column("int", "the step the work was done in (Kineto: matrix operators' FLOPs from their "
                       "recorded shapes); absent where the source gives the whole window"),
        "mflops": Column("float", "floating-point operations executed, in millions (cube + vector units; "
                         "Kineto: the matrix multiplies and 2-D convolutions only)", required=True),
        "gflops_per_s": Column("float", "achieved rate while the operators ran, GFLOP/s"),
        "utilization": Column("float", "achieved rate / the device's peak, 0..1"),
    },
    "device_freq": {  # AI Core clock samples (Ascend trace_view.json "AI Core Freq" counter, AICORE_FREQ table)
        "rank": _rank(),
        "time_us": Column("float", "when the clock changed to this frequency (it holds until the next sample)",
                          required=True),
        "mhz": Column("float", "AI Core frequency", required=True),
    },
    "kernel_sequences": {  # per rank, contiguous kernel sequences that repeat within steps, the few with the
        # most gap time per length (collectors/kernel_sequences.py); times over the profiled steps
        "rank": _rank(),
        "kernels": Column("text", 'the kernels in device order, joined by " -> " (Ascend: operator types)',
                          required=True),
        "length": Column("int", "kernels in the sequence", required=True),
        "count": Column("int", "occurrences over the profiled steps (overlapping ones included)", required=True),
        "device_us": Column("float", "time the kernels of its occurrences ran (each kernel once)", required=True),
        "gap_us": Column("float", "device-idle gaps between the kernels of its occurrences (each gap once): "
                         "the launch and host cost that fusing the sequence into one kernel removes",
                         required=True),
        "steps": Column("int", "steps the kernels were taken from", required=True),
        "mte_us": Column("float", "memory-transfer time of its kernels (each once): per kernel the MTE2 load plus "
                         "the MTE3 / FIXPIPE store (Ascend PipeUtilization; msprof-analyze's fusible-operator "
                         "MTE time)"),
        "pipe_us": Column("float", "busy time of its kernels' cores (each kernel once; the larger of its cube "
                          "and vector parts): the base of mte_us"),
        "by_gap": Column("bool", "kept among the sequences with the most gap time of its length (else only "
                         "among those with the most memory-transfer time)"),
    },
    "hccl_tasks": {  # HCCL transfer tasks (Memcpy, Reduce_Inline) per (rank, step, transport, link, size):
        # Ascend trace_view.json communication lanes at Level1+ (collectors/ascend/hccl_tasks.py)
        "rank": _rank(),
        "step": _step("the step the tasks start in (NA outside every step or without step markers)"),
        "transport": Column("text", "transport type as the profiler names it: SDMA (intra-node copy engine), "
                            "RDMA (inter-node), LOCAL", required=True),
        "link": Column("text", "link type: HCCS, PCIE, ROCE, SIO, ON_CHIP (a copy within the chip) ...",
                       required=True),
        "size_bytes": Column("int", "bytes each of these tasks moves", required=True),
        "count": Column("int", "tasks", required=True),
        "total_us": Column("float", "their summed device duration", required=True),
    },
    "annotations": {  # time per record_function range (user annotation) per (rank, step, name):
        # Kineto traces (collectors/kineto/annotations.py)
        "rank": _rank(),
        "step": _step("the step the ranges start in (NA outside every step or without step markers)"),
        "name": Column("text", "the range's name (record_function label, 'DistributedDataParallel.forward', "
                       "'Optimizer.step#AdamW.step' ...)", required=True),
        "source": Column("text", "device: device time (the gpu_user_annotation span, or else the summed "
                         "kernels, copies and memsets launched inside the range); host: the range's own host "
                         "time (a CPU-only trace)", required=True),
        "count": Column("int", "ranges", required=True),
        "total_us": Column("float", "their summed time; nested ranges each count their own", required=True),
    },
    "memory_summary": {  # device memory per rank, GiB = 2**30 bytes: MindSpore memory_usage_summary_{rank}.json,
        # Kineto [memory] events (collectors/kineto/collector.py), torch_npu memory_record.csv
        # (collectors/ascend/memory_record.py)
        "rank": _rank(),
        "capacity_gib": Column("float", "device memory the framework may use (MindSpore: the memory proto's "
                               "total_mem; Kineto: deviceProperties totalGlobalMem); NaN where the profile does "
                               "not record it (torch_npu)"),
        "peak_gib": Column("float", "MindSpore: highest static + live tensor memory over the nodes of every "
                           "graph; Kineto and torch_npu: the caching allocator's highest reserved memory (Total "
                           "Reserved)", required=True),
        "peak_allocated_gib": Column("float", "the caching allocator's highest allocated memory (Total "
                                     "Allocated; Kineto and torch_npu)"),
        "static_gib": Column("float", "memory the graphs hold for their whole run (weights, constants)"),
        "allocations": Column("int", "tensors allocated over the graphs"),
        "graphs": Column("int", "graphs with a memory curve (memory_usage_details_{rank}.json)"),
        "peak_graph": Column("int", "id of the graph whose curve holds the highest memory (details file)"),
    },
    "comm_contention": {  # communication operators' transfers beside compute and alone, summed per (rank,
        # step, transport, size_class, beside_compute): Ascend communication.json spans and bandwidths
        # paired with the compute kernels (collectors/ascend/contention.py)
        "rank": _rank(),
        "step": _step(),
        "transport": Column("text", "SDMA, RDMA, HCCS, PCIE, SIO, ... (communication.json's transport)",
                            required=True),
        "size_class": Column("int", "floor(log2(MB)) of each operator's transfer before summing", required=True),
        "beside_compute": Column("bool", "True: compute kernels ran during at least half of each operator's "
                                 "span; False: during at most 5% of it (operators in between are left out)",
                                 required=True),
        "ops": Column("int", "operators summed", required=True),
        "size_mb": Column("float", "data size", required=True),
        "time_ms": Column("float", "transfer time in milliseconds, as the profilers write it", required=True),
        "exposed_us": Column("float", "time within the operators' spans when no compute kernel ran",
                             required=True),
    },
    "cp_edges": {  # the dependency graph of each step of a Kineto trace, for its critical path
        # (collectors/kineto/critical_path.py; node ids unique within a rank)
        "rank": _rank(),
        "step": _step("the step whose window the graph is of (NA without step markers)"),
        "src": Column("int", "node the edge leaves (an instant of a host thread or device stream)", required=True),
        "dst": Column("int", "node the edge enters", required=True),
        "kind": Column("text", "what the edge's time is: host (a host thread inside its events), launch (launch "
                       "call start to device start on an idle stream, or between queued device events), device "
                       "(a device event), sync (returning from a wait for the device; a blocking call that "
                       "waited on nothing), dependency (a device event waiting for another stream's: from "
                       "that one's end to this one's start)", required=True),
        "weight_us": Column("float", "the time the edge takes (0 where the thread waits: the device work "
                            "waited for is the path there)", required=True),
    },
    "cupti_counters": {  # CUPTI range-profiler counters per operator and kernel of a Kineto trace
        # (collectors/kineto/cupti_counters.py); over the whole trace
        "rank": _rank(),
        "op": Column("text", "the outermost cpu_op around the kernel's launch ('' when none)", required=True),
        "bottom_op": Column("text", "the innermost cpu_op around the kernel's launch ('' when none)"),
        "kernel": Column("text", "the kernel (the cuda_profiler_range event's name)", required=True),
        "counter": Column("text", "the CUPTI metric as the profiler names it, e.g. "
                          "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", required=True),
        "value": Column("float", "the counter summed over those kernels", required=True),
        "kernels": Column("int", "kernels summed", required=True),
    },
    "free_gaps": {  # CPU-only Kineto traces: each free stretch of a step, keyed by its place in the step
        # (collectors/kineto/free_gaps.py)
        "rank": _rank(),
        "step": _step(),
        "key": Column("text", "where the stretch falls in the step: the operator, collective or DataLoader fetch "
                      "ending where it starts, the one starting where it ends ('(step start)' / '(step end)' at "
                      "the step's bounds; '(busy)' after '(step start)' in the row of no gap a step that starts busy opens "
                      "with) and its occurrence among the step's stretches between those two, "
                      "e.g. 'aten::linear > aten::relu #3'", required=True),
        "gap_us": Column("float", "its length within the step: the training thread runs no top-level operator "
                         "and no thread a collective or a DataLoader fetch", required=True),
        "busy_after_us": Column("float", "the busy stretch after it, up to the next free stretch or the step's "
                                "end (a step's rows add up to its duration)", required=True),
        "frame": Column("text", "the Python function of the profiled program that runs in the stretch on the "
                        "training thread (collectors/kineto/host_calls.py frames_holding; traces recorded "
                        "with_stack=True); absent otherwise"),
        "range": Column("text", "the record_function range the stretch runs in on the training "
                        "thread (collectors/kineto/host_calls.py ranges_holding: 'Optimizer.zero_grad#SGD.zero_grad', "
                        "the program's own ranges), step and DataLoader markers left out; absent without such ranges"),
        "after_collective": Column("bool", "it begins where a collective the training thread waits for ends "
                                   "on another thread: the training thread resuming after that wait",
                                   required=True),
    },
    "op_trend": {  # Kineto traces: per step, the time of the few top-level host operators whose per-step time
        # rises most over the profiled steps, and of those that stand out in some steps, at most 3 names per rank
        # each (collectors/kineto/op_trend.py)
        "rank": _rank(),
        "step": _step(),
        "name": Column("text", "the operator (a top-level host op: cpu_op, not nested in another op of its thread)",
                       required=True),
        "time_us": Column("float", "its summed duration in the step (0 when it did not run in it)", required=True),
        "calls": Column("int", "its calls starting in the step"),
        "kept_for": Column("text", "why the operator is in the table: 'rise' (its per-step time rises) or "
                                   "'stand out' (its time stands out in some steps)"),
    },
}
TABLES = tuple(SCHEMA)


class ProfileSchemaError(ValueError):
    """A Profile table that does not match ``SCHEMA`` (strict mode)."""


def strict_mode() -> bool:
    """``ADVISOR_STRICT=1`` (the test suite's mode): Profile tables are
    checked against ``SCHEMA`` and unexpected metric errors propagate."""
    return os.environ.get("ADVISOR_STRICT", "") not in ("", "0")


def check_table(name: str, df: pd.DataFrame) -> None:
    """Raise ProfileSchemaError unless table ``name`` has only known columns,
    every required one, and values of each column's kind."""
    columns = SCHEMA.get(name)
    if columns is None:
        raise ProfileSchemaError(f"unknown profile table {name!r} (known: {', '.join(SCHEMA)})")
    for col in df.columns:
        spec = columns.get(col)
        if spec is None:
            raise ProfileSchemaError(f"profile table {name}: unknown column {col!r}")
        if not _is_kind(df[col], spec.kind):
            raise ProfileSchemaError(f"profile table {name}, column {col}: {df[col].dtype} values, "
                                     f"expected {spec.kind}")
    missing = [c for c, spec in columns.items() if spec.required and c not in df.columns]
    if missing:
        raise ProfileSchemaError(f"profile table {name}: missing required column(s) {', '.join(missing)}")


def _is_kind(values: pd.Series, kind: Kind) -> bool:
    dtype = values.dtype
    if kind == "bool":  # bool, or object (a table concatenated with one lacking the column): bools or nulls
        return pdtypes.is_bool_dtype(dtype) or (
            dtype == object and pdtypes.infer_dtype(values, skipna=True) in ("boolean", "empty"))
    if pdtypes.is_bool_dtype(dtype):
        return False
    if kind == "text":
        return pdtypes.is_string_dtype(dtype) or (
            dtype == object and pdtypes.infer_dtype(values, skipna=True) in ("string", "empty"))
    if kind == "float":
        return pdtypes.is_numeric_dtype(dtype)
    if pdtypes.is_integer_dtype(dtype):
        return True
    # ids read as floats (a column of NaN where a source has none): whole numbers only
    return pdtypes.is_float_dtype(dtype) and bool((values.dropna() % 1 == 0).all())


#: The first NVIDIA compute capability with bfloat16 tensor cores (Ampere).
BF16_TENSOR_CORES_SINCE = 8.0
#: Compute capability since which NVIDIA GPUs have tensor cores (Volta).
TENSOR_CORES_SINCE = 7.0

Framework = Literal["mindspore", "pytorch", "torch_npu", "unknown"]
Device = Literal["ascend", "gpu", "cpu", "unknown"]


class Skip(BaseModel):
    """Something that could not be read or evaluated, and why."""

    what: str = Field(description="file, table, metric or rule that was skipped")
    reason: str


#: RunMeta's rank -> value fields: merged across a run's parts, the first
#: part that names a rank wins.
PER_RANK_META = ("hosts", "stages", "env", "comm_source", "ai_core_num", "aiv_num")


class CpuInfo(BaseModel):
    """The host CPU of a run, as ``advisor run`` records it in a Kineto
    trace (``cpuProperties``): what its bfloat16 / float16 matrix products
    compute with."""

    arch: str | None = Field(None, description="platform.machine(): x86_64, aarch64, ...")
    capability: str | None = Field(None, description="the vector ISA PyTorch dispatched to: AVX2, AVX512, ...")
    bf16: bool | None = Field(None, description="the CPU has bfloat16 arithmetic instructions (x86: "
                              "AVX512-BF16 or AMX-BF16; Arm: bf16); None: unknown")
    fp16: bool | None = Field(None, description="the CPU has float16 arithmetic instructions (x86: "
                              "AVX512-FP16 or AMX-FP16; Arm: fphp); None: unknown")
    usable_cpus: int | None = Field(None, description="the CPUs the training process could run on (its affinity "
                                    "mask), which it shares with its data-loader workers; None: unknown")


class RunMeta(BaseModel):
    """What the run was and where its data came from."""

    framework: Framework = "unknown"
    device: Device = "unknown"
    device_model: str | None = Field(
        None, description="the accelerator's model as the profile names it (Kineto's deviceProperties: "
        "'Tesla V100-SXM2-16GB'); None where it does not")
    compute_capability: str | None = Field(
        None, description="an NVIDIA GPU's compute capability, 'major.minor' ('7.0' for a V100); "
        "None where the profile does not record it")
    cpu: CpuInfo | None = Field(None, description="the host CPU where the profile records it (advisor run's "
                                "Kineto traces); None otherwise")
    source_format: str = Field(
        "unknown",
        description="ascend_pt, ascend_ms, mindinsight, msprof_cluster, kineto, ...",
    )
    source_version: str | None = None
    source_path: str = ""
    ranks: list[int] = Field(default_factory=list)
    ranks_inferred: bool = Field(
        False,
        description="ranks were assigned to files that declare none (e.g. several captures "
        "of one worker); cross-rank comparisons are then not made",
    )
    world_size: int | None = None
    hosts: dict[int, str] = Field(
        default_factory=dict,
        description="rank -> host, where the output names it (a worker folder or trace file "
        "named {host}_{pid}_...; absent otherwise)",
    )
    stages: dict[int, int] = Field(
        default_factory=dict,
        description="rank -> pipeline stage, where the profiler metadata lists the rank's "
        "pipeline-parallel group (absent otherwise)",
    )
    parallel: dict[str, int] = Field(
        default_factory=dict, description="e.g. {'dp': 8, 'tp': 1, 'pp': 1}"
    )
    env: dict[int, dict[str, str]] = Field(
        default_factory=dict,
        description="rank -> the environment variables the profiler recorded for it (torch_npu's "
        "profiler_metadata.json ENV_VARIABLES); absent where the profile records none",
    )
    ai_core_num: dict[int, int] = Field(
        default_factory=dict,
        description="rank -> the device's AI Core count (Ascend PROF_*/device_*/info.json.* DeviceInfo "
        "ai_core_num; absent where the profile has no info.json)",
    )
    aiv_num: dict[int, int] = Field(
        default_factory=dict,
        description="rank -> the device's AI Vector core count (info.json DeviceInfo aiv_num; absent where "
        "not recorded)",
    )
    time_unit: str = "us"
    notes: list[str] = Field(default_factory=list)
    comm_source: dict[int, str] = Field(
        default_factory=dict,
        description="rank -> a stable key of what its comm table was read from, naming the profiler level "
        "where the layout has levels (Ascend: 'level1_communication_json', 'level0_kernels', "
        "'level0_trace_view', ...; their words: metric comm.source); absent where the collector does not say",
    )

    @property
    def tensor_cores(self) -> bool | None:
        """Whether the GPU has tensor cores (compute capability 7.0 and
        newer: Volta); None where the capability is not recorded."""
        return self._capability_at_least(TENSOR_CORES_SINCE)

    @property
    def bf16_tensor_cores(self) -> bool | None:
        """Whether the GPU runs bfloat16 matrix work on tensor cores: NVIDIA
        added them with compute capability 8.0 (Ampere); a V100 (7.0) or T4
        (7.5) has float16 tensor cores only. None where the capability is
        not recorded."""
        return self._capability_at_least(BF16_TENSOR_CORES_SINCE)

    def _capability_at_least(self, since: float) -> bool | None:
        """The recorded compute capability is ``since`` or newer; None where
        it is not recorded (or not a number)."""
        if self.compute_capability is None:
            return None
        try:
            return float(self.compute_capability) >= since
        except ValueError:
            return None


class _Raised:
    """An exception :meth:`Profile.memo` keeps in place of a value."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception):
        self.exc = exc


@dataclass
class Profile:
    """Run metadata plus the normalized tables ``SCHEMA`` describes (pandas
    DataFrames; a collector may hold Arrow tables while it works)."""

    meta: RunMeta
    steps: pd.DataFrame | None = None
    ops: pd.DataFrame | None = None
    comm: pd.DataFrame | None = None
    bandwidth: pd.DataFrame | None = None
    links: pd.DataFrame | None = None
    data_queue: pd.DataFrame | None = None
    data_ops: pd.DataFrame | None = None
    warmup: pd.DataFrame | None = None
    idle_causes: pd.DataFrame | None = None
    memory: pd.DataFrame | None = None
    flops: pd.DataFrame | None = None
    device_freq: pd.DataFrame | None = None
    memory_summary: pd.DataFrame | None = None
    host_calls: pd.DataFrame | None = None
    kernel_sequences: pd.DataFrame | None = None
    hccl_tasks: pd.DataFrame | None = None
    annotations: pd.DataFrame | None = None
    comm_contention: pd.DataFrame | None = None
    cp_edges: pd.DataFrame | None = None
    cupti_counters: pd.DataFrame | None = None
    free_gaps: pd.DataFrame | None = None
    op_trend: pd.DataFrame | None = None
    skipped: list[Skip] = field(default_factory=list)
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def check(self) -> None:
        """ProfileSchemaError unless every table matches ``SCHEMA`` (see
        :func:`check_table`; Arrow tables a collector still holds are skipped)."""
        for name in TABLES:
            df = getattr(self, name)
            if isinstance(df, pd.DataFrame):
                check_table(name, df)

    def memo(self, key: str, compute):
        """``compute()`` once per profile (tables never change after collection);
        metrics share derived views such as steady-state steps through it. An
        exception it raises (a view the profile cannot give: NotEvaluated) is
        kept and raised again, not computed again."""
        if key not in self._memo:
            try:
                self._memo[key] = compute()
            except Exception as exc:
                self._memo[key] = _Raised(exc)
        value = self._memo[key]
        if isinstance(value, _Raised):
            raise value.exc.with_traceback(None)
        return value

    def table(self, name: str) -> pd.DataFrame | None:
        """The named table, or None when absent or empty."""
        df = getattr(self, name)
        if df is None or len(df) == 0:
            return None
        return df

    def has(self, name: str, *columns: str) -> bool:
        """True when table ``name`` exists, is non-empty, and has ``columns``
        with at least one non-null value each."""
        df = self.table(name)
        if df is None:
            return False
        return all(c in df.columns and df[c].notna().any() for c in columns)

    def skip(self, what: str, reason: str) -> None:
        self.skipped.append(Skip(what=what, reason=reason))


def compile_id_parts(compile_id: str) -> tuple[int, int]:
    """(frame F, count C) of a torch.compile id ``"F/C"`` (``warmup.compile_id``:
    frame F compiled for the C+1-th time)."""
    frame, count = str(compile_id).split("/")
    return int(frame), int(count)


def is_recompilation(compile_id) -> bool:
    """Whether a ``warmup.compile_id`` is a recompilation: its frame was
    compiled before (C of 1 or more); False for a row without an id."""
    return isinstance(compile_id, str) and compile_id_parts(compile_id)[1] >= 1


def merge_profiles(parts: list[Profile], meta: RunMeta) -> Profile:
    """Concatenate per-rank Profiles (each already carrying its ``rank``
    column) into one cluster Profile with the given metadata."""
    out = Profile(meta=meta)
    for name in TABLES:
        frames = [getattr(p, name) for p in parts if p.table(name) is not None]
        if frames:
            setattr(out, name, pd.concat(frames, ignore_index=True))
    for p in parts:
        out.skipped.extend(p.skipped)
        for note in p.meta.notes:
            if note not in out.meta.notes:
                out.meta.notes.append(note)
    ranks = set(meta.ranks)
    for p in parts:
        ranks.update(p.meta.ranks)
        out.meta.ranks_inferred |= p.meta.ranks_inferred
        for field_name in PER_RANK_META:
            mine = getattr(out.meta, field_name)
            for rank, value in getattr(p.meta, field_name).items():
                mine.setdefault(rank, value)
    out.meta.ranks = sorted(ranks)
    if strict_mode():
        out.check()
    return out
