"""Read a PyTorch profiler (Kineto) trace, ``*.pt.trace.json`` or ``.json.gz``, into columnar tables.

The file is a JSON object whose ``traceEvents`` array holds Chrome-trace events. Kept, each as a small
table: GPU activity (kernels, memcpy/memset; classified compute / communication / memory by name as
Holistic Trace Analysis does), runtime calls (``cuda*``/``hip*`` launches and synchronisations, with the
``correlation`` id that links a launch to its kernel), CPU ops (``ProfilerStep#N``, data loading, the
optimizer step, ``aten::`` ops) and the device's ``[memory]`` instants (allocated / reserved after each
event; host-memory events, ``Device Type`` 0, are left out). The header's ``record_shapes``,
``profile_memory`` and ``with_stack`` are kept as the capture settings.
The rank comes from ``distributedInfo.rank``. Timestamps and durations are µs, as the Chrome trace format
defines them, whatever ``displayTimeUnit`` says (it only sets how a viewer displays them). ROCm traces that
write a stream as text (``"stream": "0x0"``) keep their events, the stream read as a number. Old exporters' capitalised categories
(``Kernel``, ``Runtime``, ``Operator``, ``Memcpy``) are accepted. The keys around ``traceEvents`` are
decoded on their own and the array is streamed in blocks by ``ingest.jsonstream`` into structs holding only
these fields, so memory stays at a few blocks whatever the file's size; a trace cut off mid-write keeps
every event before the cut. A ``.gz`` trace is decompressed as it is read, within the limits of
``ingest.limits``.

``ingest/gpu.py`` turns these tables into a RankData; the GPU-only analyses are in ``facts/gpu.py``.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Union

import msgspec
import pandas as pd

from advisor.ingest import jsonstream, pieces
from advisor.ingest.jsonstream import Cut, EventDecoders, Trailer, array_blocks
from advisor.ingest.kept import API_OPS
from advisor.ingest.kinetosteps import ITERATION
from advisor.ingest.limits import open_binary
from advisor.ingest.model import FileProblem
from advisor.ingest.sniff import ascend_trace_alone, describe
from advisor.names import per_name

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
RUNTIME_CATEGORIES = {"cuda_runtime", "runtime", "cuda_driver", "driver"}
CPU_CATEGORIES = {"cpu_op", "operator", "user_annotation"}
PYTHON_CATEGORY = "python_function"
# Communication kernels: NCCL/RCCL and the libraries that move data between GPUs with kernels of their own —
# DeepEP's dispatch/combine, vLLM's and TensorRT-LLM's custom all-reduce, PyTorch's symmetric-memory collectives,
# NVSHMEM, MSCCL++, UCC — named as they appear in real traces.
COMMUNICATION_KERNEL = re.compile(
    r"^(nccl|rccl|msccl)|ncclKernel|ncclDevKernel|deep_?ep::|\b(intranode|internode(_ll)?)::(dispatch|combine|notify)|"
    r"cross_device_reduce|custom_?all_?reduce|allreduce_fusion|(one|two)_shot_all_reduce|multimem_(all_reduce|"
    r"all_gather|reduce_scatter)|symm_?mem|nvshmem|mscclpp|\bucc_|all_?to_?all_?(kernel|dispatch|combine)|"
    r"lamport|\bhcom_",
    re.IGNORECASE)
MEMORY_KERNEL = re.compile(r"^(hip)?(Memcpy|Memset)|^dma", re.IGNORECASE)
# the framework ops ingest.kept keeps, the process group's collective ops (nccl:all_to_all, c10d::allreduce_…), TorchRec's
# pipeline stages, and a serving engine's iteration annotations (vLLM's execute_context_<n>(<tokens>)_generation_…)
CPU_EVENTS = re.compile(rf"^ProfilerStep#|dataloader|^Optimizer\.(step|zero_grad)#|^(?:{API_OPS['gpu'].pattern})|SyncBatchNorm|"
                        r"^(nccl|gloo|rccl|ucc|c10d):|sparse_data_dist|^execute_context_\d", re.IGNORECASE)


GPU_COLUMNS = ["name", "kind", "stream", "device", "correlation", "ts", "dur", "external_id", "bytes"]
RUNTIME_COLUMNS = ["name", "correlation", "tid", "ts", "dur"]
CPU_COLUMNS = ["name", "tid", "ts", "dur", "external_id", "dtype"]
PYTHON_COLUMNS = ["name", "tid", "ts", "dur"]
_TABLES = {"gpu": GPU_COLUMNS, "runtime": RUNTIME_COLUMNS, "cpu": CPU_COLUMNS,
           "memory": ["ts", "allocated_mb", "reserved_mb"], "python": PYTHON_COLUMNS}
PYTHON_KEEP_US = 500.0  # with_stack's Python functions kept: those long enough to be where a host's wait goes
# The framework ops that do matrix math (forward and backward), whose operand types (record_shapes' "Input type") tell
# the precision of the kernels they launch.
MATRIX_OPS = re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|_scaled_mm|_scaled_grouped_mm|_grouped_mm|"
                        r"_int_mm|(cudnn_|miopen_|_)?convolution\w*|conv\w*|_scaled_dot_product_\w+|_flash_attention\w*|"
                        r"_efficient_attention\w*|_cudnn_attention\w*)$")
# Operand types as record_shapes writes them, from the lowest precision: the first one found is the op's precision
# (a _scaled_mm of FP8 matrices with a BF16 bias is FP8).
_DTYPES = (("fp8", re.compile(r"Float8|float8")), ("int8", re.compile(r"^(signed char|c10::qint8|int8)$")),
           ("bf16", re.compile(r"BFloat16|bfloat16")), ("fp16", re.compile(r"^(c10::Half|half|Half)$")),
           ("fp32", re.compile(r"^float$")), ("fp64", re.compile(r"^double$")))
_TYPE_LIST = msgspec.json.Decoder(list[Union[str, None]])


class _Args(msgspec.Struct):
    stream: Union[int, str, None] = None
    correlation: Union[int, None] = None
    device: Union[int, None] = None
    device_type: Union[int, None] = msgspec.field(default=None, name="Device Type")  # 0 CPU, 1 CUDA (ROCm too)
    allocated: Union[float, None] = msgspec.field(default=None, name="Total Allocated")
    reserved: Union[float, None] = msgspec.field(default=None, name="Total Reserved")
    size: Union[float, None] = msgspec.field(default=None, name="Bytes")  # each allocation (+) or free (−)
    copied: Union[int, float, None] = msgspec.field(default=None, name="bytes")  # a memcpy's size
    external_id: Union[int, None] = msgspec.field(default=None, name="External id")  # a kernel's op (cpu_op's own id)
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")  # decoded for matrix ops only
    # Left undecoded: only whether an op has them tells that record_shapes / with_stack was on.
    shapes: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    stack: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Call stack")


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
    computeMajor: Union[int, None] = None
    computeMinor: Union[int, None] = None


class _Keys(msgspec.Struct):
    """The keys of the trace object around traceEvents (before it in Kineto's output, or after it)."""

    deviceProperties: Union[list[_Device], None] = None
    distributedInfo: Union[_Distributed, None] = None
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
    gpu: pd.DataFrame  # GPU_COLUMNS: name, kind (compute|communication|memory), stream, device, correlation, ts, dur,
    # external_id (the cpu_op that launched it, when the trace records it), bytes (a copy's size, else None)
    runtime: pd.DataFrame  # RUNTIME_COLUMNS: name, correlation, tid, ts, dur
    cpu: pd.DataFrame  # CPU_COLUMNS: name, tid, ts, dur, external_id, dtype (a matrix op's operand precision, else None)
    memory: pd.DataFrame  # ts, allocated_mb, reserved_mb
    # PYTHON_COLUMNS: with_stack's Python functions of PYTHON_KEEP_US or more (what the host runs between launches)
    python: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PYTHON_COLUMNS))
    device_name: str | None = None  # deviceProperties[0].name, e.g. "NVIDIA H100 80GB HBM3"
    compute_capability: str | None = None  # deviceProperties[0] computeMajor.computeMinor, e.g. "7.0"
    # record_shapes, profile_memory, with_stack from the header; else record_shapes / with_stack when ops carry
    # Input Dims / Call stack (older traces have no such header keys)
    settings: dict[str, bool] = field(default_factory=dict)
    truncation: str | None = None  # why only the start of the file was read (a cut-off file), else None
    warnings: list[str] = field(default_factory=list)
    # the top-level packages of with_stack's Python frames ("torch", "vllm", "sglang", …): what code ran (empty without
    # with_stack)
    code_roots: frozenset[str] = frozenset()


