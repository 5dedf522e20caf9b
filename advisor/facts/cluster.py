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
