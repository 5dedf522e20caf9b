"""GPU time analyses over a Kineto trace's tables, with Holistic Trace Analysis' definitions (pure functions).

* temporal breakdown: over the kernel span (first GPU activity start to last end), idle = span − |∪ all GPU
  intervals|, compute = |∪ compute kernels|, non-compute = span − compute − idle;
* communication–computation overlap = |∪ compute ∩ ∪ communication| / |∪ communication|;
* idle per stream, split by the gap before each kernel: host wait (the kernel was launched only after the
  stream had drained), kernel wait (a gap under 30 µs between back-to-back kernels) or other.

As HTA does by default, the per-rank figures (``gpu_summary``) cover the GPU activity launched before the last
ProfilerStep began — the last step is often cut short by the end of the capture — when there are two steps or
more (``analysis_window``); the per-step breakdown (``ingest/kinetosteps.py``) keeps every step. Timestamps are not rounded to whole µs.
A test compares the figures with HTA's when HTA is installed.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from advisor.facts.matrix import matrix_summary
from advisor.ingest.kinetosteps import launch_times, step_markers
from advisor.intervals import intersect, intersection, length, merged, subtract
from advisor.names import matching, per_name

CONSECUTIVE_KERNEL_DELAY_US = 30.0


def temporal_breakdown(gpu: pd.DataFrame) -> dict[str, float]:
    """HTA's temporal breakdown in µs and as shares of the kernel span."""
    everything = merged(gpu)
    if not len(everything):
        return {"span_us": 0.0, "idle_us": 0.0, "compute_us": 0.0, "non_compute_us": 0.0,
                "idle_ratio": 0.0, "compute_ratio": 0.0, "non_compute_ratio": 0.0}
    span = float(everything[-1, 1] - everything[0, 0])
    idle = span - length(everything)
    compute = length(merged(gpu.loc[gpu["kind"] == "compute"]))
    non_compute = span - compute - idle
    share = (lambda v: v / span) if span > 0 else (lambda v: 0.0)
    return {"span_us": span, "idle_us": idle, "compute_us": compute, "non_compute_us": non_compute,
            "idle_ratio": share(idle), "compute_ratio": share(compute), "non_compute_ratio": share(non_compute)}


def comm_comp_overlap(gpu: pd.DataFrame) -> float | None:
    """Share of communication time during which compute kernels run (None without communication)."""
    communication = merged(gpu.loc[gpu["kind"] == "communication"])
    total = length(communication)
    if total <= 0:
        return None
    return intersection(merged(gpu.loc[gpu["kind"] == "compute"]), communication) / total


def idle_breakdown(gpu: pd.DataFrame, runtime: pd.DataFrame) -> pd.DataFrame:
    """Per stream: idle µs before kernels split into host_wait, kernel_wait and other (HTA's rules)."""
    kernels = gpu.loc[gpu["stream"].notna()].sort_values(["stream", "ts"], kind="stable")
    launches = launch_times(runtime)
    rows = []
    for stream, tasks in kernels.groupby("stream", sort=True):
        previous_end = (tasks["ts"] + tasks["dur"]).shift()
        gap = (tasks["ts"] - previous_end).iloc[1:].clip(lower=0)
        launched = tasks["correlation"].map(launches).iloc[1:]
        host_wait = launched > previous_end.iloc[1:]
        kernel_wait = ~host_wait & (gap < CONSECUTIVE_KERNEL_DELAY_US)
        rows.append({"stream": int(stream), "host_wait_us": float(gap[host_wait].sum()),
                     "kernel_wait_us": float(gap[kernel_wait].sum()),
                     "other_us": float(gap[~host_wait & ~kernel_wait].sum())})
    return pd.DataFrame(rows, columns=["stream", "host_wait_us", "kernel_wait_us", "other_us"])


COPY_NAME = re.compile(r"^Memcpy (?P<direction>\w+) \((?P<source>\w+) -> (?P<target>\w+)\)")
DRAIN_WAIT_US = 50.0  # a copy call that waited longer than this for its copy to start waited for the stream to drain


