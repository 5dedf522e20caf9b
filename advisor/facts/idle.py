"""Where the device's idle time goes: each idle stretch of a step charged to what the host was doing (pure functions).

The same on both platforms: idle is step-window time with neither compute nor communication on the device. It is
split, in this order, into the parts of ``IdleFact``:

1. the host inside a DataLoader call, compiling an operator online, freeing or allocating device memory, in a
   garbage collection, in the optimizer's step or in its zero_grad (the host events' own spans);
2. ``sync``: after a synchronisation that blocked, from when the device ran out of the work it waited for until it
   next starts work — the host waited for the device, then the device waits for the host to queue new work (gaps
   between kernels it was still draining meanwhile are not the sync's, nor idle after a sync that had nothing to
   wait for);
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

from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.facts.gpu import DRAIN_WAIT_US, copy_kinds, draining_copy_calls
from advisor.facts.host import (OPTIMIZER_STEP, ZERO_GRAD, compile_calls, dataloader_calls, launch_calls,
                                 sync_calls)
from advisor.facts.models import Fact, IdleFact
from advisor.facts.platforms import QUEUED_LAUNCH_US_CAP, traits
from advisor.facts.scope import RankScope, file_source
from advisor.facts.windows import inside, longest_ranges
from advisor.ingest.kinetosteps import first_start, launch_times, per_window, step_windows
from advisor.ingest.lanes import lane_windows
from advisor.ingest.warmup import first_call_launches, warmup_by_step
from advisor.intervals import EMPTY, intersect, length, merged, subtract, union
from advisor.names import matching

HOST_PARTS = ("dataloader", "compile", "allocator", "gc", "optimizer", "zero_grad")
PARTS = (*HOST_PARTS, "sync", "copy", "dispatch", "host")
OUTLIER_FACTOR = 1.2  # a step more than 20 % longer than the median step is an outlier
MIN_STEPS_FOR_SPREAD = 3  # fewer steps have no median worth comparing with


def spans(frame: pd.DataFrame) -> np.ndarray:
    """The [ts, ts + dur) intervals of a table's rows (any order, overlapping or not)."""
    if frame.empty:
        return EMPTY
    return union(np.column_stack([frame["ts"].to_numpy(float), (frame["ts"] + frame["dur"]).to_numpy(float)]))


def after_syncs(calls: pd.DataFrame, busy: np.ndarray, returned: bool = False) -> np.ndarray:
    """The idle each synchronisation that blocked (DRAIN_WAIT_US or longer) leaves: from when the device ran out of the
    work it waited for — the end of the last device work that started before the call returned, or the call's start —
    to the next start of device work after it. Gaps between kernels the device was still draining while the host
    waited are not the sync's (the host was not what they waited for), nor is idle after a sync that found nothing
    to wait for. ``returned``: only the part after the call returned, while the host queues new work."""
    blocking = calls.loc[calls["dur"] >= DRAIN_WAIT_US]
    if blocking.empty:
        return EMPTY
    starts, ends = blocking["ts"].to_numpy(float), (blocking["ts"] + blocking["dur"]).to_numpy(float)
    busy_starts = busy[:, 0] if len(busy) else np.array([])
    busy_ends = np.maximum.accumulate(busy[:, 1]) if len(busy) else np.array([])
    before = np.searchsorted(busy_starts, ends, side="left") - 1  # the last device work that started before the return
    drained = np.where(before >= 0, busy_ends[np.clip(before, 0, None)] if len(busy) else starts, starts)
    begin = np.maximum(starts, np.minimum(drained, ends))
    after = np.searchsorted(busy_starts, ends, side="left")  # the next device work that starts after the return
    resume = np.where(after < len(busy_starts), busy_starts[np.minimum(after, max(len(busy_starts) - 1, 0))]
                      if len(busy_starts) else ends, ends)
    begin = np.maximum(begin, ends) if returned else begin
    return union(np.column_stack([begin, np.maximum(resume, begin)]))


