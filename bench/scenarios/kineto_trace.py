"""Kineto traces built event by event, in the format the PyTorch profiler
writes (schema 1, as ``torch.profiler`` with CUDA activities exports it).

:class:`KinetoTrace` places what a training loop does on a timeline: host
ops (``cpu_op``) on the main or the autograd thread, runtime calls
(``cuda_runtime``, with ``cbid`` and ``correlation``) and what they start on
the device -- kernels (``kernel``), copies (``gpu_memcpy``, named
``Memcpy HtoD (Pinned -> Device)`` etc.) --, blocking synchronizations with
their CUPTI records (``cuda_sync``: ``Stream Sync``, ``Event Sync``,
``Context Sync`` with ``wait_on_stream`` / ``wait_on_cuda_event_record_corr_id``),
``cudaStreamWaitEvent`` with its ``Stream Wait Event`` record, the
``ac2g`` flow events linking launches to kernels, ``ProfilerStep#N`` and
``enumerate(DataLoader)`` annotations and the process/thread metadata.

The device side is modelled per stream: an operation starts when it is
launched (plus ``LAUNCH_LATENCY_US``), the previous operation of its stream
has ended (plus ``TURNAROUND_US``) and anything it was made to wait for has
ended; a synchronizing call returns when what it waits for has ended. So a
host that runs ahead builds a queue, exactly as on a real device.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

from bench.scenarios.kineto import _dumps

#: Host pid/tid of the training process and its autograd thread.
PID, MAIN, BACKWARD = 3727853, 3727853, 3727901
#: A kernel launched on an idle device starts this long after its launch call ends (us).
LAUNCH_LATENCY_US = 3.0
#: With work queued, the next operation of a stream starts this long after the previous one ends (us).
TURNAROUND_US = 1.0
#: A blocking call returns this long after what it waits for has ended (us).
WAKE_US = 4.0
DEVICE = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85031157760, "computeMajor": 8,
          "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
          "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
          "sharedMemPerMultiprocessor": 167936, "numSms": 108, "sharedMemPerBlockOptin": 166912}
GEMM = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, "
               "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::Half>, "
               "at::detail::Array<char*, 3>)")
DATALOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


@dataclass
class KinetoTrace:
    """A trace under construction; times in us from ``t0``. Host-side
    methods take the host time at which the call starts and return the
    time it ends."""

    t0: float = 1_712_867_402_305_721.0
    events: list = field(default_factory=list)
    stream_end: dict = field(default_factory=dict)  # stream -> end of its last device op
    records: dict = field(default_factory=dict)  # event record correlation -> (stream, time it completes)
    corr: int = 1000
    ext: int = 500

    # ------------------------------------------------------------ host side

    def step(self, n: int, ts: float, dur: float) -> None:
        self._x("user_annotation", f"ProfilerStep#{n}", PID, MAIN, ts, dur, {})

    def dataloader(self, ts: float, dur: float) -> float:
        self._x("user_annotation", DATALOADER, PID, MAIN, ts, dur, {})
        return ts + dur

    def frame(self, name: str, ts: float, dur: float, tid: int = MAIN) -> None:
        """A Python frame (``with_stack=True``): ``python_function``."""
        self.ext += 1
        self._x("python_function", name, PID, tid, ts, dur,
                {"Python parent id": None, "Python id": self.ext, "Ev Idx": self.ext})

    def op(self, name: str, ts: float, dur: float, tid: int = MAIN) -> float:
        """A host op (``cpu_op``) that launches nothing."""
        self._x("cpu_op", name, PID, tid, ts, dur, {"External id": self._ext(), "Ev Idx": self.ext})
        return ts + dur

    def kernel(self, op: str, ts: float, kernel_dur: float, stream: int = 7, name: str = GEMM,
               tid: int = MAIN, after: float = 0.0, launch_us: float = 6.0) -> float:
        """A host op ``op`` launching one kernel (launch call ``launch_us``
        long inside a ``launch_us + 4`` us op); ``after``: the kernel also
        waits for this device time (an event it waits on)."""
        corr = self._corr()
        self._x("cpu_op", op, PID, tid, ts, launch_us + 4.0, {"External id": self._ext(), "Ev Idx": self.ext})
        self._runtime("cudaLaunchKernel", 211, ts + 2.0, launch_us, corr, tid)
        start = self._device_start(stream, ts + 2.0 + launch_us, after)
        self._x("kernel", name, 0, stream, start, kernel_dur,
                {"External id": corr, "queued": 0, "device": 0, "context": 1, "stream": stream,
                 "correlation": corr, "registers per thread": 128, "shared memory": 49152,
                 "blocks per SM": 1.185185, "warps per SM": 9.481482, "grid": [128, 1, 1],
                 "block": [256, 1, 1], "est. achieved occupancy %": 13})
        self._flow(corr, ts + 2.0, tid, start, stream)
        self.stream_end[stream] = start + kernel_dur
        return ts + launch_us + 4.0

    def copy_h2d(self, ts: float, copy_dur: float, pinned: bool, stream: int = 7,
                 nbytes: int = 1 << 26, tid: int = MAIN) -> float:
        """``tensor.to("cuda", non_blocking=pinned)`` as PyTorch records it:
        ``aten::to > aten::_to_copy > aten::copy_ > cudaMemcpyAsync``. A
        pinned non_blocking copy returns at once; a pageable one is staged
        by the driver and the call returns when the copy is done."""
        corr = self._corr()
        start = self._device_start(stream, ts + 12.0, 0.0)
        end = start + copy_dur
        call_end = ts + 12.0 if pinned else end + WAKE_US
        host_end = call_end + 3.0
        for depth, name in enumerate(("aten::to", "aten::_to_copy", "aten::copy_")):
            self._x("cpu_op", name, PID, tid, ts + depth, host_end - ts - 2 * depth,
                    {"External id": self._ext(), "Ev Idx": self.ext})
        self._runtime("cudaMemcpyAsync", 41, ts + 4.0, call_end - ts - 4.0, corr, tid)
        src = "Pinned" if pinned else "Pageable"
        self._x("gpu_memcpy", f"Memcpy HtoD ({src} -> Device)", 0, stream, start, copy_dur,
                {"External id": corr, "device": 0, "context": 1, "stream": stream, "correlation": corr,
                 "bytes": nbytes, "memory bandwidth (GB/s)": nbytes / copy_dur / 1e3})
        self._flow(corr, ts + 4.0, tid, start, stream)
        self.stream_end[stream] = end
        return host_end

    def item(self, ts: float, stream: int = 7, tid: int = MAIN) -> float:
        """``loss.item()``: ``aten::item > aten::_local_scalar_dense >
        cudaMemcpyAsync`` (a 4-byte DtoH copy) then ``cudaStreamSynchronize``,
        which returns once the stream has drained."""
        corr = self._corr()
        start = self._device_start(stream, ts + 10.0, 0.0)
        self._x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 0, stream, start, 2.0,
                {"External id": corr, "device": 0, "context": 1, "stream": stream, "correlation": corr,
                 "bytes": 4, "memory bandwidth (GB/s)": 0.002})
        self._runtime("cudaMemcpyAsync", 41, ts + 4.0, 6.0, corr, tid)
        self._flow(corr, ts + 4.0, tid, start, stream)
        self.stream_end[stream] = start + 2.0
        sync_end = self.synchronize(ts + 11.0, stream=stream, tid=tid)
        end = sync_end + 3.0
        self._x("cpu_op", "aten::item", PID, tid, ts, end - ts, {"External id": self._ext(), "Ev Idx": self.ext})
        self._x("cpu_op", "aten::_local_scalar_dense", PID, tid, ts + 1.0, end - ts - 2.0,
                {"External id": self._ext(), "Ev Idx": self.ext})
        return end

    def synchronize(self, ts: float, stream: int | None = None, tid: int = MAIN) -> float:
        """``cudaStreamSynchronize`` on ``stream`` (``torch.cuda.synchronize()``,
        ``cudaDeviceSynchronize``, when None) with its cuda_sync record."""
        done = self.stream_end.get(stream, 0.0) if stream is not None else max(self.stream_end.values(), default=0.0)
        end = max(ts + 2.0, done + WAKE_US)
        corr = self._corr()
        if stream is None:
            self._runtime("cudaDeviceSynchronize", 165, ts, end - ts, corr, tid)
            self._x("cuda_sync", "Context Sync", 0, -1, ts + 1.0, end - ts - 2.0,
                    {"External id": corr, "cuda_sync_kind": "Context Sync", "stream": -1, "correlation": corr,
                     "device": 0, "context": 1})
        else:
            self._runtime("cudaStreamSynchronize", 131, ts, end - ts, corr, tid)
            self._x("cuda_sync", "Stream Sync", 0, stream, ts + 1.0, end - ts - 2.0,
                    {"External id": corr, "cuda_sync_kind": "Stream Sync", "stream": stream, "correlation": corr,
                     "device": 0, "context": 1})
        return end

    def record_event(self, ts: float, stream: int, tid: int = MAIN) -> int:
        """``cudaEventRecord`` on ``stream``; returns its correlation id."""
        corr = self._corr()
        self._runtime("cudaEventRecord", 135, ts, 3.0, corr, tid)
        self.records[corr] = (stream, self.stream_end.get(stream, 0.0))
        return corr

    def event_synchronize(self, ts: float, record: int, tid: int = MAIN) -> float:
        """``cudaEventSynchronize`` on the event of ``record``."""
        stream, done = self.records[record]
        end = max(ts + 2.0, done + WAKE_US)
        corr = self._corr()
        self._runtime("cudaEventSynchronize", 137, ts, end - ts, corr, tid)
        self._x("cuda_sync", "Event Sync", 0, -1, ts + 1.0, end - ts - 2.0,
                {"External id": corr, "cuda_sync_kind": "Event Sync", "wait_on_stream": stream,
                 "wait_on_cuda_event_record_corr_id": record, "stream": -1, "correlation": corr,
                 "device": 0, "context": 1})
        return end

    def query_event(self, ts: float, record: int, tid: int = MAIN) -> float:
        """``cudaEventQuery`` (``event.query()``): returns at once; CUPTI
        still writes an ``Event Sync`` record for it."""
        stream, _ = self.records[record]
        corr = self._corr()
        self._runtime("cudaEventQuery", 138, ts, 3.0, corr, tid)
        self._x("cuda_sync", "Event Sync", 0, -1, ts + 1.0, 2.0,
                {"External id": corr, "cuda_sync_kind": "Event Sync", "wait_on_stream": stream,
                 "wait_on_cuda_event_record_corr_id": record, "stream": -1, "correlation": corr,
                 "device": 0, "context": 1})
        return ts + 3.0

    def stream_wait(self, ts: float, stream: int, record: int, done: float | None = None,
                    tid: int = MAIN) -> float:
        """``cudaStreamWaitEvent``: ``stream`` waits on the event of
        ``record``, complete at ``done`` (default: when its stream's work
        recorded so far ends); returns that device time, for ``after``."""
        on, recorded = self.records[record]
        corr = self._corr()
        self._runtime("cudaStreamWaitEvent", 147, ts, 3.0, corr, tid)
        self._x("cuda_sync", "Stream Wait Event", 0, stream, ts + 1.0, 1.0,
                {"External id": corr, "cuda_sync_kind": "Stream Wait Event", "wait_on_stream": on,
                 "wait_on_cuda_event_record_corr_id": record, "stream": stream, "correlation": corr,
                 "device": 0, "context": 1})
        return recorded if done is None else done

    # ------------------------------------------------------------ output

    def document(self) -> dict:
        streams = sorted({e["tid"] for e in self.events if e.get("pid") == 0 and e["tid"] >= 0})
        meta = [{"name": "process_name", "ph": "M", "ts": self.t0, "pid": PID, "tid": 0,
                 "args": {"name": "python3.10"}},
                {"name": "process_name", "ph": "M", "ts": self.t0, "pid": 0, "tid": 0,
                 "args": {"name": "python3.10"}},
                {"name": "thread_name", "ph": "M", "ts": self.t0, "pid": PID, "tid": MAIN,
                 "args": {"name": f"thread {MAIN} (python3.10)"}},
                {"name": "thread_name", "ph": "M", "ts": self.t0, "pid": 0, "tid": -1,
                 "args": {"name": "Device 0"}}]
        meta += [{"name": "thread_name", "ph": "M", "ts": self.t0, "pid": 0, "tid": s,
                  "args": {"name": f"stream {s} "}} for s in streams]
        return {"schemaVersion": 1, "deviceProperties": [DEVICE],
                "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
                "traceEvents": self.events + meta, "traceName": "node0_3727853.1712867402305.pt.trace.json",
                "displayTimeUnit": "ms", "baseTimeNanoseconds": 1712860000000000000}

    def write(self, path: Path) -> Path:
        """The trace as ``path`` (gzipped when it ends in ``.gz``)."""
        data = _dumps(self.document())
        path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
        return path

    # ------------------------------------------------------------ internals

    def _x(self, cat, name, pid, tid, ts, dur, args) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                            "ts": round(self.t0 + ts, 3), "dur": round(dur, 3), "args": args})

    def _runtime(self, name: str, cbid: int, ts: float, dur: float, corr: int, tid: int) -> None:
        self._x("cuda_runtime", name, PID, tid, ts, dur, {"External id": corr, "cbid": cbid, "correlation": corr})

    def _flow(self, corr: int, host_ts: float, tid: int, dev_ts: float, stream: int) -> None:
        self.events.append({"ph": "s", "id": corr, "pid": PID, "tid": tid, "ts": round(self.t0 + host_ts, 3),
                            "cat": "ac2g", "name": "ac2g"})
        self.events.append({"ph": "f", "id": corr, "pid": 0, "tid": stream, "ts": round(self.t0 + dev_ts, 3),
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})

    def _device_start(self, stream: int, launched: float, after: float) -> float:
        return max(launched + LAUNCH_LATENCY_US, self.stream_end.get(stream, -1e18) + TURNAROUND_US, after)

    def _corr(self) -> int:
        self.corr += 1
        return self.corr

    def _ext(self) -> int:
        self.ext += 1
        return self.ext


# ---------------------------------------------------------------- training loops
#
# Each returns a KinetoTrace of ``steps`` steps of one kind of loop; the
# docstring says what the device and the host do and what the trace shows.

CPU_OPS = ("aten::index_select", "aten::cat", "aten::nonzero", "aten::sort", "aten::unique")


def _step_loop(tr: KinetoTrace, steps: int, body) -> KinetoTrace:
    """Steps one after the other: ``body(t) -> end`` inside ``ProfilerStep#n``."""
    t = 0.0
    for n in range(1, steps + 1):
        end = body(t) + 30.0
        tr.step(n, t, end - t)
        t = end
    return tr


