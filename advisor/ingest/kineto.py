"""Read a PyTorch profiler (Kineto) trace, ``*.pt.trace.json`` or ``.json.gz``, into columnar tables.

The file is a JSON object whose ``traceEvents`` array holds Chrome-trace events. Kept, each as a small
table: GPU activity (kernels, memcpy/memset; classified compute / communication / memory by name as
Holistic Trace Analysis does), runtime calls (``cuda*``/``hip*`` launches and synchronisations, with the
``correlation`` id that links a launch to its kernel), CPU ops (``ProfilerStep#N``, data loading, the
optimizer step, ``aten::`` ops) and the device's ``[memory]`` instants (allocated / reserved after each
event; host-memory events, ``Device Type`` 0, are left out). The header's ``record_shapes``,
``profile_memory`` and ``with_stack`` are kept as the capture settings.
The rank comes from ``distributedInfo.rank``. Timestamps are µs; a trace that declares
``displayTimeUnit: "ns"`` is taken to hold ns and is scaled to µs. Old exporters' capitalised categories
(``Kernel``, ``Runtime``, ``Operator``, ``Memcpy``) are accepted. Events are decoded by msgspec into structs
holding only these fields; a ``.gz`` trace is decompressed within the limits of ``ingest.limits``.

``ingest/gpu.py`` turns these tables into a RankData; the GPU-only analyses are in ``facts/gpu.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import msgspec
import pandas as pd

from advisor.ingest.limits import open_binary
from advisor.ingest.model import FileProblem

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
RUNTIME_CATEGORIES = {"cuda_runtime", "runtime", "cuda_driver", "driver"}
CPU_CATEGORIES = {"cpu_op", "operator", "user_annotation"}
COMMUNICATION_KERNEL = re.compile(r"^(nccl|rccl)|ncclKernel|ncclDevKernel", re.IGNORECASE)
MEMORY_KERNEL = re.compile(r"^(hip)?(Memcpy|Memset)|^dma", re.IGNORECASE)
CPU_EVENTS = re.compile(r"^ProfilerStep#|dataloader|^Optimizer\.(step|zero_grad)#|^aten::|SyncBatchNorm", re.IGNORECASE)


class _Args(msgspec.Struct):
    stream: Union[int, None] = None
    correlation: Union[int, None] = None
    device: Union[int, None] = None
    device_type: Union[int, None] = msgspec.field(default=None, name="Device Type")  # 0 CPU, 1 CUDA (ROCm too)
    allocated: Union[float, None] = msgspec.field(default=None, name="Total Allocated")
    reserved: Union[float, None] = msgspec.field(default=None, name="Total Reserved")


class _Event(msgspec.Struct):
    ph: Union[str, None] = None
    name: Union[str, None] = None
    cat: Union[str, None] = None
    ts: Union[float, None] = None
    dur: Union[float, None] = None
    tid: Union[int, str, None] = None
    args: Union[_Args, None] = None


class _Distributed(msgspec.Struct):
    rank: Union[int, None] = None


class _Device(msgspec.Struct):
    name: Union[str, None] = None


class _Trace(msgspec.Struct):
    traceEvents: list[msgspec.Raw] = msgspec.field(default_factory=list)
    deviceProperties: Union[list[_Device], None] = None
    distributedInfo: Union[_Distributed, None] = None
    displayTimeUnit: Union[str, None] = None
    record_shapes: Union[int, None] = None
    profile_memory: Union[int, None] = None
    with_stack: Union[int, None] = None


_DOCUMENT = msgspec.json.Decoder(_Trace, strict=False)
_EVENT = msgspec.json.Decoder(_Event, strict=False)


@dataclass
class KinetoTrace:
    """The tables of one rank's trace (times in µs)."""

    path: Path
    rank: int | None
    gpu: pd.DataFrame  # name, kind (compute|communication|memory), stream, device, correlation, ts, dur
    runtime: pd.DataFrame  # name, correlation, tid, ts, dur
    cpu: pd.DataFrame  # name, tid, ts, dur
    memory: pd.DataFrame  # ts, allocated_mb, reserved_mb
    device_name: str | None = None  # deviceProperties[0].name, e.g. "NVIDIA H100 80GB HBM3"
    settings: dict[str, bool] = field(default_factory=dict)  # record_shapes, profile_memory, with_stack from the header
    warnings: list[str] = field(default_factory=list)