def copy_kinds(copies: pd.DataFrame) -> pd.DataFrame:
    """The memcpy rows of ``copies`` (GPU rows named as Kineto names them, e.g. ``Memcpy DtoH (Device -> Pageable)``)
    with their ``direction`` (HtoD, DtoH, DtoD, PtoP…) and ``host_memory`` (Pageable, Pinned, or None when the name does
    not say: ROCm writes ``Host``)."""
    found = copies["name"].str.extract(COPY_NAME)
    rows = copies.loc[found["direction"].notna()]
    found = found.loc[rows.index]
    host = found["source"].where(found["source"].isin(["Pageable", "Pinned"]), found["target"])
    return rows.assign(direction=found["direction"], host_memory=host.where(host.isin(["Pageable", "Pinned"])))


def copy_summary(copies: pd.DataFrame, steps: int) -> dict[str, object]:
    """Copies per step by kind: pageable ones counted and timed, and every kind in one line (``copies_by_kind``)."""
    kinds = copy_kinds(copies)
    pageable = kinds.loc[kinds["host_memory"] == "Pageable"]
    label = kinds["direction"] + kinds["host_memory"].map(lambda m: f" {m.lower()}" if isinstance(m, str) else "")
    grouped = kinds.groupby(label)["dur"].agg(["size", "sum"]).sort_values("sum", ascending=False)
    return {
        "pageable_memcpy_per_step": len(pageable) / steps,
        "pageable_copy_us_per_step": float(pageable["dur"].sum()) / steps,
        "pageable_htod_per_step": int((pageable["direction"] == "HtoD").sum()) / steps,
        "pageable_dtoh_per_step": int((pageable["direction"] == "DtoH").sum()) / steps,
        "copies_by_kind": "; ".join(f"{kind} {total / steps:,.0f} µs ({count / steps:g} per step)"
                                    for kind, (count, total) in grouped.iterrows()) or None,
    }


def draining_copy_calls(gpu: pd.DataFrame, runtime: pd.DataFrame, copy_call: re.Pattern[str]) -> pd.DataFrame:
    """The runtime's copy calls (``copy_call``) that waited for the stream to drain: their copy started more than
    DRAIN_WAIT_US after the call began and the call returned only once the copy had ended (a synchronous copy, such as
    a device-to-pageable one). Such a call is a synchronisation: the device then idles until new work is queued."""
    calls = runtime.loc[matching(runtime["name"], copy_call) & runtime["correlation"].notna()]
    copies = gpu.loc[gpu["kind"] == "memory", ["correlation", "ts", "dur"]].dropna(subset=["correlation"])
    if calls.empty or copies.empty:
        return calls.iloc[:0]
    copy = copies.drop_duplicates("correlation").set_index("correlation")
    start, length = calls["correlation"].map(copy["ts"]), calls["correlation"].map(copy["dur"])
    waited = (start - calls["ts"] > DRAIN_WAIT_US) & (calls["ts"] + calls["dur"] >= start + length)
    return calls.loc[waited]  # the runtime's rows (and index)


FUSED_ATTENTION = re.compile(r"flash|fmha|sdpa|_attention|attention_|paged_?attention|mha_(fwd|bwd)|efficient_attention",
                             re.IGNORECASE)
SOFTMAX = re.compile(r"softmax", re.IGNORECASE)


# Kernels that convert tensors between dtypes (autocast's per-op casts, .to(dtype), .float()) and between memory
# layouts (cuDNN's NCHW↔NHWC transposes around convolutions), by their names in PyTorch and cuDNN. A cast is a copy
# kernel: an element-wise kernel that loads with a cast to do its own math (CUDAFunctor_add on mixed dtypes) is not.
CAST_KERNEL = re.compile(r"(bfloat16|float16|half)_copy_kernel|_to_copy_kernel_cast|copy_kernel.*(Load|Store)WithCast")
LAYOUT_KERNEL = re.compile(r"nchwToNhwc|nhwcToNchw|NCHW2NHWC|NHWC2NCHW", re.IGNORECASE)


def conversion_summary(compute: pd.DataFrame, steps: int) -> dict[str, float]:
    """GPU time per step, and share of compute-kernel time, in dtype casts and in layout transposes."""
    total = float(compute["dur"].sum())
    found = {}
    for what, pattern in (("cast", CAST_KERNEL), ("layout", LAYOUT_KERNEL)):
        time = float(compute.loc[matching(compute["name"], pattern, search=True), "dur"].sum())
        found[f"{what}_us_per_step"] = time / steps
        found[f"{what}_share_of_compute"] = time / total if total > 0 else 0.0
    return found


