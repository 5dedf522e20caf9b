"""GPU time analyses over a Kineto trace's tables, with Holistic Trace Analysis' definitions (pure functions).

* temporal breakdown: over the kernel span (first GPU activity start to last end), idle = span − |∪ all GPU
  intervals|, compute = |∪ compute kernels|, non-compute = span − compute − idle;
* communication–computation overlap = |∪ compute ∩ ∪ communication| / |∪ communication|;
* idle per stream, split by the gap before each kernel: host wait (the kernel was launched only after the
  stream had drained), kernel wait (a gap under 30 µs between back-to-back kernels) or other.

The step breakdown is measured on wall-clock step windows (``step_windows``): each ProfilerStep#N extended to the
end of the GPU work it launched, so that the host's time before a step's first kernel (data loading, the
optimizer's host work) is idle time of that step, as torch-tb-profiler counts it.

As HTA does by default, the per-rank figures (``gpu_summary``) cover the GPU activity launched before the last
ProfilerStep began — the last step is often cut short by the end of the capture — when there are two steps or
more (``analysis_window``); the per-step breakdown keeps every step. Timestamps are not rounded to whole µs.
A test compares the figures with HTA's when HTA is installed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.facts.intervals import intersect, intersection, length, merged, union

CONSECUTIVE_KERNEL_DELAY_US = 30.0


def launch_times(runtime: pd.DataFrame) -> pd.Series:
    """The start of the runtime call that launched each correlation id (the first call, where ids repeat)."""
    return runtime.dropna(subset=["correlation"]).drop_duplicates("correlation").set_index("correlation")["ts"]


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


STEP_EVENT = r"^ProfilerStep#(\d+)$"
BREAKDOWN_COLUMNS = ["step", "start_us", "end_us", "computing_us", "communication_us", "comm_not_overlapped_us",
                     "overlapped_us", "free_us", "preparing_us"]


def step_windows(gpu: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame) -> pd.DataFrame:
    """The wall-clock window of each ProfilerStep#N: from max(the previous step's end, the ProfilerStep's start) to
    max(the ProfilerStep's end, the end of the last GPU activity launched inside it). The windows tile the steps'
    wall time and never overlap; a trace without ProfilerStep markers is one window (step None) from its first to
    its last host or GPU event. Columns: step (int or None), start, end (µs)."""
    numbers = cpu["name"].str.extract(STEP_EVENT, expand=False)
    markers = cpu.loc[numbers.notna()].assign(step=numbers.dropna().astype(int)).sort_values(["ts", "step"])
    if markers.empty:
        bounds = [frame[["ts", "dur"]] for frame in (cpu, gpu, runtime) if not frame.empty]
        if not bounds:
            return pd.DataFrame(columns=["step", "start", "end"])
        every = pd.concat(bounds, ignore_index=True)
        return pd.DataFrame({"step": [None], "start": [float(every["ts"].min())],
                             "end": [float((every["ts"] + every["dur"]).max())]})
    launched_end = (gpu["ts"] + gpu["dur"]).groupby(launch_steps(gpu, runtime, cpu)).max()
    rows, previous_end = [], -np.inf
    for step, ts, dur in zip(markers["step"], markers["ts"], markers["dur"]):
        start = max(previous_end, float(ts))
        end = max(float(ts + dur), float(launched_end.get(str(step), -np.inf)), start)
        rows.append((int(step), start, end))
        previous_end = end
    return pd.DataFrame(rows, columns=["step", "start", "end"])


def per_window(spans: np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    """The length of ``spans`` (disjoint, sorted) inside each of the disjoint windows, in the windows' order."""
    bounds = windows[["start", "end"]].to_numpy(float)
    order = np.argsort(bounds[:, 0], kind="stable")
    pieces = intersect(spans, bounds[order])
    slot = np.searchsorted(bounds[order, 0], pieces[:, 0], side="right") - 1
    sums = np.bincount(slot, weights=pieces[:, 1] - pieces[:, 0], minlength=len(bounds)) if len(pieces) else np.zeros(len(bounds))
    out = np.empty(len(bounds))
    out[order] = sums
    return out


def first_start(spans: np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    """Per window: where the first of ``spans`` inside it begins (the window's end when none is inside)."""
    bounds = windows[["start", "end"]].to_numpy(float)
    pieces = intersect(spans, bounds[np.argsort(bounds[:, 0], kind="stable")])
    if not len(pieces):
        return bounds[:, 1].copy()
    found = np.searchsorted(pieces[:, 0], bounds[:, 0], side="left")
    at = np.minimum(found, len(pieces) - 1)
    inside = (found < len(pieces)) & (pieces[at, 0] < bounds[:, 1])
    return np.where(inside, pieces[at, 0], bounds[:, 1])


def step_breakdown(gpu: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Per step window (``step_windows``): the step_trace_time.csv columns, so GPU steps read like Ascend ones.

    Inside each window: Computing = |∪ compute|, Communication = |∪ communication|, Communication(Not Overlapped)
    = Communication − the part under compute, Free = window − |compute ∪ communication| (memory copies count as
    free, as on Ascend; so does the host's time before the step's first kernel, e.g. in the DataLoader), and
    Preparing = window start to the first compute or communication activity.
    """
    if windows.empty:
        return pd.DataFrame(columns=BREAKDOWN_COLUMNS)
    compute = merged(gpu.loc[gpu["kind"] == "compute"])
    communication = merged(gpu.loc[gpu["kind"] == "communication"])
    busy = union(np.concatenate([compute, communication]))
    span = (windows["end"] - windows["start"]).to_numpy(float)
    computing, comm = per_window(compute, windows), per_window(communication, windows)
    overlapped = per_window(intersect(compute, communication), windows)
    return pd.DataFrame({
        "step": [None if s is None or pd.isna(s) else str(int(s)) for s in windows["step"]],
        "start_us": windows["start"].to_numpy(float), "end_us": windows["end"].to_numpy(float),
        "computing_us": computing, "communication_us": comm, "comm_not_overlapped_us": comm - overlapped,
        "overlapped_us": overlapped, "free_us": np.clip(span - per_window(busy, windows), 0.0, None),
        "preparing_us": first_start(busy, windows) - windows["start"].to_numpy(float),
    }, columns=BREAKDOWN_COLUMNS)


def launch_steps(gpu: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame) -> pd.Series:
    """The ProfilerStep number (as text) of each GPU activity: the host window holding the runtime call that
    launched it (by correlation), or its own start when no launch is recorded; None outside every step."""
    numbers = cpu["name"].str.extract(STEP_EVENT, expand=False)
    windows = cpu.loc[numbers.notna()].assign(step=numbers.dropna().astype(int)).sort_values("ts")
    out = pd.Series(None, index=gpu.index, dtype=object)
    if windows.empty or gpu.empty:
        return out
    launches = launch_times(runtime)
    anchor = gpu["correlation"].map(launches).fillna(gpu["ts"]).to_numpy(float)
    slot = np.searchsorted(windows["ts"].to_numpy(float), anchor, side="right") - 1
    ends = (windows["ts"] + windows["dur"]).to_numpy(float)
    inside = (slot >= 0) & (anchor <= ends[np.clip(slot, 0, None)])
    steps = windows["step"].to_numpy()
    out[inside] = [str(int(steps[i])) for i in slot[inside]]
    return out


CUDA_CORE_GEMM = r"sgemm|simt|gemmSN|dgemm"
PAGEABLE_COPY = r"Pageable"


def analysis_window(gpu: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """HTA's default scope: with 2+ ProfilerSteps, the GPU activity whose launch (by correlation) started before
    the last step began; else everything. Returns the rows and the number of steps they cover (at least 1)."""
    starts = cpu.loc[cpu["name"].str.match(STEP_EVENT), "ts"]
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


def gpu_summary(gpu: pd.DataFrame, runtime: pd.DataFrame, steps: int) -> dict[str, float]:
    """The GpuFact fields of one rank (pass the rows of ``analysis_window``): HTA's breakdown, overlap and idle
    split, CUDA-core GEMMs, pageable copies."""
    breakdown = temporal_breakdown(gpu)
    span = breakdown["span_us"]
    idle = idle_breakdown(gpu, runtime)[["host_wait_us", "kernel_wait_us", "other_us"]].sum()
    gaps = float(idle.sum())
    compute = gpu.loc[gpu["kind"] == "compute"]
    compute_us = float(compute["dur"].sum())
    cuda_core = float(compute.loc[compute["name"].str.contains(CUDA_CORE_GEMM, case=False), "dur"].sum())
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
        "fp32_gemm_share": share(cuda_core, compute_us),
        "pageable_memcpy_per_step": int(copies["name"].str.contains(PAGEABLE_COPY).sum()) / steps,
        "memcpy_us_per_step": float(copies["dur"].sum()) / steps,
        "max_queue_length": max_queue_length(gpu, runtime),
    }