def sync_every_step(steps: int = 8, sync: str = "item", with_stack: bool = False) -> KinetoTrace:
    """The host launches 60 kernels of 200 us (40 us of host time each: the
    queue fills), then blocks in ``loss.item()`` (``sync="item"``) or
    ``torch.cuda.synchronize()`` (``"device"``) until the device has drained
    it, then does 6 ms of CPU bookkeeping before the next step launches
    anything: the device idles after every synchronization. ``with_stack``:
    the Python frames too -- ``train.py(22): train_step`` calls
    ``train.py(35): log_loss`` (the sync, under the built-in ``item``) and
    ``train.py(48): update_metrics`` (the bookkeeping, under ``torch/``
    frames)."""
    tr = KinetoTrace()

    def body(t: float) -> float:
        begin = t
        t = tr.dataloader(t + 20.0, 150.0)
        t = tr.copy_h2d(t + 10.0, 300.0, pinned=True)
        for _ in range(60):
            t = tr.kernel("aten::linear", t + 30.0, 200.0)
        at = t + 10.0
        t = tr.item(t + 20.0) if sync == "item" else tr.synchronize(t + 20.0)
        if with_stack:
            tr.frame("train.py(35): log_loss", at, t + 5.0 - at)
            tr.frame("<built-in method item of Tensor object at 0x7f3a2c1d9e40>", at + 8.0, t - at - 6.0)
        at = t + 10.0
        for k in range(20):
            t = tr.op(CPU_OPS[k % len(CPU_OPS)], t + 20.0, 280.0)
        if with_stack:
            tr.frame("train.py(48): update_metrics", at, t + 5.0 - at)
            tr.frame("torch/utils/_contextlib.py(116): decorate_context", at + 2.0, t + 2.0 - at)
            tr.frame("train.py(22): train_step", begin + 10.0, t + 10.0 - begin)
        return t

    return _step_loop(tr, steps, body)


