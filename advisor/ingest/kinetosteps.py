"""ProfilerStep windows of a Kineto trace and the step breakdown over them (pure functions), which the GPU reader
(``ingest/gpu.py``) writes as the rank's step table. A trace without ProfilerStep markers takes its steps from the
optimizer: each Optimizer.step#… ends a training iteration.

The step breakdown is measured on wall-clock step windows (``step_windows``): each ProfilerStep#N extended to the
end of the GPU work it launched, so that the host's time before a step's first kernel (data loading, the
optimizer's host work) is idle time of that step, as torch-tb-profiler counts it.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from advisor.intervals import intersect, merged, union
from advisor.names import matching


def launch_times(runtime: pd.DataFrame) -> pd.Series:
    """The start of the runtime call that launched each correlation id (the first call, where ids repeat)."""
    return runtime.dropna(subset=["correlation"]).drop_duplicates("correlation").set_index("correlation")["ts"]


STEP_EVENT = r"^ProfilerStep#(\d+)$"
BREAKDOWN_COLUMNS = ["step", "start_us", "end_us", "computing_us", "communication_us", "comm_not_overlapped_us",
                     "overlapped_us", "free_us", "preparing_us"]


LAUNCH_ALLOWANCE_US = 50.0  # a kernel may start this long after its launch on an idle device (launch latency)
MIN_LAG_US = 1000.0  # a shorter wait for the first step's first GPU work is no backlog from before the capture


OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
# A serving engine's iteration: vLLM's annotation execute_context_<n>(<tokens>)_generation_<m>(<tokens>), or its
# model runner's execute_model, or SGLang's ModelRunner.forward (Python function events of a with_stack trace)
# What marks the iterations of a generation loop the trace does not mark (``serving.readback_markers``)
READBACK_ITERATION = "serving iteration (to its token read-back)"
ITERATION = re.compile(r"^execute_context_\d+|: execute_model$|model_runner\.py\(\d+\): forward$|"
                       + re.escape(READBACK_ITERATION))
SERVING_SOURCES = ("iteration", "read-back")  # step sources whose steps are a serving engine's iterations


def step_source(cpu: pd.DataFrame) -> str | None:
    """Where a trace's steps come from: "ProfilerStep" markers; else a serving engine's "iteration" events (two or
    more), or the "read-back" iterations advisor cut a generation loop into (``serving.readback_markers``); else
    "Optimizer.step" events (two or more: each ends a training iteration); else None (one window)."""
    names = cpu["name"]
    if matching(names, re.compile(STEP_EVENT)).any():
        return "ProfilerStep"
    if len(outermost(cpu.loc[matching(names, ITERATION, search=True)])) >= 2:
        return "read-back" if (names == READBACK_ITERATION).any() else "iteration"
    return "Optimizer.step" if len(outermost(cpu.loc[matching(names, OPTIMIZER_STEP)])) >= 2 else None


def per_trace(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` of a trace's tables, memoised over the tables' identity: the reader and the fact families of one
    trace ask for its step markers, windows and launch steps a dozen times, each a pass over every event. The last two
    calls are kept, with their tables (so that their ids stay theirs); a DataFrame or Series result is copied out."""
    cache: OrderedDict[tuple[int, ...], tuple[tuple, Any]] = OrderedDict()

    @functools.wraps(function)
    def wrapper(*tables: pd.DataFrame) -> Any:
        key = tuple(id(table) for table in tables)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = (tables, function(*tables))
            while len(cache) > 2:
                cache.popitem(last=False)
        result = hit[1]
        return result.copy() if isinstance(result, (pd.DataFrame, pd.Series)) else result

    return wrapper


@per_trace
def step_markers(cpu: pd.DataFrame) -> pd.DataFrame:
    """The step markers (step, ts, dur), one per step in start order: the ProfilerStep#N events — a step listed twice
    (as some traces do) is one step, from its first start to its last end —, else a serving engine's iterations
    (numbered 1, 2, … in order), else the training iterations the optimizer marks (``optimizer_iterations``)."""
    numbers = cpu["name"].str.extract(STEP_EVENT, expand=False)
    rows = cpu.loc[numbers.notna()]
    if rows.empty:
        iterations = outermost(cpu.loc[matching(cpu["name"], ITERATION, search=True)])
        if len(iterations) >= 2:
            return pd.DataFrame({"step": np.arange(1, len(iterations) + 1), "ts": iterations["ts"].to_numpy(float),
                                 "dur": iterations["dur"].to_numpy(float)})
        return optimizer_iterations(cpu)
    rows = rows.assign(step=numbers.loc[rows.index].astype(int), end=rows["ts"] + rows["dur"])
    merged_rows = rows.groupby("step", sort=False).agg(ts=("ts", "min"), end=("end", "max")).reset_index()
    return merged_rows.assign(dur=merged_rows["end"] - merged_rows["ts"])[["step", "ts", "dur"]].sort_values(
        ["ts", "step"], ignore_index=True)


