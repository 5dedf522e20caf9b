"""Inference and serving profiles in the shapes the field writes: vLLM and SGLang GPU traces, vLLM-Ascend captures.

Each builder writes what a serving engine's profiler run leaves on disk — file names, event categories, argument
names, kernel and op names, flows — and returns the path a user would hand to advisor plus a ``Truth``: the numbers
the profile was built with, so a test can check advisor recovers them, and what an expert would conclude.

Where the shapes come from (``shared/formats/inference.md`` and ``ascend-profiler-output.md`` are the spec):

* Kineto traces mirror the real H200 decode traces in ``tests/fixtures/h200-recorded`` (torch 2.11, CUDA 13:
  ``cudaGraphLaunch`` with ``cbid`` 311 and no ``External id`` when no op encloses it; every replayed kernel carries
  the launch's ``correlation`` and its own ``ac2g`` ``f`` flow while the launch has one ``s``; eager GEMMs launched
  through the driver (``cuLaunchKernelEx``, cat ``cuda_driver``); the sampled token read back by ``cudaMemcpyAsync``
  then ``cudaStreamSynchronize``, whose ``s`` flow has no ``f``; metadata events for every visible GPU; stream
  thread names with a trailing space) and, for ROCm, HTA's real MI250 trace (``kineto-more/hta-amd_trace``: ``hip*``
  runtime calls under cat ``cuda_runtime`` with ``cid``, a string ``stream`` and the kernel name in their args; GPU
  events with ``kind`` and no ``bytes``; ``Memcpy HtoD (Host -> Device)``).
* Ascend captures mirror the real Level1 export (``ascend-level1-2ranks``) and the torch_npu 2.7.1 + CANN 8.3 shapes of
  the format reference: bare-array ``trace_view.json`` with string ``ts``, bit-packed CANN pids, ``Enqueue@``/
  ``Dequeue@`` task-queue events, ``AscendCL@…``/``Node@launch`` with ``HostToDevice`` flows, ``torch_to_npu`` flows
  keyed by the device task's start in ns, CSVs with CRLF, a TAB after absolute times and quoted shapes. Two details
  follow the real export where inference.md is looser: ``AscendCL@aclnn*`` events carry ``Mode`` ``ACL_NN`` (the real
  file's value; ``ACL_OP`` is what its ``aclop*`` calls carry), and a blocking read-back is
  ``AscendCL@aclrtSynchronizeStreamWithTimeout`` then ``AscendCL@aclrtMemcpy`` on the main thread, with no device task.

Builders (each ``builder(directory) -> (path to diagnose, Truth)``): ``vllm_graph_decode_host_bound`` (MI300X, HIP
graphs, host Python between replays), ``vllm_graph_decode_device_bound`` (H100, CUDA graphs, weight-read bound),
``vllm_eager_decode`` (enforce_eager, launch-bound), ``vllm_prefill_heavy`` (chunked prefill), ``sglang_stage_files``
(EXTEND/DECODE files), ``ascend_eager_decode``, ``ascend_aclgraph_decode``, ``ascend_prefill_decode_dirs``.

Details a public source does not settle are marked *unverified* where they are written and listed in each
``Truth.unverified``. Everything is deterministic (no randomness; gzip without a timestamp) and each builder runs in a
fraction of a second.
"""

from __future__ import annotations

import bisect
import csv
import gzip
import io
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from kineto_shapes import HOPPER_NVJET_GEMM, NCCL_ALLREDUCE

# ---------------------------------------------------------------------------------------------------------------------
# What a builder says about its profile
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Truth:
    """The numbers a profile was built with, the way an inference expert reads them, and the expected diagnosis.

    Definitions (the test module re-derives each from the written files):

    * an *iteration* is one engine step (one forward over the running batch); ``phases`` lists them in order as
      ``prefill`` (context tokens only), ``mixed`` (chunked prefill: context and generation tokens in one step) or
      ``decode`` (generation tokens only). Its start and end are its marker's (the ``execute_context_…`` annotation,
      else the runner's ``execute_model`` Python frame, SGLang's ``model_runner.py(…): forward``, vLLM-Ascend's marker).
    * ``ttft_us``: the first prefill iteration's duration (its marker, which ends after the sampled token was read back,
      so the device work is inside it); SGLang's overlap scheduler reads the token on another thread, so there it runs
      from the ``forward`` frame's start to the return of the main thread's ``cudaEventSynchronize`` for that batch.
    * ``tpot_us``: median start-to-start time of consecutive decode iterations; ``tokens_per_s`` = decode_batch / TPOT.
    * ``graph_launches_per_decode`` / ``eager_launches_per_decode``: median over decode iterations of graph launches
      (``cudaGraphLaunch``, ``hipGraphLaunch``, ``AscendCL@aclmdlRIExecuteAsync``) and of single-kernel launches
      (``cudaLaunchKernel``, ``cuLaunchKernel``, ``cuLaunchKernelEx``, ``hipLaunchKernel``,
      ``hipExtModuleLaunchKernel``, ``hipModuleLaunchKernel``; on Ascend ``Node@launch`` events that launch a device
      task) inside the iteration (on SGLang, inside the forward thread's ``forward_batch_generation`` frame, which
      also samples).
    * ``host_between_replays_us``: median over decode iterations of the host time from the moment the host was last
      free of the previous iteration (its blocking read-back returned; on SGLang's forward thread, the moment the
      thread takes the batch off its queue) to this iteration's first graph launch — the host work between replays.
      0 without graphs.
    * ``device_busy_share_decode``: median over consecutive decode pairs of the union of device activity (kernels,
      copies, collectives) inside [start of decode k, start of decode k+1) divided by that window.
    * ``blocking_dtoh_per_iteration``: blocking device-to-host read-backs per iteration (median).
    * ``htod_bytes``: per iteration, the bytes of the step's ``input_ids`` and ``positions`` host-to-device copies
      (``None`` where the engine copies no token inputs from the host).
    """

    engine: str
    platform: str  # "cuda" | "rocm" | "ascend"
    device: str
    model: str
    tensor_parallel: int
    rank: int
    layers: int
    marker: str  # what marks iterations
    phases: tuple[str, ...]
    context_tokens: tuple[int, ...]
    generation_tokens: tuple[int, ...]
    ttft_us: float
    tpot_us: float
    tokens_per_s: float
    decode_batch: int
    graph_launches_per_decode: int
    eager_launches_per_decode: int
    host_between_replays_us: float
    device_busy_share_decode: float
    blocking_dtoh_per_iteration: int
    htod_bytes: tuple[tuple[int, int] | None, ...]
    expected_verdict: str
    expected_top_findings: tuple[str, ...]
    must_not_advise: tuple[str, ...]
    unverified: tuple[str, ...]
    files: tuple[str, ...]  # what was written, relative to the returned path

    @property
    def iterations(self) -> dict[str, int]:
        return {phase: self.phases.count(phase) for phase in ("prefill", "mixed", "decode")}

    @property
    def prefill_tokens(self) -> tuple[int, ...]:
        """The context tokens of every iteration that carries any (prefill and mixed)."""
        return tuple(t for t in self.context_tokens if t)


@dataclass
class _Iteration:
    """One engine step as built: its marker span and what the host did in it."""

    phase: str
    ctx_reqs: int
    ctx_tokens: int
    gen_reqs: int
    gen_tokens: int
    start: float = 0.0
    end: float = 0.0
    host_free_before: float = 0.0  # when the host was last free of the previous iteration
    graph_launches: list[float] = field(default_factory=list)  # their host start times
    eager_launches: int = 0
    blocking_dtoh: int = 0
    htod: tuple[int, int] | None = None


