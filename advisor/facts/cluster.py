"""Cluster facts: how the ranks of one profile differ (pure functions over per-rank breakdowns)."""

from __future__ import annotations

import pandas as pd

DIMENSIONS = {"compute": "compute_us", "communication": "comm_not_overlapped_us", "free": "free_us"}


def rank_spreads(breakdowns: pd.DataFrame) -> pd.DataFrame:
    """Per dimension: the ranks with the most and least time, the gap, and the gap over the mean step.

    ``breakdowns`` has one row per rank with ``rank``, ``step_time_us`` and the dimension columns.
    """
    mean_step = breakdowns["step_time_us"].mean()
    rows = []
    for dimension, column in DIMENSIONS.items():
        ordered = breakdowns.sort_values([column, "rank"], kind="stable")
        low, high = ordered.iloc[0], ordered.iloc[-1]
        spread = float(high[column] - low[column])
        rows.append(
            {
                "dimension": dimension,
                "max_rank": int(high["rank"]),
                "min_rank": int(low["rank"]),
                "max_us": float(high[column]),
                "min_us": float(low[column]),
                "spread_us": spread,
                "spread_ratio": min(spread / mean_step, 1.0) if mean_step > 0 else 0.0,
                "rank": int(low["rank"] if dimension == "communication" else high["rank"]),
                "ranks": len(breakdowns),
            }
        )
    return pd.DataFrame(rows)


def pipeline_groups(metadata_by_rank: dict[int, dict]) -> list[tuple[str, list[int]]]:
    """The pipeline-parallel groups named in profiler_metadata parallel_group_info ('pp'), each once, stage order."""
    groups: dict[tuple[int, ...], str] = {}
    for metadata in metadata_by_rank.values():
        info = metadata.get("parallel_group_info") if isinstance(metadata, dict) else None
        if not isinstance(info, dict):
            continue
        for comm_name, group in info.items():
            if not isinstance(group, dict) or str(group.get("group_name", "")).lower() != "pp":
                continue
            ranks = group.get("global_ranks")
            if isinstance(ranks, list) and len(ranks) >= 2 and all(isinstance(r, int) for r in ranks):
                groups.setdefault(tuple(ranks), str(comm_name))
    return sorted(((name, list(ranks)) for ranks, name in groups.items()), key=lambda g: g[1])


def stage_spread(ranks: list[int], compute_us: dict[int, float]) -> dict | None:
    """Compute time per pipeline stage and how unevenly it is spread; None when a stage has no breakdown."""
    times = [compute_us.get(rank) for rank in ranks]
    if any(t is None for t in times):
        return None
    mean = sum(times) / len(times)
    slowest = max(range(len(times)), key=lambda i: times[i])
    fastest = min(range(len(times)), key=lambda i: times[i])
    return {
        "stages": len(times),
        "slowest_stage": slowest,
        "slowest_rank": ranks[slowest],
        "fastest_stage": fastest,
        "max_compute_us": times[slowest],
        "mean_compute_us": mean,
        "min_compute_us": times[fastest],
        "compute_spread_ratio": (times[slowest] - times[fastest]) / mean if mean > 0 else 0.0,
    }