@dataclass
class IdleSplit:
    """Idle time split by cause (``attribute_idle``): µs per part of PARTS, the measured sub-parts of some of them
    (``item_sync``, ``copy_sync`` of sync; ``pageable_copy`` of copy; ``dispatch_in_operators`` of dispatch), and the
    stretches themselves (disjoint, sorted) of each part and of the sub-parts item_sync, copy_sync and pageable_copy."""

    parts: dict[str, float]
    sub: dict[str, float]
    stretches: dict[str, np.ndarray]

    @property
    def late(self) -> np.ndarray:
        """The dispatch stretches: idle before a task launched only after the device had drained."""
        return self.stretches["dispatch"]


def attribute_idle(idle: np.ndarray, busy: np.ndarray, host: dict[str, np.ndarray], syncs: np.ndarray,
                   copies: np.ndarray, tasks: pd.DataFrame, item_syncs: np.ndarray = EMPTY,
                   copy_syncs: np.ndarray = EMPTY, pageable: np.ndarray = EMPTY,
                   activity: dict[str, np.ndarray] | None = None) -> IdleSplit:
    """``idle`` (disjoint, sorted) split into the parts of ``PARTS``, with the sub-parts: ``item_sync`` / ``copy_sync``,
    the parts of ``sync`` that follow the synchronisations made by ``.item()`` reads and by blocking copies between
    host and device (``item_syncs``, ``copy_syncs``: disjoint subsets of ``syncs``); ``pageable_copy``, the part of
    ``copy`` under copies from or to pageable memory and the host's calls for them (``pageable``); and for each host
    activity of ``activity`` (name → its spans: launch calls, framework operators…), ``dispatch_in_<name>``, the part
    of ``dispatch`` the host spends in it, with ``dispatch_in_any``, in any of them.

    ``busy``: the device's compute and communication; ``host``: the host spans of each of ``HOST_PARTS``;
    ``syncs``, ``item_syncs``, ``copy_syncs``: the idle synchronisations leave (``after_syncs``); ``copies``: memory copies on the device and the host's copy calls; ``tasks``: device task starts
    (``device_ts``) with the start of the call that launched them (``launch_ts``, NaN when unknown).
    """
    stretches: dict[str, np.ndarray] = {}
    left = idle
    for part in HOST_PARTS:
        cause = host.get(part, EMPTY)
        stretches[part] = intersect(left, cause)
        left = subtract(left, cause)
    stretches["item_sync"], stretches["copy_sync"] = intersect(left, item_syncs), intersect(left, copy_syncs)
    stretches["sync"] = intersect(left, syncs)
    left = subtract(left, syncs)
    stretches["pageable_copy"], stretches["copy"] = intersect(left, pageable), intersect(left, copies)
    left = subtract(left, copies)
    late, host_us = _late_launches(left, tasks)
    stretches["dispatch"] = late
    parts = {part: host_us if part == "host" else length(stretches[part]) for part in PARTS}
    sub = {name: length(stretches[name]) for name in ("item_sync", "copy_sync", "pageable_copy")}
    activity = activity or {}
    sub.update({f"dispatch_in_{name}": length(intersect(late, where)) for name, where in activity.items()})
    sub["dispatch_in_any"] = length(intersect(late, union(np.concatenate([EMPTY, *activity.values()]))))
    return IdleSplit(parts, sub, stretches)


def outlier_mask(windows: pd.DataFrame, warmup: frozenset[int] = frozenset()) -> np.ndarray:
    """Which step windows (``step``, ``start``, ``end``) are longer than OUTLIER_FACTOR × the median window of the
    steps that do not warm up (none below MIN_STEPS_FOR_SPREAD such steps); a warm-up step (``warmup``: step numbers)
    is never an outlier — it is its own kind of slow."""
    durations = (windows["end"] - windows["start"]).to_numpy(float)
    warm = _warm(windows, warmup)
    if (~warm).sum() < MIN_STEPS_FOR_SPREAD:
        return np.zeros(len(durations), dtype=bool)
    return ~warm & (durations > OUTLIER_FACTOR * float(np.median(durations[~warm])))


def _warm(windows: pd.DataFrame, warmup: frozenset[int]) -> np.ndarray:
    return windows["step"].map(lambda step: step is not None and not pd.isna(step) and int(step) in warmup).to_numpy(bool)