def _phase(ctx_tokens: int, gen_tokens: int) -> str:
    return "mixed" if ctx_tokens and gen_tokens else "prefill" if ctx_tokens else "decode"


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def _covered(merged: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Busy µs of the sorted, disjoint ``merged`` intervals inside [lo, hi) (bisection: a 1,000-decode run stays fast)."""
    total, i = 0.0, bisect.bisect_right(merged, lo, key=lambda interval: interval[1])
    while i < len(merged) and merged[i][0] < hi:
        total += min(merged[i][1], hi) - max(merged[i][0], lo)
        i += 1
    return total


def _truth(iterations: list[_Iteration], busy: list[tuple[float, float]], **fields) -> Truth:
    """Derive the expert's numbers from the built iterations and the device's activity intervals."""
    decodes = [i for i in iterations if i.phase == "decode"]
    prefill = next(i for i in iterations if i.phase == "prefill")
    ttft = fields.pop("ttft_us", None) or prefill.end - prefill.start
    merged = _union(busy)
    pairs = [(a, b) for a, b in zip(iterations, iterations[1:]) if a.phase == b.phase == "decode"]
    tpot = statistics.median(b.start - a.start for a, b in pairs)
    shares = [_covered(merged, a.start, b.start) / (b.start - a.start) for a, b in pairs]
    batch = decodes[0].gen_tokens
    assert all(d.gen_tokens == batch for d in decodes), "a builder's decode iterations share one batch size"
    between = [d.graph_launches[0] - d.host_free_before for d in decodes if d.graph_launches]
    return Truth(
        phases=tuple(i.phase for i in iterations),
        context_tokens=tuple(i.ctx_tokens for i in iterations),
        generation_tokens=tuple(i.gen_tokens for i in iterations),
        ttft_us=round(ttft, 3),
        tpot_us=round(tpot, 3),
        tokens_per_s=round(batch / (tpot / 1e6), 3),
        decode_batch=batch,
        graph_launches_per_decode=int(statistics.median(len(d.graph_launches) for d in decodes)),
        eager_launches_per_decode=int(statistics.median(d.eager_launches for d in decodes)),
        host_between_replays_us=round(statistics.median(between), 3) if between else 0.0,
        device_busy_share_decode=round(statistics.median(shares), 4),
        blocking_dtoh_per_iteration=int(statistics.median(i.blocking_dtoh for i in iterations)),
        htod_bytes=tuple(i.htod for i in iterations),
        **fields,
    )


def _gzip_json(path: Path, document: object) -> None:
    """Write gzip JSON the way tensorboard_trace_handler(use_gzip=True) does, minus the header timestamp (mtime=0)
    so that two builds are byte-identical."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as out:
        out.write(json.dumps(document).encode())


# ---------------------------------------------------------------------------------------------------------------------
# Kineto (torch.profiler) traces
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Platform:
    """Runtime-call names and argument shapes of one GPU stack."""

    name: str  # "cuda" | "rocm"
    launch: dict  # kind -> (call name, category, cbid or cid)
    graph: tuple[str, int]
    memcpy: tuple[str, int]
    sync: tuple[str, int]
    event_record: tuple[str, int]
    event_sync: tuple[str, int]
    stream: int
    copy_names: dict  # (direction, host memory) -> GPU event name


CUDA = _Platform(
    "cuda",
    # cbids from CUPTI (the real traces show cudaLaunchKernel 211, cudaGraphLaunch 311, cudaMemcpyAsync 41,
    # cudaStreamSynchronize 131, cuLaunchKernel 307, cuLaunchKernelEx 652)
    {"kernel": ("cudaLaunchKernel", "cuda_runtime", 211), "driver": ("cuLaunchKernelEx", "cuda_driver", 652),
     "triton": ("cuLaunchKernel", "cuda_driver", 307)},
    graph=("cudaGraphLaunch", 311), memcpy=("cudaMemcpyAsync", 41), sync=("cudaStreamSynchronize", 131),
    event_record=("cudaEventRecord", 135), event_sync=("cudaEventSynchronize", 137),
    stream=7,  # the legacy default stream as CUPTI numbers it (stream 7 in the real traces)
    copy_names={("HtoD", "pinned"): "Memcpy HtoD (Pinned -> Device)",
                ("HtoD", "pageable"): "Memcpy HtoD (Pageable -> Device)",
                ("DtoH", "pinned"): "Memcpy DtoH (Device -> Pinned)",
                ("DtoH", "pageable"): "Memcpy DtoH (Device -> Pageable)",
                ("DtoD", "device"): "Memcpy DtoD (Device -> Device)"},
)
# cid values: hipLaunchKernel 107 and hipExtModuleLaunchKernel 65 are the real MI250 trace's; the others are HIP API
# ids as we believe ROCm 6.x numbers them (*unverified*).
ROCM = _Platform(
    "rocm",
    {"kernel": ("hipLaunchKernel", "cuda_runtime", 107), "driver": ("hipExtModuleLaunchKernel", "cuda_runtime", 65),
     "triton": ("hipModuleLaunchKernel", "cuda_runtime", 147)},
    graph=("hipGraphLaunch", 264), memcpy=("hipMemcpyAsync", 139), sync=("hipStreamSynchronize", 210),
    event_record=("hipEventRecord", 121), event_sync=("hipEventSynchronize", 122),
    stream=0,
    # roctracer does not know pinned from pageable: every copy is "Host -> Device" / "Device -> Host"
    copy_names={("HtoD", "pinned"): "Memcpy HtoD (Host -> Device)",
                ("HtoD", "pageable"): "Memcpy HtoD (Host -> Device)",
                ("DtoH", "pinned"): "Memcpy DtoH (Device -> Host)",
                ("DtoH", "pageable"): "Memcpy DtoH (Device -> Host)",
                ("DtoD", "device"): "Memcpy DtoD (Device -> Device)"},
)

H100_PROPS = {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85520809984, "computeMajor": 9, "computeMinor": 0,
              "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
              "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
              "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
# ROCm's keys as in the real MI250 trace; MI300X: gfx942, 304 CUs, 192 GiB
MI300X_PROPS = {"name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992, "computeMajor": 9, "computeMinor": 4,
                "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 64,
                "sharedMemPerBlock": 65536, "numSms": 304, "maxSharedMemoryPerMultiProcessor": 65536}

LAUNCH_CALLS = frozenset({"cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC",
                          "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipExtLaunchKernel"})
GRAPH_CALLS = frozenset({"cudaGraphLaunch", "hipGraphLaunch"})


class _Kineto:
    """A torch.profiler trace being written: one host process (main thread plus optional others), one GPU stream.

    Host ops are opened and closed like record functions, so a runtime call gets the ``External id`` of the innermost
    open op or annotation (none when only Python frames enclose it, as the real graph trace's ``cudaGraphLaunch``);
    device work runs on the stream in launch order, when the stream is free and the launch has arrived.
    """

    def __init__(self, platform: _Platform, props: dict, *, rank: int, world: int, pid: int, host_us: float,
                 devices: int = 8, with_stack: bool = True, record_shapes: bool = False, base_ns: int,
                 trace_id: str, distributed: bool = True, nccl_version: str = "2.21.5") -> None:
        self.platform, self.props, self.rank, self.world = platform, props, rank, world
        self.pid, self.devices, self.with_stack, self.record_shapes = pid, devices, with_stack, record_shapes
        self.base_ns, self.trace_id, self.distributed, self.nccl_version = base_ns, trace_id, distributed, nccl_version
        self.device = rank % devices
        self.events: list[dict] = []
        self.flows: list[dict] = []
        self.t0 = host_us
        self.correlation = 3_000_000 + 100_000 * rank
        self.external = 0
        self.ev_idx = 0
        self.python_id = 0
        self.scopes: dict[int, list[dict]] = {}  # tid -> open record functions (cpu_op / user_annotation)
        self.frames: dict[int, list[dict]] = {}  # tid -> open Python frames
        self.stream_free = 0.0
        self.busy: list[tuple[float, float]] = []
        self.annotation_work: dict[int, list[tuple[float, float]]] = {}  # user annotation External id -> GPU spans
        self.threads: dict[int, str] = {pid: "python3"}
        self.streams: set[int] = set()
        self.counting: _Iteration | None = None

    # -- host side ----------------------------------------------------------------------------------------------------

    def _x(self, cat: str, name: str, pid: object, tid: object, ts: float, dur: float, args: dict | None) -> dict:
        event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args is not None:
            event["args"] = args
        self.events.append(event)
        return event

    def open(self, name: str, ts: float, *, cat: str = "cpu_op", tid: int | None = None,
             shapes: tuple[list, list] | None = None) -> dict:
        """Open a record function (an aten op, a custom op, a user annotation) on a host thread."""
        tid = self.pid if tid is None else tid
        self.external += 1
        args: dict = {"External id": self.external, "Record function id": 0}
        if self.record_shapes and shapes is not None:
            args["Input Dims"], args["Input type"] = shapes
        args["Ev Idx"] = self._ev()
        event = self._x(cat, name, self.pid, tid, ts, 0.0, args)
        self.scopes.setdefault(tid, []).append(event)
        if cat == "user_annotation":
            self.annotation_work[self.external] = []
        return event

    def close(self, end: float, *, tid: int | None = None) -> dict:
        event = self.scopes[self.pid if tid is None else tid].pop()
        event["dur"] = end - event["ts"]
        return event

    def op(self, name: str, ts: float, dur: float, *, tid: int | None = None, shapes=None) -> dict:
        """A leaf op that launches nothing."""
        self.open(name, ts, tid=tid, shapes=shapes)
        return self.close(ts + dur, tid=tid)

    def py_open(self, name: str, ts: float, *, tid: int | None = None) -> dict | None:
        if not self.with_stack:
            return None
        tid = self.pid if tid is None else tid
        stack = self.frames.setdefault(tid, [])
        self.python_id += 1
        parent = stack[-1]["args"]["Python id"] if stack else None
        event = self._x("python_function", name, self.pid, tid, ts, 0.0,
                        {"Python parent id": parent, "Python id": self.python_id, "Ev Idx": self._ev()})
        stack.append(event)
        return event

    def py_close(self, end: float, *, tid: int | None = None) -> None:
        if self.with_stack:
            event = self.frames[self.pid if tid is None else tid].pop()
            event["dur"] = end - event["ts"]

    def py(self, name: str, ts: float, dur: float, *, tid: int | None = None) -> None:
        if self.py_open(name, ts, tid=tid) is not None:
            self.py_close(ts + dur, tid=tid)

    def _ev(self) -> int:
        self.ev_idx += 1
        return self.ev_idx - 1

    def _scope(self, tid: int) -> dict | None:
        stack = self.scopes.get(tid) or []
        return stack[-1] if stack else None

    def call(self, name: str, cat: str, cbid: int, ts: float, dur: float, *, tid: int | None = None,
             extra: dict | None = None, flow: bool = True) -> tuple[int, int | None]:
        """A runtime or driver call; returns (correlation, External id)."""
        tid = self.pid if tid is None else tid
        self.correlation += 1
        scope = self._scope(tid)
        external = scope["args"]["External id"] if scope else None
        args: dict = {}
        if external is not None:
            args["External id"] = external
        if self.platform.name == "rocm":
            args["cid"] = cbid
            args["correlation"] = self.correlation
            args.update(extra or {})
        else:
            args.update(cbid=cbid, correlation=self.correlation)
        self._x(cat, name, self.pid, tid, ts, dur, args)
        if flow:
            self.flows.append({"ph": "s", "id": self.correlation, "pid": self.pid, "tid": tid, "ts": ts, "cat": "ac2g",
                               "name": "ac2g"})
        return self.correlation, external

    # -- device side --------------------------------------------------------------------------------------------------

    def _run(self, ready: float, dur: float) -> float:
        start = max(self.stream_free, ready)
        self.stream_free = start + dur
        self.busy.append((start, start + dur))
        return start

    def _activity(self, cat: str, name: str, start: float, dur: float, correlation: int, external: int | None,
                  extra: dict, stream: int | None = None, tid: int | None = None) -> None:
        stream = self.platform.stream if stream is None else stream
        self.streams.add(stream)
        args: dict = {} if external is None else {"External id": external}
        if cat == "kernel" and self.platform.name == "cuda":
            args["queued"] = 0
        args["device"] = self.device
        if self.platform.name == "cuda":
            args["context"] = 1
        args.update(stream=stream, correlation=correlation, **extra)
        self._x(cat, name, self.device, stream, start, dur, args)
        self.flows.append({"ph": "f", "id": correlation, "pid": self.device, "tid": stream, "ts": start, "cat": "ac2g",
                           "name": "ac2g", "bp": "e"})
        for scope in self.scopes.get(self.pid if tid is None else tid, []):
            if scope["cat"] == "user_annotation":
                self.annotation_work[scope["args"]["External id"]].append((start, start + dur))

    @staticmethod
    def _kernel_args(name: str) -> dict:
        """CUPTI's launch configuration (plausible values; advisor does not read them)."""
        big = name.startswith(("nvjet", "sm90", "void cutlass", "void flash"))
        return {"registers per thread": 168 if big else 32, "shared memory": 164308 if big else 0,
                "blocks per SM": 1.0 if big else 0.060606, "warps per SM": 12.0 if big else 0.242424,
                "grid": [132, 1, 1] if big else [8, 1, 1], "block": [384, 1, 1] if big else [128, 1, 1],
                "est. achieved occupancy %": 0}

    def launch(self, kind: str, kernel: str, ts: float, dur: float, *, call_dur: float = 6.0, tid: int | None = None,
               stream: int | None = None) -> float:
        """An eager launch of one kernel; returns the host time after the call."""
        name, cat, cbid = self.platform.launch[kind]
        extra = {}
        if self.platform.name == "rocm":
            extra = {"kernel": kernel, "stream": "0x0", "grid": [304, 1, 1], "block": [256, 1, 1], "shared memory": 0}
        correlation, external = self.call(name, cat, cbid, ts, call_dur, extra=extra, tid=tid)
        start = self._run(ts + call_dur + 2.0, dur)
        args = {"kind": "Dispatch Kernel"} if self.platform.name == "rocm" else self._kernel_args(kernel)
        self._activity("kernel", kernel, start, dur, correlation, external, args, stream, tid)
        if self.counting is not None:
            self.counting.eager_launches += 1
        return ts + call_dur

    def graph_launch(self, kernels: list[tuple[str, float]], ts: float, call_dur: float, *,
                     tid: int | None = None) -> float:
        """One graph replay: a single runtime call, every kernel of the graph correlated to it."""
        name, cbid = self.platform.graph
        extra = {"stream": "0x0"} if self.platform.name == "rocm" else None
        correlation, external = self.call(name, "cuda_runtime", cbid, ts, call_dur, extra=extra, tid=tid)
        ready = ts + call_dur + 3.0
        for kernel, dur in kernels:
            start = self._run(ready, dur)
            args = {"kind": "Dispatch Kernel"} if self.platform.name == "rocm" else self._kernel_args(kernel)
            self._activity("kernel", kernel, start, dur, correlation, external, args, tid=tid)
            ready = start + dur + 1.0  # kernels of a graph run back to back, about 1 µs apart
        if self.counting is not None:
            self.counting.graph_launches.append(ts)
        return ts + call_dur

    def memcpy(self, direction: str, memory: str, nbytes: int, ts: float, *, call_dur: float = 7.0,
               dur: float = 1.6, tid: int | None = None) -> tuple[float, float]:
        """A cudaMemcpyAsync/hipMemcpyAsync and its copy; returns the copy's (start, end) on the device."""
        name, cbid = self.platform.memcpy
        extra = None
        if self.platform.name == "rocm":  # roctracer puts the size on the call only, as a string
            kinds = {"HtoD": "1", "DtoH": "2", "DtoD": "3"}
            extra = {"stream": "0x0", "src": "0x7f3a6c000000", "dst": "0x7f2e14a00000", "size": str(nbytes),
                     "kind": kinds[direction]}
        correlation, external = self.call(name, "cuda_runtime", cbid, ts, call_dur, extra=extra, tid=tid)
        start = self._run(ts + call_dur + 1.5, dur)
        if self.platform.name == "rocm":
            args = {"kind": direction}
        else:
            args = {"bytes": nbytes, "memory bandwidth (GB/s)": nbytes / (dur * 1000.0)}
        self._activity("gpu_memcpy", self.platform.copy_names[(direction, memory)], start, dur, correlation, external,
                       args, tid=tid)
        return start, start + dur

    def stream_sync(self, ts: float, until: float) -> float:
        """cudaStreamSynchronize (its ``s`` flow, as in the real traces, has no ``f``) / hipStreamSynchronize."""
        name, cbid = self.platform.sync
        self.call(name, "cuda_runtime", cbid, ts, until - ts, flow=self.platform.name == "cuda")
        return until

    # -- writing ------------------------------------------------------------------------------------------------------

    def annotate_gpu(self) -> None:
        """gpu_user_annotation spans: for each user annotation, from its first to its last linked GPU activity."""
        names = {e["args"]["External id"]: e["name"] for e in self.events if e["cat"] == "user_annotation"}
        for external, spans in self.annotation_work.items():
            if spans:
                lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
                self._x("gpu_user_annotation", names[external], self.device, self.platform.stream, lo, hi - lo,
                        {"External id": external})

    def document(self, name: str) -> dict:
        self.annotate_gpu()
        meta_ts = round(self.t0, 3)
        meta: list[dict] = []
        for pid, label, sort in ([(self.pid, "CPU", self.pid)]
                                 + [(d, f"GPU {d}", 5_000_000 + d) for d in range(self.devices)]):
            meta += [{"name": key, "ph": "M", "ts": meta_ts, "pid": pid, "tid": 0, "args": args}
                     for key, args in (("process_name", {"name": "python3"}), ("process_labels", {"labels": label}),
                                       ("process_sort_index", {"sort_index": sort}))]
        for stream in sorted(self.streams):
            meta += [{"name": "thread_name", "ph": "M", "ts": meta_ts, "pid": self.device, "tid": stream,
                      "args": {"name": f"stream {stream} "}},
                     {"name": "thread_sort_index", "ph": "M", "ts": meta_ts, "pid": self.device, "tid": stream,
                      "args": {"sort_index": stream}}]
        for tid, label in self.threads.items():
            meta += [{"name": "thread_name", "ph": "M", "ts": meta_ts, "pid": self.pid, "tid": tid,
                      "args": {"name": f"thread {tid} ({label})"}},
                     {"name": "thread_sort_index", "ph": "M", "ts": meta_ts, "pid": self.pid, "tid": tid,
                      "args": {"sort_index": tid}}]
        end = max(e["ts"] + e["dur"] for e in self.events)
        spans = [{"ph": "X", "cat": "Trace", "ts": meta_ts, "dur": round(end - self.t0, 3), "pid": "Spans",
                  "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
                 {"name": "process_sort_index", "ph": "M", "ts": meta_ts, "pid": "Spans", "tid": 0,
                  "args": {"sort_index": 536870912}},
                 {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
                  "tid": "Trace PyTorch Profiler", "ts": meta_ts}]
        for event in self.events + self.flows:
            event["ts"] = round(event["ts"], 3)
            if "dur" in event:
                event["dur"] = round(event["dur"], 3)
        document: dict = {"schemaVersion": 1,
                          "deviceProperties": [{"id": d, **self.props} for d in range(self.devices)]}
        if self.distributed:
            # torch.profiler's _get_distributed_info (pg_config from memory of torch ≥2.2: *unverified* key set)
            document["distributedInfo"] = {
                "backend": "nccl", "rank": self.rank, "world_size": self.world, "pg_count": 2,
                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                               "pg_size": self.world, "ranks": list(range(self.world))},
                              {"pg_name": "1", "pg_desc": "undefined", "backend_config": "cuda:nccl",
                               "pg_size": self.world, "ranks": list(range(self.world))}],
                "nccl_version": self.nccl_version}
        document["trace_id"] = self.trace_id
        if self.with_stack:
            document["with_stack"] = 1
        if self.record_shapes:
            document["record_shapes"] = 1
        if self.platform.name == "cuda":
            document.update(cuda_driver_version=12080, cuda_runtime_version=12080, cupti_version=26)
        document.update(displayTimeUnit="ms", baseTimeNanoseconds=self.base_ns,
                        traceEvents=[*self.events, *self.flows, *meta, *spans], traceName=name)
        return document

    def write(self, path: Path) -> Path:
        # traceName is the temporary file torch.profiler exported to before the handler wrote the final one (as in the
        # real traces: "/tmp/tmpxa68wd_1.json"), so it does not depend on where the fixture is built
        _gzip_json(path, self.document(f"/tmp/tmp{self.trace_id[:8].lower()}.json"))
        return path


# ---------------------------------------------------------------------------------------------------------------------
# Kernel names as serving stacks write them
# ---------------------------------------------------------------------------------------------------------------------

NVJET_DECODE = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"  # as in the real H200 decode trace
XMMA_DECODE = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_"
               "kernel__5x_cublas")
XMMA_PREFILL = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_"
                "kernel__5x_cublas")
FLASH_SPLITKV = ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass:"
                 ":bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, false, false, false"
                 ", true, true, false, false>(flash::Flash_fwd_params)")
FLASH_SPLITKV_COMBINE = ("void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false,"
                         " false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4,"
                         " 3, false>(flash::Flash_fwd_params)")
RESHAPE_AND_CACHE_FLASH = ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
                           "(vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, "
                           "__nv_bfloat16*, long const*, long, long, long, long, int, int, int, float const*, "
                           "float const*)")
CUDA_CUSTOM_ALLREDUCE = ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*, vllm::RankSignals, "
                         "vllm::Signal*, __nv_bfloat16*, int, int)")
NCCL_ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
ROTARY = ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, "
          "c10::BFloat16 const*, int, long, long, long, int, int, int)")
# Inductor's fused kernels in vLLM's compiled (piecewise) model: RMSNorm and SiLU-and-mul become Triton kernels
TRITON_EMBED = "triton_poi_fused_embedding_0"
TRITON_NORM = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1"
TRITON_ACT = "triton_poi_fused_mul_silu_slice_2"
# vLLM's own CUDA kernels, which run in eager mode (enforce_eager: custom ops on)
VLLM_RMS_NORM = ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*"
                 ", float, int, int)")
VLLM_FUSED_ADD_RMS_NORM = ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, "
                           "c10::BFloat16 const*, float, int, int)")
VLLM_SILU_AND_MUL = ("void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>"
                     "(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)")
INDEX_SELECT = ("void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2"
                ", -2>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BF"
                "loat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsign"
                "ed int, long)")
ARGMAX = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned "
          "int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>)")
CAST_TO_INT = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::direct_copy_kerne"
               "l_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{"
               "lambda(long)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::direct_copy_kernel_c"
               "uda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lam"
               "bda(long)#1}, std::array<char*, 2ul>)")
# ROCm (MI300X): hipBLASLt/Tensile GEMMs, vLLM's ROCm paged attention and custom all-reduce
CIJK_DECODE = ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR"
               "1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSU1_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA256_LBSPPB256_"
               "LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT1_1_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NTM0_NEPBS16_NLCA1_N"
               "LCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW8_SK3_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_"
               "VWA1_VWB1_WSGRA0_WSGRB0_WS64_WG16_16_1")
CIJK_DECODE_WIDE = ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x32x512_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM"
                    "1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSU1_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA512_"
                    "LBSPPB512_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT1_2_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NTM0_"
                    "NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW8_SK3_TLDS1_ULSGRO0_USL1_UIO"
                    "FGRO0_USFGROn1_VSn1_VWA1_VWB1_WSGRA0_WSGRB0_WS64_WG32_8_1")
CIJK_PREFILL = ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_C"
                "LR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSU0_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA128_LBSPPB1"
                "28_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT4_4_MO40_NTn1_NTA0_NTB0_NTC4_NTD4_NTM0_NEPBS16_NLC"
                "A1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW8_SK0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_"
                "VSn1_VWA8_VWB8_WSGRA0_WSGRB0_WS64_WG64_4_1")
ROCM_PAGED_ATTENTION = ("void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCach"
                        "eDataType)0, 16, 128, 256, false, 8>(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bflo"
                        "at16 const*, int, float, int const*, int const*, int const*, int, float const*, int, int, int"
                        ", float*, float*, __hip_bfloat16*, __hip_bfloat16*, int, float const*, float const*, float co"
                        "nst*)")
ROCM_PAGED_ATTENTION_REDUCE = ("void paged_attention_ll4mi_reduce_kernel<__hip_bfloat16, __hip_bfloat16, 128, 128, 256"
                               ", 1>(__hip_bfloat16*, float const*, float const*, __hip_bfloat16 const*, int const*, i"
                               "nt const*, int, float const*)")
ROCM_RESHAPE_AND_CACHE = ("void vllm::reshape_and_cache_kernel<__hip_bfloat16, __hip_bfloat16, "
                          "(vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16*, "
                          "__hip_bfloat16*, long const*, int, int, int, int, int, int, float const*, float const*)")
ROCM_CUSTOM_ALLREDUCE_1STAGE = ("void vllm::cross_device_reduce_1stage<__hip_bfloat16, 4>(vllm::RankData*, "
                                "vllm::RankSignals, vllm::Signal*, __hip_bfloat16*, int, int)")
ROCM_CUSTOM_ALLREDUCE_2STAGE = ("void vllm::cross_device_reduce_2stage<__hip_bfloat16, 4>(vllm::RankData*, "
                                "vllm::RankSignals, vllm::Signal*, __hip_bfloat16*, int, int)")
# ROCm prefill attention in vLLM's ROCm backend: the Triton prefix-prefill kernel (launched by Triton, no op of its own)
ROCM_PREFIX_PREFILL = "_fwd_kernel"
RCCL_ALLGATHER = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"  # RCCL's generic kernel (*unverified*)

# The path prefix Kineto's Python tracer keeps for installed packages (the real traces show "torch/cuda/graphs.py(…)")
RUNNER = "vllm/v1/worker/gpu_model_runner.py"