def read_kineto(path: Path) -> KinetoTrace:
    """Stream one trace into tables; FileProblem when it is not a Kineto trace object. A large trace is read as
    consecutive ranges of its events on several cores (ingest.pieces) with the same tables as one read."""
    with open_binary(path) as handle:
        head = handle.read(jsonstream.BLOCK_BYTES)
        start = head.lstrip()
        if not start:
            raise FileProblem("is empty")
        if start.startswith(b"["):
            return _read_legacy(path, handle, head)
        if not start.startswith(b"{"):
            raise FileProblem(f"is not a PyTorch profiler trace ({describe(head, False)})")
        found = _EVENTS_KEY.search(head)
        while found is None and len(head) < _MAX_HEADER_BYTES and (more := handle.read(jsonstream.BLOCK_BYTES)):
            head += more
            found = _EVENTS_KEY.search(head)
        if found is None:
            raise FileProblem("has no traceEvents; it is not a PyTorch profiler trace")
        before = _keys(head[:found.start()].rstrip().rstrip(b",") + b"}")
        if before is None:
            raise FileProblem("is not a PyTorch profiler trace (the keys before traceEvents are not valid JSON)")
        parts = pieces.read_in_pieces(path, found.end(), _read_piece) if pieces.large(path) else None
        if parts is None:
            tables, cut = _Tables(), Cut()
            try:
                tables.take(array_blocks(handle, head[found.end():], found.end(), _DECODERS, cut, tables.trailer))
            except RecursionError as exc:
                raise FileProblem("nests arrays or objects too deeply to be a trace") from exc
            parts = [tables.finished(cut.reason)]
    tables = _Tables.joined(parts)
    if not tables.seen:
        raise FileProblem("has no traceEvents; it is not a PyTorch profiler trace")
    if tables.bad == tables.seen:
        raise FileProblem(f"holds no usable event: all {tables.seen} of its traceEvents have fields of unexpected types")
    trailer = tables.trailer.text
    after = _keys(b"{" + trailer.lstrip().lstrip(b",")) if trailer.strip() else _Keys()
    warnings = [f"{tables.bad} event(s) with fields of unexpected types were ignored"] if tables.bad else []
    if after is None:
        warnings.append("the keys after traceEvents are not valid JSON and were ignored")
        after = _Keys()
    return _trace(path, before, after, tables, warnings)