def step_outliers(windows: pd.DataFrame, free: np.ndarray, parts_of, warmup: frozenset[int] = frozenset()
                  ) -> dict[str, object]:
    """The spread of the step windows (``step``, ``start``, ``end``): the median step, the steps longer than
    OUTLIER_FACTOR × the median, what they add to the mean step, and the slowest step with its largest idle part
    (``parts_of(idle)``: µs per part of PARTS for some of ``free``); the warm-up steps (``warmup``) are left out of
    all that, and what they add to the mean step is a figure of its own. Empty below MIN_STEPS_FOR_SPREAD steps that
    do not warm up."""
    durations = (windows["end"] - windows["start"]).to_numpy(float)
    warm = _warm(windows, warmup)
    if (~warm).sum() < MIN_STEPS_FOR_SPREAD:
        return {}
    median = float(np.median(durations[~warm]))
    slow = outlier_mask(windows, warmup)
    worst = int(np.argmax(np.where(warm, -np.inf, durations)))
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
        "warmup_steps": ", ".join(str(step) for step, w in zip(steps, warm) if w) or None,
        "warmup_excess_us": float(np.clip(durations[warm] - median, 0.0, None).sum() / len(durations)),
    }


def _late_launches(gaps: np.ndarray, tasks: pd.DataFrame) -> tuple[np.ndarray, float]:
    """Split idle stretches by the next device task after each: those launched after the stretch began (dispatch,
    returned as intervals), and the µs of the others."""
    if not len(gaps):
        return EMPTY, 0.0
    known = tasks.dropna(subset=["device_ts"]).sort_values("device_ts", kind="stable")
    starts = known["device_ts"].to_numpy(float)
    launches = known["launch_ts"].to_numpy(float)
    at = np.searchsorted(starts, gaps[:, 1] - 1e-6, side="left")  # the first task starting at the gap's end or later
    found = at < len(starts)
    launched = np.where(found, launches[np.minimum(at, max(len(starts) - 1, 0))] if len(starts) else np.nan, np.nan)
    late = found & (launched > gaps[:, 0])
    sizes = gaps[:, 1] - gaps[:, 0]
    return gaps[late], float(sizes[~late].sum())


