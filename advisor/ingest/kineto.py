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
(``Kernel``, ``Runtime``, ``Operator``, ``Memcpy``) are accepted. The keys around ``traceEvents`` are
decoded on their own and the array is streamed in blocks by ``ingest.jsonstream`` into structs holding only
these fields, so memory stays at a few blocks whatever the file's size; a trace cut off mid-write keeps
every event before the cut. A ``.gz`` trace is decompressed as it is read, within the limits of
``ingest.limits``.

``ingest/gpu.py`` turns these tables into a RankData; the GPU-only analyses are in ``facts/gpu.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import msgspec
import pandas as pd

from advisor.ingest import jsonstream
from advisor.ingest.jsonstream import Cut, EventDecoders, Trailer, array_blocks
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


_NO_ARGS = _Args()


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


class _Keys(msgspec.Struct):
    """The keys of the trace object around traceEvents (before it in Kineto's output, or after it)."""

    deviceProperties: Union[list[_Device], None] = None
    distributedInfo: Union[_Distributed, None] = None
    displayTimeUnit: Union[str, None] = None
    record_shapes: Union[int, None] = None
    profile_memory: Union[int, None] = None
    with_stack: Union[int, None] = None


_KEYS = msgspec.json.Decoder(_Keys, strict=False)
_DECODERS = EventDecoders.of(_Event)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_MAX_HEADER_BYTES = 64 << 20  # the keys before traceEvents (device properties, distributed info) are small


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
    truncation: str | None = None  # why only the start of the file was read (a cut-off file), else None
    warnings: list[str] = field(default_factory=list)


def read_kineto(path: Path) -> KinetoTrace:
    """Stream one trace into tables; FileProblem when it is not a Kineto trace object."""
    rows: dict[str, list] = {"gpu": [], "runtime": [], "cpu": [], "memory": []}
    cut, trailer, bad, seen = Cut(), Trailer(), 0, 0
    with open_binary(path) as handle:
        head = handle.read(jsonstream.BLOCK_BYTES)
        start = head.lstrip()
        if not start:
            raise FileProblem("is empty")
        if not start.startswith(b"{"):
            raise FileProblem("is not a PyTorch profiler trace (the file does not hold a JSON object)")
        found = _EVENTS_KEY.search(head)
        while found is None and len(head) < _MAX_HEADER_BYTES and (more := handle.read(jsonstream.BLOCK_BYTES)):
            head += more
            found = _EVENTS_KEY.search(head)
        if found is None:
            raise FileProblem("has no traceEvents; it is not a PyTorch profiler trace")
        before = _keys(head[:found.start()].rstrip().rstrip(b",") + b"}")
        if before is None:
            raise FileProblem("is not a PyTorch profiler trace (the keys before traceEvents are not valid JSON)")
        try:
            for events, dropped in array_blocks(handle, head[found.end():], found.end(), _DECODERS, cut, trailer):
                _collect(events, rows)
                bad += dropped
                seen += len(events) + dropped
        except RecursionError as exc:
            raise FileProblem("nests arrays or objects too deeply to be a trace") from exc
    if not seen:
        raise FileProblem("has no traceEvents; it is not a PyTorch profiler trace")
    after = _keys(b"{" + trailer.text.lstrip().lstrip(b",")) if trailer.text.strip() else _Keys()
    warnings = [f"{bad} event(s) with fields of unexpected types were ignored"] if bad else []
    if after is None:
        warnings.append("the keys after traceEvents are not valid JSON and were ignored")
        after = _Keys()
    return _trace(path, before, after, rows, cut.reason, warnings)


def _keys(document: bytes) -> _Keys | None:
    try:
        return _KEYS.decode(document)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _collect(events: list[_Event], rows: dict[str, list]) -> None:
    """Keep the rows of one block of events, in the trace's own time unit."""
    for event in events:
        category = (event.cat or "").lower()
        args = event.args or _NO_ARGS
        if event.ph == "i" and event.name == "[memory]" and event.ts is not None:
            if args.device_type != 0:  # 0 is host memory, not the device allocator
                rows["memory"].append((event.ts, _mb(args.allocated), _mb(args.reserved)))
            continue
        if event.ph != "X" or event.ts is None or event.dur is None or event.dur < 0:
            continue
        name = event.name or ""
        if category in GPU_CATEGORIES:
            rows["gpu"].append((name, _kind(name, category), args.stream, args.device, args.correlation, event.ts, event.dur))
        elif category in RUNTIME_CATEGORIES:
            rows["runtime"].append((name, args.correlation, event.tid, event.ts, event.dur))
        elif category in CPU_CATEGORIES and CPU_EVENTS.search(name):
            rows["cpu"].append((name, event.tid, event.ts, event.dur))


def _trace(path: Path, before: _Keys, after: _Keys, rows: dict[str, list], truncation: str | None,
           warnings: list[str]) -> KinetoTrace:
    """The tables in µs (a trace declaring displayTimeUnit "ns" is scaled), with the header's settings."""
    unit = (before.displayTimeUnit or after.displayTimeUnit or "").lower()
    scale = 1e-3 if unit == "ns" else 1.0
    distributed = before.distributedInfo or after.distributedInfo
    devices = (before.deviceProperties or []) + (after.deviceProperties or [])

    def frame(name: str, columns: list[str], times: tuple[str, ...]) -> pd.DataFrame:
        table = pd.DataFrame(rows[name], columns=columns)
        if scale != 1.0:
            for column in times:
                table[column] = table[column] * scale
        return table

    settings = {}
    for key in ("record_shapes", "profile_memory", "with_stack"):
        value = getattr(before, key) if getattr(before, key) is not None else getattr(after, key)
        if value is not None:
            settings[key] = bool(value)
    return KinetoTrace(
        path=path, rank=distributed.rank if distributed is not None else None,
        gpu=frame("gpu", ["name", "kind", "stream", "device", "correlation", "ts", "dur"], ("ts", "dur")),
        runtime=frame("runtime", ["name", "correlation", "tid", "ts", "dur"], ("ts", "dur")),
        cpu=frame("cpu", ["name", "tid", "ts", "dur"], ("ts", "dur")),
        memory=frame("memory", ["ts", "allocated_mb", "reserved_mb"], ("ts",)),
        device_name=next((d.name for d in devices if d.name), None),
        settings=settings, truncation=truncation, warnings=warnings,
    )


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
