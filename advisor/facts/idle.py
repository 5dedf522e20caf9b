"""Where the device's idle time goes: each idle stretch of a step charged to what the host was doing (pure functions).

The same on both platforms: idle is step-window time with neither compute nor communication on the device. It is
split, in this order, into the parts of ``IdleFact``:

1. the host inside a DataLoader call, compiling an operator online, freeing or allocating device memory, in a
   garbage collection, in the optimizer's step or in its zero_grad (the host events' own spans);
2. ``sync``: from a synchronisation call's start until the device next starts work — after the host waited for
   the device, the device waits for the host to queue new work;
3. ``copy``: a memory copy runs, but nothing else, or the host is inside a memory-copy call (a copy from pageable
   host memory blocks the host until it is staged, so nothing new is launched meanwhile);
4. ``dispatch``: what is left of a gap whose next task was launched only after the gap began (the host could not
   keep the device fed — launch-bound, HTA's "host wait"); ``host``: the rest (the next task was queued already,
   or the step ends without one).

The per-step figures are means over the typical steps: from three steps on, a step longer than OUTLIER_FACTOR × the
median is left out of them (one stalled step would otherwise set the gain of the part it stalled in for every
step), and its excess over the median is a figure of its own (``outlier_excess_us``, host.outlier_steps).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.facts.host import OPTIMIZER_STEP, ZERO_GRAD, compile_calls, dataloader_calls, matching, sync_calls
from advisor.facts.models import Fact, IdleFact
from advisor.facts.platforms import traits
from advisor.facts.scope import RankScope, file_source
from advisor.ingest.kinetosteps import first_start, launch_times, step_windows
from advisor.intervals import EMPTY, intersect, length, merged, subtract, union

HOST_PARTS = ("dataloader", "compile", "allocator", "gc", "optimizer", "zero_grad")
PARTS = (*HOST_PARTS, "sync", "copy", "dispatch", "host")
OUTLIER_FACTOR = 1.2  # a step more than 20 % longer than the median step is an outlier
MIN_STEPS_FOR_SPREAD = 3  # fewer steps have no median worth comparing with


def spans(frame: pd.DataFrame) -> np.ndarray:
    """The [ts, ts + dur) intervals of a table's rows (any order, overlapping or not)."""
    if frame.empty:
        return EMPTY
    return union(np.column_stack([frame["ts"].to_numpy(float), (frame["ts"] + frame["dur"]).to_numpy(float)]))