def idle_facts(scope: RankScope) -> list[Fact]:
    """Where the device's idle time per step goes (``facts.idle``). On a GPU the idle time is measured in the step
    windows of the breakdown; on Ascend it is the Overlap Analysis lane ``Free`` (torch_npu's own idle intervals)
    inside the ProfilerStep windows and each window's Preparing (its start to its first Computing or Communication
    event: the host preparing the step), else the device step windows without their kernels."""
    show, rank, breakdown = scope.show, scope.rank, scope.breakdown
    if rank.trace is None:
        return []
    trace, names = rank.trace, traits(rank.platform).runtime
    platform = traits(rank.platform)
    pageable, blocking, warmup, first_calls = EMPTY, None, frozenset(), pd.Index([])
    if rank.kineto is not None:
        gpu, runtime = rank.kineto.gpu, rank.kineto.runtime
        if gpu.empty:  # a CPU-only trace: there is no device to be idle
            return []
        windows = step_windows(gpu, runtime, rank.kineto.cpu)
        busy = merged(gpu.loc[gpu["kind"].isin(["compute", "communication"])])
        free = subtract(_window_set(windows), busy)
        copies = merged(gpu.loc[gpu["kind"] == "memory"])
        tasks = pd.DataFrame({"device_ts": gpu["ts"], "launch_ts": gpu["correlation"].map(launch_times(runtime))})
        pageable = _pageable_spans(gpu, runtime)
        blocking = draining_copy_calls(gpu, runtime, names.copy_call)
        warmup = frozenset(warmup_by_step(rank.kineto, windows))
        first_calls = first_call_launches(gpu, runtime).index  # set-up, not launch overhead (trace.apis shares the index)
        trace_file = show(rank.kineto.path)
        source = f"{trace_file}[kernel, gpu_memcpy, gpu_memset, cuda_runtime, cpu_op]"
    else:
        kernels = rank.kernels.frame if rank.kernels is not None else pd.DataFrame()
        timed = {"start_us", "duration_us"} <= set(kernels.columns)  # a kernel table may lack Start Time
        busy = spans(kernels[["start_us", "duration_us"]].set_axis(["ts", "dur"], axis=1).dropna() if timed else pd.DataFrame())
        lanes = trace.overlap.loc[trace.overlap["lane"] == "Free"]
        device_windows = scope.kernel_windows
        # a serving run's iterations end with the device work they launched, as its breakdown's do (ingest.lanes)
        windows = lane_windows(trace) if rank.iterations is not None else scope.host_windows if not lanes.empty \
            else device_windows
        if windows.empty:
            windows = device_windows if not device_windows.empty else scope.host_windows
        free = subtract(_window_set(windows), busy) if lanes.empty else union(np.concatenate(
            [intersect(spans(lanes), _window_set(windows)), _preparing(trace.overlap, windows)]))
        copies = spans(trace.device.loc[matching(trace.device["task_type"].fillna(""), names.copy_task)])
        tasks = trace.launches
        trace_file = show(rank.file("trace"))
        source = file_source(show, rank, "trace", "Overlap Analysis: Free; Python: DataLoader, GC; CANN: AscendCL")
    if rank.iterations is not None and rank.step_trace is not None:  # a serving run: the breakdown's iterations only
        covered = pd.to_numeric(rank.step_trace.frame["step"], errors="coerce")
        windows = windows.loc[pd.to_numeric(windows["step"], errors="coerce").isin(covered)].reset_index(drop=True)
        free = intersect(free, _window_set(windows))
    working = per_window(busy, windows) > 0 if len(busy) else np.zeros(len(windows), dtype=bool)
    if working.any():  # a step cut off before its device work (the capture's last, often) is no step
        windows = windows.loc[working].reset_index(drop=True)
    if windows.empty:
        return []
    apis = trace.apis
    host = {"dataloader": spans(dataloader_calls(trace.host)),
            "compile": spans(compile_calls(apis, names)),
            "allocator": spans(apis.loc[matching(apis["name"], names.allocator)]),
            "gc": spans(trace.host.loc[trace.host["cat"] == "GC"]),
            "optimizer": spans(trace.host.loc[matching(trace.host["name"], OPTIMIZER_STEP)]),
            "zero_grad": spans(trace.host.loc[matching(trace.host["name"], ZERO_GRAD)])}
    # the allocator's synchronisations are its idle
    program_syncs, item_syncs, copy_syncs, _allocator_syncs = sync_calls(apis, trace.host, names, blocking)
    copies = union(np.concatenate([copies, spans(apis.loc[matching(apis["name"], names.copy_call)])]))
    operators = trace.host.loc[trace.host["name"].str.startswith("aten::")]
    operators = operators if len(operators) else None  # a capture without the framework's ops cannot say where the host was
    launching = launch_calls(apis, trace.host, names).drop(first_calls, errors="ignore")

    syncs, item_spans, copy_spans = (after_syncs(calls, busy) for calls in (program_syncs, item_syncs, copy_syncs))
    copy_refills = after_syncs(copy_syncs, busy, returned=True)
    aclop = spans(apis.loc[matching(apis["name"], names.operator_execution)])
    # a task queue's launch (Dequeue@, where the runtime's launch calls are not recorded) runs the operator's whole host
    # path, aclop's compile-and-execute included, which is not launching
    queued = not matching(apis["name"], names.launch).any()
    launching_only = subtract(spans(launching), aclop) if queued else spans(launching)
    # where the runtime's launch calls are recorded too, the task queue's per-operator launches (Dequeue@) are the launch
    # thread's whole host path per operator: while it runs, the main thread's operators (a read-back waiting for the
    # device to drain) are not where the device's wait comes from
    task_queue = EMPTY if queued else spans(trace.host.loc[matching(trace.host["name"], names.queued_launch)])
    # a first-call launch loads its kernel's module (once per process): inside the operator that launched it, that is
    # neither launching nor the operator's own host work
    loading = spans(apis.loc[apis.index.intersection(first_calls)])
    not_the_operators = union(np.concatenate([task_queue, loading]))
    activity = {"launch_calls": launching_only,
                "graph_launches": spans(apis.loc[matching(apis["name"], names.graph_launch)]),
                "aclop": aclop,
                **({"task_queue": task_queue} if len(task_queue) else {}),
                **({"first_calls": loading} if len(loading) else {}),
                **({"operators": subtract(spans(operators), not_the_operators)} if operators is not None else {})}

    def split(idle: np.ndarray) -> IdleSplit:
        return attribute_idle(idle, busy, host, syncs, copies, tasks, item_spans, copy_spans, pageable, activity)

    if _warm(windows, warmup).all():  # no steady step to tell them from: the warm-up steps are all there is
        warmup = frozenset()
    outliers = outlier_mask(windows, warmup)
    typical = windows.loc[~outliers & ~_warm(windows, warmup)]
    typical_idle = intersect(free, _window_set(typical)) if len(typical) < len(windows) else free
    found = split(typical_idle)
    count = len(typical)
    step = (breakdown.step_time_us if breakdown is not None and count == len(windows)
            else float((typical["end"] - typical["start"]).sum()) / count)
    idle = length(typical_idle) / count
    per_step = {part: value / count for part, value in found.parts.items()}
    largest = max(per_step, key=lambda part: per_step[part]) if idle > 0 else None
    share = (lambda value, whole: min(value / whole, 1.0) if whole > 0 else 0.0)
    spread = step_outliers(windows, free, lambda stretch: split(stretch).parts, warmup)
    if spread:  # the excess is part of the mean step over every window, not of the typical step
        spread["outlier_cause_differs"] = (spread["slowest_idle_part"] != largest if spread["outlier_steps"] else None)
        mean_step = (breakdown.step_time_us if breakdown is not None and breakdown.step_time_us
                     else float((windows["end"] - windows["start"]).mean()))
        spread["outlier_excess_share_of_step"] = share(spread["outlier_excess_us"], mean_step)
    launched = inside(launching, typical)
    launches = len(launched) / count
    per_launch = platform.host_us_per_launch
    if per_launch is None:
        per_launch = length(intersect(launching_only, _window_set(typical))) / len(launched) if len(launched) else 0.0
        per_launch = min(per_launch, QUEUED_LAUNCH_US_CAP) if queued else per_launch
    within = {name: value / count for name, value in found.sub.items() if name.startswith("dispatch_in_")}
    # the dispatch wait a steady step repeats: module loading in first-call launches is set-up (named, not counted)
    steady = max(per_step["dispatch"] - within.get("dispatch_in_first_calls", 0.0), 0.0)
    per_kernel = steady / launches if launches else None
    # the task queue's launches are the operators' whole host path: only what launching itself costs is explained
    in_calls = 0.0 if queued else within["dispatch_in_launch_calls"]
    explained = min(steady, max(launches * per_launch, in_calls))
    outside_launches = max(steady - within["dispatch_in_launch_calls"], 0.0)
    top, top_us = _top_operator(subtract(found.late, not_the_operators), operators) if operators is not None else (None, None)
    python = rank.kineto.python if rank.kineto is not None else None
    not_launching = subtract(found.late, union(np.concatenate([launching_only, loading])))
    waiting = union(np.concatenate([intersect(typical_idle, syncs), not_launching]))
    in_python = _python_in(waiting, inside(python, typical)) if python is not None and len(python) else None
    top_us = top_us / count if top_us is not None else None
    stretches = {**{f"{part}_us": found.stretches[part] for part in PARTS if part != "host"},
                 **{f"{name}_us": found.stretches[name] for name in ("item_sync", "copy_sync", "pageable_copy")},
                 "idle_us": typical_idle, "dispatch_outside_launches_us": not_launching,
                 "host_wait_outside_launches_us": waiting, **_step_stretches(windows, outliers, spread)}
    return [IdleFact(
        id=f"idle:r{rank.rank}", sources=[source], rank=rank.rank, steps=count, step_us=step, idle_us=idle,
        idle_share_of_step=share(idle, step), **{f"{part}_us": value for part, value in per_step.items()},
        **{f"{part}_share_of_step": share(value, step) for part, value in per_step.items()},
        largest_part=largest, largest_share_of_idle=share(per_step[largest], idle) if largest else 0.0,
        dataloader_share_of_idle=share(per_step["dataloader"], idle), item_sync_us=found.sub["item_sync"] / count,
        copy_sync_us=found.sub["copy_sync"] / count, pageable_copy_us=found.sub["pageable_copy"] / count,
        copy_sync_after_return_us=length(intersect(found.stretches["copy_sync"], copy_refills)) / count,
        launches_per_step=launches, launch_explained_us=explained, dispatch_per_launch_us=per_kernel,
        launch_explained_share=(share(explained, steady)  # unknown where no launch is recorded
                                if steady > 0 and len(launching) else None),
        dispatch_in_launch_calls_us=within["dispatch_in_launch_calls"],
        dispatch_outside_launches_us=outside_launches,
        dispatch_outside_launches_share_of_step=share(outside_launches, step),
        host_wait_outside_launches_us=outside_launches + per_step["sync"],
        host_wait_outside_launches_share_of_step=share(outside_launches + per_step["sync"], step),
        dispatch_in_graph_launches_us=within["dispatch_in_graph_launches"], dispatch_in_aclop_us=within["dispatch_in_aclop"],
        dispatch_in_first_calls_us=within.get("dispatch_in_first_calls", 0.0),
        dispatch_in_task_queue_us=within.get("dispatch_in_task_queue", 0.0),
        dispatch_in_operators_us=within.get("dispatch_in_operators"), dispatch_top_operator=top,
        dispatch_top_operator_us=top_us,
        dispatch_host_activity=_host_activity(per_step["dispatch"], within, top, top_us, operators is not None),
        host_wait_python=_python_words(in_python, count, rank),
        **spread, ranges=longest_ranges(stretches, windows, rank.rank, trace_file, scope.out.step_starts or None),
    )]