def deep_queue_sync_copy(steps: int = 4) -> KinetoTrace:
    """The host launches 400 kernels of 500 us in 4 ms (the queue grows to
    about 200 ms), each kernel also held back 150 us by work the trace does
    not show, then copies the next batch from pageable memory: the
    synchronous copy waits for the whole queue. Kernels start a median of
    100+ ms after their launch; the device idles between kernels with work
    queued."""
    tr = KinetoTrace()

    def body(t: float) -> float:
        for _ in range(400):
            after = tr.stream_end.get(7, 0.0) + 150.0
            t = tr.kernel("aten::conv2d", t, 500.0, after=after, launch_us=5.0)
        return tr.copy_h2d(t + 20.0, 2000.0, pinned=False)

    return _step_loop(tr, steps, body)


def host_busy(steps: int = 8) -> KinetoTrace:
    """Each step the host spends 5 ms in CPU operators that launch nothing
    (index building, sorting), then launches 40 kernels of 30 us with 50 us
    of host time each: the device finishes each kernel before the next is
    launched and waits on the host most of the step; the queue stays empty."""
    tr = KinetoTrace()

    def body(t: float) -> float:
        for k in range(10):
            t = tr.op(CPU_OPS[k % len(CPU_OPS)], t + 15.0, 500.0)
        for _ in range(40):
            t = tr.kernel("aten::mm", t + 40.0, 30.0)
        return t

    return _step_loop(tr, steps, body)