def until_next_busy(calls: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Each call extended from its start to the next start of device work after the call ends."""
    if not len(calls):
        return EMPTY
    starts = busy[:, 0] if len(busy) else np.array([])
    at = np.searchsorted(starts, calls[:, 1], side="left")
    ends = np.where(at < len(starts), starts[np.minimum(at, max(len(starts) - 1, 0))] if len(starts) else calls[:, 1],
                    calls[:, 1])
    return union(np.column_stack([calls[:, 0], np.maximum(ends, calls[:, 1])]))


def attribute_idle(idle: np.ndarray, busy: np.ndarray, host: dict[str, np.ndarray], syncs: np.ndarray,
                   copies: np.ndarray, tasks: pd.DataFrame, item_syncs: np.ndarray = EMPTY,
                   copy_syncs: np.ndarray = EMPTY) -> dict[str, float]:
    """µs of ``idle`` (disjoint, sorted) per part of ``PARTS``, and ``item_sync`` / ``copy_sync``: the parts of
    ``sync`` that follow the synchronisations made by ``.item()`` reads and by blocking copies between host and
    device (``item_syncs``, ``copy_syncs``: disjoint subsets of ``syncs``).

    ``busy``: the device's compute and communication; ``host``: the host spans of each of ``HOST_PARTS``;
    ``syncs``: synchronisation calls; ``copies``: memory copies on the device and the host's copy calls; ``tasks``: device task starts
    (``device_ts``) with the start of the call that launched them (``launch_ts``, NaN when unknown).
    """
    out = dict.fromkeys(PARTS, 0.0)
    left = idle
    for part in HOST_PARTS:
        cause = host.get(part, EMPTY)
        out[part] = length(intersect(left, cause))
        left = subtract(left, cause)
    out["item_sync"] = length(intersect(left, until_next_busy(item_syncs, busy)))
    out["copy_sync"] = length(intersect(left, until_next_busy(copy_syncs, busy)))
    for part, cause in (("sync", until_next_busy(syncs, busy)), ("copy", copies)):
        out[part] = length(intersect(left, cause))
        left = subtract(left, cause)
    out["dispatch"], out["host"] = _late_launches(left, tasks)
    return out


def outlier_mask(windows: pd.DataFrame) -> np.ndarray:
    """Which step windows (``start``, ``end``) are longer than OUTLIER_FACTOR × the median window (none below
    MIN_STEPS_FOR_SPREAD steps)."""
    durations = (windows["end"] - windows["start"]).to_numpy(float)
    if len(durations) < MIN_STEPS_FOR_SPREAD:
        return np.zeros(len(durations), dtype=bool)
    return durations > OUTLIER_FACTOR * float(np.median(durations))


def step_outliers(windows: pd.DataFrame, free: np.ndarray, parts_of) -> dict[str, object]:
    """The spread of the step windows (``step``, ``start``, ``end``): the median step, the steps longer than
    OUTLIER_FACTOR × the median, what they add to the mean step, and the slowest step with its largest idle part
    (``parts_of(idle)``: µs per part of PARTS for some of ``free``). Empty below MIN_STEPS_FOR_SPREAD steps."""
    durations = (windows["end"] - windows["start"]).to_numpy(float)
    if len(durations) < MIN_STEPS_FOR_SPREAD:
        return {}
    median = float(np.median(durations))
    slow = outlier_mask(windows)
    worst = int(np.argmax(durations))
    window = windows[["start", "end"]].to_numpy(float)[worst:worst + 1]
    parts = {part: value for part, value in parts_of(intersect(free, window)).items() if part in PARTS}
    part = max(parts, key=lambda name: parts[name])
    steps = windows["step"].tolist()
    return {
        "step_median_us": median,
        "slowest_step": None if steps[worst] is None else int(steps[worst]),
        "first_step": min((int(step) for step in steps if step is not None), default=None),
        "slowest_step_us": float(durations[worst]),
        "outlier_steps": ", ".join(str(step) for step, out in zip(steps, slow) if out) or None,
        "outlier_excess_us": float((durations[slow] - median).sum() / len(durations)),
        "slowest_idle_part": part if parts[part] > 0 else None,
        "slowest_idle_part_us": float(parts[part]),
    }


def _late_launches(gaps: np.ndarray, tasks: pd.DataFrame) -> tuple[float, float]:
    """Split idle stretches by the next device task after each: launched after the stretch began (dispatch) or not."""
    if not len(gaps):
        return 0.0, 0.0
    known = tasks.dropna(subset=["device_ts"]).sort_values("device_ts", kind="stable")
    starts = known["device_ts"].to_numpy(float)
    launches = known["launch_ts"].to_numpy(float)
    at = np.searchsorted(starts, gaps[:, 1] - 1e-6, side="left")  # the first task starting at the gap's end or later
    found = at < len(starts)
    launched = np.where(found, launches[np.minimum(at, max(len(starts) - 1, 0))] if len(starts) else np.nan, np.nan)
    late = found & (launched > gaps[:, 0])
    sizes = gaps[:, 1] - gaps[:, 0]
    return float(sizes[late].sum()), float(sizes[~late].sum())


def idle_facts(scope: RankScope) -> list[Fact]:
    """Where the device's idle time per step goes (``facts.idle``). On a GPU the idle time is measured in the step
    windows of the breakdown; on Ascend it is the Overlap Analysis lane ``Free`` (torch_npu's own idle intervals)
    inside the ProfilerStep windows and each window's Preparing (its start to its first Computing or Communication
    event: the host preparing the step), else the device step windows without their kernels."""
    show, rank, breakdown = scope.show, scope.rank, scope.breakdown
    if rank.trace is None:
        return []
    trace, names = rank.trace, traits(rank.platform).runtime
    if rank.kineto is not None:
        gpu = rank.kineto.gpu
        if gpu.empty:  # a CPU-only trace: there is no device to be idle
            return []
        windows = step_windows(gpu, rank.kineto.runtime, rank.kineto.cpu)
        busy = merged(gpu.loc[gpu["kind"].isin(["compute", "communication"])])
        free = subtract(_window_set(windows), busy)
        copies = merged(gpu.loc[gpu["kind"] == "memory"])
        tasks = pd.DataFrame({"device_ts": gpu["ts"], "launch_ts": gpu["correlation"].map(launch_times(rank.kineto.runtime))})
        source = f"{show(rank.kineto.path)}[kernel, gpu_memcpy, gpu_memset, cuda_runtime, cpu_op]"
    else:
        kernels = rank.kernels.frame if rank.kernels is not None else pd.DataFrame()
        timed = {"start_us", "duration_us"} <= set(kernels.columns)  # a kernel table may lack Start Time
        busy = spans(kernels[["start_us", "duration_us"]].set_axis(["ts", "dur"], axis=1).dropna() if timed else pd.DataFrame())
        lanes = trace.overlap.loc[trace.overlap["lane"] == "Free"]
        device_windows = scope.kernel_windows
        windows = scope.host_windows if not lanes.empty else device_windows
        if windows.empty:
            windows = device_windows if not device_windows.empty else scope.host_windows
        free = subtract(_window_set(windows), busy) if lanes.empty else union(np.concatenate(
            [intersect(spans(lanes), _window_set(windows)), _preparing(trace.overlap, windows)]))
        copies = spans(trace.device.loc[matching(trace.device["task_type"].fillna(""), names.copy_task)])
        tasks = trace.launches
        source = file_source(show, rank, "trace", "Overlap Analysis: Free; Python: DataLoader, GC; CANN: AscendCL")
    if windows.empty:
        return []
    apis = trace.apis
    host = {"dataloader": spans(dataloader_calls(trace.host)),
            "compile": spans(compile_calls(apis, names)),
            "allocator": spans(apis.loc[matching(apis["name"], names.allocator)]),
            "gc": spans(trace.host.loc[trace.host["cat"] == "GC"]),
            "optimizer": spans(trace.host.loc[matching(trace.host["name"], OPTIMIZER_STEP)]),
            "zero_grad": spans(trace.host.loc[matching(trace.host["name"], ZERO_GRAD)])}
    program_syncs, item_syncs, copy_syncs, _allocator_syncs = sync_calls(apis, trace.host, names)  # the allocator's are its idle
    copies = union(np.concatenate([copies, spans(apis.loc[matching(apis["name"], names.copy_call)])]))

    syncs, item_spans, copy_spans = spans(program_syncs), spans(item_syncs), spans(copy_syncs)

    def parts_of(idle: np.ndarray) -> dict[str, float]:
        return attribute_idle(idle, busy, host, syncs, copies, tasks, item_spans, copy_spans)

    typical = windows.loc[~outlier_mask(windows)]
    typical_idle = intersect(free, _window_set(typical)) if len(typical) < len(windows) else free
    parts = parts_of(typical_idle)
    item_sync, copy_sync = parts.pop("item_sync"), parts.pop("copy_sync")
    count = len(typical)
    step = (breakdown.step_time_us if breakdown is not None and count == len(windows)
            else float((typical["end"] - typical["start"]).sum()) / count)
    idle = length(typical_idle) / count
    per_step = {part: value / count for part, value in parts.items()}
    largest = max(per_step, key=lambda part: per_step[part]) if idle > 0 else None
    share = (lambda value, whole: min(value / whole, 1.0) if whole > 0 else 0.0)
    spread = step_outliers(windows, free, parts_of)
    if spread:  # the excess is part of the mean step over every window, not of the typical step
        mean_step = (breakdown.step_time_us if breakdown is not None and breakdown.step_time_us
                     else float((windows["end"] - windows["start"]).mean()))
        spread["outlier_excess_share_of_step"] = share(spread["outlier_excess_us"], mean_step)
    return [IdleFact(
        id=f"idle:r{rank.rank}", sources=[source], rank=rank.rank, steps=count, step_us=step, idle_us=idle,
        idle_share_of_step=share(idle, step), **{f"{part}_us": value for part, value in per_step.items()},
        **{f"{part}_share_of_step": share(value, step) for part, value in per_step.items()},
        largest_part=largest, largest_share_of_idle=share(per_step[largest], idle) if largest else 0.0,
        dataloader_share_of_idle=share(per_step["dataloader"], idle), item_sync_us=item_sync / count,
        copy_sync_us=copy_sync / count, **spread,
    )]


def _preparing(overlap: pd.DataFrame, windows: pd.DataFrame) -> np.ndarray:
    """Per step window, torch_npu's Preparing: from the window's start to its first Computing or Communication lane
    event (the host preparing the step while the device has nothing to run)."""
    working = spans(overlap.loc[overlap["lane"].isin(["Computing", "Communication"])])
    starts = windows["start"].to_numpy(float)
    return union(np.column_stack([starts, first_start(working, windows)]))


def _window_set(windows: pd.DataFrame) -> np.ndarray:
    """Step windows as a sorted interval set."""
    return union(windows[["start", "end"]].to_numpy(float))