# ---------------------------------------------------------------------------------------------------------------------
# vLLM on a GPU
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Llm:
    """A Llama-shaped decoder, its per-rank sizes, and the device's speeds (bytes and FLOP per µs, derated)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tp: int
    bandwidth: float  # effective bytes per µs
    flops: float  # effective FLOP per µs

    def gemm_shapes(self) -> dict[str, tuple[int, int]]:
        head = self.hidden // self.heads
        return {"qkv": (self.hidden, (self.heads + 2 * self.kv_heads) * head // self.tp),
                "o": (self.hidden // self.tp, self.hidden),
                "gate_up": (self.hidden, 2 * self.intermediate // self.tp),
                "down": (self.intermediate // self.tp, self.hidden),
                "lm_head": (self.hidden, self.vocab // self.tp)}

    def gemm_us(self, which: str, tokens: int) -> float:
        """Decode GEMMs read the weights; prefill GEMMs are bound by their FLOP."""
        k, n = self.gemm_shapes()[which]
        return round(max(k * n * 2 / self.bandwidth, 2 * tokens * k * n / self.flops) + 3.0, 3)

    def attention_us(self, contexts: list[int], generating: int, kv_len: int) -> float:
        """Causal attention over each prefill's new tokens (2·L²·d FLOP), plus each decode request reading its KV
        cache (``kv_len`` tokens of K and V)."""
        d = self.hidden // self.tp
        kv_bytes = kv_len * 2 * (self.kv_heads * (self.hidden // self.heads) // self.tp) * 2
        prefill = sum(2 * n * n * d / self.flops for n in contexts)
        return round(5.0 + prefill + generating * (0.3 + kv_bytes / self.bandwidth), 3)


LLAMA_70B_MI300X = _Llm("Llama-3-70B-class (80 layers, hidden 8192, GQA 64/8, bf16)", 80, 8192, 64, 8, 28672, 128256,
                        4, bandwidth=5.3e6 * 0.62, flops=1307e6 * 0.45)
LLAMA_70B_H100 = _Llm("Llama-3-70B-class (80 layers, hidden 8192, GQA 64/8, bf16)", 80, 8192, 64, 8, 28672, 128256, 4,
                      bandwidth=3.35e6 * 0.8, flops=989e6 * 0.6)
LLAMA_8B_H100 = _Llm("Llama-3-8B-class (32 layers, hidden 4096, GQA 32/8, bf16)", 32, 4096, 32, 8, 14336, 128256, 1,
                     bandwidth=3.35e6 * 0.8, flops=989e6 * 0.6)
LLAMA_8B_H100_TP2 = _Llm("Llama-3-8B-class (32 layers, hidden 4096, GQA 32/8, bf16)", 32, 4096, 32, 8, 14336, 128256, 2,
                         bandwidth=3.35e6 * 0.8, flops=989e6 * 0.6)


@dataclass(frozen=True)
class _Stack:
    """The kernels one serving stack runs for a layer, by role."""

    gemm_decode: str
    gemm_wide: str
    gemm_prefill: str
    allreduce_decode: str
    allreduce_prefill: str
    gather: str
    cache: str
    cache_op: str
    attention: tuple[str, ...]  # decode attention kernels (one custom-op call launches them all)
    attention_prefill: tuple[str, ...]
    attention_op: str
    prefill_op: str | None = None  # the op around the prefill attention kernel, when it differs


VLLM_CUDA = _Stack(NVJET_DECODE, XMMA_DECODE, XMMA_PREFILL, NCCL_ALLREDUCE, NCCL_ALLREDUCE, NCCL_ALLGATHER,
                   RESHAPE_AND_CACHE_FLASH, "_C_cache_ops::reshape_and_cache_flash",
                   (FLASH_SPLITKV, FLASH_SPLITKV_COMBINE), (FLASH_SPLITKV,), "_vllm_fa2_C::varlen_fwd")
VLLM_ROCM = _Stack(CIJK_DECODE, CIJK_DECODE_WIDE, CIJK_PREFILL, ROCM_CUSTOM_ALLREDUCE_1STAGE,
                   ROCM_CUSTOM_ALLREDUCE_2STAGE, RCCL_ALLGATHER, ROCM_RESHAPE_AND_CACHE,
                   "_C_cache_ops::reshape_and_cache",
                   (ROCM_PAGED_ATTENTION, ROCM_PAGED_ATTENTION_REDUCE), (ROCM_PREFIX_PREFILL,),
                   "_rocm_C::paged_attention", prefill_op=ROCM_PREFIX_PREFILL)


def _pieces(model: _Llm, stack: _Stack, tokens: int) -> list[list[tuple[str, float, str]]]:
    """vLLM's piecewise split of the compiled model: ``layers + 1`` pieces, attention between them.

    Piece 0 is the embedding and layer 0 up to attention; piece i the rest of layer i-1 and layer i up to attention;
    the last the rest of the last layer and the final norm. Entries are (kernel, µs, launch kind when run eagerly).
    """
    decode = tokens <= 512
    gemm = stack.gemm_decode if decode else stack.gemm_prefill
    wide = stack.gemm_wide if decode else stack.gemm_prefill
    allreduce = stack.allreduce_decode if decode else stack.allreduce_prefill
    activation = model.hidden * tokens * 2
    ar_us = round(10.0 + activation / (model.bandwidth * 0.15), 3) if model.tp > 1 else 0.0
    small = round(2.5 + activation * 3 / model.bandwidth, 3)
    ar_kind = "driver" if allreduce.startswith("nccl") and stack is VLLM_CUDA else "kernel"
    up = [(wide, model.gemm_us("qkv", tokens), "driver"), (ROTARY, small, "kernel")]
    down = [(gemm, model.gemm_us("o", tokens), "driver")]
    if ar_us:
        down.append((allreduce, ar_us, ar_kind))
    down += [(TRITON_NORM, small, "triton"), (wide, model.gemm_us("gate_up", tokens), "driver"),
             (TRITON_ACT, small, "triton"), (gemm, model.gemm_us("down", tokens), "driver")]
    if ar_us:
        down.append((allreduce, ar_us, ar_kind))
    down.append((TRITON_NORM, small, "triton"))
    first = [(TRITON_EMBED, small, "triton")] + ([(allreduce, ar_us, ar_kind)] if ar_us else []) + [
        (TRITON_NORM, small, "triton")] + up
    return [first] + [down + up for _ in range(model.layers - 1)] + [down]


class _VllmWorker:
    """vLLM v1's worker process of one TP rank, as its profiler sees it (with_stack on: VLLM_TORCH_PROFILER_WITH_STACK
    defaults to 1; record_shapes off by default)."""

    def __init__(self, trace: _Kineto, model: _Llm, stack: _Stack, *, annotate: bool, cudagraph_sizes: tuple[int, ...],
                 eager: bool = False, prep_us: float = 1000.0, gap_us: float = 250.0, metadata_copies: bool = False,
                 graph_call_us: float = 15.0, attention_host_us: float = 30.0, kv_len: int = 1100) -> None:
        self.trace, self.model, self.stack, self.annotate = trace, model, stack, annotate
        self.graph_sizes, self.eager, self.prep_us, self.gap_us = cudagraph_sizes, eager, prep_us, gap_us
        self.metadata_copies, self.graph_call_us = metadata_copies, graph_call_us
        self.attention_host_us, self.kv_len = attention_host_us, kv_len
        self.h = trace.t0 + 2000.0
        self.host_free = self.h
        self.iterations: list[_Iteration] = []
        trace.py_open("vllm/v1/executor/multiproc_executor.py(584): worker_busy_loop", trace.t0 + 5.0)
        self.prep_jitter = (0.0, 0.012, -0.008, 0.02, -0.015, 0.005, -0.01, 0.015, 0.0, -0.005)

    # the host steps of one iteration -------------------------------------------------------------------------------

    def _copy_inputs(self, it: _Iteration) -> None:
        """_prepare_inputs' non-blocking copies from pinned host buffers: input_ids (int32) then positions (int64); with
        ``metadata_copies`` also what vLLM v1 copies around them (block table, query_start_loc, seq_lens, slot
        mapping — which and in what order varies by version: *unverified*)."""
        t = self.trace
        reqs, tokens = it.ctx_reqs + it.gen_reqs, it.ctx_tokens + it.gen_tokens
        copies = [("input_ids", 4 * tokens, "int"), ("positions", 8 * tokens, "long int")]
        if self.metadata_copies:
            copies = ([("block_table", 4 * reqs * 512, "int"), ("query_start_loc", 4 * (reqs + 1), "int"),
                       ("seq_lens", 4 * reqs, "int")] + copies + [("slot_mapping", 8 * tokens, "long int")])
        for _, nbytes, dtype in copies:
            elements = nbytes // (4 if dtype == "int" else 8)
            t.open("aten::copy_", self.h, shapes=([[elements], [elements], []], [dtype, dtype, "Scalar"]))
            t.memcpy("HtoD", "pinned", nbytes, self.h + 6.0, dur=1.3 + nbytes / 20_000.0)
            t.close(self.h + 22.0)
            self.h += 30.0
        it.htod = (4 * tokens, 8 * tokens)

    def _attention(self, tokens: int, contexts: list[int], generating: int, decode: bool) -> None:
        """The attention custom op vLLM leaves eager between the pieces: KV-cache write, then attention."""
        t = self.trace
        t.py_open("vllm/attention/layer.py(489): unified_attention_with_output", self.h)
        t.open("vllm::unified_attention_with_output", self.h + 4.0)
        self.h += self.attention_host_us * 0.4
        t.open(self.stack.cache_op, self.h)
        self.h = t.launch("kernel", self.stack.cache, self.h + 3.0, round(2.0 + tokens * 0.01, 3), call_dur=5.0) + 1.0
        t.close(self.h)
        triton = not decode and self.stack.prefill_op is not None
        if not triton:
            t.open(self.stack.attention_op, self.h + 2.0)
        self.h += 4.0
        kernels = self.stack.attention if decode else self.stack.attention_prefill
        total = self.model.attention_us(contexts, generating, self.kv_len)
        for index, kernel in enumerate(kernels):
            dur = total if index == 0 else 3.0
            self.h = t.launch("triton" if triton else "kernel", kernel, self.h, round(dur, 3), call_dur=5.0) + 1.5
        if not triton:
            t.close(self.h)
        self.h += self.attention_host_us * 0.4
        t.close(self.h)
        t.py_close(self.h + 1.0)
        self.h += 2.0

    def _forward(self, it: _Iteration) -> None:
        t, model = self.trace, self.model
        tokens = it.ctx_tokens + it.gen_tokens
        contexts = [it.ctx_tokens // it.ctx_reqs] * it.ctx_reqs if it.ctx_reqs else []
        decode = it.ctx_tokens == 0
        graphed = not self.eager and tokens in self.graph_sizes
        t.py_open("vllm/model_executor/models/llama.py(372): forward", self.h)
        self.h += 20.0
        if self.eager:
            self._eager_layers(tokens, contexts, it.gen_reqs, decode)
        else:
            for index, piece in enumerate(_pieces(model, self.stack, tokens)):
                t.py_open("vllm/compilation/cuda_graph.py(121): __call__" if graphed else
                          "vllm/compilation/piecewise_backend.py(94): __call__", self.h)
                self.h += 6.0
                if graphed:
                    t.py_open("torch/cuda/graphs.py(137): replay", self.h)
                    self.h = t.graph_launch([(k, d) for k, d, _ in piece], self.h + 2.0, self.graph_call_us) + 2.0
                    t.py_close(self.h)
                else:  # an inductor-compiled piece run without a graph: every kernel launched on its own
                    for kernel, dur, kind in piece:
                        self._compiled_kernel(kernel, dur, kind)
                t.py_close(self.h + 1.0)
                self.h += 3.0
                if index < model.layers:
                    self._attention(tokens, contexts, it.gen_reqs, decode)
        t.py_close(self.h + 2.0)
        self.h += 5.0

    def _compiled_kernel(self, kernel: str, dur: float, kind: str) -> None:
        """One kernel of an inductor-compiled piece run without a graph, inside the op that launches it: Inductor's
        Triton launcher records a function named after the kernel; extern GEMMs are aten::mm; the all-reduce is vLLM's
        ``vllm::all_reduce`` custom op (with ``_C_custom_ar::all_reduce`` inside for the custom all-reduce; pynccl
        adds no op of its own); the rotary embedding is vLLM's ``_C::rotary_embedding``."""
        t = self.trace
        if kind == "triton":
            names = [kernel]
        elif "cross_device_reduce" in kernel:
            names = ["vllm::all_reduce", "_C_custom_ar::all_reduce"]
        elif kernel.startswith("nccl"):
            names = ["vllm::all_reduce"]
        elif kernel == ROTARY:
            names = ["_C::rotary_embedding"]
        else:
            names = ["aten::mm"]
        for name in names:
            t.open(name, self.h)
            self.h += 4.0
        self.h = t.launch(kind, kernel, self.h + 4.0, dur, call_dur=7.0 if kind == "driver" else 5.0) + 2.0
        for _ in names:
            t.close(self.h)
            self.h += 1.0
        self.h += 4.0

    def _eager_layers(self, tokens: int, contexts: list[int], generating: int, decode: bool) -> None:
        """enforce_eager: no compilation, vLLM's custom ops on, every kernel its own launch from an op."""
        t, model = self.trace, self.model
        small = round(2.5 + model.hidden * tokens * 6 / model.bandwidth, 3)
        t.open("aten::embedding", self.h)
        self.h = t.launch("kernel", INDEX_SELECT, self.h + 30.0, small, call_dur=8.0) + 10.0
        t.close(self.h)
        for layer in range(model.layers):
            t.py_open("vllm/model_executor/models/llama.py(302): forward", self.h)
            self.h += 15.0
            steps = [("_C::rms_norm" if layer == 0 else "_C::fused_add_rms_norm",
                      VLLM_RMS_NORM if layer == 0 else VLLM_FUSED_ADD_RMS_NORM, small),
                     ("qkv", XMMA_DECODE if decode else XMMA_PREFILL, model.gemm_us("qkv", tokens)),
                     ("_C::rotary_embedding", ROTARY, small), ("attention", "", 0.0),
                     ("o", NVJET_DECODE if decode else XMMA_PREFILL, model.gemm_us("o", tokens)),
                     ("_C::fused_add_rms_norm", VLLM_FUSED_ADD_RMS_NORM, small),
                     ("gate_up", XMMA_DECODE if decode else XMMA_PREFILL, model.gemm_us("gate_up", tokens)),
                     ("_C::silu_and_mul", VLLM_SILU_AND_MUL, small),
                     ("down", NVJET_DECODE if decode else XMMA_PREFILL, model.gemm_us("down", tokens))]
            for op, kernel, dur in steps:
                if op == "attention":
                    self._attention(tokens, contexts, generating, decode)
                elif op.startswith("_C::"):
                    t.py("vllm/model_executor/custom_op.py(44): forward", self.h, 8.0)
                    t.open(op, self.h + 10.0)
                    self.h = t.launch("kernel", kernel, self.h + 16.0, dur, call_dur=6.0) + 3.0
                    t.close(self.h)
                    self.h += 6.0
                else:  # aten::linear → aten::t, aten::matmul → aten::mm → cuBLASLt through the driver
                    t.py("vllm/model_executor/layers/linear.py(505): forward", self.h, 10.0)
                    t.open("aten::linear", self.h + 12.0)
                    t.op("aten::t", self.h + 14.0, 5.0)
                    t.open("aten::matmul", self.h + 20.0)
                    t.open("aten::mm", self.h + 24.0)
                    self.h = t.launch("driver", kernel, self.h + 36.0, dur, call_dur=7.0) + 4.0
                    t.close(self.h)
                    t.close(self.h + 2.0)
                    t.close(self.h + 4.0)
                    self.h += 12.0
            t.py_close(self.h)
            self.h += 8.0
        t.open("_C::fused_add_rms_norm", self.h)
        self.h = t.launch("kernel", VLLM_FUSED_ADD_RMS_NORM, self.h + 10.0, small, call_dur=6.0) + 4.0
        t.close(self.h)

    def _sample_and_read_back(self, it: _Iteration) -> None:
        """compute_logits (lm_head, then the TP all-gather through pynccl: no torch op around it), greedy sampling, and
        the blocking ``.tolist()`` of the int32 token ids (aten::to → aten::_to_copy → aten::copy_ → cudaMemcpyAsync to
        pageable memory, then cudaStreamSynchronize)."""
        t, model = self.trace, self.model
        reqs = it.ctx_reqs + it.gen_reqs
        t.py_open(f"{RUNNER}(1212): compute_logits", self.h)
        t.open("aten::linear", self.h + 5.0)
        t.open("aten::mm", self.h + 12.0)
        gemm = self.stack.gemm_decode if reqs <= 512 else self.stack.gemm_prefill
        self.h = t.launch("driver", gemm, self.h + 20.0, model.gemm_us("lm_head", reqs), call_dur=7.0) + 3.0
        t.close(self.h)
        t.close(self.h + 2.0)
        if model.tp > 1:
            kind = "driver" if self.stack is VLLM_CUDA else "kernel"
            self.h = t.launch(kind, self.stack.gather, self.h + 10.0, round(12.0 + reqs * 0.2, 3), call_dur=8.0) + 2.0
        t.py_close(self.h + 2.0)
        self.h += 10.0
        t.py_open("vllm/v1/sample/sampler.py(64): forward", self.h)
        t.open("aten::argmax", self.h + 8.0)
        self.h = t.launch("kernel", ARGMAX, self.h + 18.0, round(6.0 + reqs * 0.5, 3), call_dur=6.0) + 3.0
        t.close(self.h)
        t.open("aten::to", self.h + 4.0)
        t.open("aten::_to_copy", self.h + 6.0)
        t.open("aten::copy_", self.h + 9.0)
        self.h = t.launch("kernel", CAST_TO_INT, self.h + 12.0, 2.0, call_dur=5.0) + 2.0
        t.close(self.h)
        t.close(self.h + 1.0)
        t.close(self.h + 2.0)
        t.py_close(self.h + 4.0)
        self.h += 10.0
        t.py_open("<method 'tolist' of 'torch._C.TensorBase' objects>", self.h)
        t.open("aten::to", self.h + 2.0)
        t.open("aten::_to_copy", self.h + 4.0)
        t.op("aten::empty_strided", self.h + 5.0, 3.0)
        t.open("aten::copy_", self.h + 10.0)
        _, copied = t.memcpy("DtoH", "pageable", 4 * reqs, self.h + 13.0, call_dur=8.0, dur=1.6)
        self.h = t.stream_sync(self.h + 22.0, max(copied, self.h + 22.0) + 4.0)
        it.blocking_dtoh += 1
        self.host_free = self.h
        t.close(self.h + 1.0)
        t.close(self.h + 2.0)
        t.close(self.h + 3.0)
        t.py_close(self.h + 4.0)
        self.h += 8.0

    def iteration(self, ctx_reqs: int, ctx_tokens: int, gen_reqs: int, gen_tokens: int, *,
                  prep_us: float | None = None) -> _Iteration:
        t = self.trace
        it = _Iteration(_phase(ctx_tokens, gen_tokens), ctx_reqs, ctx_tokens, gen_reqs, gen_tokens)
        it.host_free_before = self.host_free
        self.h += self.gap_us  # the worker waits for the scheduler's next output
        t.py_open("vllm/v1/worker/gpu_worker.py(352): execute_model", self.h)
        self.h += 8.0
        if self.annotate:  # newer vLLM: a record_function per step (does it enclose the runner frame? *unverified*)
            annotation = t.open(f"execute_context_{ctx_reqs}({ctx_tokens})_generation_{gen_reqs}({gen_tokens})", self.h,
                                cat="user_annotation")
            self.h += 4.0
        runner = t.py_open(f"{RUNNER}(1387): execute_model", self.h)
        it.start = annotation["ts"] if self.annotate else runner["ts"]
        t.counting = it
        self.h += 10.0
        prep = (self.prep_us if prep_us is None else prep_us) * (1 + self.prep_jitter[len(self.iterations) % 10])
        t.py(f"{RUNNER}(472): _update_states", self.h, prep * 0.12)
        self.h += prep * 0.12 + 5.0
        t.py_open(f"{RUNNER}(690): _prepare_inputs", self.h)
        self.h += prep * 0.6
        self._copy_inputs(it)
        t.py_close(self.h)
        self.h += 5.0
        t.py("vllm/v1/attention/backends/utils.py(214): build", self.h, prep * 0.22)
        self.h += prep * 0.22 + 5.0
        self._forward(it)
        self._sample_and_read_back(it)
        t.counting = None
        t.py_close(self.h)  # runner
        self.h += 3.0
        if self.annotate:
            t.close(self.h)
            it.end = self.h
        else:
            it.end = runner["ts"] + runner["dur"]
        self.h += 3.0
        t.py_close(self.h)  # worker
        self.h += 2.0
        self.iterations.append(it)
        return it

    def empty_step(self) -> None:
        """The last execute_model of a capture, with nothing scheduled (it returns before any GPU work)."""
        t = self.trace
        self.h += self.gap_us
        t.py_open("vllm/v1/worker/gpu_worker.py(352): execute_model", self.h)
        t.py(f"{RUNNER}(1387): execute_model", self.h + 8.0, 45.0)
        self.h += 60.0
        t.py_close(self.h)

    def finish(self) -> None:
        self.trace.py_close(self.h + 100.0)