def _read_piece(piece: pieces.Piece) -> _Tables | None:
    """The tables of one range of the trace's events (see read_kineto); None when the range does not decode whole."""
    tables, cut = _Tables(), Cut()
    tables.take(piece.blocks(_DECODERS, cut, tables.trailer))
    return None if cut.reason else tables.finished(None)


@dataclass
class _Tables:
    """The rows kept from a trace's events (or one range of them), then their tables."""

    rows: dict = field(default_factory=lambda: {**{name: [] for name in (*_TABLES, "recorded", "untotalled")},
                                                 "roots": set()})
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    recorded: list[str] = field(default_factory=list)  # the settings the ops' fields show (record_shapes, with_stack)
    untotalled: int = 0  # device [memory] events without the allocator's totals
    roots: frozenset[str] = frozenset()  # KinetoTrace.code_roots
    bad: int = 0  # events with fields of unexpected types
    seen: int = 0
    trailer: Trailer = field(default_factory=Trailer)
    truncation: str | None = None

    def take(self, blocks) -> None:
        for events, dropped in blocks:
            _collect(events, self.rows)
            self.bad += dropped
            self.seen += len(events) + dropped

    def finished(self, truncation: str | None) -> _Tables:
        """The rows made tables (dropped)."""
        self.frames = {name: pd.DataFrame(self.rows[name], columns=columns) for name, columns in _TABLES.items()}
        self.recorded, self.untotalled = self.rows["recorded"], len(self.rows["untotalled"])
        self.roots = frozenset(self.rows["roots"]) - {""}
        self.truncation, self.rows = truncation, {}
        return self

    @staticmethod
    def joined(parts: list[_Tables]) -> _Tables:
        """The tables of consecutive ranges as one read of them all gives them."""
        if len(parts) == 1:
            return parts[0]
        return _Tables(
            frames={name: _concatenated([part.frames[name] for part in parts]) for name in _TABLES},
            recorded=list(dict.fromkeys(key for part in parts for key in part.recorded)),
            untotalled=sum(part.untotalled for part in parts), roots=frozenset().union(*(part.roots for part in parts)),
            bad=sum(part.bad for part in parts),
            seen=sum(part.seen for part in parts), trailer=parts[-1].trailer, truncation=parts[-1].truncation)