def _step_stretches(windows: pd.DataFrame, outliers: np.ndarray, spread: dict[str, object]) -> dict[str, np.ndarray]:
    """The step windows behind the spread's figures: the outlier steps (``outlier_excess_us``) and the slowest step
    (``slowest_step_us``, when the steps are numbered)."""
    found = {"outlier_excess_us": windows.loc[outliers, ["start", "end"]].to_numpy(float)} if outliers.any() else {}
    slowest = windows.loc[windows["step"] == spread.get("slowest_step"), ["start", "end"]]
    if spread.get("slowest_step") is not None and len(slowest):
        found["slowest_step_us"] = slowest.to_numpy(float)[:1]
    return found


def _pageable_spans(gpu: pd.DataFrame, runtime: pd.DataFrame) -> np.ndarray:
    """The copies from or to pageable memory on the device, and the host's calls that made them (by correlation)."""
    kinds = copy_kinds(gpu.loc[gpu["kind"] == "memory"])
    pageable = kinds.loc[kinds["host_memory"] == "Pageable"]
    calls = runtime.loc[runtime["correlation"].isin(pageable["correlation"].dropna())]
    return union(np.concatenate([spans(pageable), spans(calls)]))


def _host_activity(dispatch: float, within: dict[str, float], top: str | None, top_us: float | None,
                   every_operator: bool) -> str | None:
    """What the host does while the device waits for its launches, in words (None without dispatch idle): time in
    launch calls (graph launches among them), in first-call launches (module loading), in the Ascend aclop path, in
    framework operators (the top one named), and
    the rest — outside any recorded operator where the trace records them all, else unknown."""
    if dispatch <= 0:
        return None
    parts = []
    if within["dispatch_in_launch_calls"] > 0:
        graphs = within["dispatch_in_graph_launches"]
        parts.append(f"inside launch calls {within['dispatch_in_launch_calls']:,.0f} µs per step"
                     + (f" ({graphs:,.0f} µs of them graph launches)" if graphs > 0 else ""))
    if within.get("dispatch_in_task_queue"):
        parts.append(f"inside the task queue's per-operator launches (Dequeue@, the launch thread's host path for each "
                     f"operator) {within['dispatch_in_task_queue']:,.0f} µs")
    if within.get("dispatch_in_first_calls"):
        parts.append(f"inside first-call launches (a kernel's module loaded on its first use, once per process) "
                     f"{within['dispatch_in_first_calls']:,.0f} µs")
    if within["dispatch_in_aclop"] > 0:
        parts.append(f"inside AscendCL@aclopCompileAndExecute (the legacy aclop operator path) "
                     f"{within['dispatch_in_aclop']:,.0f} µs")
    if within.get("dispatch_in_operators"):
        parts.append(f"inside framework operators {within['dispatch_in_operators']:,.0f} µs"
                     + (f" (most in {top}, {top_us:,.0f} µs)" if top is not None and top_us else ""))
    rest = max(dispatch - within["dispatch_in_any"], 0.0)
    if every_operator:
        parts.append(f"outside any recorded operator or call {rest:,.0f} µs (Python code, data preparation, or work "
                     "the trace does not record)")
    else:
        parts.append(f"for the other {rest:,.0f} µs the trace records too few of the host's own operators to say "
                     "(read the host threads in those stretches of the timeline)")
    return "the host is " + "; ".join(parts) if parts[0].startswith("inside") else parts[0]