def copies(steps: int = 8, pinned: bool = True, overlapped: bool = True) -> KinetoTrace:
    """30 kernels of 300 us per step and a 2 ms host-to-device copy of a
    batch: ``overlapped`` -- pinned, non_blocking, on a side stream while the
    kernels run (the next batch prefetched) --, else on the compute stream
    before the kernels (``pinned`` non_blocking, or pageable: the call blocks
    until the copy is done), so the kernels wait for it."""
    tr = KinetoTrace()

    def body(t: float) -> float:
        if overlapped:
            t = tr.kernel("aten::linear", t + 20.0, 300.0)
            t = tr.copy_h2d(t + 10.0, 2000.0, pinned=True, stream=20)
        else:
            t = tr.copy_h2d(t + 20.0, 2000.0, pinned=pinned)
        for _ in range(30):
            t = tr.kernel("aten::linear", t + 10.0, 300.0)
        return tr.synchronize(t + 10.0, stream=7)

    return _step_loop(tr, steps, body)


def stream_wait(steps: int = 8) -> KinetoTrace:
    """Each step: 20 kernels of 250 us on stream 7; then stream 7 waits
    (``cudaStreamWaitEvent``) on an event recorded on stream 20 whose work
    ends 3 ms after stream 7's, on a part of the device the trace does not
    show; 20 more kernels launched right away wait on it; the step ends in a
    ``cudaStreamSynchronize``. The device idles 3 ms a step with 20 kernels
    queued."""
    tr = KinetoTrace()

    def body(t: float) -> float:
        for _ in range(20):
            t = tr.kernel("aten::linear", t + 10.0, 250.0)
        record = tr.record_event(t + 5.0, stream=20)
        done = tr.stream_wait(t + 10.0, stream=7, record=record, done=tr.stream_end[7] + 3000.0)
        t += 15.0
        for i in range(20):
            t = tr.kernel("aten::linear", t + 10.0, 250.0, after=done if i == 0 else 0.0)
        return tr.synchronize(t + 10.0, stream=7)

    return _step_loop(tr, steps, body)


