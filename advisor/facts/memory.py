"""Memory facts: pure functions over memory_record, operator_memory, npu_module_mem and kernel timing."""

from __future__ import annotations

import pandas as pd

MB_PER_KB = 1 / 1024
MAX_TIMES_LISTED = 20


def allocator_series(records: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The allocator's own time series: PTA+GE when graph-mode (GE) memory exists, else PTA; by time."""
    component = "PTA+GE" if (records["component"] == "GE").any() else "PTA"
    rows = records.loc[(records["component"] == component) & records["reserved_mb"].notna()]
    return component, rows.sort_values("timestamp_us", kind="stable")


def timeline(series: pd.DataFrame, points: int = 240) -> pd.DataFrame:
    """The allocator series cut into at most ``points`` equal time intervals, each keeping its maxima (peaks survive)."""
    known = series.loc[series["timestamp_us"].notna()]
    if len(known) <= points:
        return known[["timestamp_us", "allocated_mb", "reserved_mb"]].reset_index(drop=True)
    start, end = known["timestamp_us"].min(), known["timestamp_us"].max()
    bucket = ((known["timestamp_us"] - start) / max(end - start, 1e-9) * (points - 1)).round().astype("int64")
    return known.groupby(bucket, sort=True)[["timestamp_us", "allocated_mb", "reserved_mb"]].max().reset_index(drop=True)


def reserved_drops(series: pd.DataFrame) -> pd.DataFrame:
    """The records at which Total Reserved fell: the allocator gave cached blocks back to the device."""
    return series.loc[series["reserved_mb"].diff() < 0]


def reserved_unused_at_peak(series: pd.DataFrame) -> tuple[float, float]:
    """(reserved − allocated, and its share of reserved) at the record with the peak allocation."""
    known = series.loc[series["allocated_mb"].notna()]
    if known.empty:
        return 0.0, 0.0
    peak = known.loc[known["allocated_mb"].idxmax()]
    unused = max(float(peak["reserved_mb"] - peak["allocated_mb"]), 0.0)
    return unused, (unused / float(peak["reserved_mb"]) if peak["reserved_mb"] > 0 else 0.0)


def top_allocators(operator_memory: pd.DataFrame, limit: int = 10) -> pd.DataFrame:
    """Operators by memory allocated (positive sizes only: a negative size is a free whose alloc was not captured)."""
    rows = operator_memory.loc[operator_memory["size_kb"] > 0]
    sizes = rows.groupby("name", sort=False)["size_kb"]  # one grouping for the three (named aggregation costs more)
    summary = pd.DataFrame({"allocations": sizes.size(), "allocated_kb": sizes.sum(), "largest_kb": sizes.max()})
    summary = summary.rename_axis("name").reset_index()
    total = summary["allocated_kb"].sum()
    summary["allocated_mb"] = summary["allocated_kb"] * MB_PER_KB
    summary["largest_mb"] = summary["largest_kb"] * MB_PER_KB
    summary["share_of_allocated"] = summary["allocated_kb"] / total if total > 0 else 0.0
    summary = summary.sort_values(["allocated_kb", "name"], ascending=[False, True], kind="stable").head(limit)
    summary["position"] = range(1, len(summary) + 1)
    return summary.reset_index(drop=True)
