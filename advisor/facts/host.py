"""Host-side facts from trace_view.json (or a PyTorch trace): dispatch, compilation, synchronisation, data loading, GC.

Pure functions over the trace tables. Counts and times are per profiled step: events are kept when they
start inside a ``ProfilerStep#N`` window (the whole capture is one step when there is none). The runtime
calls differ by platform (``AscendCL@…``/``Node@launch`` on Ascend, ``cuda…``/``hip…`` on GPUs):
``facts.platforms.RuntimeNames`` says which names count as what.
"""

from __future__ import annotations

import re
import numpy as np
import pandas as pd

from advisor.facts.gpu import analysis_window, draining_copy_calls, gpu_summary
from advisor.facts.matrix import nvidia_capability
from advisor.facts.operators import compute_kernels
from advisor.facts.models import ApiFact, DataLoaderFact, Fact, GpuFact, HostFact, TimeRange
from advisor.facts.platforms import ASCEND_RUNTIME, QUEUED_LAUNCH_US_CAP, RuntimeNames, traits
from advisor.facts.scope import RankScope, Shown, file_source
from advisor.facts.windows import inside, longest_ranges
from advisor.ingest.columns import records
from advisor.ingest.kinetosteps import OPTIMIZER_STEP, outermost, window_of
from advisor.ingest.model import RankData
from advisor.ingest.serving import breakdown_phase, phase_steps
from advisor.intervals import union
from advisor.names import matching

ZERO_GRAD = re.compile(r"^Optimizer\.zero_grad#")
MULTI_TENSOR_KERNEL = re.compile(r"Foreach|multi_tensor_apply|_fused_|Fused(?:Adam|SGD|Lamb)", re.IGNORECASE)
SYNC_BATCH_NORM = re.compile(r"SyncBatchNorm", re.IGNORECASE)
DATALOADER = re.compile(r"dataloader", re.IGNORECASE)
LONG_STREAM_GAP_US = 50.0
LONG_HOST_GAP_US = 1000.0




def compile_calls(apis: pd.DataFrame, names: RuntimeNames) -> pd.DataFrame:
    """The runtime's online compilations: its compile steps (AscendCL@opCompile) where it records them, else the
    calls that compile (AscendCL@aclopCompileAndExecute, which also runs the operator and finds a compiled binary
    in the cache most of the time)."""
    steps = apis.loc[matching(apis["name"], names.compile_step)]
    return steps if len(steps) else apis.loc[matching(apis["name"], names.compile)]


def launch_calls(apis: pd.DataFrame, host: pd.DataFrame, names: RuntimeNames) -> pd.DataFrame:
    """The calls that launch device work: the runtime's launch calls, else (where they are not recorded) the task
    queue's per-operator launches on the host lane."""
    calls = apis.loc[matching(apis["name"], names.launch)]
    return calls if len(calls) else host.loc[matching(host["name"], names.queued_launch)]


def launch_cost_us(launches: pd.DataFrame, queued: bool) -> float | None:
    """The host time one launch costs: the launch calls' mean; for the task queue's launches (``queued``) at most
    QUEUED_LAUNCH_US_CAP, since each spans the operator's whole host path."""
    if not len(launches):
        return None
    mean = float(launches["dur"].mean())
    return min(mean, QUEUED_LAUNCH_US_CAP) if queued else mean