def iteration_names(cpu: pd.DataFrame) -> pd.Series:
    """The name marking each serving iteration (``step_markers``' iterations, in order): an annotation nested in it
    that says what the iteration runs (execute_context_…), else the marker's own name."""
    events = cpu.loc[matching(cpu["name"], ITERATION, search=True)]
    outer = outermost(events)
    inner = events.loc[events["name"].str.startswith("execute_context_")].sort_values("ts", kind="stable")
    starts, inner_names = inner["ts"].to_numpy(float), inner["name"].tolist()
    first = np.searchsorted(starts, outer["ts"].to_numpy(float), side="left")  # the first annotation starting inside
    names = [inner_names[at] if at < len(starts) and starts[at] <= ts + dur else name
             for at, ts, dur, name in zip(first, outer["ts"], outer["dur"], outer["name"])]
    return pd.Series(names, dtype=object)


def optimizer_iterations(cpu: pd.DataFrame) -> pd.DataFrame:
    """Without ProfilerStep markers, the training iterations (step 1, 2, …; ts, dur) that two or more Optimizer.step#…
    events mark: each iteration ends with its optimizer step and begins where the previous one ended (the first at the
    capture's first host event). Empty with fewer than two optimizer steps."""
    steps = outermost(cpu.loc[matching(cpu["name"], OPTIMIZER_STEP)])
    if len(steps) < 2:
        return pd.DataFrame(columns=["step", "ts", "dur"])
    ends = (steps["ts"] + steps["dur"]).to_numpy(float)
    starts = np.concatenate([[float(cpu["ts"].min())], ends[:-1]])
    return pd.DataFrame({"step": np.arange(1, len(ends) + 1), "ts": starts, "dur": ends - starts})


def outermost(events: pd.DataFrame) -> pd.DataFrame:
    """The events not nested inside an earlier one, by start."""
    ordered = events.sort_values("ts")
    return ordered.loc[ordered["ts"] >= (ordered["ts"] + ordered["dur"]).cummax().shift(fill_value=-np.inf)]


@dataclass(frozen=True)
class Backlog:
    """Device work launched before the capture that the first step waited behind: how long (``us``), and where the
    first step's own GPU work began (``own_start``)."""

    us: float
    own_start: float


@per_trace
def capture_backlog(gpu: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame) -> Backlog | None:
    """The backlog the first step found on the device, or None: the first step's first GPU activity started at least
    MIN_LAG_US (plus launch latency) after it was issued, with nothing recorded on the device before it — the queue held
    work the trace does not show (the warm-up steps' kernels, when the host runs ahead of the device). Issued: a copy
    call's start (a copy call blocks while the stream drains, so the wait shows inside it); a kernel launch call's
    return (a launch that is slow itself, as on lazy module loading, is no backlog)."""
    markers = step_markers(cpu)
    if markers.empty or gpu.empty:
        return None
    launched = gpu["correlation"].map(launch_times(runtime))
    first = markers.iloc[0]
    own = gpu.loc[(launched >= first["ts"]) & (launched <= first["ts"] + first["dur"])]
    if own.empty:
        return None
    earliest = own.loc[own["ts"].idxmin()]
    if (gpu["ts"] < earliest["ts"]).any():  # recorded work ran before it: the wait is this capture's queueing
        return None
    calls = runtime.dropna(subset=["correlation"]).drop_duplicates("correlation").set_index("correlation")
    call = calls.loc[earliest["correlation"]]
    issued = float(call["ts"]) if earliest["kind"] == "memory" else float(call["ts"] + call["dur"])
    waited = float(earliest["ts"]) - issued - LAUNCH_ALLOWANCE_US
    return Backlog(waited, float(earliest["ts"])) if waited >= MIN_LAG_US else None