def _concatenated(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """One table of the rows of ``frames`` in order, typed as one table built from all the rows is: a column whose
    type differs between pieces (all-None in one, numbers in another) is typed again from its values."""
    filled = [frame for frame in frames if len(frame)]
    if len(filled) < 2:
        return (filled or frames)[0].reset_index(drop=True)
    joined = pd.concat(filled, ignore_index=True)
    for column in joined.columns:
        if len({str(frame[column].dtype) for frame in filled}) > 1:
            joined[column] = pd.Series([value for frame in filled for value in frame[column].tolist()])
    return joined


class _LegacyEvent(msgspec.Struct):
    """An event of the legacy autograd profiler's Chrome trace: a JSON array of ``X`` events in the processes
    "CPU functions" and "CUDA functions" (tid: the device), and ``s``/``f`` flows (same ``id``) from an op's start to
    the GPU interval it launched."""

    ph: Union[str, None] = None
    name: Union[str, None] = None
    ts: Union[float, None] = None
    dur: Union[float, None] = None
    tid: Union[int, str, None] = None
    pid: Union[int, str, None] = None
    id: Union[int, str, None] = None


_LEGACY_DECODERS = EventDecoders.of(_LegacyEvent)
LEGACY_LAUNCH = "cpu_to_cuda"  # the runtime table's name for a legacy flow's start (the op that launched the work)
_LEGACY_NO_GPU = ("holds a bare JSON array of events as the legacy torch.autograd.profiler's export_chrome_trace "
                  "writes, with no GPU activity in it (PyTorch 1.8 and later write only CPU functions there): profile "
                  "with torch.profiler.profile(activities=[CPU, CUDA]) and tensorboard_trace_handler or export_chrome_trace")


def _read_legacy(path: Path, handle, head: bytes) -> KinetoTrace:
    """The legacy autograd profiler's array: its "CPU functions" as cpu ops, its "CUDA functions" as GPU activity (on
    one stream per device: the array records no streams) and its flows as the launches linking them."""
    cpu, gpu, starts, ends, bad = [], [], {}, {}, 0
    cut = Cut()
    start = head.lstrip()
    try:
        for events, dropped in array_blocks(handle, start[1:], len(head) - len(start) + 1, _LEGACY_DECODERS, cut):
            bad += dropped
            for event in events:
                if event.ts is None or event.ts - event.ts != 0:
                    continue
                if event.ph == "X" and event.dur is not None and event.dur >= 0:
                    (gpu if event.pid == "CUDA functions" else cpu).append(event)
                elif event.ph in ("s", "f") and event.id is not None:
                    (starts if event.ph == "s" else ends)[event.id] = event
    except RecursionError as exc:
        raise FileProblem("nests arrays or objects too deeply to be a trace") from exc
    if not gpu:
        raise FileProblem(ascend_trace_alone(path) or _LEGACY_NO_GPU)
    flow_of = {(e.ts, e.name): flow for flow, e in ends.items()}
    rows: dict[str, list] = {"gpu": [], "runtime": [], "cpu": [], "memory": []}
    for event in gpu:
        name = event.name or ""
        device = _stream(event.tid)
        flow = flow_of.get((event.ts, event.name))
        correlation = flow if isinstance(flow, int) else None
        rows["gpu"].append((name, _kind(name, "kernel"), device, device, correlation, event.ts, event.dur, None, None))
    for flow, event in starts.items():
        if isinstance(flow, int) and flow in ends:
            rows["runtime"].append((LEGACY_LAUNCH, flow, event.tid, event.ts, 0.0))
    for event in cpu:
        if CPU_EVENTS.search(event.name or ""):
            rows["cpu"].append((event.name, event.tid, event.ts, event.dur, None, None))
    warnings = [f"{bad} event(s) with fields of unexpected types were ignored"] if bad else []
    warnings.append("a legacy torch.autograd.profiler trace (a JSON array): it records no runtime calls, streams, "
                    "device properties or memory, and its GPU intervals are per operator before PyTorch 1.8; profile "
                    "with torch.profiler for a full diagnosis")
    tables = _Tables(rows={**rows, "python": [], "recorded": [], "untotalled": [], "roots": set()})
    return _trace(path, _Keys(), _Keys(), tables.finished(cut.reason), warnings)


_HINT_BYTES = 64 << 10


def rank_hint(path: Path) -> int | None:
    """The rank a trace records in distributedInfo when the keys before traceEvents (in its first 64 KiB) say it;
    None when they do not (the trace is read whole to know). Never raises: a bad file is the reader's to report."""
    if not path.is_file():  # a FIFO would never end
        return None
    try:
        with open_binary(path) as handle:
            head = handle.read(_HINT_BYTES)
    except (OSError, EOFError, ValueError, zlib.error, FileProblem):
        return None
    found = _EVENTS_KEY.search(head)
    if found is None or not head.lstrip().startswith(b"{"):
        return None
    keys = _keys(head[:found.start()].rstrip().rstrip(b",") + b"}")
    if keys is None or keys.distributedInfo is None:
        return None
    return keys.distributedInfo.rank


def _keys(document: bytes) -> _Keys | None:
    try:
        return _KEYS.decode(document)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@lru_cache(maxsize=8192)
def _code_root(name: str) -> str:
    """The top-level package of a with_stack frame ("vllm/v1/worker/gpu_model_runner.py(1543): execute_model" →
    "vllm"; "" for a builtin or a module-level script), tested once per name."""
    path = name.split("(", 1)[0]
    return path.split("/", 1)[0] if "/" in path and not path.startswith("<") else ""


@lru_cache(maxsize=8192)
def _kept_cpu_event(name: str) -> bool:
    """Whether a host event is one the facts use (CPU_EVENTS), tested once per name: a trace repeats a few hundred."""
    return bool(CPU_EVENTS.search(name))


def _collect(events: list[_Event], rows: dict[str, list]) -> None:
    """Keep the rows of one block of events, in the trace's own time unit."""
    for event in events:
        category = (event.cat or "").lower()
        args = event.args or _NO_ARGS
        if event.ph == "i" and event.name == "[memory]" and event.ts is not None:
            if args.device_type != 0:  # 0 is host memory, not the device allocator
                if args.allocated is None and args.reserved is None and args.size is not None:
                    rows["untotalled"].append(event.ts)  # PyTorch < 1.10: the allocation's size, no totals
                else:
                    rows["memory"].append((event.ts, _mb(args.allocated), _mb(args.reserved)))
            continue
        if event.ph != "X" or event.ts is None or event.dur is None or event.dur < 0:
            continue
        name = event.name or ""
        if category in GPU_CATEGORIES:
            rows["gpu"].append((name, _kind(name, category), _stream(args.stream), args.device, args.correlation, event.ts,
                                event.dur, args.external_id, args.copied))
        elif category in RUNTIME_CATEGORIES:
            rows["runtime"].append((name, args.correlation, event.tid, event.ts, event.dur))
        elif category == PYTHON_CATEGORY:
            rows["roots"].add(_code_root(name))
            if ITERATION.search(name):  # of with_stack's many functions, an iteration marker
                rows["cpu"].append((name, event.tid, event.ts, event.dur, None, None))
            elif event.dur >= PYTHON_KEEP_US:
                rows["python"].append((name, event.tid, event.ts, event.dur))
        elif category in CPU_CATEGORIES:
            if _kept_cpu_event(name):
                dtype = _operand_dtype(args.input_types) if args.input_types and MATRIX_OPS.match(name) else None
                rows["cpu"].append((name, event.tid, event.ts, event.dur, args.external_id, dtype))
            recorded = rows["recorded"]
            if len(recorded) < 2 and (args.shapes or args.stack):
                recorded += [key for key, raw in (("record_shapes", args.shapes), ("with_stack", args.stack))
                             if raw and key not in recorded]


def _trace(path: Path, before: _Keys, after: _Keys, tables: _Tables, warnings: list[str]) -> KinetoTrace:
    """The tables (µs), with the header's settings."""
    distributed = before.distributedInfo or after.distributedInfo
    devices = (before.deviceProperties or []) + (after.deviceProperties or [])
    frames = tables.frames
    settings = {}
    for key in ("record_shapes", "profile_memory", "with_stack"):
        value = getattr(before, key) if getattr(before, key) is not None else getattr(after, key)
        if value is not None:
            settings[key] = bool(value)
    for key in tables.recorded:
        settings.setdefault(key, True)
    # Kineto writes the key when on
    settings.setdefault("profile_memory", bool(len(frames["memory"]) or tables.untotalled))
    if tables.untotalled:
        warnings.append(f"{tables.untotalled} device [memory] event(s) record each allocation's Bytes but not the "
                        "allocator's totals (Total Allocated, Total Reserved: written since PyTorch 1.10), so peak memory "
                        "and allocator behaviour are not measured")
    device = next((d for d in devices if d.name), None)
    return KinetoTrace(
        path=path, rank=distributed.rank if distributed is not None else None,
        gpu=frames["gpu"], runtime=frames["runtime"], cpu=frames["cpu"], memory=frames["memory"], python=frames["python"],
        device_name=device.name if device is not None else None,
        compute_capability=(f"{device.computeMajor}.{device.computeMinor or 0}"
                            if device is not None and device.computeMajor is not None else None),
        settings=settings, truncation=tables.truncation, warnings=warnings, code_roots=tables.roots,
    )


def _operand_dtype(raw: msgspec.Raw) -> str | None:
    """A matrix op's precision from its operand types (``_DTYPES``), None when none is a floating or int8 type."""
    try:
        types = [t for t in _TYPE_LIST.decode(bytes(raw)) if t]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return next((label for label, pattern in _DTYPES if any(pattern.search(t) for t in types)), None)


@lru_cache(maxsize=4096)
def _kind(name: str, category: str) -> str:
    if COMMUNICATION_KERNEL.search(name):
        return "communication"
    if category != "kernel" or MEMORY_KERNEL.search(name):
        return "memory"
    return "compute"


def _stream(value: int | str | None) -> int | None:
    """A stream id: a number, or text such as ROCm's "0x0" / "7" read as one (None when it is neither)."""
    if value is None or isinstance(value, int):
        return value
    try:
        return int(value.strip(), 0)
    except ValueError:
        return None


def _mb(value: float | None) -> float | None:
    return None if value is None else value / (1024.0 * 1024.0)


_TEMPLATE = re.compile(r"<[^<>]*>")
_LAMBDA = re.compile(r"\{lambda\([^{}]*\)#(\d+)\}")
_CORES = {"compute": "GPU", "communication": "COMMUNICATION", "memory": "MEMORY"}


def kernel_type(name: str) -> str:
    """A kernel's name without return type, parameters and nested template arguments, to group its launches
    without merging different kernels: each top-level template argument stays, as its last name.

    ``void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, std::pair<int, int>>>(…)`` →
    ``at::native::reduce_kernel<512, 1, ReduceOp>``; ``void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_…>(…)`` keeps
    its GEMM; ``at::native::(anonymous namespace)::softmax_warp_forward<…>`` → ``at::native::softmax_warp_forward<…>``.
    """
    text = _LAMBDA.sub(r"lambda#\1", name.removeprefix("void ").replace("(anonymous namespace)::", "")).strip()
    depth, cut = 0, len(text)
    for position, char in enumerate(text):  # the parameter list starts at the first '(' outside template arguments
        depth += (char == "<") - (char == ">")
        if char == "(" and depth == 0 and position > 0:
            cut = position
            break
    text = text[:cut].strip()
    opening = text.find("<")
    if opening <= 0 or not text.endswith(">"):
        return text or name
    return f"{text[:opening]}<{', '.join(_short_argument(a) for a in _top_level(text[opening + 1:-1]))}>"


def _top_level(arguments: str) -> list[str]:
    """Template arguments split at the commas outside nested <…> and (…)."""
    parts, depth, start = [], 0, 0
    for position, char in enumerate(arguments):
        depth += (char in "<(") - (char in ">)")
        if char == "," and depth == 0:
            parts.append(arguments[start:position])
            start = position + 1
    return [*parts, arguments[start:]]


_PARAMETERS = re.compile(r"\([^()]*\)")
_NOT_A_NAME = re.compile(r"^(operator.*|lambda#\d+|const)$")
_FUNCTOR = re.compile(r"\w*[Ff]unctor\w*")


def _short_argument(argument: str) -> str:
    """One template argument without its own template arguments, parameters, qualifiers and namespaces; a lambda
    is named after the function it is defined in (``launch_clamp_scalar::lambda``); an argument wrapping functors is
    named after the innermost one (``gpu_kernel_impl<BinaryFunctor<…, MulFunctor<float>>>`` → ``MulFunctor``)."""
    functors = _FUNCTOR.findall(argument)
    if functors:
        return functors[-1]
    text = argument
    for pattern in (_TEMPLATE, _PARAMETERS):
        while (shorter := pattern.sub("", text)) != text:
            text = shorter
    text = text.replace("const", " ").replace("*", "").replace("&", "").strip()
    names = [part.strip() for part in text.split("::") if part.strip()]
    named = [part for part in names if not _NOT_A_NAME.match(part)]
    if not named:
        return text
    return named[-1] + ("::lambda" if any(part.startswith("lambda#") for part in names) else "")


def kernel_table(trace: KinetoTrace, steps: pd.Series) -> pd.DataFrame:
    """The GPU activity as kernel_details.csv's canonical columns (``steps``: the step of each row, or None)."""
    gpu = trace.gpu
    return pd.DataFrame({
        "step": steps, "device_id": gpu["device"].astype("float64"), "name": gpu["name"],
        "type": per_name(gpu["name"], kernel_type), "accelerator_core": gpu["kind"].map(_CORES),
        "duration_us": gpu["dur"], "start_us": gpu["ts"],
    })