def host_summary(host: pd.DataFrame, apis: pd.DataFrame, device: pd.DataFrame, launches: pd.DataFrame,
                 windows: pd.DataFrame, names: RuntimeNames = ASCEND_RUNTIME,
                 blocking_copies: pd.DataFrame | None = None) -> dict[str, float | None]:
    """Per-step counts and times of the dispatch-related host activity (``blocking_copies``: see ``sync_calls``)."""
    steps = max(len(windows), 1)
    apis = inside(apis, windows)
    host = inside(host, windows)
    compiles = compile_calls(apis, names)["dur"]
    if blocking_copies is not None:
        blocking_copies = blocking_copies.loc[blocking_copies.index.isin(apis.index)]
    program_syncs, item_syncs, copy_syncs, allocator_syncs = sync_calls(apis, host, names, blocking_copies)
    made = launch_calls(apis, host, names)
    launches_made = made["dur"]
    free_calls = apis.loc[matching(apis["name"], names.free), "dur"]
    gc = host.loc[host["cat"] == "GC", "dur"]
    optimizer = host.loc[matching(host["name"], OPTIMIZER_STEP), "dur"]
    launch_cost = launch_cost_us(made, queued=not matching(apis["name"], names.launch).any())
    compute = inside(device, windows).loc[lambda d: matching(d["task_type"].fillna(""), names.compute_task)]
    latency = inside(launches, windows, "launch_ts")
    latency = (latency["device_ts"] - latency["launch_ts"]).clip(lower=0)
    return {
        "compile_calls_per_step": len(compiles) / steps,
        "compile_us_per_step": float(compiles.sum()) / steps,
        "sync_calls_per_step": len(program_syncs) / steps,
        "sync_us_per_step": float(program_syncs["dur"].sum()) / steps,
        "item_sync_calls_per_step": len(item_syncs) / steps,
        "copy_sync_calls_per_step": len(copy_syncs) / steps,
        "allocator_sync_calls_per_step": len(allocator_syncs) / steps,
        "launch_calls_per_step": len(launches_made) / steps,
        "graph_launches_per_step": int(matching(apis["name"], names.graph_launch).sum()) / steps,
        "replays_aclgraph_only": _aclgraph_only(apis["name"], names),
        "device_sync_calls_per_step": int(matching(program_syncs["name"], DEVICE_SYNC).sum()) / steps,
        "dataloader_calls_per_step": len(dataloader_calls(host)) / steps,
        "free_calls_per_step": len(free_calls) / steps,
        "free_us_per_step": float(free_calls.sum()) / steps,
        "launch_us_mean": launch_cost,
        "launch_latency_us_median": float(latency.median()) if len(latency) else None,
        "launch_latency_us_p90": float(latency.quantile(0.9)) if len(latency) else None,
        "tiny_kernel_share": float((compute["dur"] < launch_cost).mean()) if launch_cost and len(compute) else None,
        "gc_calls_per_step": len(gc) / steps,
        "gc_us_per_step": float(gc.sum()) / steps,
        "optimizer_us_per_step": float(optimizer.sum()) / steps,
        "sync_batch_norm_calls_per_step": int(matching(host["name"], SYNC_BATCH_NORM, search=True).sum()) / steps,
        **stream_gaps(device, windows, steps, names.compute_task),
        **host_gaps(apis, windows, steps),
        **optimizer_kernels(host.loc[matching(host["name"], OPTIMIZER_STEP)], launches, device, steps),
    }


ACLGRAPH_REPLAY = re.compile(r"^AscendCL@aclmdlRIExecute(Async)?$")  # TorchAir reduce-overhead's aclgraph, not GE


def _aclgraph_only(calls: pd.Series, names: RuntimeNames) -> bool:
    """Whether the step replays graphs and every replay is an aclgraph one (aclmdlRIExecute[Async]: TorchAir
    reduce-overhead), none a GE graph's (aclmdlExecute: max-autotune)."""
    replays = calls.loc[matching(calls, names.graph_launch)]
    return bool(len(replays)) and bool(matching(replays, ACLGRAPH_REPLAY).all())


ITEM_READ = re.compile(r"^aten::(item|_local_scalar_dense)$")
DEVICE_SYNC = re.compile(r"DeviceSynchronize$|aclrtSynchronizeDevice")  # a device-wide synchronisation
DEVICE_COPY = re.compile(r"^aten::_to_copy$")  # .to() / .cpu() of a tensor: a copy between host and device