def read_kineto(path: Path) -> KinetoTrace:
    """Decode one trace; FileProblem when it is not a Kineto trace object."""
    with open_binary(path) as handle:
        data = handle.read()
    if not data.strip():
        raise FileProblem("is empty")
    try:
        document = _DOCUMENT.decode(data)
    except RecursionError as exc:
        raise FileProblem("nests arrays or objects too deeply to be a trace") from exc
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FileProblem(f"is not a PyTorch profiler trace ({exc})") from exc
    if not document.traceEvents:
        raise FileProblem("has no traceEvents; it is not a PyTorch profiler trace")
    scale = 1e-3 if (document.displayTimeUnit or "").lower() == "ns" else 1.0
    gpu, runtime, cpu, memory, bad = [], [], [], [], 0
    for raw in document.traceEvents:
        try:
            event = _EVENT.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            bad += 1
            continue
        category = (event.cat or "").lower()
        args = event.args or _Args()
        if event.ph == "i" and event.name == "[memory]" and event.ts is not None:
            if args.device_type == 0:  # host memory: not the device allocator
                continue
            memory.append((event.ts * scale, _mb(args.allocated), _mb(args.reserved)))
            continue
        if event.ph != "X" or event.ts is None or event.dur is None or event.dur < 0:
            continue
        ts, dur, name = event.ts * scale, event.dur * scale, event.name or ""
        if category in GPU_CATEGORIES:
            gpu.append((name, _kind(name, category), args.stream, args.device, args.correlation, ts, dur))
        elif category in RUNTIME_CATEGORIES:
            runtime.append((name, args.correlation, event.tid, ts, dur))
        elif category in CPU_CATEGORIES and CPU_EVENTS.search(name):
            cpu.append((name, event.tid, ts, dur))
    rank = document.distributedInfo.rank if document.distributedInfo is not None else None
    device = next((d.name for d in document.deviceProperties or [] if d.name), None)
    trace = KinetoTrace(
        path=path, rank=rank,
        gpu=pd.DataFrame(gpu, columns=["name", "kind", "stream", "device", "correlation", "ts", "dur"]),
        runtime=pd.DataFrame(runtime, columns=["name", "correlation", "tid", "ts", "dur"]),
        cpu=pd.DataFrame(cpu, columns=["name", "tid", "ts", "dur"]),
        memory=pd.DataFrame(memory, columns=["ts", "allocated_mb", "reserved_mb"]),
        device_name=device,
        settings={key: bool(value) for key in ("record_shapes", "profile_memory", "with_stack")
                  if (value := getattr(document, key)) is not None},
    )
    if bad:
        trace.warnings.append(f"{bad} event(s) with fields of unexpected types were ignored")
    return trace


def _kind(name: str, category: str) -> str:
    if COMMUNICATION_KERNEL.search(name):
        return "communication"
    if category != "kernel" or MEMORY_KERNEL.search(name):
        return "memory"
    return "compute"


def _mb(value: float | None) -> float | None:
    return None if value is None else value / (1024.0 * 1024.0)


_TEMPLATE = re.compile(r"<[^<>]*>")
_CORES = {"compute": "GPU", "communication": "COMMUNICATION", "memory": "MEMORY"}


def kernel_type(name: str) -> str:
    """A kernel's name without return type, template arguments and parameters, to group its launches.

    ``void at::native::reduce_kernel<512, 1>(…)`` → ``at::native::reduce_kernel``.
    """
    text = name.removeprefix("void ")
    while True:
        shorter = _TEMPLATE.sub("", text)
        if shorter == text:
            break
        text = shorter
    return text.split("(", 1)[0].strip() or name


def kernel_table(trace: KinetoTrace, steps: pd.Series) -> pd.DataFrame:
    """The GPU activity as kernel_details.csv's canonical columns (``steps``: the step of each row, or None)."""
    gpu = trace.gpu
    return pd.DataFrame({
        "step": steps, "device_id": gpu["device"].astype("float64"), "name": gpu["name"],
        "type": gpu["name"].map(kernel_type), "accelerator_core": gpu["kind"].map(_CORES),
        "duration_us": gpu["dur"], "start_us": gpu["ts"],
    })
