"""The memory fact families: the allocator and the top allocating operators, over memory_record, operator_memory,
npu_module_mem and kernel timing."""

from __future__ import annotations

import pandas as pd

from advisor.facts.models import AllocationFact, Fact, MemoryFact
from advisor.facts.platforms import traits
from advisor.facts.scope import RankScope, float_or_none, file_source
from advisor.facts.windows import inside
from advisor.ingest.columns import records

MB_PER_KB = 1 / 1024
MAX_TIMES_LISTED = 20


def allocator_series(entries: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The allocator's own time series: PTA+GE when graph-mode (GE) memory exists, else PTA; by time."""
    component = "PTA+GE" if (entries["component"] == "GE").any() else "PTA"
    rows = entries.loc[(entries["component"] == component) & entries["reserved_mb"].notna()]
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


SPLIT_SIZE_MIN_MB = 20  # the allocator refuses max_split_size_mb at or below its large-buffer size, 20 MB


def largest_allocations(operator_memory: pd.DataFrame, limit: int = 4) -> list[int]:
    """The sizes of the largest single allocations in MB, rounded down, distinct, largest first: those above
    SPLIT_SIZE_MIN_MB, the values max_split_size_mb can take."""
    sizes = (operator_memory.loc[operator_memory["size_kb"] > 0, "size_kb"] * MB_PER_KB).astype("float64")
    return sorted({int(v) for v in sizes if v > SPLIT_SIZE_MIN_MB}, reverse=True)[:limit]


def memory_facts(scope: RankScope) -> list[Fact]:
    """The allocator's peaks, reorganisations and timeline, and the operators that allocate the most."""
    show, rank, user = scope.show, scope.rank, scope.user
    facts: list[Fact] = []
    if rank.memory_record is not None:
        component, series = allocator_series(rank.memory_record.frame)
        if not series.empty:
            windows, window_source = _memory_windows(scope)
            drops = inside(reserved_drops(series), windows, "timestamp_us")["timestamp_us"]
            unused, unused_ratio = reserved_unused_at_peak(series)
            line = timeline(series)
            entries = rank.memory_record.frame
            app = entries.loc[entries["component"] == "APP", "reserved_mb"]
            sources = [file_source(show, rank, "memory_record", "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB)")]
            if not windows.empty:
                sources.append(window_source)
            hccl = None
            if rank.module_memory is not None:
                modules = rank.module_memory.frame
                hccl_rows = modules.loc[modules["component"] == "HCCL", "reserved_mb"]
                hccl = float(hccl_rows.max()) if hccl_rows.notna().any() else None
                sources.append(f"{show(rank.module_memory.path)}[Component,Total Reserved(MB)]")
            peak = float(app.max()) if app.notna().any() else float(series["reserved_mb"].max())
            largest = largest_allocations(rank.operator_memory.frame) if rank.operator_memory is not None else []
            if largest:
                sources.append(f"{show(rank.operator_memory.path)}[Size(KB)]")
            capacity = user.model.device_memory_gb * 1024 if user and user.model and user.model.device_memory_gb else None
            if capacity:
                sources.append(user.model_source)
            facts.append(
                MemoryFact(
                    id=f"memory:r{rank.rank}",
                    sources=sources,
                    rank=rank.rank,
                    component=component,
                    peak_allocated_mb=float_or_none(series["allocated_mb"].max()) or 0.0,
                    peak_reserved_mb=float(series["reserved_mb"].max()),
                    reserved_unused_mb=unused,
                    reserved_unused_ratio=min(unused_ratio, 1.0),
                    reorganisations=len(drops),
                    reorganisations_per_step=len(drops) / max(len(windows), 1),
                    reorganisation_times_us=[float(t) for t in drops.head(MAX_TIMES_LISTED)],
                    steps_observed=len(windows),
                    process_peak_reserved_mb=float(app.max()) if app.notna().any() else None,
                    hccl_reserved_mb=hccl,
                    largest_allocation_mb=largest[0] if largest else None,
                    split_size_trials_mb=", ".join(f"{v:,}" for v in largest) or None,
                    capacity_mb=capacity,
                    peak_share_of_capacity=min(peak / capacity, 1.0) if capacity else None,
                    timeline_us=[float(t) for t in line["timestamp_us"]],
                    timeline_allocated_mb=[float(v) if v == v else 0.0 for v in line["allocated_mb"]],
                    timeline_reserved_mb=[float(v) for v in line["reserved_mb"]],
                )
            )
    if rank.operator_memory is not None:
        source = f"{show(rank.operator_memory.path)}[Name,Size(KB)]"
        for row in records(top_allocators(rank.operator_memory.frame)):
            facts.append(
                AllocationFact(
                    id=f"allocation:r{rank.rank}:{row['position']}",
                    sources=[source],
                    rank=rank.rank,
                    op_name=str(row["name"]),
                    allocations=int(row["allocations"]),
                    allocated_mb=float(row["allocated_mb"]),
                    largest_mb=float(row["largest_mb"]),
                    share_of_allocated=min(float(row["share_of_allocated"]), 1.0),
                    position=int(row["position"]),
                )
            )
    return facts


def _memory_windows(scope: RankScope) -> tuple[pd.DataFrame, str]:
    """The step windows allocator events are counted in, and their source. A PyTorch trace's [memory] events
    are host-side allocator calls, so its host ProfilerStep windows; on Ascend the device windows of the kernels."""
    show, rank = scope.show, scope.rank
    if traits(rank.platform).allocator_on_host and rank.trace is not None:
        windows = scope.host_windows
        if not windows.empty:
            return windows, f"{show(rank.file('trace'))}[ProfilerStep#N windows]"
    return scope.kernel_windows, file_source(show, rank, "kernels", "Step Id,Start Time(us),Duration(us)")
