"""Communication facts: pure functions over the tables of communication.json."""

from __future__ import annotations

import pandas as pd

# Ops moving less than this over a transport are "small" (msprof-analyze's packet check: SDMA 16 MB, RDMA 1 MB).
SMALL_OP_MB = {"RDMA": 1.0}
SMALL_OP_MB_DEFAULT = 16.0
_LINK_SPLIT = ("HCCS", "PCIE", "SIO")


def communication_summary(ops: pd.DataFrame, step_count: int) -> pd.DataFrame:
    """Per kind (collective, p2p): op count and CANN times per step in µs, and their shares of elapse."""
    per_step = max(step_count, 1)
    grouped = ops.groupby("kind", sort=True)
    summary = grouped.agg(
        ops=("elapse_ms", "size"),
        elapse_ms=("elapse_ms", "sum"),
        transit_ms=("transit_ms", "sum"),
        wait_ms=("wait_ms", "sum"),
        synchronization_ms=("synchronization_ms", "sum"),
        idle_ms=("idle_ms", "sum"),
    ).reset_index()
    summary["ops_per_step"] = summary["ops"] / per_step
    for name in ("elapse", "transit", "wait", "synchronization", "idle"):
        summary[f"{name}_us"] = summary[f"{name}_ms"] * 1000 / per_step
    elapse = summary["elapse_us"].where(summary["elapse_us"] > 0)
    for name in ("transit", "wait", "idle"):
        summary[f"{name}_share"] = (summary[f"{name}_us"] / elapse).clip(0, 1).fillna(0.0)
    waited = summary["wait_us"] + summary["transit_us"]
    summary["wait_ratio"] = (summary["wait_us"] / waited.where(waited > 0)).clip(0, 1).fillna(0.0)
    return summary


def transport_summary(traffic: pd.DataFrame, step_count: int) -> pd.DataFrame:
    """Per transport: MB and µs per step, bandwidth, and the share of ops that move little data.

    SDMA is the sum of HCCS, PCIE and SIO, so it is dropped when the split is present.
    """
    per_step = max(step_count, 1)
    rows = traffic.loc[traffic["size_mb"] > 0]
    if rows["transport"].isin(_LINK_SPLIT).any():
        rows = rows.loc[rows["transport"] != "SDMA"]
    threshold = rows["transport"].map(SMALL_OP_MB).fillna(SMALL_OP_MB_DEFAULT)
    rows = rows.assign(small=rows["size_mb"] < threshold)
    summary = rows.groupby("transport", sort=True).agg(
        ops=("size_mb", "size"), size_mb=("size_mb", "sum"), time_ms=("time_ms", "sum"), small=("small", "mean")
    ).reset_index()
    summary["size_mb_per_step"] = summary["size_mb"] / per_step
    summary["time_us_per_step"] = summary["time_ms"] * 1000 / per_step
    summary["bandwidth_gbps"] = (summary["size_mb"] / summary["time_ms"].where(summary["time_ms"] > 0)).fillna(0.0)
    summary["ops_per_step"] = summary["ops"] / per_step
    summary["small_op_share"] = summary["small"].astype(float)
    return summary


def link_summary(matrix: pd.DataFrame, ranks: dict[str, tuple[str, tuple[int, ...]]]) -> pd.DataFrame:
    """Per (group, src → dst, transport): MB and µs per step and bandwidth, ranks made global where ``ranks`` knows the group.

    ``ranks`` maps a group hash to (its name, its sorted global ranks). LOCAL (on-chip) copies are dropped.
    """
    rows = matrix.loc[(matrix["transport"] != "LOCAL") & (matrix["src"] != matrix["dst"])]
    per_step = max(int(matrix["step"].nunique(dropna=False)), 1)
    summary = rows.groupby(["group", "src", "dst", "transport"], sort=True).agg(
        size_mb=("size_mb", "sum"), time_ms=("time_ms", "sum")).reset_index()
    if summary.empty:
        return summary

    def global_rank(group: str, local: int) -> int | None:
        known = ranks.get(group)
        return known[1][local] if known is not None and 0 <= local < len(known[1]) else None

    src = [global_rank(g, s) for g, s in zip(summary["group"], summary["src"])]
    dst = [global_rank(g, d) for g, d in zip(summary["group"], summary["dst"])]
    mapped = [s is not None and d is not None for s, d in zip(src, dst)]
    summary["ranks_are_global"] = mapped
    summary["src_rank"] = [s if m else int(local) for s, m, local in zip(src, mapped, summary["src"])]
    summary["dst_rank"] = [d if m else int(local) for d, m, local in zip(dst, mapped, summary["dst"])]
    summary["group_name"] = [ranks[g][0] if g in ranks else g for g in summary["group"]]
    summary["size_mb_per_step"] = summary["size_mb"] / per_step
    summary["time_us_per_step"] = summary["time_ms"] * 1000 / per_step
    summary["bandwidth_gbps"] = (summary["size_mb"] / summary["time_ms"].where(summary["time_ms"] > 0)).fillna(0.0)
    return summary


def median_ratios(bandwidth: pd.Series, transport: pd.Series) -> pd.Series:
    """Each link's bandwidth over the median of its transport's links (None with fewer than 3 links)."""
    counts = transport.map(transport.value_counts())
    medians = bandwidth.groupby(transport).transform("median")
    return (bandwidth / medians.where(medians > 0)).where(counts >= 3)
