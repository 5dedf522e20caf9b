"""The step and breakdown fact families: the step-time breakdown over step_trace_time (else over what the reader
rebuilt from the trace's Overlap Analysis lanes: ``ingest.lanes.lane_steps``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from advisor.facts.models import BreakdownFact, Fact, StepFact, TimeRange
from advisor.facts.scope import RankScope, file_source, float_or_none
from advisor.ingest.columns import Columns
from advisor.facts.windows import longest_ranges, step_starts, window_of
from advisor.intervals import intersect, merged, subtract, union

TIME_COLUMNS = (
    "compute_us",
    "comm_not_overlapped_us",
    "free_us",
    "communication_us",
    "overlapped_us",
    "bubble_us",
    "preparing_us",
)
RATIO_COLUMNS = ("compute_ratio", "communication_ratio", "free_ratio")
_STEP_COLUMNS = "Computing,Communication(Not Overlapped),Free,Communication,Overlapped,Bubble,Preparing"
_REQUIRED = ("computing_us", "comm_not_overlapped_us", "free_us")
# breakdown field ← step_trace column
_BREAKDOWN_SOURCES = {"stage_us": "stage_us", "compute_us": "computing_us",
                      "comm_not_overlapped_us": "comm_not_overlapped_us", "free_us": "free_us",
                      "communication_us": "communication_us", "overlapped_us": "overlapped_us",
                      "bubble_us": "bubble_us", "preparing_us": "preparing_us"}


def clean_step_rows(step_trace: Columns) -> tuple[Columns, list[str]]:
    """Drop rows that cannot describe a step (missing or negative core times, empty span)."""
    required = np.column_stack([np.asarray(step_trace[name], dtype="float64") for name in _REQUIRED])
    unusable = np.isnan(required).any(axis=1) | (required < 0).any(axis=1) | (required.sum(axis=1) <= 0)
    if not unusable.any():
        return step_trace, []
    problems = [f"{int(unusable.sum())} step row(s) with missing, negative or zero times were ignored"]
    return {name: values[~unusable] for name, values in step_trace.items()}, problems


def step_breakdown(step_trace: Columns) -> list[dict[str, Any]]:
    """One record per step: the profiler's times, the step (step_time_us) and the three ratios.

    Computing + Communication(Not Overlapped) + Free tile the device span of a step exactly (Stage = that span
    minus Bubble); Preparing is the host's part of the step before it, from the ProfilerStep's start to the first
    device task (the DataLoader's next batch, its copy to the device), when the device has nothing to run either.
    So ``free_us`` = Free + Preparing and ``step_time_us`` = Computing + Communication(Not Overlapped) + free_us:
    the host step as the PyTorch profiler's ProfilerStep measures it, as on a GPU. Absent columns are None (an
    absent Preparing counts 0).
    """
    steps = pd.to_numeric(step_trace["step"], errors="coerce").tolist() if "step" in step_trace else None
    columns: dict[str, Any] = {name: np.asarray(step_trace[source], dtype="float64") if source in step_trace else None
                               for name, source in _BREAKDOWN_SOURCES.items()}
    if columns["preparing_us"] is not None:
        columns["free_us"] = columns["free_us"] + np.nan_to_num(np.clip(columns["preparing_us"], 0.0, None))
    columns["step_time_us"] = columns["compute_us"] + columns["comm_not_overlapped_us"] + columns["free_us"]
    columns.update(_ratios(columns))
    records = []
    for index in range(len(columns["step_time_us"])):
        record = {name: values[index] if values is not None else None for name, values in columns.items()}
        record["step"] = steps[index] if steps is not None else None
        records.append(record)
    return records


def _ratios(times: dict[str, Any]) -> dict[str, Any]:
    """Compute/communication/free ratios of step_time_us and the dominant overhead, of arrays or numbers."""
    span = times["step_time_us"]
    exposed, free = np.asarray(times["comm_not_overlapped_us"]), np.asarray(times["free_us"])
    dominant = np.where(exposed >= free, "communication", "free")
    return {"compute_ratio": np.clip(times["compute_us"] / span, 0.0, 1.0),
            "communication_ratio": np.clip(times["comm_not_overlapped_us"] / span, 0.0, 1.0),
            "free_ratio": np.clip(times["free_us"] / span, 0.0, 1.0),
            "dominant_overhead": dominant.tolist()}


def mean_step(steps: Sequence[Any]) -> dict[str, Any]:
    """The mean step of step facts (or of rank breakdowns), with ratios recomputed from the mean times; a time no
    step has is left out."""
    mean: dict[str, Any] = {}
    for column in (*TIME_COLUMNS, "step_time_us"):
        values = np.array([getattr(step, column) for step in steps], dtype="float64")  # None → NaN
        known = ~np.isnan(values)
        if known.any():
            mean[column] = np.float64(np.where(known, values, 0.0).sum() / known.sum())
    mean.update(_ratios(mean))
    return mean


_LANES = {
    "Computing": "computing_us",
    "Communication(Not Overlapped)": "comm_not_overlapped_us",
    "Communication": "communication_us",
    "Free": "free_us",
}


def step_facts(scope: RankScope) -> list[Fact]:
    """The rank's step facts (at most MAX_STEP_FACTS of them listed; ``scope.steps`` keeps every one), its step
    numbers (else those of the host's ProfilerStep windows) and where its ProfilerStep windows start (the cross-rank
    facts' time ranges are placed in their steps by them)."""
    rank, warnings = scope.rank, scope.out.warnings
    steps = scope.steps = _all_step_facts(scope)
    scope.out.steps = {s.step for s in steps if s.step is not None}
    scope.out.step_starts = step_starts(scope.host_windows)
    if not steps and rank.trace is not None:  # no device breakdown, but the host recorded step boundaries
        scope.out.steps.update(int(n) for n in scope.host_windows["step"])
    return listed_steps(steps, rank.rank, warnings)


def breakdown_facts(scope: RankScope) -> list[Fact]:
    """The rank's mean step (``scope.breakdown`` from here on), on a GPU with where its exposed communication lies."""
    breakdown = rank_breakdown(scope.rank.rank, scope.steps)
    if breakdown is not None and scope.rank.kineto is not None and scope.rank.step_trace is not None:
        breakdown = breakdown.model_copy(update={"ranges": _exposed_ranges(scope)})
    scope.out.breakdown = breakdown
    return [breakdown] if breakdown is not None else []


def _exposed_ranges(scope: RankScope) -> list[TimeRange]:
    """The longest stretches of a GPU rank's steps (its step table's windows) in which communication kernels run
    under no compute kernel: where comm_not_overlapped_us, the Kineto breakdown's exposed communication, lies."""
    rank = scope.rank
    gpu, steps = rank.kineto.gpu, rank.step_trace.frame
    windows = pd.DataFrame({"step": pd.to_numeric(steps["step"], errors="coerce"), "start": steps["start_us"].astype(float),
                            "end": steps["end_us"].astype(float)})
    exposed = subtract(merged(gpu.loc[gpu["kind"] == "communication"]), merged(gpu.loc[gpu["kind"] == "compute"]))
    inside_steps = intersect(exposed, union(windows[["start", "end"]].to_numpy(float)))
    return longest_ranges({"comm_not_overlapped_us": inside_steps}, windows, rank.rank, scope.show(rank.kineto.path),
                          scope.out.step_starts or None)


def _all_step_facts(scope: RankScope) -> list[StepFact]:
    """The rank's step facts from its step table: step_trace_time.csv (the DB's StepTraceTime), or what the reader
    rebuilt from the trace's Overlap Analysis lanes without one (its provenance says so), cross-checked against the
    lanes when both exist."""
    show, rank, warnings = scope.show, scope.rank, scope.out.warnings
    if rank.step_trace is None:
        return []
    table, shown = rank.step_trace.columns, show(rank.step_trace.path)
    source = file_source(show, rank, "step_trace", _STEP_COLUMNS)
    lanes = _lanes_in_steps(scope) if rank.source("step_trace").file != rank.file("trace") else None
    if lanes is not None and not _agree(table, lanes):
        warnings.append(f"{shown}: Computing differs by more than 1 % from the Overlap Analysis lanes of "
                        f"{show(rank.file('trace'))}")
    rows, problems = clean_step_rows(table)
    warnings.extend(f"{shown}: {p}" for p in problems)
    facts = []
    for position, row in enumerate(step_breakdown(rows)):
        step = int_or_none(row.get("step"))
        facts.append(
            StepFact(
                id=f"step:r{rank.rank}:{'s' + str(step) if step is not None else 'n' + str(position)}",
                sources=[source],
                rank=rank.rank,
                step=step,
                **times(row),
                stage_us=float_or_none(row.get("stage_us")),
            )
        )
    return facts


MAX_STEP_FACTS = 200


def listed_steps(steps: list[StepFact], rank: int, warnings: list[str]) -> list[StepFact]:
    """The step facts a rank lists: all of them up to MAX_STEP_FACTS, else the slowest, the fastest and evenly
    spaced ones (every figure of the rank, its breakdown included, still covers all its steps)."""
    if len(steps) <= MAX_STEP_FACTS:
        return steps
    times = [s.step_time_us for s in steps]
    keep = {int(i) for i in np.linspace(0, len(steps) - 1, MAX_STEP_FACTS - 2).round()}
    keep |= {times.index(max(times)), times.index(min(times))}
    warnings.append(f"rank {rank}: {len(steps):,} steps; the report lists {len(keep)} of them as step facts (the slowest, "
                    "the fastest and evenly spaced ones) — the breakdown and every other figure cover all of them")
    return [steps[i] for i in sorted(keep)]


def _lane_windows(scope: RankScope) -> pd.DataFrame:
    """The windows the Overlap Analysis lanes are summed in: the kernels' steps, else the ProfilerStep windows."""
    return scope.kernel_windows if not scope.kernel_windows.empty else scope.host_windows


def _lanes_in_steps(scope: RankScope) -> pd.DataFrame | None:
    """The trace's Overlap Analysis events of the step lanes that start in a step window (all of them without
    windows): what the step table is checked against; None when there are none."""
    trace = scope.rank.trace
    if trace is None or trace.overlap.empty:
        return None
    windows = _lane_windows(scope)
    lanes = trace.overlap.loc[trace.overlap["lane"].isin(_LANES)]
    if not windows.empty:
        lanes = lanes.loc[window_of(lanes, windows).notna()]
    return lanes if not lanes.empty else None


def _agree(step_trace: Columns, lanes: pd.DataFrame) -> bool:
    """Whether step_trace_time's Computing is within 1 % of the Computing lane's events in the steps."""
    written, rebuilt = np.nansum(step_trace["computing_us"]), lanes.loc[lanes["lane"] == "Computing", "dur"].sum()
    return abs(written - rebuilt) <= 0.01 * max(written, rebuilt, 1e-9)


def rank_breakdown(rank: int, steps: list[StepFact]) -> BreakdownFact | None:
    if not steps:
        return None
    mean = mean_step(steps)
    return BreakdownFact(
        id=f"breakdown:r{rank}",
        sources=sorted({src for s in steps for src in s.sources}),
        scope="rank",
        rank=rank,
        steps=len(steps),
        dominant_overhead=mean["dominant_overhead"],
        **times(mean),
    )


def times(row) -> dict:
    """The time and ratio fields shared by step and breakdown facts, NaN mapped to None."""
    keys = ("step_time_us", *TIME_COLUMNS, *RATIO_COLUMNS)
    return {k: float_or_none(row.get(k)) for k in keys}


def int_or_none(value) -> int | None:
    if value is None or pd.isna(value):
        return None
    return int(value)
