"""Step time windows, and selecting what happened inside them (pure functions over DataFrames)."""

from __future__ import annotations


import numpy as np
import pandas as pd

from advisor.facts.models import TimeRange
from advisor.ingest.kinetosteps import step_markers, window_of  # noqa: F401 (window_of: the facts' name for it)

WINDOW_COLUMNS = ["step", "start", "end"]
RANGES_PER_FIELD = 3  # the longest stretches a fact names per field (where to look, not an inventory)


def kernel_step_windows(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per step (kernel_details Step Id): the device window from the first kernel start to the last kernel end."""
    if "start_us" not in kernels or "step" not in kernels:
        return pd.DataFrame(columns=WINDOW_COLUMNS)
    step = pd.to_numeric(kernels["step"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    start = kernels["start_us"].to_numpy(dtype=float, na_value=np.nan)
    end = start + np.nan_to_num(kernels["duration_us"].to_numpy(dtype=float, na_value=np.nan), nan=0.0)
    known = ~np.isnan(step) & ~np.isnan(start)
    if not known.any():
        return pd.DataFrame(columns=WINDOW_COLUMNS).astype({"step": int})
    steps, slot = np.unique(step[known], return_inverse=True)
    first = np.full(len(steps), np.inf)
    last = np.full(len(steps), -np.inf)
    np.minimum.at(first, slot, start[known])
    np.maximum.at(last, slot, end[known])
    return pd.DataFrame({"step": steps.astype(int), "start": first, "end": last})[WINDOW_COLUMNS]


def profiler_step_windows(host: pd.DataFrame) -> pd.DataFrame:
    """The host ProfilerStep#N windows of a trace, one per step (a step listed twice is one window)."""
    markers = step_markers(host)
    return pd.DataFrame({"step": markers["step"].astype(int), "start": markers["ts"].astype(float),
                         "end": (markers["ts"] + markers["dur"]).astype(float)})[WINDOW_COLUMNS]


def inside(frame: pd.DataFrame, windows: pd.DataFrame, column: str = "ts") -> pd.DataFrame:
    """Rows whose ``column`` falls inside one of the (non-overlapping) windows; all rows when there are none."""
    if windows.empty or frame.empty:
        return frame
    ordered = windows.sort_values("start")
    starts, ends = ordered["start"].to_numpy(), ordered["end"].to_numpy()
    times = frame[column].to_numpy()
    slot = np.searchsorted(starts, times, side="right") - 1
    hit = (slot >= 0) & (times <= ends[np.clip(slot, 0, None)])
    return frame.loc[hit]


def longest_ranges(stretches: dict[str, np.ndarray], windows: pd.DataFrame, rank: int, file: str,
                   starts: dict[int, float] | None = None) -> list[TimeRange]:
    """For each field (name → its [start, end) stretches on ``file``'s clock), its RANGES_PER_FIELD longest stretches,
    longest first, each with the step window (``windows``) it starts in and that step's start (``starts``: step →
    start on the same clock; by default the windows' own starts)."""
    starts = step_starts(windows) if starts is None else starts
    ranges = []
    for field, spans in stretches.items():
        spans = np.asarray(spans, dtype=float).reshape(-1, 2)
        for at in np.argsort(spans[:, 0] - spans[:, 1], kind="stable")[:RANGES_PER_FIELD]:
            start, end = (float(value) for value in spans[at])
            if end > start:
                step = step_at(windows, start)
                ranges.append(TimeRange(field=field, rank=rank, step=step, start_us=start, end_us=end, file=file,
                                        step_start_us=starts.get(step) if step is not None else None))
    return ranges


def step_starts(windows: pd.DataFrame) -> dict[int, float]:
    """Each numbered step window's (``step``, ``start``, ``end``) start: step → start (the first of a step listed twice)."""
    numbered = windows.loc[pd.to_numeric(windows["step"], errors="coerce").notna()]
    found: dict[int, float] = {}
    for step, start in zip(numbered["step"], numbered["start"]):
        found.setdefault(int(step), float(start))
    return found


def step_at(windows: pd.DataFrame, ts: float) -> int | None:
    """The number of the step window (``step``, ``start``, ``end``) holding ``ts``; None outside them or unnumbered."""
    hit = windows.loc[(windows["start"] <= ts) & (ts < windows["end"]), "step"]
    step = hit.iloc[0] if len(hit) else None
    return None if step is None or pd.isna(step) else int(step)