def _vllm_file(directory: Path, trace: _Kineto, worker: str = "gpu-node-0_48211") -> Path:
    """tensorboard_trace_handler(dir, use_gzip=True): ``{worker}.{ms}.pt.trace.json.gz``."""
    return trace.write(directory / f"{worker}.{trace.base_ns // 1_000_000 + 1}.pt.trace.json.gz")


def vllm_graph_decode_host_bound(directory: Path, decodes: int = 9, *, metadata_copies: bool = False
                                 ) -> tuple[Path, Truth]:
    """An MI300X node serving a 70B-class model with TP=4 (the trace of TP rank 0): one eager prefill of 1,049 tokens,
    then ``decodes`` batch-1 decode iterations on vLLM's piecewise HIP graphs — 81 ``hipGraphLaunch`` per decode with
    attention (``paged_attention_ll4mi_*``, ``reshape_and_cache``) eager between them, vLLM's custom all-reduce
    (``cross_device_reduce_1stage``; ``2stage`` for the prefill's larger activations) and hipBLASLt ``Cijk_…`` GEMMs
    inside. About 25 ms of host Python (``_update_states``, ``_prepare_inputs``, attention-metadata ``build``) runs
    before the replays of each decode, while the GPU, drained by the previous step's blocking read-back, waits.

    Iterations are marked by newer vLLM's ``execute_context_<n>(<tokens>)_generation_<m>(<tokens>)`` user annotation
    (and, with_stack being on, by the runner's ``execute_model`` frame inside it). Input copies per iteration:
    ``input_ids`` int32 and ``positions`` int64 (4,196 B and 8,392 B for the prefill; 4 B and 8 B per decode, bytes
    only on the ``hipMemcpyAsync`` call's ``size`` as roctracer writes it); one blocking 4-byte DtoH per iteration.
    """
    trace = _Kineto(ROCM, MI300X_PROPS, rank=0, world=4, pid=48211, host_us=6_412_345_000_000.0,
                    base_ns=1_761_500_000_000_000_000, trace_id="8F2C0D1E6A3B4C5D9E7F1A2B3C4D5E6F")
    worker = _VllmWorker(trace, LLAMA_70B_MI300X, VLLM_ROCM, annotate=True, cudagraph_sizes=(1, 2, 4, 8, 16, 24, 32),
                         prep_us=25_000.0, gap_us=400.0, metadata_copies=metadata_copies, graph_call_us=42.0,
                         attention_host_us=34.0)
    worker.iteration(1, 1049, 0, 0, prep_us=6_000.0)
    for _ in range(decodes):
        worker.iteration(0, 0, 1, 1)
    worker.finish()
    path = _vllm_file(directory, trace)
    return directory, _truth(
        worker.iterations, trace.busy, engine="vllm", platform="rocm", device=MI300X_PROPS["name"],
        model=LLAMA_70B_MI300X.name, tensor_parallel=4, rank=0, layers=80, marker="annotation",
        expected_verdict="decode is host-bound between graph replays",
        expected_top_findings=(
            "~25 ms of host Python before each decode's graph replays; the GPU idles waiting for the host",
            "GPU busy only ~40 % of a decode iteration although HIP graphs are replayed",
            "81 piecewise graph launches plus eager paged attention per decode: move host work off the critical path"
            " (async scheduling / overlap) rather than adding graphs",
        ),
        must_not_advise=("CUDA graphs", "DataLoader", "scaled_dot_product_attention", "mixed precision"),
        unverified=("hip* cid values other than hipLaunchKernel/hipExtModuleLaunchKernel",
                    "RCCL all-gather kernel name", "whether the annotation encloses the runner's execute_model frame",
                    "graph launches and their kernels carrying the annotation's External id (Kineto links a call to"
                    " the innermost record function; no real vLLM trace seen)",
                    "roctracer's gpu_memcpy without bytes on newer ROCm (the real MI250 trace, ROCm 6.2, has none)",
                    "distributedInfo pg_config keys"),
        files=(path.name,))


def vllm_graph_decode_device_bound(directory: Path, decodes: int = 9) -> tuple[Path, Truth]:
    """An H100 node, same 70B-class model and TP=4 (rank 0): one eager prefill of 1,049 tokens, then batch-1 decodes
    on piecewise CUDA graphs (81 ``cudaGraphLaunch``; ``nvjet``/``sm90_xmma`` GEMMs and
    ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` inside; ``flash_fwd_splitkv`` attention eager between them). The host
    prepares each step in about 1 ms and launches far ahead of the GPU, which is busy ≳90 % of every decode
    iteration: batch-1 decode is bound by reading ~35 GB of weights per rank per token.

    Older vLLM: no annotation; iterations are the runner's ``…/gpu_model_runner.py(1387): execute_model`` Python
    frames (with_stack), and the last one is empty (nothing scheduled). The graph launches carry no ``External id``
    (no op encloses them), like the real graph trace's."""
    trace = _Kineto(CUDA, H100_PROPS, rank=0, world=4, pid=51873, host_us=8_812_345_000_000.0,
                    base_ns=1_761_600_000_000_000_000, trace_id="1B7E0C9D2A4F4E8B8C6D5A3F2E1D0C9B")
    worker = _VllmWorker(trace, LLAMA_70B_H100, VLLM_CUDA, annotate=False, cudagraph_sizes=(1, 2, 4, 8, 16, 24, 32),
                         prep_us=700.0, gap_us=150.0)
    worker.iteration(1, 1049, 0, 0, prep_us=3_000.0)
    for _ in range(decodes):
        worker.iteration(0, 0, 1, 1)
    worker.empty_step()
    worker.finish()
    path = _vllm_file(directory, trace, "gpu-node-1_51873")
    return directory, _truth(
        worker.iterations, trace.busy, engine="vllm", platform="cuda", device=H100_PROPS["name"],
        model=LLAMA_70B_H100.name, tensor_parallel=4, rank=0, layers=80, marker="execute_model",
        expected_verdict="decode is device-bound: batch-1 decode is limited by reading the weights",
        expected_top_findings=(
            "GPU busy ≳90 % of each decode iteration; GEMMs read ~35 GB of weights per rank per token",
            "decode runs at batch 1: raising the batch (more concurrent requests) is the lever, not kernels",
            "CUDA graphs are on (81 piecewise replays per decode); attention runs eagerly between them",
        ),
        must_not_advise=("CUDA graphs", "DataLoader", "scaled_dot_product_attention", "host-bound",
                         "launch overhead"),
        unverified=("distributedInfo pg_config keys",),
        files=(path.name,))


def vllm_eager_decode(directory: Path, decodes: int = 8) -> tuple[Path, Truth]:
    """vLLM with ``enforce_eager`` on one H100, an 8B-class model: a 512-token prefill, then batch-1 decodes with no
    graphs — every kernel launched on its own (about 360 per decode: ``cudaLaunchKernel`` for vLLM's custom ops and
    ATen kernels, ``cuLaunchKernelEx`` for cuBLASLt GEMMs and FlashAttention), each behind its Python module and op
    dispatch. The GPU idles between kernels waiting for launches: like the real ``decode_eager_small`` trace, but
    marked by the ``execute_context_…`` annotation and carrying the step's input copies."""
    trace = _Kineto(CUDA, H100_PROPS, rank=0, world=1, pid=30311, host_us=7_712_345_000_000.0,
                    base_ns=1_761_700_000_000_000_000, trace_id="5D3C1B0A9F8E4D7C6B5A4F3E2D1C0B9A")
    worker = _VllmWorker(trace, LLAMA_8B_H100, VLLM_CUDA, annotate=True, cudagraph_sizes=(), eager=True,
                         prep_us=900.0, gap_us=200.0, attention_host_us=45.0)
    worker.iteration(1, 512, 0, 0, prep_us=1_500.0)
    for _ in range(decodes):
        worker.iteration(0, 0, 1, 1)
    worker.finish()
    path = _vllm_file(directory, trace, "gpu-node-2_30311")
    return directory, _truth(
        worker.iterations, trace.busy, engine="vllm", platform="cuda", device=H100_PROPS["name"],
        model=LLAMA_8B_H100.name, tensor_parallel=1, rank=0, layers=32, marker="annotation",
        expected_verdict="decode is launch-bound: the GPU waits for kernel launches between kernels",
        expected_top_findings=(
            "hundreds of eager kernel launches per decode iteration and no graph launches",
            "GPU idle between kernels for most of each decode iteration",
            "enable CUDA graphs (drop enforce_eager) so each decode replays one graph per piece",
        ),
        must_not_advise=("DataLoader", "scaled_dot_product_attention", "mixed precision"),
        unverified=(),
        files=(path.name,))


def vllm_prefill_heavy(directory: Path) -> tuple[Path, Truth]:
    """Many long-prompt requests on one H100 (8B-class model, chunked prefill with max_num_batched_tokens 8,192):
    two full prefill iterations, three mixed iterations (context chunks and generation tokens in one step — run
    without graphs, their token counts being above the largest capture size), then three pure decodes of 24 tokens
    replayed from piecewise graphs (33 launches). The GPU is saturated by GEMMs and attention in the prefill and
    mixed steps; the capture is device-bound."""
    trace = _Kineto(CUDA, H100_PROPS, rank=0, world=1, pid=40127, host_us=9_112_345_000_000.0,
                    base_ns=1_761_800_000_000_000_000, trace_id="9A8B7C6D5E4F40312233445566778899")
    worker = _VllmWorker(trace, LLAMA_8B_H100, VLLM_CUDA, annotate=True,
                         cudagraph_sizes=(1, 2, 4, 8, 16, 24, 32, 48, 64, 128, 256, 512), prep_us=1_200.0, gap_us=200.0,
                         kv_len=2600)
    for ctx_reqs, ctx_tokens, gen_reqs, gen_tokens in ((4, 8192, 0, 0), (4, 8192, 0, 0), (3, 8184, 8, 8),
                                                       (2, 8176, 16, 16), (1, 4096, 24, 24)):
        worker.iteration(ctx_reqs, ctx_tokens, gen_reqs, gen_tokens, prep_us=2_500.0)
    for _ in range(3):
        worker.iteration(0, 0, 24, 24)
    worker.finish()
    path = _vllm_file(directory, trace, "gpu-node-3_40127")
    return directory, _truth(
        worker.iterations, trace.busy, engine="vllm", platform="cuda", device=H100_PROPS["name"],
        model=LLAMA_8B_H100.name, tensor_parallel=1, rank=0, layers=32, marker="annotation",
        expected_verdict="prefill-dominated serving, device-bound on GEMMs and attention",
        expected_top_findings=(
            "prefill and mixed (chunked-prefill) iterations take most of the capture",
            "GEMMs then attention dominate device time; the GPU is busy throughout the long steps",
            "TTFT is the prefill step's duration (~150+ ms per 8,192-token step): chunk size / prefill priority trade"
            " TTFT against decode latency",
        ),
        must_not_advise=("CUDA graphs", "DataLoader", "scaled_dot_product_attention", "host-bound"),
        unverified=(),
        files=(path.name,))


# ---------------------------------------------------------------------------------------------------------------------
# SGLang: one trace file per stage
# ---------------------------------------------------------------------------------------------------------------------

FI_RMSNORM = ("void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, "
              "unsigned int, unsigned int, unsigned int, float, float)")
FI_FUSED_ADD_RMSNORM = ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, "
                        "__nv_bfloat16*, __nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)")
FI_ROPE = ("void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheHeadParallelismKernel<false, 128u, 8u, 16u, "
           "__nv_bfloat16, long>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, float*, long*, "
           "unsigned int, unsigned int, unsigned int, unsigned int, unsigned long, unsigned long, unsigned long, "
           "unsigned long, unsigned long, unsigned long, unsigned long, unsigned long)")
KV_STORE = ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_put_kern"
            "el_impl<at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lamb"
            "da(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::n"
            "ative::index_put_kernel_impl<at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::A"
            "rrayRef<long>)::{lambda(char*, char const*, long)#1} const&, bool)::{lambda(int)#1}>(long, at::native::gp"
            "u_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<2> >(at::TensorIterator&, c10::Ar"
            "rayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::A"
            "rrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<at::native::OpaqueType<2> >(at::Ten"
            "sorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&, boo"
            "l)::{lambda(int)#1})")
FI_DECODE = ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 2u, 8u, 16u, 1u, "
             "8u, flashinfer::DefaultAttention<false, false, false, false>, flashinfer::BatchDecodeParams<__nv_bfloat1"
             "6, __nv_bfloat16, __nv_bfloat16, int> >(flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv"
             "_bfloat16, int>)")
FI_PREFILL = ("void flashinfer::BatchPrefillWithRaggedKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)1, "
              "128u, 1u, 4u, 8u, 8u, 1u, 4u, (flashinfer::PosEncodingMode)0, __nv_bfloat16, __nv_bfloat16, "
              "__nv_bfloat16, float, int, flashinfer::DefaultAttention<false, false, false, false> >, "
              "flashinfer::BatchPrefillRaggedParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> >"
              "(flashinfer::BatchPrefillRaggedParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>)")
FI_SILU_AND_MUL = ("void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*, "
                   "__nv_bfloat16 const*, int)")
SGL_CUSTOM_ALLREDUCE = ("void sglang::cross_device_reduce_1stage<__nv_bfloat16, 2>(sglang::RankData*, "
                        "sglang::RankSignals, sglang::Signal*, __nv_bfloat16*, int, int)")
SGLANG = "sglang/srt"


