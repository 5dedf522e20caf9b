"""Step-time breakdown: pure functions over the step_trace_time table."""

from __future__ import annotations

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


def clean_step_rows(step_trace: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Drop rows that cannot describe a step (missing or negative core times, empty span)."""
    problems: list[str] = []
    required = step_trace[list(_REQUIRED)]
    unusable = required.isna().any(axis=1) | (required < 0).any(axis=1) | (required.sum(axis=1) <= 0)
    if unusable.any():
        problems.append(f"{int(unusable.sum())} step row(s) with missing, negative or zero times were ignored")
    return step_trace.loc[~unusable], problems


def step_breakdown(step_trace: pd.DataFrame) -> pd.DataFrame:
    """One row per step: the profiler's times, the device span (step_time_us) and the three ratios.

    ``step_time_us`` = Computing + Communication(Not Overlapped) + Free, which tile the device span of a
    step exactly (Stage = that span minus Bubble).
    """
    frame = pd.DataFrame(
        {
            "step": pd.to_numeric(step_trace.get("step"), errors="coerce") if "step" in step_trace else None,
            "stage_us": step_trace.get("stage_us"),
            "compute_us": step_trace["computing_us"],
            "comm_not_overlapped_us": step_trace["comm_not_overlapped_us"],
            "free_us": step_trace["free_us"],
            "communication_us": step_trace.get("communication_us"),
            "overlapped_us": step_trace.get("overlapped_us"),
            "bubble_us": step_trace.get("bubble_us"),
            "preparing_us": step_trace.get("preparing_us"),
        },
        index=step_trace.index,
    )
    frame["step_time_us"] = frame["compute_us"] + frame["comm_not_overlapped_us"] + frame["free_us"]
    return with_ratios(frame)


def with_ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """Add compute/communication/free ratios of step_time_us and the dominant overhead."""
    out = frame.copy()
    span = out["step_time_us"]
    out["compute_ratio"] = (out["compute_us"] / span).clip(0.0, 1.0)
    out["communication_ratio"] = (out["comm_not_overlapped_us"] / span).clip(0.0, 1.0)
    out["free_ratio"] = (out["free_us"] / span).clip(0.0, 1.0)
    out["dominant_overhead"] = (out["comm_not_overlapped_us"] >= out["free_us"]).map(
        {True: "communication", False: "free"}
    )
    return out


def mean_step(steps: pd.DataFrame) -> pd.Series:
    """The mean step of a set of step rows, with ratios recomputed from the mean times."""
    columns = [c for c in (*TIME_COLUMNS, "step_time_us") if c in steps and steps[c].notna().any()]
    mean = steps[columns].mean().to_frame().T
    return with_ratios(mean).iloc[0]


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
