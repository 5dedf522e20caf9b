"""Step-time breakdown: pure functions over the step_trace_time table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from advisor.facts.windows import window_of

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
_REQUIRED = ("computing_us", "comm_not_overlapped_us", "free_us")
# breakdown field ← step_trace column
_BREAKDOWN_SOURCES = {"stage_us": "stage_us", "compute_us": "computing_us",
                      "comm_not_overlapped_us": "comm_not_overlapped_us", "free_us": "free_us",
                      "communication_us": "communication_us", "overlapped_us": "overlapped_us",
                      "bubble_us": "bubble_us", "preparing_us": "preparing_us"}


def clean_step_rows(step_trace: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Drop rows that cannot describe a step (missing or negative core times, empty span)."""
    required = step_trace[list(_REQUIRED)].to_numpy("float64")
    unusable = np.isnan(required).any(axis=1) | (required < 0).any(axis=1) | (required.sum(axis=1) <= 0)
    if not unusable.any():
        return step_trace, []
    problems = [f"{int(unusable.sum())} step row(s) with missing, negative or zero times were ignored"]
    return step_trace.loc[~unusable], problems


def step_breakdown(step_trace: pd.DataFrame) -> list[dict[str, Any]]:
    """One record per step: the profiler's times, the device span (step_time_us) and the three ratios.

    ``step_time_us`` = Computing + Communication(Not Overlapped) + Free, which tile the device span of a
    step exactly (Stage = that span minus Bubble). Absent columns are None.
    """
    steps = pd.to_numeric(step_trace["step"], errors="coerce").tolist() if "step" in step_trace else None
    columns: dict[str, Any] = {name: step_trace[source].to_numpy("float64") if source in step_trace else None
                               for name, source in _BREAKDOWN_SOURCES.items()}
    columns["step_time_us"] = columns["compute_us"] + columns["comm_not_overlapped_us"] + columns["free_us"]
    columns.update(_ratios(columns))
    records = []
    for index in range(len(step_trace)):
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


def steps_from_overlap(overlap: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """step_trace_time rows rebuilt from trace_view's Overlap Analysis lanes, as torch_npu computes them:
    per step window, the summed duration of each lane's events that start in it (one row without windows)."""
    lanes = overlap.loc[overlap["lane"].isin(_LANES)]
    step = window_of(lanes, windows) if not windows.empty else pd.Series(-1, index=lanes.index)
    kept = lanes.assign(step=step).dropna(subset=["step"])
    sums = kept.groupby(["step", "lane"], sort=True)["dur"].sum().unstack("lane", fill_value=0.0)
    frame = sums.rename(columns=_LANES).reindex(columns=list(_LANES.values()), fill_value=0.0).reset_index()
    frame["overlapped_us"] = (frame["communication_us"] - frame["comm_not_overlapped_us"]).clip(lower=0)
    frame["step"] = frame["step"].map(lambda s: "" if s == -1 else str(int(s))).astype("str")
    return frame