def attention_summary(compute: pd.DataFrame) -> dict[str, float]:
    """The shares of compute-kernel time in fused attention kernels and in softmax kernels (decomposed attention)."""
    total = float(compute["dur"].sum())
    if total <= 0:
        return {"fused_attention_share_of_compute": 0.0, "softmax_share_of_compute": 0.0}
    names = compute["name"]
    fused = matching(names, FUSED_ATTENTION, search=True)
    softmax = matching(names, SOFTMAX, search=True) & ~fused
    return {"fused_attention_share_of_compute": float(compute.loc[fused, "dur"].sum()) / total,
            "softmax_share_of_compute": float(compute.loc[softmax, "dur"].sum()) / total}


# What a communication kernel does, by its name (NCCL/RCCL names the collective; DeepEP dispatches and combines the
# tokens of expert parallelism, an all-to-all; vLLM's and TensorRT-LLM's custom kernels all-reduce).
COLLECTIVE_KINDS = (
    ("all-to-all", re.compile(r"AllToAll|all_?to_?all|deep_?ep::|(intranode|internode(_ll)?)::(dispatch|combine)",
                              re.IGNORECASE)),
    ("send/recv", re.compile(r"SendRecv|\bSend\b|\bRecv\b|_Send_|_Recv_|Sendrecv|nvshmem|:send$|:recv$|"
                             r"batch_isend_irecv", re.IGNORECASE)),
    ("reduce-scatter", re.compile(r"ReduceScatter|reduce_scatter", re.IGNORECASE)),
    ("all-gather", re.compile(r"AllGather|all_gather", re.IGNORECASE)),
    ("all-reduce", re.compile(r"AllReduce|all_reduce|allreduce|cross_device_reduce|lamport", re.IGNORECASE)),
    ("broadcast", re.compile(r"Broadcast", re.IGNORECASE)),
)
GRADIENT_SYNC = ("all-reduce", "reduce-scatter", "all-gather")  # what data parallelism (DDP, FSDP, ZeRO) runs


SPARSE_DIST_PIPELINE = re.compile(r"## (?:wait_)?sparse_data_dist ##")  # TorchRec's TrainPipelineSparseDist stages
# FBGEMM's table-batched embedding (TBE) kernels, pooled or not, split or dense, forward and backward (the inference
# int_nbit_split_embedding_codegen_* among them): the tables already looked up together
TBE_KERNEL = re.compile(r"(split|dense)_embedding_(nobag_)?(backward_)?codegen")
COLLECTIVE_OP = re.compile(r"^(nccl|gloo|rccl|ucc|c10d):")  # the process group's op that launched a collective


def collective_kind(name: str) -> str:
    """A communication kernel's (or collective op's) collective (COLLECTIVE_KINDS), "other" when its name does not
    say."""
    return next((kind for kind, pattern in COLLECTIVE_KINDS if pattern.search(name)), "other")


def collective_kinds(communication: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame) -> pd.Series:
    """Each communication kernel's collective: that of the process group's op it was launched in (``nccl:all_to_all``
    — NCCL runs an all-to-all as grouped send/recv kernels, which only the op tells apart from pipeline send/recv),
    else its own name's."""
    own = per_name(communication["name"], collective_kind)
    ops = cpu.loc[matching(cpu["name"], COLLECTIVE_OP)].sort_values("ts")
    if ops.empty or communication.empty:
        return own
    launched = communication["correlation"].map(launch_times(runtime)).to_numpy(float)
    starts, ends = ops["ts"].to_numpy(float), (ops["ts"] + ops["dur"]).to_numpy(float)
    slot = np.searchsorted(starts, launched, side="right") - 1
    inside = (slot >= 0) & (launched <= ends[np.clip(slot, 0, None)])
    op_kinds = per_name(ops["name"], collective_kind).to_numpy(object)[np.clip(slot, 0, None)]
    return own.where(~inside | (op_kinds == "other"), pd.Series(op_kinds, index=own.index))