def sync_calls(apis: pd.DataFrame, host: pd.DataFrame, names: RuntimeNames, blocking_copies: pd.DataFrame | None = None
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The synchronisation calls split by what made them: (the program's; the subset made by ``.item()`` reads —
    inside aten::item / aten::_local_scalar_dense —; the subset made by blocking copies between host and device —
    inside aten::_to_copy, e.g. ``.to(device)`` of a batch in pageable memory —; the allocator's: inside its own
    free/malloc calls). ``blocking_copies``: copy calls that waited for the stream to drain (``facts.gpu
    .draining_copy_calls``), synchronisations too; those not inside an ``.item()`` read count as blocking copies."""
    syncs = apis.loc[matching(apis["name"], names.sync)]
    if blocking_copies is not None and len(blocking_copies):
        syncs = pd.concat([syncs, blocking_copies.loc[~blocking_copies.index.isin(syncs.index), syncs.columns]])
    in_allocator = _starts_within(syncs, apis.loc[matching(apis["name"], names.allocator)])
    program = syncs.loc[~in_allocator]
    reads = program.loc[_starts_within(program, host.loc[matching(host["name"], ITEM_READ)])]
    copies = program.loc[_starts_within(program, host.loc[matching(host["name"], DEVICE_COPY)])
                         | (program.index.isin(blocking_copies.index) if blocking_copies is not None else False)]
    return program, reads, copies.loc[~copies.index.isin(reads.index)], syncs.loc[in_allocator]


def _starts_within(calls: pd.DataFrame, spans: pd.DataFrame) -> np.ndarray:
    """Whether each call starts inside one of ``spans`` (overlapping or nested)."""
    if calls.empty or spans.empty:
        return np.zeros(len(calls), dtype=bool)
    merged = union(np.column_stack([spans["ts"].to_numpy(float), (spans["ts"] + spans["dur"]).to_numpy(float)]))
    if not len(merged):  # only empty spans
        return np.zeros(len(calls), dtype=bool)
    starts = calls["ts"].to_numpy(float)
    slot = np.searchsorted(merged[:, 0], starts, side="right") - 1
    return (slot >= 0) & (starts <= merged[np.clip(slot, 0, None), 1])


def stream_gaps(device: pd.DataFrame, windows: pd.DataFrame, steps: int,
                compute_task: re.Pattern[str]) -> dict[str, float | None]:
    """Idle gaps between consecutive compute tasks on the busiest compute stream, inside the steps."""
    compute = device.loc[matching(device["task_type"].fillna(""), compute_task)]
    if compute.empty:
        return {"stream_gap_us_per_step": None, "stream_gap_max_us": None, "stream_gaps_per_step": None}
    busiest = compute.groupby("stream", sort=True)["dur"].sum().idxmax()
    gaps = gaps_within_steps(compute.loc[compute["stream"] == busiest], windows)
    return {"stream_gap_us_per_step": float(gaps.sum()) / steps, "stream_gap_max_us": float(gaps.max()) if len(gaps) else 0.0,
            "stream_gaps_per_step": int((gaps >= LONG_STREAM_GAP_US).sum()) / steps}


def host_gaps(apis: pd.DataFrame, windows: pd.DataFrame, steps: int) -> dict[str, float | None]:
    """Host stretches of 1 ms or more inside the steps without a runtime call (launch, sync, compile, free)."""
    if len(apis) < 2:
        return {"host_gap_us_per_step": None, "host_gap_max_us": None}
    gaps = gaps_within_steps(apis, windows)
    return {"host_gap_us_per_step": float(gaps.loc[gaps >= LONG_HOST_GAP_US].sum()) / steps,
            "host_gap_max_us": float(gaps.max()) if len(gaps) else 0.0}


def gaps_within_steps(events: pd.DataFrame, windows: pd.DataFrame) -> pd.Series:
    """Time from the latest end so far to each next event's start (≥ 0), for consecutive events of one step window."""
    ordered = events.loc[events["ts"].notna()].sort_values("ts", kind="stable")
    if not windows.empty:
        ordered = inside(ordered, windows)
        step = np.searchsorted(windows.sort_values("start")["start"].to_numpy(), ordered["ts"].to_numpy(), side="right")
    else:
        step = np.zeros(len(ordered), dtype=int)
    ends = (ordered["ts"] + ordered["dur"]).groupby(step).cummax().groupby(step).shift()
    return (ordered["ts"] - ends).dropna().clip(lower=0)


def optimizer_kernels(regions: pd.DataFrame, launches: pd.DataFrame, device: pd.DataFrame,
                      steps: int) -> dict[str, float | None]:
    """Device tasks launched from inside Optimizer.step regions (HostToDevice flows), per step, their time, and how
    many are multi-tensor kernels (Foreach*, multi_tensor_apply: the optimizer is already foreach or fused) — where
    none of those launches is one, the capture's multi-tensor kernels per step: with the task queue on, an operator's
    launch can come after Optimizer.step has returned (a real DB export launched its ForeachAddList 5 ms after it)."""
    if regions.empty or launches.empty:
        return {"optimizer_kernels_per_step": None, "optimizer_kernel_us_per_step": None,
                "optimizer_foreach_kernels_per_step": None}
    windows = pd.DataFrame({"start": regions["ts"], "end": regions["ts"] + regions["dur"]})
    launched = inside(launches, windows, "launch_ts")
    tasks = device.drop_duplicates("ts").set_index("ts")
    kernel_us = launched["device_ts"].map(tasks["dur"]).fillna(0.0)
    foreach = int(launched["device_ts"].map(tasks["name"]).fillna("").str.contains(MULTI_TENSOR_KERNEL).sum())
    if not foreach:  # the task queue can launch the step's kernels after Optimizer.step returns: the device's own count
        foreach = int(device["name"].fillna("").astype(str).str.contains(MULTI_TENSOR_KERNEL).sum())
    return {"optimizer_kernels_per_step": len(launched) / steps, "optimizer_kernel_us_per_step": float(kernel_us.sum()) / steps,
            "optimizer_foreach_kernels_per_step": foreach / steps}


def dataloader_calls(host: pd.DataFrame) -> pd.DataFrame:
    """The outermost host events whose name mentions a DataLoader (nested ones dropped), by start."""
    return outermost(host.loc[matching(host["name"], DATALOADER, search=True)])


def dataloader_summary(host: pd.DataFrame, windows: pd.DataFrame, rank: int, file: str) -> dict[str, object] | None:
    """Data-loading time per step: the outermost events whose name mentions a DataLoader, and where it lies on the
    rank's trace (``file``)."""
    rows = inside(host, windows)
    rows = rows.loc[matching(rows["name"], DATALOADER, search=True)].sort_values("ts")
    if rows.empty:
        return None
    outer = dataloader_calls(rows)
    names = " ".join(rows["name"].unique())
    iterator = "multi-process" if "MultiProcessing" in names else "single-process" if "SingleProcess" in names else "unknown"
    steps = max(len(windows), 1)
    slowest = _slowest_step(outer, windows)
    return {"calls_per_step": len(outer) / steps, "us_per_step": float(outer["dur"].sum()) / steps, "iterator": iterator,
            **slowest, "ranges": _dataloader_ranges(outer, windows, slowest.get("slowest_step"), rank, file)}


def _dataloader_ranges(calls: pd.DataFrame, windows: pd.DataFrame, slowest: int | None, rank: int, file: str
                       ) -> list[TimeRange]:
    """The longest DataLoader calls (``us_per_step``) and the longest of the slowest step's (``excess_us_per_step``,
    when there is one) as time ranges."""
    def spans(rows: pd.DataFrame) -> np.ndarray:
        return np.column_stack([rows["ts"].to_numpy(float), (rows["ts"] + rows["dur"]).to_numpy(float)])

    stretches = {"us_per_step": spans(calls)}
    if slowest is not None:
        stretches["excess_us_per_step"] = spans(calls.loc[window_of(calls, windows) == slowest])
    return longest_ranges(stretches, windows, rank, file)


def _slowest_step(calls: pd.DataFrame, windows: pd.DataFrame) -> dict[str, object]:
    """The step that waits longest for its batches against the median step (three or more numbered steps): slowest_step,
    slowest_step_us, median_step_us, slowest_to_median and excess_us_per_step, (slowest − median) / steps; empty
    otherwise."""
    if len(windows) < 3 or "step" not in windows or windows["step"].isna().any():
        return {}
    per_step = calls["dur"].groupby(window_of(calls, windows)).sum().reindex(windows["step"], fill_value=0.0)
    slowest, median = float(per_step.max()), float(per_step.median())
    return {"slowest_step": int(per_step.idxmax()), "slowest_step_us": slowest, "median_step_us": median,
            "slowest_to_median": slowest / max(median, 1.0), "excess_us_per_step": (slowest - median) / len(windows)}


def api_calls(host: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Per framework op (aten::…): calls and host time per step inside the step windows."""
    ops = inside(host, windows)
    ops = ops.loc[ops["name"].str.startswith("aten::")]
    steps = max(len(windows), 1)
    grouped = ops.groupby("name", sort=True)["dur"].agg(["size", "sum"]).reset_index()
    return pd.DataFrame({"name": grouped["name"], "calls_per_step": grouped["size"] / steps,
                         "us_per_step": grouped["sum"] / steps})


SINGLE_OP_MODEL_ID = 4294967295  # UINT32_MAX: the Model ID of a kernel launched on its own, outside any graph


def single_op_ids(ids: pd.Series) -> bool | None:
    """Whether every Model ID of ``ids`` (compute kernels') is the single-op one; None when none is known."""
    ids = pd.to_numeric(ids, errors="coerce").dropna()
    return bool((ids == SINGLE_OP_MODEL_ID).all()) if len(ids) else None


def kernel_model_ids(rank: RankData, names: RuntimeNames) -> tuple[bool | None, str | None]:
    """Whether the rank's compute kernels all ran as single ops, and the table that says so: kernel_details' Model ID
    (the DB's TASK.modelId), else the Model Id of the trace's device tasks (a Level0 kernel_details has no such
    column); (None, None) where neither records it."""
    kernels = rank.kernels.frame if rank.kernels is not None else None
    if kernels is not None and "model_id" in kernels:
        found = single_op_ids(kernels.loc[compute_kernels(kernels).index, "model_id"])
        if found is not None:
            return found, "kernels"
    device = rank.trace.device if rank.trace is not None else None
    if device is not None and "model_id" in device:
        compute = matching(device["task_type"].fillna(""), names.compute_task)
        found = single_op_ids(device.loc[compute, "model_id"])
        if found is not None:
            return found, "trace"
    return None, None


def host_facts(scope: RankScope) -> list[Fact]:
    """The host's summary, its busiest API calls, the DataLoader and, on a GPU, the HTA figures."""
    show, rank, breakdown = scope.show, scope.rank, scope.breakdown
    if rank.trace is None:
        return []
    trace = rank.trace
    windows = scope.host_windows
    path = show(rank.file("trace"))
    names = traits(rank.platform).runtime
    kineto = rank.kineto
    blocking = draining_copy_calls(kineto.gpu, kineto.runtime, names.copy_call) if kineto is not None else None
    summary = host_summary(trace.host, trace.apis, trace.device, trace.launches, windows, names, blocking)
    step_time = breakdown.step_time_us if breakdown is not None else None
    if step_time is None and not windows.empty:  # no device breakdown: the host's ProfilerStep windows are the step
        step_time = float((windows["end"] - windows["start"]).mean()) or None
    single_ops, told_by = kernel_model_ids(rank, names)
    sources = [file_source(show, rank, "trace", "CANN, Python, Ascend Hardware, HostToDevice")]
    if told_by == "kernels":
        sources.append(file_source(show, rank, "kernels", "TASK.modelId" if rank.export == "db" else "Model ID"))
    elif told_by == "trace":
        sources[0] = file_source(show, rank, "trace", "CANN, Python, Ascend Hardware (Model Id), HostToDevice")
    facts: list[Fact] = [
        HostFact(id=f"host:r{rank.rank}", sources=sources, rank=rank.rank, steps=max(len(windows), 1), **summary,
                 single_op_kernels_only=bool(single_ops),
                 gc_share_of_step=min(summary["gc_us_per_step"] / step_time, 1.0) if step_time else None,
                 optimizer_share_of_step=min(summary["optimizer_us_per_step"] / step_time, 1.0) if step_time else None)
    ]
    for row in records(api_calls(trace.host, windows)):
        facts.append(ApiFact(id=f"api:r{rank.rank}:{row['name']}", sources=[f"{path}[{traits(rank.platform).host_process}: {row['name']}]"],
                             rank=rank.rank, name=row["name"], calls_per_step=float(row["calls_per_step"]),
                             us_per_step=float(row["us_per_step"])))
    loading = dataloader_summary(trace.host, windows, rank.rank, path)
    if loading is not None:
        share = min(loading["us_per_step"] / step_time, 1.0) if step_time else None
        facts.append(DataLoaderFact(id=f"dataloader:r{rank.rank}", sources=[f"{path}[{traits(rank.platform).host_process}: *DataLoader*]"],
                                    rank=rank.rank, share_of_step=share, **loading))
    if rank.kineto is not None and not rank.kineto.gpu.empty:
        facts.append(_gpu_fact(show, rank))
    return facts


def _gpu_fact(show: Shown, rank: RankData) -> GpuFact:
    trace = rank.kineto
    assert trace is not None
    if rank.iterations is not None and breakdown_phase(rank.iterations) is not None:
        # a serving run: the iterations the breakdown covers, as every per-step figure (per-stage files merged into one
        # trace lie far apart, and time between iterations is no iteration's)
        covered = rank.iterations.loc[rank.iterations["step"].isin(phase_steps(rank.iterations,
                                                                               breakdown_phase(rank.iterations)))]
        gpu, steps = inside(trace.gpu, covered[["step", "start", "end"]]), max(len(covered), 1)
    else:
        gpu, steps = analysis_window(trace.gpu, trace.runtime, trace.cpu)
    capability = nvidia_capability(trace.device_name, trace.compute_capability, trace.runtime["name"])
    return GpuFact(id=f"gpu:r{rank.rank}", sources=[f"{show(trace.path)}[kernel, gpu_memcpy, gpu_memset, cuda_runtime, "
                                                    "cpu_op Input type]"],
                   rank=rank.rank, device=trace.device_name, steps=steps,
                   **gpu_summary(gpu, trace.runtime, steps, trace.cpu, capability))