def _sglang_layer(model: _Llm, tokens: int, reqs: int, kv_len: int) -> list[tuple[str, str, float, str]]:
    """One decoder layer as SGLang runs it: (op, kernel, µs, launch kind). Op names of sgl-kernel/flashinfer's torch
    ops are *unverified*."""
    small = round(2.5 + model.hidden * tokens * 6 / model.bandwidth, 3)
    decode = tokens == reqs
    gemm = NVJET_DECODE if decode else HOPPER_NVJET_GEMM
    activation = model.hidden * tokens * 2
    if activation <= 8 << 20:  # the custom all-reduce's default size limit; above it, NCCL through torch.distributed
        allreduce = ("sgl_kernel::all_reduce", SGL_CUSTOM_ALLREDUCE, round(9.0 + activation / 4e5, 3), "kernel")
    else:
        allreduce = ("nccl:all_reduce", NCCL_ALLREDUCE, round(12.0 + activation / 4e5, 3), "driver")
    kv_bytes = kv_len * 2 * (model.kv_heads * (model.hidden // model.heads) // model.tp) * 2
    attention = (("flashinfer::batch_decode_run", FI_DECODE, round(5.0 + reqs * kv_bytes / model.bandwidth, 3),
                  "kernel") if decode else ("flashinfer::batch_prefill_ragged_run", FI_PREFILL,
                                 model.attention_us([tokens // reqs] * reqs, 0, 0), "kernel"))
    return [("sgl_kernel::fused_add_rmsnorm", FI_FUSED_ADD_RMSNORM, small, "kernel"),
            ("aten::mm", gemm, model.gemm_us("qkv", tokens), "driver"),
            ("sgl_kernel::apply_rope_pos_ids_cos_sin_cache", FI_ROPE, small, "kernel"),
            ("aten::index_put_", KV_STORE, round(2.0 + tokens * 0.002, 3), "kernel"), attention,
            ("aten::mm", gemm, model.gemm_us("o", tokens), "driver"), allreduce,
            ("sgl_kernel::fused_add_rmsnorm", FI_FUSED_ADD_RMSNORM, small, "kernel"),
            ("aten::mm", gemm, model.gemm_us("gate_up", tokens), "driver"),
            ("sgl_kernel::silu_and_mul", FI_SILU_AND_MUL, small, "kernel"),
            ("aten::mm", gemm, model.gemm_us("down", tokens), "driver"), allreduce]


def _sglang_trace(base_ns: int, host_us: float, trace_id: str, pid: int) -> _Kineto:
    trace = _Kineto(CUDA, H100_PROPS, rank=0, world=2, pid=pid, host_us=host_us, base_ns=base_ns, trace_id=trace_id)
    trace.threads[pid + 183] = "python3"  # the overlap scheduler's forward thread
    return trace


def sglang_stage_files(directory: Path, extends: int = 3, decodes: int = 6, batch: int = 4) -> tuple[Path, Truth]:
    """SGLang's profile-by-stage output for TP rank 0 of a TP=2 8B-class deployment on H100s: one profiler session per
    stage, written as ``<profile id>-TP-0-EXTEND.trace.json.gz`` (prefill: ``extends`` batches of ``batch`` prompts of
    1,024 tokens, eager) and ``<profile id>-TP-0-DECODE.trace.json.gz`` (``decodes`` decode batches of ``batch``
    requests, each replayed from one whole-model CUDA graph) in one directory.

    SGLang's default overlap scheduler runs the model on a separate forward thread: each iteration is that thread's
    ``sglang/srt/model_executor/model_runner.py(…): forward`` frame (with_stack is SGLang's profiler default;
    record_shapes is off); before a decode replay, ``replay_prepare`` copies the batch into the graph's static buffers
    (device-to-device); the sampled ids go to pinned memory with a non-blocking ``cudaMemcpyAsync`` followed by
    ``cudaEventRecord``, and the scheduler's main thread blocks in ``cudaEventSynchronize`` before reading them.
    Prompts arrive by a ``torch.tensor(…, dtype=int64).to(device, non_blocking=True)`` copy from pageable memory on the
    main thread; decode batches copy no token ids from the host (the next input ids stay on the device)."""
    model, kv_len = LLAMA_8B_H100_TP2, 1100
    pid = 61729
    forward_tid = pid + 183
    profile_id = "1761573242.8316586"
    iterations: list[_Iteration] = []
    busy: list[tuple[float, float]] = []
    ttft: list[float] = []
    written: list[str] = []

    def sample(trace: _Kineto, h: float, it: _Iteration) -> tuple[float, float]:
        """Greedy sampling on the forward thread and the non-blocking read-back; returns (host time, copy end)."""
        trace.py_open(f"{SGLANG}/layers/sampler.py(73): forward", h, tid=forward_tid)
        trace.open("aten::argmax", h + 5.0, tid=forward_tid)
        h = trace.launch("kernel", ARGMAX, h + 12.0, round(6.0 + batch * 0.5, 3), tid=forward_tid) + 2.0
        trace.close(h, tid=forward_tid)
        trace.py_close(h + 2.0, tid=forward_tid)
        h += 6.0
        trace.open("aten::to", h, tid=forward_tid)
        trace.open("aten::_to_copy", h + 2.0, tid=forward_tid)
        trace.open("aten::copy_", h + 5.0, tid=forward_tid)
        _, copied = trace.memcpy("DtoH", "pinned", 4 * batch, h + 8.0, tid=forward_tid)
        h += 16.0
        trace.close(h, tid=forward_tid)
        trace.close(h + 1.0, tid=forward_tid)
        trace.close(h + 2.0, tid=forward_tid)
        name, cbid = CUDA.event_record
        trace.call(name, "cuda_runtime", cbid, h + 4.0, 3.0, tid=forward_tid, flow=False)
        it.blocking_dtoh += 1  # waited for by the main thread's cudaEventSynchronize
        return h + 8.0, copied

    def resolve(trace: _Kineto, at: float, copied: float, prefill: bool) -> float:
        """The scheduler's main thread blocks until the batch's copy is done, then reads the ids."""
        phase = "prefill" if prefill else "decode"
        trace.py_open(f"{SGLANG}/managers/scheduler_output_processor_mixin.py(61): process_batch_result_{phase}", at)
        trace.py_open(f"{SGLANG}/managers/tp_worker_overlap_thread.py(225): resolve_last_batch_result", at + 3.0)
        name, cbid = CUDA.event_sync
        end = max(copied, at + 6.0) + 5.0
        trace.call(name, "cuda_runtime", cbid, at + 6.0, end - at - 6.0, flow=False)
        trace.py_close(end + 2.0)
        trace.py_close(end + 30.0)
        return end

    # EXTEND ---------------------------------------------------------------------------------------------------------
    trace = _sglang_trace(1_761_573_242_000_000_000, 5_512_345_000_000.0, "0C1D2E3F405162738495A6B7C8D9EAFB", pid)
    trace.py_open(f"{SGLANG}/managers/tp_worker_overlap_thread.py(142): forward_thread_func_", trace.t0 + 3.0,
                  tid=forward_tid)
    trace.py_open(f"{SGLANG}/managers/scheduler.py(771): event_loop_overlap", trace.t0 + 4.0)
    h = main = trace.t0 + 500.0
    tokens = 1024 * batch
    for _ in range(extends):
        it = _Iteration("prefill", batch, tokens, 0, 0)
        it.host_free_before = h
        trace.py_open(f"{SGLANG}/managers/schedule_batch.py(1105): prepare_for_extend", main)
        trace.open("aten::to", main + 900.0)
        trace.open("aten::_to_copy", main + 903.0)
        trace.open("aten::copy_", main + 910.0)
        trace.memcpy("HtoD", "pageable", 8 * tokens, main + 915.0, call_dur=18.0, dur=4.0)
        trace.close(main + 940.0)
        trace.close(main + 942.0)
        trace.close(main + 944.0)
        trace.py_close(main + 1_100.0)
        h = max(h, main + 1_150.0)
        it.htod = None
        trace.counting = it
        trace.py_open(f"{SGLANG}/managers/tp_worker.py(226): forward_batch_generation", h, tid=forward_tid)
        runner = trace.py_open(f"{SGLANG}/model_executor/model_runner.py(1740): forward", h + 6.0, tid=forward_tid)
        trace.py_open(f"{SGLANG}/model_executor/model_runner.py(1647): forward_extend", h + 12.0, tid=forward_tid)
        it.start = runner["ts"]
        h += 40.0
        for _ in range(model.layers):
            trace.py_open(f"{SGLANG}/models/llama.py(292): forward", h, tid=forward_tid)
            h += 12.0
            for op, kernel, dur, kind in _sglang_layer(model, tokens, batch, kv_len):
                if op == "nccl:all_reduce":  # torch.distributed: c10d op, kernel on NCCL's own stream
                    trace.open("c10d::allreduce_", h, tid=forward_tid)
                    trace.open(op, h + 8.0, tid=forward_tid)
                    h = trace.launch(kind, kernel, h + 20.0, dur, call_dur=9.0, tid=forward_tid, stream=23) + 4.0
                    trace.close(h, tid=forward_tid)
                    trace.close(h + 2.0, tid=forward_tid)
                else:
                    trace.open(op, h, tid=forward_tid)
                    h = trace.launch(kind, kernel, h + 14.0, dur, call_dur=6.0, tid=forward_tid) + 3.0
                    trace.close(h, tid=forward_tid)
                h += 9.0
            trace.py_close(h, tid=forward_tid)
            h += 5.0
        trace.open("aten::mm", h, tid=forward_tid)  # the logits of each prompt's last token
        h = trace.launch("driver", NVJET_DECODE, h + 12.0, model.gemm_us("lm_head", batch), tid=forward_tid) + 3.0
        trace.close(h, tid=forward_tid)
        trace.py_close(h + 2.0, tid=forward_tid)  # forward_extend
        trace.py_close(h + 4.0, tid=forward_tid)  # forward
        it.end = h + 4.0
        h, copied = sample(trace, h + 8.0, it)
        trace.py_close(h, tid=forward_tid)
        trace.counting = None
        done = resolve(trace, h + 5.0, copied, prefill=True)
        ttft.append(done - it.start)
        iterations.append(it)
        main = done + 400.0
        h = main
    trace.py_close(main, tid=None)
    trace.py_close(h + 10.0, tid=forward_tid)
    busy += trace.busy
    name = f"{profile_id}-TP-0-EXTEND.trace.json.gz"
    trace.write(directory / name)
    written.append(name)

    # DECODE ---------------------------------------------------------------------------------------------------------
    trace = _sglang_trace(1_761_573_251_000_000_000, 5_521_345_000_000.0, "1D2E3F405162738495A6B7C8D9EAFB0C", pid)
    trace.py_open(f"{SGLANG}/managers/tp_worker_overlap_thread.py(142): forward_thread_func_", trace.t0 + 3.0,
                  tid=forward_tid)
    trace.py_open(f"{SGLANG}/managers/scheduler.py(771): event_loop_overlap", trace.t0 + 4.0)
    graph = []
    small = round(2.5 + model.hidden * batch * 6 / model.bandwidth, 3)
    graph.append((INDEX_SELECT, small))
    for _ in range(model.layers):
        graph += [(kernel, dur) for _, kernel, dur, _ in _sglang_layer(model, batch, batch, kv_len)]
    graph += [(FI_RMSNORM, small), (NVJET_DECODE, model.gemm_us("lm_head", batch)),
              (NCCL_ALLGATHER, round(12.0 + batch * 0.2, 3))]  # logits gathered across TP inside the graph
    h = trace.t0 + 400.0
    last_free = h
    main = h
    pending: tuple[float, float] | None = None
    for index in range(decodes):
        it = _Iteration("decode", 0, 0, batch, batch)
        # the forward thread takes batch k as soon as it is scheduled: about when the GPU is finishing batch k-1
        h = max(last_free + 60.0, trace.stream_free - 700.0) if index else h
        it.host_free_before = h  # the forward thread idles on its queue until the batch arrives: not host work
        trace.counting = it
        trace.py_open(f"{SGLANG}/managers/tp_worker.py(226): forward_batch_generation", h, tid=forward_tid)
        runner = trace.py_open(f"{SGLANG}/model_executor/model_runner.py(1740): forward", h + 6.0, tid=forward_tid)
        it.start = runner["ts"]
        trace.py_open(f"{SGLANG}/model_executor/model_runner.py(1610): forward_decode", h + 12.0, tid=forward_tid)
        trace.py_open(f"{SGLANG}/model_executor/cuda_graph_runner.py(734): replay", h + 18.0, tid=forward_tid)
        trace.py_open(f"{SGLANG}/model_executor/cuda_graph_runner.py(681): replay_prepare", h + 22.0, tid=forward_tid)
        h += 60.0
        for _ in range(4):  # input_ids, req_pool_indices, seq_lens, out_cache_loc into the graph's static buffers
            trace.open("aten::copy_", h, tid=forward_tid)
            trace.memcpy("DtoD", "device", 8 * batch, h + 5.0, call_dur=6.0, dur=1.5, tid=forward_tid)
            trace.close(h + 14.0, tid=forward_tid)
            h += 22.0
        trace.py_close(h, tid=forward_tid)
        trace.py_open("torch/cuda/graphs.py(137): replay", h + 4.0, tid=forward_tid)
        h = trace.graph_launch(graph, h + 8.0, 28.0, tid=forward_tid) + 3.0
        trace.py_close(h, tid=forward_tid)
        trace.py_close(h + 2.0, tid=forward_tid)  # replay
        trace.py_close(h + 3.0, tid=forward_tid)  # forward_decode
        trace.py_close(h + 4.0, tid=forward_tid)  # forward
        it.end = h + 4.0
        h, copied = sample(trace, h + 8.0, it)
        trace.py_close(h, tid=forward_tid)
        trace.counting = None
        last_free = h
        if pending is not None:  # the main thread resolves batch k-1 after launching batch k (overlap)
            main = resolve(trace, max(main, pending[0]), pending[1], prefill=False) + 40.0
        pending = (h + 10.0, copied)
        iterations.append(it)
    main = resolve(trace, max(main, pending[0]), pending[1], prefill=False) + 40.0
    trace.py_close(main)
    trace.py_close(h + 20.0, tid=forward_tid)
    busy += trace.busy
    name = f"{profile_id}-TP-0-DECODE.trace.json.gz"
    trace.write(directory / name)
    written.append(name)
    return directory, _truth(
        iterations, busy, ttft_us=ttft[0], engine="sglang", platform="cuda", device=H100_PROPS["name"],
        model=model.name, tensor_parallel=2, rank=0, layers=model.layers, marker="stage files + model_runner forward",
        expected_verdict="decode is device-bound: graph replays back to back, the overlap scheduler hides host work",
        expected_top_findings=(
            "one CUDA-graph replay per decode batch and the GPU busy nearly all of each decode iteration",
            f"decode batch of {batch} bound by weight reads: more concurrent requests raise tokens/s",
            "extend (prefill) iterations are GEMM-bound",
        ),
        must_not_advise=("CUDA graphs", "DataLoader", "overlap scheduling", "scaled_dot_product_attention"),
        unverified=("SGLang file-name prefix (str(time.time())) and stage suffixes",
                    "sgl-kernel / flashinfer op names and sglang:: custom all-reduce namespace",
                    "replay_prepare copies device-to-device; no HtoD token copies in decode",
                    "prompt ids copied as int64 from pageable memory; positions computed on the device",
                    "the overlap scheduler's read-back: non-blocking DtoH + cudaEventRecord / cudaEventSynchronize"),
        files=tuple(written))


# ---------------------------------------------------------------------------------------------------------------------
# vLLM-Ascend: *_ascend_pt directories (torch_npu 2.7.1 + CANN 8.3 shapes, Level1, PipeUtilization, no schedule)
# ---------------------------------------------------------------------------------------------------------------------

# The reference's Level1 header (A2, PipeUtilization, CANN 8.1–8.5, torch_npu ≥2.6) without ``Step Id``, which torch_npu
# writes only when it found ProfilerStep#N — serving engines call the profiler without a schedule.
KERNEL_DETAILS_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
    "Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,"
    "aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),"
    "aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,"
    "aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,"
    "aiv_icache_miss_rate,cube_utilization(%)").split(",")
STEP_TRACE_HEADER = ("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
                     "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing").split(",")
OP_STATISTIC_HEADER = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),"
                       "Ratio(%)").split(",")
API_STATISTIC_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance".split(",")
OPERATOR_DETAILS_HEADER = ("Name,Input Shapes,Call Stack,Host Self Duration(us),Host Total Duration(us),"
                           "Device Self Duration(us),Device Total Duration(us),Device Self Duration With AICore(us),"
                           "Device Total Duration With AICore(us)").split(",")
INVALID = 4294967295  # UINT32_MAX: Model ID of eager (single-op) tasks
AIC_FREQ_MHZ, AIC_CORES = 1650, 20  # Atlas A2 (910B): the samples' device info


def double_hash(text: str) -> int:
    """msprof-analyze's communicator hash: two 32-bit polynomial hashes (primes 29 and 131), high/low."""
    high = low = 0
    for ch in text:
        high = (high * 29 + ord(ch)) & 0xFFFFFFFF
        low = (low * 131 + ord(ch)) & 0xFFFFFFFF
    return (high << 32) | low


@dataclass(frozen=True)
class _NpuOp:
    """One eager operator: the torch op, its aclnn API, and the kernel it puts on the device."""

    torch_op: str
    acl: str
    kernel: str
    op_type: str
    core: str
    dur: float
    shapes: tuple[str, str, str, str, str, str] = ("", "DT_BF16", "ND", "", "DT_BF16", "ND")
    blocks: int = 0


QWEN_7B_910B = _Llm("Qwen2-7B-class (28 layers, hidden 3584, GQA 28/4, bf16)", 28, 3584, 28, 4, 18944, 152064, 2,
                    bandwidth=1.6e6 * 0.6, flops=313e6 * 0.55)


def _npu_layer_ops(model: _Llm, tokens: int, reqs: int, attention: str, kv_len: int = 1100) -> list[_NpuOp | str]:
    """A Qwen2 decoder layer as vLLM-Ascend runs it eagerly; the strings are the TP all-reduces."""
    h, kv = model.hidden, model.kv_heads * (model.hidden // model.heads) // model.tp
    shapes = model.gemm_shapes()
    vec = round(3.0 + h * tokens * 6 / model.bandwidth, 3)

    def mm(which: str, torch_op: str = "aten::mm", acl: str = "aclnnMm") -> _NpuOp:
        k, n = shapes[which]
        kernel = f"{acl}_MatMulV3Common_MatMulV3" if acl == "aclnnMm" else "aclnnAddmm_MatMulCommon_MatMulV2"
        return _NpuOp(torch_op, acl, kernel, "MatMulV3" if acl == "aclnnMm" else "MatMulV2", "AI_CORE",
                      model.gemm_us(which, tokens) + 2.0,
                      (f'"{tokens},{k};{k},{n}"', "DT_BF16;DT_BF16", "ND;ND", f'"{tokens},{n}"', "DT_BF16", "ND"), 20)

    norm = _NpuOp("npu::npu_add_rms_norm", "aclnnAddRmsNorm", "aclnnAddRmsNorm_AddRmsNorm_AddRmsNorm", "AddRmsNorm",
                  "AI_VECTOR_CORE", vec,
                  (f'"{tokens},{h};{tokens},{h};{h}"', "DT_BF16;DT_BF16;DT_BF16", "ND;ND;ND",
                   f'"{tokens},{h};{tokens},1;{tokens},{h}"', "DT_BF16;FLOAT;DT_BF16", "ND;ND;ND"), 40)
    if attention == "prefill":
        d = model.hidden // model.tp
        attn = _NpuOp("npu::npu_fusion_attention", "aclnnFlashAttentionScore",
                      "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore", "FlashAttentionScore",
                      "MIX_AIC", model.attention_us([tokens // reqs] * reqs, 0, 0) + 8.0,
                      (f'"{tokens},{d};{tokens},{kv};{tokens},{kv}"', "DT_BF16;DT_BF16;DT_BF16", "ND;ND;ND",
                       f'"{tokens},{d}"', "DT_BF16", "ND"), 20)
    else:
        acl, name, op_type, torch_op = {
            "ifa": ("aclnnIncreFlashAttentionV4", "aclnnIncreFlashAttentionV4_IncreFlashAttention_IncreFlashAttention",
                    "IncreFlashAttention", "npu::npu_incre_flash_attention"),
            "fia": ("aclnnFusedInferAttentionScoreV3",
                    "aclnnFusedInferAttentionScoreV3_FusedInferAttentionScore_FusedInferAttentionScore",
                    "FusedInferAttentionScore", "npu::npu_fused_infer_attention_score")}[attention]
        d = model.hidden // model.tp
        attn = _NpuOp(torch_op, acl, name, op_type, "MIX_AIC", model.attention_us([], reqs, kv_len) + 12.0,
                      (f'"{reqs},1,{d};{reqs * 128},128,{kv}"', "DT_BF16;DT_BF16", "ND;ND", f'"{reqs},1,{d}"',
                       "DT_BF16", "ND"), 20)
    return [
        norm, mm("qkv", "aten::addmm", "aclnnAddmm"),
        _NpuOp("npu::npu_apply_rotary_pos_emb", "aclnnApplyRotaryPosEmb",
               "aclnnApplyRotaryPosEmb_ApplyRotaryPosEmb_ApplyRotaryPosEmb", "ApplyRotaryPosEmb", "AI_VECTOR_CORE",
               vec + 2.0, blocks=40),
        # the KV-cache write: a ScatterPagedKVCache-like op (which op vLLM-Ascend calls varies: *unverified*)
        _NpuOp("npu::npu_scatter_pa_kv_cache", "aclnnScatterPaKvCache",
               "aclnnScatterPaKvCache_ScatterPaKvCache_ScatterPaKvCache", "ScatterPaKvCache", "AI_VECTOR_CORE",
               round(4.0 + tokens * 0.01, 3), blocks=40),
        attn, mm("o"), "allreduce", norm, mm("gate_up"),
        _NpuOp("npu::npu_swiglu", "aclnnSwiGlu", "aclnnSwiGlu_SwiGlu_SwiGlu", "SwiGlu", "AI_VECTOR_CORE", vec + 1.0,
               blocks=40),
        mm("down"), "allreduce"]


def _npu_prep_ops(tokens: int) -> list[_NpuOp]:
    """What the runner's input preparation puts on the device each step: AI-CPU index ops, a cast, a format change."""
    n = max(tokens, 1)
    return [_NpuOp("aten::index_put_", "aclnnIndexPutImpl", "aclnnIndexPutImpl_IndexPutV2_IndexPutV2", "IndexPutV2",
                   "AI_CPU", 62.0, (f'"{n},512;{n}"', "INT32;INT64", "ND;ND", f'"{n},512"', "INT32", "ND")),
            _NpuOp("aten::nonzero", "aclnnNonzero", "aclnnNonzero_NonZero_NonZero", "NonZero", "AI_CPU", 48.0,
                   (f'"{max(tokens, 1)}"', "BOOL", "ND", f'"{max(tokens, 1)},1"', "INT64", "ND")),
            _NpuOp("aten::_to_copy", "aclnnCast", "aclnnCast_CastAiCore_Cast", "Cast", "AI_VECTOR_CORE", 3.2,
                   (f'"{max(tokens, 1)}"', "INT64", "ND", f'"{max(tokens, 1)}"', "INT32", "ND"), 8),
            _NpuOp("aten::copy_", "aclnnInplaceCopy", "trans_TransData_0", "TransData", "AI_VECTOR_CORE", 4.6,
                   (f'"{max(tokens, 1)},128"', "DT_BF16", "ND", f'"8,{max(tokens, 1)},16,16"', "DT_BF16", "FRACTAL_NZ"),
                   8)]


class _AscendRank:
    """One vLLM-Ascend worker process profiled by torch_npu: the Python lane (main thread, task-queue thread), the CANN
    host layer, the device's streams and collectives, and what torch_npu derives from them."""

    def __init__(self, model: _Llm, *, pid: int, base_us: int, rank: int = 0, device: int = 0,
                 with_stack: bool = False, group: str = "group_name_3", prof_ts: str = "20251127192733456") -> None:
        self.model, self.pid, self.rank, self.device, self.with_stack = model, pid, rank, device, with_stack
        self.main, self.deq = pid, pid + 2871  # the task-queue (dequeue) thread launches on the NPU
        self.cann = (pid << 10) | (7 << 5) | 31
        self.hw = (pid << 10) | (14 << 5) | device
        self.freq = (pid << 10) | (15 << 5) | device
        self.comm = (pid << 10) | (16 << 5) | device
        self.overlap = (pid << 10) | (31 << 5) | device
        self.group, self.group_hash = group, double_hash(group)
        self.prof_ts = prof_ts
        # times are kept relative to an integer µs base and written by string arithmetic: a float64 near 1.76e15 µs
        # keeps only 0.25 µs, and torch_to_npu ids must be the exact ns of the device start
        self.base = base_us
        self.h = self.deq_free = self.npu_free = 0.0
        self.framework: list[dict] = []
        self.timeline: list[dict] = []
        self.torch_flows: list[dict] = []
        self.tasks: list[dict] = []  # device tasks with operator info (kernel_details rows) and collectives
        self.others: list[tuple[float, float]] = []  # device tasks without operator info (copies, notifies)
        self.comm_ops: list[dict] = []
        self.connection = 9000
        self.task_id = 34000
        self.correlation = 1000
        self.hcom_index = 0
        self.ops: list[dict] = []  # torch op nodes for operator_details.csv
        self.node_of: dict[int, dict] = {}
        self.op_stack: list[dict] = []
        self.py_stack: list[dict] = []
        self.python_id = 0
        self.counting: _Iteration | None = None
        self.capturing = False
        self.streams = {2}

    # -- Python lane --------------------------------------------------------------------------------------------------

    def abs_ts(self, rel: float) -> str:
        """A relative time as the absolute µs string with 3 decimals that torch_npu writes."""
        whole, fraction = f"{rel:.3f}".split(".")
        return f"{self.base + int(whole)}.{fraction}"

    def abs_ns(self, rel: float) -> int:
        return self.base * 1000 + round(rel * 1000)

    def cpu_open(self, name: str, ts: float) -> dict:
        event = {"ph": "X", "name": name, "pid": self.pid, "tid": self.main, "ts": ts, "dur": 0.0, "cat": "cpu_op",
                 "args": {"Sequence number": -1, "Fwd thread id": 0}}
        self.framework.append(event)
        node = {"event": event, "children": [], "device": []}
        if self.op_stack:
            self.op_stack[-1]["children"].append(node)
        self.ops.append(node)
        self.node_of[id(event)] = node
        self.op_stack.append(node)
        return event

    def cpu_close(self, end: float) -> None:
        node = self.op_stack.pop()
        node["event"]["dur"] = round(end - node["event"]["ts"], 3)

    def py_open(self, name: str, ts: float) -> dict | None:
        if not self.with_stack:
            return None
        self.python_id += 1
        parent = self.py_stack[-1]["args"]["Python id"] if self.py_stack else None
        event = {"ph": "X", "name": name, "pid": self.pid, "tid": self.main, "ts": ts, "dur": 0.0,
                 "cat": "python_function", "args": {"Python id": self.python_id, "Python parent id": parent}}
        self.framework.append(event)
        self.py_stack.append(event)
        return event

    def py_close(self, end: float) -> None:
        if self.with_stack:
            event = self.py_stack.pop()
            event["dur"] = round(end - event["ts"], 3)

    def _enqueue(self, api: str, ts: float) -> float:
        """Enqueue@<api> on the calling thread, Dequeue@<api> on the task-queue thread; returns the dequeue start."""
        self.correlation += 1
        self.framework.append({"ph": "X", "name": f"Enqueue@{api}", "pid": self.pid, "tid": self.main, "ts": ts,
                               "dur": 5.2, "cat": "enqueue", "args": {"correlation_id": self.correlation}})
        self.framework.append({"ph": "s", "bp": "e", "name": "enqueue_to_dequeue", "id": self.correlation,
                               "pid": self.pid, "tid": self.main, "ts": ts, "cat": "async_task_queue"})
        start = max(self.deq_free, ts + 4.2)
        self.framework.append({"ph": "f", "bp": "e", "name": "enqueue_to_dequeue", "id": self.correlation,
                               "pid": self.pid, "tid": self.deq, "ts": start, "cat": "async_task_queue"})
        return start

    def _dequeue(self, api: str, start: float, dur: float) -> None:
        self.framework.append({"ph": "X", "name": f"Dequeue@{api}", "pid": self.pid, "tid": self.deq, "ts": start,
                               "dur": round(dur, 3), "cat": "dequeue", "args": {"correlation_id": self.correlation}})
        self.deq_free = start + dur + 2.0

    # -- CANN host layer ----------------------------------------------------------------------------------------------

    def acl(self, api: str, ts: float, dur: float, mode: str, *, tid: int | None = None) -> int:
        self.connection += 1
        tid = self.deq if tid is None else tid
        self.timeline.append({"name": f"AscendCL@{api}", "pid": self.cann, "tid": tid, "ts": ts, "dur": round(dur, 3),
                              "ph": "X", "args": {"Thread Id": tid, "Mode": mode, "level": "acl", "id": api,
                                                  "item_id": "0", "connection_id": self.connection}})
        return self.connection

    def node_launch(self, kernel: str, ts: float, *, flow: bool = True) -> int:
        self.connection += 1
        self.timeline.append({"name": "Node@launch", "pid": self.cann, "tid": self.deq, "ts": ts, "dur": 9.4, "ph": "X",
                              "args": {"Thread Id": self.deq, "Mode": "launch", "level": "node", "id": "0",
                                       "item_id": kernel, "connection_id": self.connection}})
        if flow:
            self.timeline.append({"name": f"HostToDevice{self.connection}", "pid": self.cann, "tid": self.deq,
                                  "ph": "s", "cat": "HostToDevice", "id": str(self.connection), "ts": ts})
        return self.connection

    # -- device -------------------------------------------------------------------------------------------------------

    def _task(self, name: str, start: float, dur: float, task_type: str, stream: int, connection: int, *,
              model_id: int = INVALID, flow: bool = True, extra: dict | None = None) -> dict:
        self.task_id += 1
        self.streams.add(stream)
        event = {"name": name, "pid": self.hw, "tid": stream, "ts": start, "dur": dur, "ph": "X",
                 "args": {"Model Id": model_id, "Task Type": task_type, "Physic Stream Id": stream,
                          "Task Id": self.task_id, "Batch Id": 0, "Subtask Id": INVALID, "connection_id": connection,
                          **(extra or {})}}
        self.timeline.append(event)
        if flow:
            self.timeline.append({"name": f"HostToDevice{connection}", "pid": self.hw, "tid": stream, "ph": "f",
                                  "cat": "HostToDevice", "id": str(connection), "ts": start, "bp": "e"})
        return event

    def _torch_flow(self, source: dict, target_pid: int, target_tid: int, start: float) -> None:
        flow_id = self.abs_ns(start)
        self.torch_flows += [{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": flow_id, "pid": self.pid,
                              "tid": self.main, "ts": source["ts"], "cat": "async_npu"},
                             {"ph": "f", "bp": "e", "name": "torch_to_npu", "id": flow_id, "pid": target_pid,
                              "tid": target_tid, "ts": start, "cat": "async_npu"}]

    def _compute_task(self, op: _NpuOp, start: float, connection: int, source: dict | None, *, model_id: int = INVALID,
                      stream: int = 2, flow: bool = True) -> None:
        task = self._task(op.kernel, start, op.dur, op.core, stream, connection, model_id=model_id, flow=flow)
        self.tasks.append({"op": op, "start": start, "dur": op.dur, "model_id": model_id, "task_id": self.task_id,
                           "stream": stream, "kind": "compute", "event": task})
        if source is not None:
            self._torch_flow(source, self.hw, stream, start)
            self.op_stack_device(source, op.dur, op.core)

    def op_stack_device(self, source: dict, dur: float, core: str) -> None:
        self.node_of[id(source)]["device"].append((dur, core))

    # -- operators ----------------------------------------------------------------------------------------------------

    def eager(self, op: _NpuOp, *, host_us: float = 55.0) -> None:
        """An aclnn operator through the task queue: the main thread enqueues, the task-queue thread runs the aclnn
        API, whose Node@launch puts the kernel on the device (linked by HostToDevice and torch_to_npu flows)."""
        host_us = round(host_us * (1 + ((self.correlation * 7) % 9 - 4) / 100), 3)  # deterministic spread
        source = self.cpu_open(op.torch_op, self.h)
        d = self._enqueue(op.acl, self.h + 9.0)
        self.h += 19.0
        self.cpu_close(self.h)
        self.h += 3.0
        self._dequeue(op.acl, d, host_us)
        self.acl(op.acl, d + 2.5, host_us - 5.0, "ACL_NN")
        launch = d + host_us - 14.0
        if self.capturing:  # captured into the graph being built: no task on the device now
            self.node_launch(op.kernel, launch, flow=False)
            return
        connection = self.node_launch(op.kernel, launch)
        start = max(self.npu_free, launch + 15.0)
        self._compute_task(op, start, connection, source)
        self.npu_free = start + op.dur + 1.2
        if self.counting is not None:
            self.counting.eager_launches += 1

    def collective(self, kind: str, nbytes: int, *, model_id: int = INVALID, start: float | None = None,
                   graph_connection: int = 0) -> float:
        """A TP collective: eagerly through the task queue (``start`` None), or as part of a graph's tasks."""
        api, torch_op, hccl, op_type = {
            "allreduce": ("hcom_allReduce_", "c10d::allreduce_", "HcclAllreduce", "allReduce"),
            "allgather": ("hcom_allGather_", "c10d::_allgather_base_", "HcclAllgather", "allGather")}[kind]
        source = connection = None
        if start is None:
            self.cpu_open(torch_op, self.h)
            source = self.cpu_open(hccl, self.h + 8.0)
            d = self._enqueue(hccl, self.h + 20.0)
            self.h += 32.0
            self.cpu_close(self.h)
            self.cpu_close(self.h + 2.0)
            self.h += 5.0
            self._dequeue(hccl, d, 72.0)
            self.acl(api, d + 3.0, 64.0, "HOST_HCCL")
            launch = d + 54.0
            if self.capturing:
                self.node_launch(api, launch, flow=False)
                return self.npu_free
            connection = self.node_launch(api, launch)
            start = max(self.npu_free, launch + 15.0)
            if self.counting is not None:
                self.counting.eager_launches += 1
        wait = 16.0 + (self.hcom_index % 5) * 3.0  # the peer's skew
        transfer = round(nbytes / 18_000.0 + 1.5, 3)  # HCCS at ~18 GB/s
        dur = round(wait + transfer + 6.0, 3)
        name = f"hcom_{op_type}__{str(self.group_hash)[-3:]}_{self.hcom_index}_1"
        self.hcom_index += 1
        op_connection = connection if connection is not None else graph_connection
        self.timeline.append({"name": name, "pid": self.comm, "tid": 0, "ts": start, "dur": dur, "ph": "X",
                              "args": {"connection_id": op_connection, "model id": model_id, "data_type": "BFP16",
                                       "alg_type": "MESH", "count": nbytes // 2, "relay": 0, "retry": 0}})
        if connection is not None:
            self.timeline.append({"name": f"HostToDevice{connection}", "pid": self.comm, "tid": 0, "ph": "f",
                                  "cat": "HostToDevice", "id": str(connection), "ts": start, "bp": "e"})
        plane = [("Notify_Record", start, 0.7, "NOTIFY_RECORD_SQE", "INVALID_TYPE", 0, 1),
                 ("Notify_Wait", start + 1.0, wait, "NOTIFY_WAIT_SQE", "INVALID_TYPE", 0, 1),
                 ("Memcpy", start + 1.5 + wait, transfer, "SDMA_SQE", "HCCS", nbytes, 1),
                 ("Notify_Record", start + 2.0 + wait + transfer, 0.7, "NOTIFY_RECORD_SQE", "INVALID_TYPE", 0, 1),
                 ("Notify_Wait", start + 3.0 + wait + transfer, 2.5, "NOTIFY_WAIT_SQE", "INVALID_TYPE", 0, 1)]
        for task_name, ts, task_dur, sqe, link, size, dst in plane:
            self.task_id += 1
            self.timeline.append({"name": task_name, "pid": self.comm, "tid": 1, "ts": ts, "dur": task_dur, "ph": "X",
                                  "args": {"notify_id": "18446744073709551615" if task_name == "Memcpy"
                                                        else "4294967364",
                                           "duration estimated(us)": round(task_dur * 0.9, 3), "stream id": 4,
                                           "task id": self.task_id, "context id": len(self.others) % 64,
                                           "task type": task_name, "src rank": self.rank, "dst rank": dst,
                                           "transport type": "SDMA" if task_name == "Memcpy" else "LOCAL",
                                           "size(Byte)": size,
                                           "data type": "BFP16" if task_name == "Memcpy" else "INVALID_TYPE",
                                           "link type": link,
                                           "bandwidth(GB/s)": round(size / (task_dur * 1000.0), 4) if size else 0.0,
                                           "model id": model_id}})
            self._task(task_name, ts, task_dur, sqe, 4, op_connection, model_id=model_id, flow=False)
            self.others.append((ts, ts + task_dur))
        self.tasks.append({"name": name, "op_type": f"hcom_{op_type}_", "start": start, "dur": dur,
                           "model_id": model_id, "kind": "collective", "wait": wait, "transfer": transfer,
                           "bytes": nbytes, "type": kind})
        if source is not None:
            self._torch_flow(source, self.comm, 0, start)
            self.op_stack_device(source, dur, "COMMUNICATION")
        self.npu_free = start + dur + 1.0
        return self.npu_free

    def h2d(self, nbytes: int) -> None:
        """A non-blocking host-to-device copy: aten::copy_ → acl_memcpy_host_to_device, through the task queue to
        AscendCL@aclrtMemcpyAsync, whose MEMCPY_ASYNC task carries the newer CANN's size/bandwidth/operation args
        (their values: *unverified*)."""
        self.cpu_open("aten::copy_", self.h)
        source = self.cpu_open("acl_memcpy_host_to_device", self.h + 6.0)
        d = self._enqueue("acl_memcpy_host_to_device", self.h + 14.0)
        self.h += 24.0
        self.cpu_close(self.h)
        self.cpu_close(self.h + 2.0)
        self.h += 4.0
        self._dequeue("acl_memcpy_host_to_device", d, 38.0)
        connection = self.acl("aclrtMemcpyAsync", d + 3.0, 30.0, "ACL_RTS")
        self.timeline.append({"name": f"HostToDevice{connection}", "ph": "s", "cat": "HostToDevice",
                              "id": str(connection), "pid": self.cann, "tid": self.deq, "ts": d + 3.0})
        dur = round(2.3 + nbytes / 12_000.0, 3)
        start = max(self.npu_free, d + 40.0)
        self._task("MEMCPY_ASYNC", start, dur, "PCIE_DMA_SQE", 2, connection,
                   extra={"size(B)": nbytes, "bandwidth(GB/s)": round(nbytes / (dur * 1000.0), 4),
                          "operation": "host to device"})
        self.others.append((start, start + dur))
        self._torch_flow(source, self.hw, 2, start)
        self.npu_free = start + dur + 1.0

    def d2h_sync(self, nbytes: int) -> float:
        """The sampled ids read back with a blocking copy: the main thread drains the queue and the stream
        (aclrtSynchronizeStreamWithTimeout), then a synchronous aclrtMemcpy, which puts no task on the device."""
        self.cpu_open("aten::to", self.h)
        self.cpu_open("aten::_to_copy", self.h + 3.0)
        self.cpu_open("aten::copy_", self.h + 8.0)
        ts = self.h + 12.0
        until = max(self.deq_free, self.npu_free, ts + 5.0) + 4.0
        self.acl("aclrtSynchronizeStreamWithTimeout", ts, until - ts, "ACL_RTS", tid=self.main)
        self.acl("aclrtMemcpy", until + 1.0, 31.0, "ACL_RTS", tid=self.main)
        end = until + 32.0
        self.cpu_close(end)
        self.cpu_close(end + 2.0)
        self.cpu_close(end + 3.0)
        self.h = end + 5.0
        if self.counting is not None:
            self.counting.blocking_dtoh += 1
        return end

    # -- graph mode (TorchAir reduce-overhead: aclgraph) --------------------------------------------------------------

    def capture(self, ops: list[_NpuOp | str], collective_bytes: int) -> None:
        """The first decode of a new shape: aclmdlRICaptureBegin, the ops issued as usual but captured (their
        launches leave no device task), aclmdlRICaptureEnd (Mode ACL_MODEL; which thread calls them: *unverified*)."""
        self.acl("aclmdlRICaptureBegin", self.h, 38.0, "ACL_MODEL", tid=self.main)
        self.h += 45.0
        self.capturing = True
        for op in ops:
            if isinstance(op, str):
                self.collective("allreduce", collective_bytes)
            else:
                self.eager(op)
        self.capturing = False
        self.h = max(self.h, self.deq_free) + 5.0
        self.acl("aclmdlRICaptureEnd", self.h, 410.0, "ACL_MODEL", tid=self.main)
        self.h += 420.0

    def replay(self, ops: list[_NpuOp | str], collective_bytes: int, model_id: int = 1) -> None:
        """One aclmdlRIExecuteAsync: every task of the graph on its stream, carrying the graph's Model Id and the
        execute call's connection id (one HostToDevice flow fanning out to the tasks: *unverified*)."""
        ts = max(self.h, self.deq_free)
        connection = self.acl("aclmdlRIExecuteAsync", ts, 64.0, "ACL_MODEL", tid=self.main)
        self.timeline.append({"name": f"HostToDevice{connection}", "ph": "s", "cat": "HostToDevice",
                              "id": str(connection), "pid": self.cann, "tid": self.main, "ts": ts})
        if self.counting is not None:
            self.counting.graph_launches.append(ts)
        start = max(self.npu_free, ts + 70.0)
        for op in ops:
            if isinstance(op, str):
                start = self.collective("allreduce", collective_bytes, model_id=model_id, start=start,
                                        graph_connection=connection) + 0.6
            else:
                self._compute_task(op, start, connection, None, model_id=model_id, stream=6)
                start += op.dur + 1.5
        self.npu_free = start
        self.h = ts + 70.0

    # -- writing ------------------------------------------------------------------------------------------------------

    def _lanes(self) -> dict[str, list[tuple[float, float]]]:
        computing = _union([(t["start"], t["start"] + t["dur"]) for t in self.tasks if t["kind"] == "compute"])
        communication = _union([(t["start"], t["start"] + t["dur"]) for t in self.tasks if t["kind"] == "collective"])
        every = computing + communication + self.others
        lo, hi = min(a for a, _ in every), max(b for _, b in every)

        def minus(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
            """a − b for sorted, disjoint interval lists (one sweep)."""
            out, j = [], 0
            for x, y in a:
                cursor = x
                while j < len(b) and b[j][1] <= cursor:
                    j += 1
                k = j
                while k < len(b) and b[k][0] < y:
                    if b[k][0] > cursor:
                        out.append((cursor, b[k][0]))
                    cursor = max(cursor, b[k][1])
                    k += 1
                if cursor < y:
                    out.append((cursor, y))
            return out

        return {"Computing": computing, "Communication": communication,
                "Communication(Not Overlapped)": minus(communication, computing),
                "Free": minus([(lo, hi)], _union(computing + communication))}

    def _kernel_rows(self) -> list[list[object]]:
        rows: list[list[object]] = []
        previous: tuple[float, float] | None = None
        for task in sorted(self.tasks, key=lambda t: t["start"]):
            wait = "0" if previous is None else f"{max(0.0, task['start'] - previous[0] - previous[1]):.6f}"
            previous = (task["start"], task["dur"])
            start = f"{self.abs_ts(task['start'])}\t"
            if task["kind"] == "collective":
                rows.append([self.device, task["model_id"], "N/A", "N/A", task["name"], task["op_type"], "N/A",
                             "COMMUNICATION", start, f"{task['dur']:.3f}", wait, 0] + ["N/A"] * 34)
                continue
            op: _NpuOp = task["op"]
            mix = 40 if op.core == "MIX_AIC" else 0
            state = "static" if task["model_id"] != INVALID else "dynamic"  # graph ops' OP State: *unverified*
            rows.append([self.device, task["model_id"], task["task_id"], task["stream"], op.kernel, op.op_type, state,
                         op.core, start, f"{op.dur:.3f}", wait, op.blocks, mix, "NO", *op.shapes,
                         "0" if op.core.startswith("MIX") else "N/A", *self._pmu(op, mix)])
        return rows

    @staticmethod
    def _pmu(op: _NpuOp, mix: int) -> list[object]:
        """PipeUtilization columns: aic_* for cube work, aiv_* for vector work, cube_utilization from the cycles."""
        if op.core == "AI_CPU":  # no AI-Core counters for AI-CPU tasks (*unverified*: N/A vs zeros)
            return ["N/A"] * 25
        cube = op.core in ("AI_CORE", "MIX_AIC")
        vector = op.core in ("AI_VECTOR_CORE", "MIX_AIC")
        out: list[object] = []
        if cube:
            time = round(op.dur * 0.93, 3)
            cycles = int(time * AIC_FREQ_MHZ * op.blocks)
            out += [time, cycles]
            for ratio in (0.21, 0.06, 0.18, 0.82, 0.03):
                out += [round(time * ratio, 3), ratio]
            out.append(0.012)
        else:
            out += [0.0, 0] + [0.0, 0.0] * 5 + [0.0]
        if vector:
            blocks = mix or op.blocks
            time = round(op.dur * 0.9, 3)
            out += [time, int(time * AIC_FREQ_MHZ * blocks)]
            for ratio in (0.38, 0.09, 0.61, 0.27):
                out += [round(time * ratio, 3), ratio]
            out.append(0.004)
        else:
            out += [0.0, 0] + [0.0, 0.0] * 4 + [0.0]
        out.append(f"{(out[1] / (AIC_FREQ_MHZ * AIC_CORES) / op.dur * 100) if cube else 0:.3f}")
        return out

    def write(self, parent: Path, *, name: str | None = None) -> Path:
        directory = parent / (name or f"node-a2-0_{self.pid}_{self.prof_ts}_ascend_pt")
        out = directory / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True, exist_ok=True)
        lanes = self._lanes()
        # trace_view.json: framework events, then the CANN timeline, then the torch_to_npu flows
        meta = self._meta()
        overlap = [{"name": lane, "pid": self.overlap, "tid": tid, "ts": lo, "dur": round(hi - lo, 3), "ph": "X",
                    "args": {}}
                   for tid, lane in enumerate(("Computing", "Communication", "Communication(Not Overlapped)", "Free"))
                   for lo, hi in lanes[lane]]
        first = min(float(e["ts"]) for e in self.framework if e["ph"] == "X")
        freq = [{"name": "AI Core Freq", "pid": self.freq, "tid": 0, "ts": first + 10.0, "ph": "C",
                 "args": {"MHz": AIC_FREQ_MHZ}}]
        events = self.framework + meta + self.timeline + overlap + freq + self.torch_flows
        for event in events:
            if "ts" in event:
                event["ts"] = self.abs_ts(float(event["ts"]))
            if "dur" in event:
                event["dur"] = round(float(event["dur"]), 4)
        (out / "trace_view.json").write_text(json.dumps(events))
        rows = self._kernel_rows()
        _write_csv(out / "kernel_details.csv", KERNEL_DETAILS_HEADER, rows)
        _write_csv(out / "step_trace_time.csv", STEP_TRACE_HEADER, [self._step_row(lanes, first)])
        _write_csv(out / "op_statistic.csv", OP_STATISTIC_HEADER, self._op_statistic())
        _write_csv(out / "api_statistic.csv", API_STATISTIC_HEADER, self._api_statistic())
        _write_csv(out / "operator_details.csv", OPERATOR_DETAILS_HEADER, self._operator_details())
        communication, matrix = self._communication()
        (out / "communication.json").write_text(json.dumps(communication))
        (out / "communication_matrix.json").write_text(json.dumps(matrix))
        self._write_info(directory)
        prof = directory / f"PROF_000001_{self.prof_ts}_FKFLNPEPPRGCEGFC"
        (prof / f"device_{self.device}").mkdir(parents=True, exist_ok=True)
        (prof / "host").mkdir(exist_ok=True)
        (prof / f"device_{self.device}" / f"info.json.{self.device}").write_text(json.dumps(
            {"jobInfo": "NA", "hostname": "node-a2-0", "pid": str(self.pid), "pid_name": "python3",
             "rank_id": self.rank, "cannVersion": "8.3.RC1", "platform_version": "5", "devices": str(self.device),
             "DeviceInfo": [{"id": self.device, "ai_core_num": AIC_CORES, "aic_frequency": str(AIC_FREQ_MHZ),
                             "aiv_num": 2 * AIC_CORES, "aiv_frequency": str(AIC_FREQ_MHZ), "hwts_frequency": "50"}]}))
        return directory

    def _meta(self) -> list[dict]:
        def process(pid: int, name: str, label: str, sort: int) -> list[dict]:
            return [{"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": name}},
                    {"name": "process_labels", "pid": pid, "tid": 0, "ph": "M", "args": {"labels": label}},
                    {"name": "process_sort_index", "pid": pid, "tid": 0, "ph": "M", "args": {"sort_index": sort}}]

        def thread(pid: int, tid: int, name: str, sort: int) -> list[dict]:
            return [{"name": "thread_name", "pid": pid, "tid": tid, "ph": "M", "args": {"name": name}},
                    {"name": "thread_sort_index", "pid": pid, "tid": tid, "ph": "M", "args": {"sort_index": sort}}]

        npu = f"NPU {self.device}"
        meta = process(self.pid, "Python", "CPU", 0) + thread(self.pid, self.main, f"Thread {self.main}", self.main)
        meta += thread(self.pid, self.deq, f"Thread {self.deq}", self.deq + 1)  # the task-queue thread sorts last
        meta += process(self.cann, "CANN", "CPU", 7)
        for tid in (self.main, self.deq):
            meta += thread(self.cann, tid, f"Thread {tid}", tid)
        meta += process(self.hw, "Ascend Hardware", npu, 14)
        for stream in sorted(self.streams):
            meta += thread(self.hw, stream, f"Stream {stream}", stream)
        meta += process(self.freq, "AI Core Freq", npu, 15)
        meta += process(self.comm, "Communication", npu, 16)
        meta += thread(self.comm, 0, f"Group {self.group} Communication", 0) + thread(self.comm, 1, "Plane 0", 1)
        meta += process(self.overlap, "Overlap Analysis", npu, 31)
        for tid, lane in enumerate(("Computing", "Communication", "Communication(Not Overlapped)", "Free")):
            meta += thread(self.overlap, tid, lane, tid)
        return meta

    def _step_row(self, lanes: dict, first_framework: float) -> list[object]:
        """One row without a step number (no ProfilerStep): torch_npu's sums of the Overlap Analysis lanes."""
        total = {lane: sum(round(hi - lo, 3) for lo, hi in spans) for lane, spans in lanes.items()}
        every = [span for spans in lanes.values() for span in spans]
        stage = max(hi for _, hi in every) - min(lo for lo, _ in every)
        busy = lanes["Computing"] + lanes["Communication"]
        preparing = min(lo for lo, _ in busy) - first_framework
        return [self.device, "", total["Computing"], total["Communication(Not Overlapped)"],
                total["Communication"] - total["Communication(Not Overlapped)"], total["Communication"], total["Free"],
                stage, 0, total["Communication(Not Overlapped)"], preparing]

    def _op_statistic(self) -> list[list[object]]:
        groups: dict[tuple[str, str], list[float]] = {}
        for task in self.tasks:
            if task["kind"] == "compute":
                groups.setdefault((task["op"].op_type, task["op"].core), []).append(task["op"].dur)
        grand = sum(sum(v) for v in groups.values())
        return [[self.device, op_type, core, len(v), round(sum(v), 3), round(min(v), 3), round(sum(v) / len(v), 3),
                 round(max(v), 3), round(sum(v) / grand * 100, 3)]
                for (op_type, core), v in sorted(groups.items(), key=lambda kv: -sum(kv[1]))]

    def _api_statistic(self) -> list[list[object]]:
        groups: dict[tuple[str, str], list[float]] = {}
        for event in self.timeline:
            if event.get("pid") == self.cann and event["ph"] == "X":
                level = event["args"]["level"]
                name = "launch" if level == "node" else event["args"]["id"]
                groups.setdefault((level, name), []).append(float(event["dur"]))
        rows = []
        for (level, name), v in sorted(groups.items(), key=lambda kv: kv[0][1]):
            mean = sum(v) / len(v)
            rows.append(["host", level, name, round(sum(v), 3), len(v), round(mean, 3), round(min(v), 3),
                         round(max(v), 3), round(sum((x - mean) ** 2 for x in v) / len(v), 3)])
        return rows

    def _operator_details(self) -> list[list[object]]:
        def device(node: dict, aicore: bool) -> float:
            return sum(d for d, core in node["device"] if not aicore or core == "AI_CORE")

        def total(node: dict, aicore: bool) -> float:
            return device(node, aicore) + sum(total(c, aicore) for c in node["children"])

        rows = []
        for node in self.ops:
            dur = float(node["event"]["dur"])
            own = dur - sum(float(c["event"]["dur"]) for c in node["children"])
            rows.append([node["event"]["name"], "", "", round(own, 3), dur, round(device(node, False), 3),
                         round(total(node, False), 3), round(device(node, True), 3), round(total(node, True), 3)])
        return rows

    def _communication(self) -> tuple[dict, dict]:
        ops, links = {}, {}
        totals = {"Elapse Time(ms)": 0.0, "Transit Time(ms)": 0.0, "Wait Time(ms)": 0.0,
                  "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.0}
        hccs_total = {"Transit Time(ms)": 0.0, "Transit Size(MB)": 0.0, "Size Distribution": {}}
        for task in (t for t in self.tasks if t["kind"] == "collective"):
            elapse, transit = task["dur"] / 1000, task["transfer"] / 1000
            wait = (task["wait"] + 2.5) / 1000
            sync = task["wait"] / 1000
            size = task["bytes"] / 1e6
            moved = {"Transit Size(MB)": size, "Transit Time(ms)": transit,
                     "Bandwidth(GB/s)": round(size / transit, 4), "Large Packet Ratio": 0.0,
                     "Size Distribution": {repr(size): [1, transit]}}
            empty = {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
                     "Size Distribution": {}}
            info = {"Start Timestamp(us)": float(self.abs_ts(task["start"])), "Elapse Time(ms)": elapse,
                    "Transit Time(ms)": transit, "Wait Time(ms)": wait, "Synchronization Time(ms)": sync,
                    "Idle Time(ms)": elapse - transit - wait, "Wait Time Ratio": round(wait / (wait + transit), 4),
                    "Synchronization Time Ratio": round(sync / (sync + transit), 4)}
            ops[f"{task['name']}@{self.group_hash}"] = {
                "Communication Time Info": info,
                "Communication Bandwidth Info": {"RDMA": dict(empty), "HCCS": moved, "PCIE": dict(empty),
                                                 "SDMA": {**moved, "Large Packet Ratio": 0, "Size Distribution": {}},
                                                 "SIO": dict(empty)}}
            for key in totals:
                totals[key] += info[key]
            hccs_total["Transit Time(ms)"] += transit
            hccs_total["Transit Size(MB)"] += size
            bucket = hccs_total["Size Distribution"].setdefault(repr(size), [0, 0.0])
            bucket[0] += 1
            bucket[1] += transit
            kind = "allreduce" if task["type"] == "allreduce" else "allgather"
            links.setdefault(kind, []).append({"Transport Type": "HCCS", "Transit Size(MB)": size,
                                               "Transit Time(ms)": transit, "Bandwidth(GB/s)": round(size / transit, 4),
                                               "Op Name": task["name"]})
        wait, transit, sync = totals["Wait Time(ms)"], totals["Transit Time(ms)"], totals["Synchronization Time(ms)"]
        empty_total = {"Transit Time(ms)": 0, "Transit Size(MB)": 0, "Size Distribution": {}}
        ops["Total Op Info"] = {
            "Communication Time Info": {**totals, "Wait Time Ratio": round(wait / (wait + transit), 4),
                                        "Synchronization Time Ratio": round(sync / (sync + transit), 4)},
            "Communication Bandwidth Info": {"RDMA": dict(empty_total), "HCCS": hccs_total, "PCIE": dict(empty_total),
                                             "SDMA": {**hccs_total, "Size Distribution": {}}, "SIO": dict(empty_total)}}
        matrix: dict = {}
        for kind, entries in links.items():
            ranked = sorted(entries, key=lambda e: -e["Bandwidth(GB/s)"])
            picks = {"top1": ranked[0], "middle": ranked[len(ranked) // 2], "bottom1": ranked[-1]}
            if len(ranked) >= 2:
                picks["bottom2"] = ranked[-2]
            if len(ranked) >= 3:
                picks["bottom3"] = ranked[-3]
            for stat, entry in picks.items():
                matrix[f"{kind}-{stat}@{self.group_hash}"] = {f"{self.rank}-{1 - self.rank}": entry}
            size = sum(e["Transit Size(MB)"] for e in entries)
            time = sum(e["Transit Time(ms)"] for e in entries)
            matrix[f"{kind}-total@{self.group_hash}"] = {f"{self.rank}-{1 - self.rank}": {
                "Transport Type": "HCCS", "Transit Size(MB)": size, "Transit Time(ms)": time,
                "Bandwidth(GB/s)": round(size / time, 4)}}
        return ({"step": {"p2p": {}, "collective": ops}}, {"step": {"p2p": {}, "collective": matrix}})

    def _write_info(self, directory: Path) -> None:
        """profiler_info_{rank}.json (indent 4; no schedule: vLLM-Ascend profiles without one — whether torch_npu then
        writes a ``schedule`` key at all is *unverified*) and the single-line profiler_metadata.json."""
        info = {
            "config": {
                "common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                                  "record_shapes": False, "profile_memory": False, "with_stack": self.with_stack,
                                  "with_flops": False, "with_modules": False},
                "experimental_config": {"_profiler_level": "Level1", "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",
                                        "_l2_cache": False, "_msprof_tx": False, "_mstx": False,
                                        "_data_simplification": True, "record_op_args": False, "_export_type": ["text"],
                                        "_host_sys": [], "_op_attr": False, "_gc_detect_threshold": None,
                                        "_mstx_domain_include": [], "_mstx_domain_exclude": [], "_sys_io": False,
                                        "_sys_interconnection": False}},
            "start_info": {"syscnt_enable": True, "freq": 100, "start_cnt": 470002538790308,
                           "start_monotonic": 4699801002845430},
            "end_info": {"collectionTimeEnd": self.abs_ns(self.h) + 900_000_000, "MonotonicTimeEnd": 4699802061975030},
            "torch_npu_version": "2.7.1", "cann_version": "8.3.RC1",
            "rank_id": self.rank,  # an int: vLLM spawns its workers itself and the rank comes from dist.get_rank()
        }
        (directory / f"profiler_info_{self.rank}.json").write_text(json.dumps(info, indent=4))
        env = {key: "" for key in ("ASCEND_GLOBAL_LOG_LEVEL", "HCCL_RDMA_TC", "HCCL_RDMA_SL", "ACLNN_CACHE_LIMIT",
                                   "HOST_CACHE_CAPACITY", "ASCEND_ENHANCE_ENABLE", "PYTORCH_NPU_ALLOC_CONF",
                                   "ASCEND_LAUNCH_BLOCKING", "HCCL_ALGO")}
        env["ASCEND_GLOBAL_LOG_LEVEL"] = "3"
        # the TP group's name in parallel_group_info: vLLM creates it without a description (*unverified*)
        groups = {"group_name_0": {"group_name": "default_group", "group_rank": self.rank, "global_ranks": [0, 1]},
                  self.group: {"group_name": "undefined", "group_rank": self.rank, "global_ranks": [0, 1]}}
        (directory / "profiler_metadata.json").write_text(json.dumps({"ENV_VARIABLES": env,
                                                                      "parallel_group_info": groups}))


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    """torch_npu's csv.writer: CRLF line ends, minimal quoting (shape cells carry their own quotes)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), newline="")


class _VllmAscend:
    """vLLM-Ascend's NPU model runner stepping an engine on one TP rank."""

    def __init__(self, rank: _AscendRank, *, marker: str, prep_us: float = 2_000.0, gap_us: float = 300.0,
                 attention: str = "ifa") -> None:
        self.r, self.marker, self.prep_us, self.gap_us, self.attention = rank, marker, prep_us, gap_us, attention
        self.iterations: list[_Iteration] = []
        self.host_free = rank.h
        self.graph_ops: list[_NpuOp | str] | None = None

    def _layers(self, tokens: int, reqs: int, decode: bool) -> list[_NpuOp | str]:
        model = self.r.model
        ops: list[_NpuOp | str] = [
            _NpuOp("aten::embedding", "aclnnEmbedding", "aclnnEmbedding_GatherV2AiCore_GatherV2", "GatherV2",
                   "AI_VECTOR_CORE", round(4.0 + tokens * 0.004, 3), blocks=40), "allreduce"]
        for _ in range(model.layers):
            ops += _npu_layer_ops(model, tokens, reqs, self.attention if decode else "prefill")
        ops.append(_NpuOp("npu::npu_rms_norm", "aclnnRmsNorm", "RmsNorm", "RmsNorm", "AI_VECTOR_CORE",
                          round(3.0 + tokens * 0.004, 3), blocks=40))
        return ops

    def _run(self, ops: list[_NpuOp | str], activation_bytes: int) -> None:
        for op in ops:
            if isinstance(op, str):
                self.r.collective("allreduce", activation_bytes)
            else:
                self.r.eager(op)

    def iteration(self, ctx_reqs: int, ctx_tokens: int, gen_reqs: int, gen_tokens: int, *, graph: bool = False,
                  prep_us: float | None = None) -> _Iteration:
        r, model = self.r, self.r.model
        it = _Iteration(_phase(ctx_tokens, gen_tokens), ctx_reqs, ctx_tokens, gen_reqs, gen_tokens)
        it.host_free_before = self.host_free
        r.h += self.gap_us
        tokens, reqs = ctx_tokens + gen_tokens, ctx_reqs + gen_reqs
        it.start = r.h
        if self.marker == "annotation":  # a record_function, which torch_npu exports as a cpu_op (*unverified* here)
            r.cpu_open(f"execute_context_{ctx_reqs}({ctx_tokens})_generation_{gen_reqs}({gen_tokens})", r.h)
        elif self.marker == "execute_model":
            r.py_open("vllm_ascend/worker/model_runner_v1.py(1523): execute_model", r.h)
        r.counting = it
        r.h += 15.0 + (self.prep_us if prep_us is None else prep_us) * 0.7
        for op in _npu_prep_ops(tokens):
            r.eager(op, host_us=48.0)
        r.h += (self.prep_us if prep_us is None else prep_us) * 0.3
        r.h2d(4 * tokens)  # input_ids, int32
        r.h2d(8 * tokens)  # positions, int64
        it.htod = (4 * tokens, 8 * tokens)
        decode = ctx_tokens == 0
        layers = self._layers(tokens, reqs, decode)
        activation = model.hidden * tokens * 2
        if graph and decode:
            r.py_open("torchair/_acl_concrete_graph/acl_graph.py(412): __call__", r.h)
            if self.graph_ops is None:
                r.capture(layers, activation)
                self.graph_ops = layers
            r.replay(self.graph_ops, activation)
            r.py_close(r.h + 5.0)
            r.h += 8.0
        else:
            self._run(layers, activation)
        k, n = model.gemm_shapes()["lm_head"]
        r.eager(_NpuOp("aten::mm", "aclnnMm", "aclnnMm_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE",
                       model.gemm_us("lm_head", reqs) + 2.0,
                       (f'"{reqs},{k};{k},{n}"', "DT_BF16;DT_BF16", "ND;ND", f'"{reqs},{n}"', "DT_BF16", "ND"), 20))
        r.collective("allgather", reqs * (model.vocab // model.tp) * 2)
        r.eager(_NpuOp("aten::argmax", "aclnnArgMax", "aclnnArgMax_ArgMaxV2AiCore_ArgMaxV2", "ArgMaxV2",
                       "AI_VECTOR_CORE", round(9.0 + reqs * 0.6, 3), blocks=40))
        r.eager(_NpuOp("aten::_to_copy", "aclnnCast", "aclnnCast_CastAiCore_Cast", "Cast", "AI_VECTOR_CORE", 2.4,
                       blocks=8))
        self.host_free = r.d2h_sync(4 * reqs)
        r.counting = None
        r.h += 4.0
        if self.marker == "annotation":
            r.cpu_close(r.h)
            it.end = r.h
        elif self.marker == "execute_model":
            r.py_close(r.h)
            it.end = r.h
        else:
            it.end = self.host_free
        if self.marker == "none":  # without a marker the step starts at its first framework op
            it.start = min(float(n["event"]["ts"]) for n in r.ops if float(n["event"]["ts"]) >= it.start)
        r.h += 3.0
        self.iterations.append(it)
        return it

    def busy(self) -> list[tuple[float, float]]:
        return [(t["start"], t["start"] + t["dur"]) for t in self.r.tasks] + self.r.others


ASCEND_FILES = ("profiler_info_0.json", "profiler_metadata.json", "ASCEND_PROFILER_OUTPUT/trace_view.json",
                "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
                "ASCEND_PROFILER_OUTPUT/op_statistic.csv", "ASCEND_PROFILER_OUTPUT/api_statistic.csv",
                "ASCEND_PROFILER_OUTPUT/operator_details.csv", "ASCEND_PROFILER_OUTPUT/communication.json",
                "ASCEND_PROFILER_OUTPUT/communication_matrix.json")
ASCEND_UNVERIFIED = (
    "AscendCL@aclnn* Mode ACL_NN (the real Level1 export) where inference.md says ACL_OP for eager",
    "vLLM-Ascend's iteration marker: the execute_context annotation as a cpu_op on the Python lane",
    "the KV-cache write op (ScatterPaKvCache) and the AI-CPU prep ops (IndexPutV2, NonZero)",
    "MEMCPY_ASYNC 'operation' value",
    "AI_CPU rows' PMU cells (N/A)",
    "parallel_group_info group_name of vLLM's TP group",
    "profiler_info without a schedule key",
)


def ascend_eager_decode(directory: Path, decodes: int = 6) -> tuple[Path, Truth]:
    """A vLLM-Ascend worker (TP rank 0 of 2, Atlas A2) serving a Qwen2-7B-class model eagerly, profiled by
    ``torch_npu.profiler`` without a schedule (Level1, PipeUtilization): one prefill of 1,049 tokens and ``decodes``
    batch-1 decodes. No ``ProfilerStep`` and no ``Step Id`` column; every kernel has ``Model ID`` 4294967295; decode
    attention is ``IncreFlashAttention``; two ``hcom_allReduce_`` per layer; AI-CPU ``IndexPutV2``/``NonZero``, a
    ``Cast`` and a ``TransData`` in each step's input preparation. Each aclnn op passes the task queue
    (``Enqueue@``/``Dequeue@``) to the launch thread, whose ``AscendCL@aclnn*`` + ``Node@launch`` (~55 µs) is slower
    than most kernels: the NPU idles between kernels, host-bound on launches. Iterations are marked on the Python lane
    by the ``execute_context_…`` annotation."""
    rank = _AscendRank(QWEN_7B_910B, pid=2861473, base_us=1_764_246_877_000_000)
    engine = _VllmAscend(rank, marker="annotation", prep_us=2_000.0)
    engine.iteration(1, 1049, 0, 0)
    for _ in range(decodes):
        engine.iteration(0, 0, 1, 1)
    path = rank.write(directory)
    return path, _truth(
        engine.iterations, engine.busy(), engine="vllm-ascend", platform="ascend", device="Atlas A2 (910B)",
        model=QWEN_7B_910B.name, tensor_parallel=2, rank=0, layers=QWEN_7B_910B.layers, marker="annotation",
        expected_verdict="decode is host-bound: eager aclnn launches leave the NPU idle between kernels",
        expected_top_findings=(
            "per-op launch cost on the task-queue thread (AscendCL@aclnn* + Node@launch) exceeds most kernels' time",
            "NPU free for a large share of each decode iteration",
            "run decode in graph mode (aclgraph / TorchAir reduce-overhead) to replay the step",
        ),
        must_not_advise=("DataLoader", "CUDA graphs", "scaled_dot_product_attention", "ProfilerStep schedule"),
        unverified=ASCEND_UNVERIFIED, files=ASCEND_FILES)


def ascend_aclgraph_decode(directory: Path, decodes: int = 6) -> tuple[Path, Truth]:
    """The same deployment with TorchAir's reduce-overhead mode (aclgraph): the first decode captures the step
    (``AscendCL@aclmdlRICaptureBegin``, the ops' launches captured, ``AscendCL@aclmdlRICaptureEnd``, Mode ACL_MODEL)
    and every decode replays it with one ``AscendCL@aclmdlRIExecuteAsync``; the graph's kernels (attention
    ``FusedInferAttentionScore``) and collectives carry the graph's Model ID (1) instead of 4294967295 — expected by the
    reference but *unverified*. Input preparation and sampling stay eager. Iterations are the runner's
    ``vllm_ascend/worker/model_runner_v1.py(…): execute_model`` frames (with_stack on). Decode is device-bound on
    reading the weights at batch 1."""
    rank = _AscendRank(QWEN_7B_910B, pid=2861999, base_us=1_764_246_977_000_000, with_stack=True,
                       prof_ts="20251127192913456")
    engine = _VllmAscend(rank, marker="execute_model", prep_us=450.0, gap_us=120.0, attention="fia")
    engine.iteration(1, 1049, 0, 0, prep_us=2_000.0)
    for _ in range(decodes):
        engine.iteration(0, 0, 1, 1, graph=True)
    path = rank.write(directory, name=f"node-a2-0_{rank.pid}_{rank.prof_ts}_ascend_pt")
    return path, _truth(
        engine.iterations, engine.busy(), engine="vllm-ascend", platform="ascend", device="Atlas A2 (910B)",
        model=QWEN_7B_910B.name, tensor_parallel=2, rank=0, layers=QWEN_7B_910B.layers, marker="execute_model",
        expected_verdict="decode replays an aclgraph and is device-bound on weight reads",
        expected_top_findings=(
            "one aclmdlRIExecuteAsync per decode; capture once, at the first decode",
            "NPU busy most of each decode iteration: batch 1 is bound by reading the weights — raise the batch size",
            "the eager remainder (input preparation, sampling) is small",
        ),
        must_not_advise=("graph mode", "aclgraph", "reduce-overhead", "DataLoader", "CUDA graphs"),
        unverified=ASCEND_UNVERIFIED + ("graph kernels' Model ID and OP State", "the execute call's flow fan-out",
                                        "which thread calls aclmdlRICapture*/ExecuteAsync"),
        files=ASCEND_FILES)


def ascend_prefill_decode_dirs(directory: Path, prefills: int = 2, decodes: int = 6) -> tuple[Path, Truth]:
    """A recipe capture (the way Ascend deployment guides profile serving): the prefill phase and the decode phase
    profiled separately into ``prof/prefill/<host>_<pid>_<ts>_ascend_pt`` and
    ``prof/decode/<host>_<pid>_<ts>_ascend_pt`` — same eager Qwen2-7B-class TP=2 worker, no iteration markers at all
    (phase from the directory; iterations from the repeating kernel sequence: one IncreFlashAttention per layer, one
    ArgMaxV2 at the end of each step). Returns
    ``prof/``; without markers each iteration runs from its first framework op to the end of its read-back."""
    prof = directory / "prof"
    iterations: list[_Iteration] = []
    busy: list[tuple[float, float]] = []
    written = []
    for phase, count, base, stamp in (("prefill", prefills, 1_764_247_100_000_000, "20251127193140123"),
                                      ("decode", decodes, 1_764_247_160_000_000, "20251127193240456")):
        rank = _AscendRank(QWEN_7B_910B, pid=2862411, base_us=base, prof_ts=stamp)
        engine = _VllmAscend(rank, marker="none", prep_us=2_000.0)
        for _ in range(count):
            if phase == "prefill":
                engine.iteration(1, 1049, 0, 0)
            else:
                engine.iteration(0, 0, 1, 1)
        path = rank.write(prof / phase)
        shift = float(base - 1_764_247_100_000_000)  # both captures on one clock for the Truth's arithmetic
        for it in engine.iterations:
            it.start, it.end, it.host_free_before = it.start + shift, it.end + shift, it.host_free_before + shift
        iterations += engine.iterations
        busy += [(lo + shift, hi + shift) for lo, hi in engine.busy()]
        written += [f"{phase}/{path.name}/{name}" for name in ASCEND_FILES]
    return prof, _truth(
        iterations, busy, engine="vllm-ascend", platform="ascend", device="Atlas A2 (910B)", model=QWEN_7B_910B.name,
        tensor_parallel=2, rank=0, layers=QWEN_7B_910B.layers, marker="directory + kernel pattern",
        expected_verdict="decode is host-bound: eager aclnn launches leave the NPU idle between kernels",
        expected_top_findings=(
            "prefill and decode captured separately: phase comes from the directory",
            "decode NPU idle between kernels waiting for launches",
            "graph mode (aclgraph) for decode",
        ),
        must_not_advise=("DataLoader", "CUDA graphs", "ProfilerStep schedule"),
        unverified=ASCEND_UNVERIFIED[2:], files=tuple(written))