#: CUDA kernels of an eager RMSNorm (``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w``),
#: named as PyTorch's ATen CUDA kernels are in a Kineto trace, with the host op launching each.
RMSNORM_CHAIN = (
    ("aten::pow", "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
                  "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)#1}, "
                  "at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::"
                  "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)#1}, "
                  "at::detail::Array<char*, 2>)"),
    ("aten::mean", "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
                   "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<"
                   "float, float, float, float>, unsigned int, float, 4>)"),
    ("aten::add", ELEMENTWISE),
    ("aten::rsqrt", "void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda(at::"
                    "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::"
                    "{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::rsqrt_kernel_cuda(at::"
                    "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::"
                    "{lambda(float)#1}, at::detail::Array<char*, 2>)"),
    ("aten::mul", "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
                  "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::"
                  "BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
                  "at::detail::Array<char*, 3>)"),
)
#: The same RMSNorm compiled by torch.compile (Inductor): one generated Triton kernel.
RMSNORM_FUSED = "triton_red_fused_add_mean_mul_pow_rsqrt_0"


def rmsnorm_layers(steps: int = 6, layers: int = 16, fused: bool = False) -> KinetoTrace:
    """Each step, ``layers`` times: a 60 us matmul, then an RMSNorm -- in
    eager mode five 4 us elementwise kernels (pow, mean, add, rsqrt, mul),
    each launched by its own host op 25 us after the previous one, so the
    device idles about 20 us between them; ``fused``: one 12 us kernel (the
    compiled chain) instead."""
    tr = KinetoTrace()

    def body(t: float) -> float:
        for _ in range(layers):
            t = tr.kernel("aten::linear", t + 10.0, 60.0)
            if fused:
                t = tr.kernel(RMSNORM_FUSED, t + 15.0, 12.0, name=RMSNORM_FUSED)
                continue
            for op, kernel in RMSNORM_CHAIN:
                t = tr.kernel(op, t + 15.0, 4.0, name=kernel)
        return t

    return _step_loop(tr, steps, body)