def exposed_communication(gpu: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame, steps: int) -> dict[str, object]:
    """Communication no compute kernel overlaps, per step, by collective kind: the kind with the most of it, the share
    of it that data parallelism's collectives (GRADIENT_SYNC) take, and every kind in one line."""
    communication = gpu.loc[gpu["kind"] == "communication"]
    exposed = subtract(merged(communication), merged(gpu.loc[gpu["kind"] == "compute"]))
    total = length(exposed)
    if total <= 0:
        return {"exposed_collective_kind": None, "exposed_gradient_sync_share": None, "exposed_by_kind": None}
    kinds = collective_kinds(communication, runtime, cpu)
    per_kind = {kind: length(intersect(merged(rows), exposed)) for kind, rows in communication.groupby(kinds)}
    ordered = sorted(per_kind.items(), key=lambda item: -item[1])
    return {
        "exposed_collective_kind": ordered[0][0],
        "exposed_gradient_sync_share": min(sum(per_kind.get(k, 0.0) for k in GRADIENT_SYNC) / total, 1.0),
        "exposed_by_kind": "; ".join(f"{kind} {value / steps:,.0f} µs" for kind, value in ordered if value > 0),
    }


def analysis_window(gpu: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """HTA's default scope: with 2+ ProfilerSteps, the GPU activity whose launch (by correlation) started before
    the last step began; else everything. Returns the rows and the number of steps they cover (at least 1)."""
    starts = step_markers(cpu)["ts"]
    if len(starts) < 2:
        return gpu, max(len(starts), 1)
    launches = launch_times(runtime)
    launched = gpu["correlation"].map(launches)
    return gpu.loc[launched < starts.max()], len(starts) - 1


def max_queue_length(gpu: pd.DataFrame, runtime: pd.DataFrame) -> int:
    """HTA's queue length, its maximum over streams: +1 at each launch (the runtime call, by correlation), −1 when
    the launched activity starts on the GPU (at equal times the start counts first)."""
    launches = launch_times(runtime)
    rows = gpu.loc[gpu["stream"].notna()].assign(launch=gpu["correlation"].map(launches)).dropna(subset=["launch"])
    longest = 0
    for _stream, tasks in rows.groupby("stream", sort=True):
        changes = pd.DataFrame({"ts": np.concatenate([tasks["launch"].to_numpy(float), tasks["ts"].to_numpy(float)]),
                                "delta": np.concatenate([np.ones(len(tasks)), -np.ones(len(tasks))])})
        queue = changes.sort_values(["ts", "delta"], kind="stable")["delta"].cumsum()
        longest = max(longest, int(queue.max()))
    return longest


def gpu_summary(gpu: pd.DataFrame, runtime: pd.DataFrame, steps: int, cpu: pd.DataFrame,
                capability: float | None) -> dict[str, object]:
    """The GpuFact fields of one rank (pass the rows of ``analysis_window``): HTA's breakdown, overlap and idle
    split, matrix math by precision and unit (``facts.matrix``; ``capability``: an NVIDIA GPU's compute capability),
    copies by kind."""
    breakdown = temporal_breakdown(gpu)
    span = breakdown["span_us"]
    idle = idle_breakdown(gpu, runtime)[["host_wait_us", "kernel_wait_us", "other_us"]].sum()
    gaps = float(idle.sum())
    copies = gpu.loc[gpu["kind"] == "memory"]
    share = (lambda part, whole: min(part / whole, 1.0) if whole > 0 else 0.0)
    return {
        "span_us": span,
        "idle_ratio": breakdown["idle_ratio"], "compute_ratio": breakdown["compute_ratio"],
        "non_compute_ratio": max(breakdown["non_compute_ratio"], 0.0),
        "communication_ratio": share(length(merged(gpu.loc[gpu["kind"] == "communication"])), span),
        "comm_comp_overlap": comm_comp_overlap(gpu),
        "idle_host_wait_ratio": share(float(idle["host_wait_us"]), gaps),
        "idle_kernel_wait_ratio": share(float(idle["kernel_wait_us"]), gaps),
        "idle_other_ratio": share(float(idle["other_us"]), gaps),
        "host_wait_us_per_step": float(idle["host_wait_us"]) / steps,
        **matrix_summary(gpu.loc[gpu["kind"] == "compute"], cpu, capability),
        **attention_summary(gpu.loc[gpu["kind"] == "compute"]),
        **conversion_summary(gpu.loc[gpu["kind"] == "compute"], steps),
        **copy_summary(copies, steps),
        **exposed_communication(gpu, runtime, cpu, steps),
        "sparse_dist_pipelined": bool(matching(cpu["name"], SPARSE_DIST_PIPELINE, search=True).any()),
        "fused_embedding_lookups": bool(matching(gpu.loc[gpu["kind"] == "compute", "name"], TBE_KERNEL, search=True).any()),
        "memcpy_us_per_step": float(copies["dur"].sum()) / steps,
        "max_queue_length": max_queue_length(gpu, runtime),
    }