@per_trace
def step_windows(gpu: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame) -> pd.DataFrame:
    """The wall-clock window of each ProfilerStep#N: from max(the previous step's end, the ProfilerStep's start) to
    max(the ProfilerStep's end, the end of the last GPU activity launched inside it). The windows tile the steps'
    wall time and never overlap, so when the device runs behind the host the steps still add up to the span and
    each step after the first takes the device's cadence. When the first step found a backlog on the device
    (``capture_backlog``), its window starts where its own GPU work did: the device's time on work launched before the
    capture is no step's, nor is the host's preparation it overlapped. A trace without ProfilerStep markers is one
    window (step None) from its first to its last host or GPU event. Columns: step (int or None), start, end (µs)."""
    markers = step_markers(cpu)
    if markers.empty:
        bounds = [frame[["ts", "dur"]] for frame in (cpu, gpu, runtime) if not frame.empty]
        if not bounds:
            return pd.DataFrame(columns=["step", "start", "end"])
        every = pd.concat(bounds, ignore_index=True)
        return pd.DataFrame({"step": [None], "start": [float(every["ts"].min())],
                             "end": [float((every["ts"] + every["dur"]).max())]})
    launched_end = (gpu["ts"] + gpu["dur"]).groupby(launch_steps(gpu, runtime, cpu)).max()
    backlog = capture_backlog(gpu, runtime, cpu)
    rows, previous_end = [], backlog.own_start - LAUNCH_ALLOWANCE_US if backlog else -np.inf
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
    = Communication − the part under compute, Preparing = window start to the first compute or communication
    activity (the host's time before the step's first kernel, e.g. in the DataLoader), Free = the rest of the
    window without compute or communication (memory copies count as free, as on Ascend). As in torch_npu's file,
    Free leaves Preparing out; the step facts add it back (``facts.steps.step_breakdown``).
    """
    if windows.empty:
        return pd.DataFrame(columns=BREAKDOWN_COLUMNS)
    compute = merged(gpu.loc[gpu["kind"] == "compute"])
    communication = merged(gpu.loc[gpu["kind"] == "communication"])
    busy = union(np.concatenate([compute, communication]))
    span = (windows["end"] - windows["start"]).to_numpy(float)
    computing, comm = per_window(compute, windows), per_window(communication, windows)
    overlapped = per_window(intersect(compute, communication), windows)
    preparing = first_start(busy, windows) - windows["start"].to_numpy(float)
    return pd.DataFrame({
        "step": [None if s is None or pd.isna(s) else str(int(s)) for s in windows["step"]],
        "start_us": windows["start"].to_numpy(float), "end_us": windows["end"].to_numpy(float),
        "computing_us": computing, "communication_us": comm, "comm_not_overlapped_us": comm - overlapped,
        "overlapped_us": overlapped, "free_us": np.clip(span - per_window(busy, windows) - preparing, 0.0, None),
        "preparing_us": preparing,
    }, columns=BREAKDOWN_COLUMNS)


@per_trace
def launch_steps(gpu: pd.DataFrame, runtime: pd.DataFrame, cpu: pd.DataFrame) -> pd.Series:
    """The ProfilerStep number (as text) of each GPU activity: the host window holding the runtime call that
    launched it (by correlation), or its own start when no launch is recorded; None outside every step."""
    windows = step_markers(cpu)
    out = pd.Series(None, index=gpu.index, dtype=object)
    if windows.empty or gpu.empty:
        return out
    launches = launch_times(runtime)
    anchor = gpu["correlation"].map(launches).fillna(gpu["ts"]).to_numpy(float)
    slot = np.searchsorted(windows["ts"].to_numpy(float), anchor, side="right") - 1
    ends = (windows["ts"] + windows["dur"]).to_numpy(float)
    inside = (slot >= 0) & (anchor <= ends[np.clip(slot, 0, None)])
    labels = np.array([str(int(step)) for step in windows["step"].tolist()], dtype=object)
    out[inside] = labels[slot[inside]]
    return out


def window_of(frame: pd.DataFrame, windows: pd.DataFrame, column: str = "ts") -> pd.Series:
    """The step number of the window each row falls in (NaN outside every window)."""
    ordered = windows.sort_values("start")
    starts, ends, steps = ordered["start"].to_numpy(), ordered["end"].to_numpy(), ordered["step"].to_numpy()
    times = frame[column].to_numpy()
    slot = np.clip(np.searchsorted(starts, times, side="right") - 1, 0, None)
    hit = (times >= starts[slot]) & (times <= ends[slot]) if len(starts) else np.zeros(len(times), bool)
    return pd.Series(np.where(hit, steps[slot] if len(steps) else np.nan, np.nan), index=frame.index)