PYTHON_SHARE = 0.5  # the Python function named must hold at least this share of the host's wait
PYTHON_SPAN = 1.5  # …and last at most this many times the wait in all (an outer loop runs the whole capture)


def _python_in(waiting: np.ndarray, python: pd.DataFrame) -> tuple[str, float] | None:
    """The innermost with_stack Python function the host is in for at least PYTHON_SHARE of ``waiting`` (and that
    time): of the functions that qualify, the one whose calls last least in all, outer frames that last more than
    PYTHON_SPAN × the wait left out. None when none qualifies."""
    total = length(waiting)
    if total <= 0:
        return None
    best = None
    for name, rows in python.groupby("name", sort=True):
        covered = length(intersect(waiting, spans(rows)))
        size = float(rows["dur"].sum())
        if covered >= PYTHON_SHARE * total and size <= PYTHON_SPAN * total and (best is None or size < best[2]):
            best = (str(name), covered, size)
    return (best[0], best[1]) if best else None


def _python_words(found: tuple[str, float] | None, steps: int, rank) -> str:
    """IdleFact.host_wait_python: the function found, else why none is named."""
    if found is not None:
        return f"the host runs {found[0]} for {found[1] / steps:,.0f} µs of it per step (with_stack)"
    if rank.kineto is None:
        return "what runs there is not named (Python functions are read from PyTorch traces only)"
    if not rank.kineto.settings.get("with_stack"):
        return "what runs there is not named: the trace records no Python functions (with_stack=True records them)"
    return "no single Python function holds half of it"


