"""Is there a device in this trace, and was its work recorded?

A trace with kernel, memcpy or memset events is a GPU trace with a device
record. Without them it is one of two things, told from the trace itself:

* a GPU job whose device work was not recorded: ``deviceProperties`` lists
  GPUs, or CUDA runtime / driver calls (``cuda_runtime``, ``cuda_driver``,
  2021 ``Runtime``) or CUDA synchronization records (``cuda_sync``) are
  there, or the device work is recorded in another form -- CUPTI
  profiler ranges (``cuda_profiler_range``: per-kernel counters taken with
  ``profiler_metrics``, which replace the timed kernel events) or device-side
  annotations (``gpu_user_annotation``) without the kernels in them. Its
  ``meta.device`` is ``gpu``; its steps keep the host-side facts only (no
  device columns, no operators, no collectives: host calls are not the
  device's work) and a note says which tables are missing and how to record
  them;
* a CPU job (no GPU at all, as a CPU-only PyTorch run writes an empty
  ``deviceProperties``): its host operators are its compute, and the
  CPU-only breakdown describes it.
"""

from __future__ import annotations

from advisor.collectors.kineto import decode as dec

#: Event categories that are device work recorded other than as timed
#: kernels, copies and sets.
DEVICE_FORM_CATS = {
    "cuda_profiler_range": "CUPTI profiler ranges (cuda_profiler_range: per-kernel counters "
                           "from profiler_metrics, recorded instead of timed kernels)",
    "gpu_user_annotation": "device-side annotations (gpu_user_annotation) without the kernels in them",
}
#: Event categories that only a CUDA process records.
CUDA_HOST_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "cuda_sync"})
HOW_TO_RECORD = ("profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (and without "
                 "experimental profiler_metrics) so that kernel, memcpy and memset events are recorded")


def gpu_evidence(trace: dec.Trace) -> list[str]:
    """What shows that a trace without device events comes from a GPU job
    (empty for a CPU job)."""
    found = []
    if trace.devices:
        found.append(f"deviceProperties lists {trace.devices} GPU{'s' if trace.devices > 1 else ''}")
    cuda = sorted(trace.categories & CUDA_HOST_CATS)
    if cuda:
        found.append(f"CUDA host events are recorded ({', '.join(cuda)})")
    found += [f"the device work is recorded as {what}" for cat, what in DEVICE_FORM_CATS.items()
              if cat in trace.categories]
    if found and trace.counters:
        found.append("counter events are recorded")
    return found


def missing_device_note(evidence: list[str]) -> str:
    """The note of a GPU job whose device work was not recorded."""
    return (f"a GPU job ({'; '.join(evidence)}), but the trace has no kernel, memcpy or memset "
            "events: the steps table keeps the host-side step times only, and there are no device "
            "busy/idle, overlap, operator or collective tables, so no device-idle, overlap or kernel "
            f"verdict can be made; {HOW_TO_RECORD}")