def _top_operator(late: np.ndarray, operators: pd.DataFrame) -> tuple[str | None, float | None]:
    """The framework operator the host is inside for most of the dispatch stretches ``late``, and that time (µs)."""
    if not len(late) or operators.empty:
        return None, None
    window = np.array([[late[0, 0], late[-1, 1]]])
    nearby = operators.loc[(operators["ts"] < window[0, 1]) & (operators["ts"] + operators["dur"] > window[0, 0])]
    best, best_us = None, 0.0
    for name, rows in nearby.groupby("name", sort=True):
        covered = length(intersect(late, spans(rows)))
        if covered > best_us:
            best, best_us = str(name), covered
    return (best, best_us) if best is not None else (None, None)


def _preparing(overlap: pd.DataFrame, windows: pd.DataFrame) -> np.ndarray:
    """Per step window, torch_npu's Preparing: from the window's start to its first Computing or Communication lane
    event (the host preparing the step while the device has nothing to run)."""
    working = spans(overlap.loc[overlap["lane"].isin(["Computing", "Communication"])])
    starts = windows["start"].to_numpy(float)
    return union(np.column_stack([starts, first_start(working, windows)]))


def _window_set(windows: pd.DataFrame) -> np.ndarray:
    """Step windows as a sorted interval set."""
    return union(windows[["start", "end"]].to_numpy(float))
