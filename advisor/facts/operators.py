"""Operator statistics: pure functions over kernel_details (or op_statistic) tables."""

from __future__ import annotations

import pandas as pd

from advisor.ingest.ascend import PIPE_RATIOS

COMMUNICATION_CORES = frozenset({"HCCL", "COMMUNICATION"})
COPY_CORES = frozenset({"MEMORY"})  # memory copies and sets of a GPU trace: device time, but not compute


def compute_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows without the collective-communication ops, with a usable operator type.

    Collectives (Accelerator Core HCCL/COMMUNICATION, or names starting with ``hcom_``) and a GPU trace's memory
    copies and sets (MEMORY) are not compute.
    Where Type is unknown (Level0 writes N/A) the kernel Name stands in and ``type_source`` says so.
    """
    core = kernels["accelerator_core"] if "accelerator_core" in kernels else pd.Series(None, index=kernels.index, dtype=object)
    name = kernels["name"].fillna("")
    is_comm = (core.fillna("").str.upper().isin(COMMUNICATION_CORES | COPY_CORES)
               | name.str.lower().str.startswith("hcom_"))
    rows = kernels.loc[~is_comm & kernels["duration_us"].notna() & (kernels["duration_us"] >= 0)]
    op_type = rows["type"] if "type" in rows else pd.Series(pd.NA, index=rows.index, dtype="str")
    known = op_type.notna()
    table = pd.DataFrame(
        {
            "step": rows["step"] if "step" in rows else pd.NA,
            "type": op_type.where(known, rows["name"]),
            "type_source": known.map({True: "type", False: "name"}),
            "accelerator_core": core.loc[rows.index],
            "duration_us": rows["duration_us"],
        }
    )
    for column in ("block_dim", "input_dtypes", "input_shapes", *PIPE_RATIOS):
        if column in rows:
            table[column] = rows[column]
    return table


def in_steps(kernels: pd.DataFrame, steps: list[int]) -> pd.DataFrame:
    """The kernel rows that belong to one of ``steps`` (all rows when the table has no step column)."""
    if not steps or "step" not in kernels or kernels["step"].isna().all():
        return kernels
    numbers = pd.to_numeric(kernels["step"], errors="coerce")
    return kernels.loc[numbers.isin(steps)]


def operator_stats(kernels: pd.DataFrame, step_count: int) -> pd.DataFrame:
    """Per (type, accelerator core): counts and times per step, mean/max duration, share of compute time."""
    per_step = max(step_count, 1)
    grouped = kernels.groupby(["type", "accelerator_core"], dropna=False, sort=False)
    stats = grouped.agg(
        type_source=("type_source", "first"),
        count=("duration_us", "size"),
        total_us=("duration_us", "sum"),
        mean_us=("duration_us", "mean"),
        max_us=("duration_us", "max"),
    ).reset_index()
    return _finish(stats.merge(pipe_profile(kernels), on=["type", "accelerator_core"], how="left"), per_step)


def pipe_profile(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per (type, core): the usual Block Dim and input dtypes, and the busiest PMU pipe with its duration-weighted mean ratio.

    A ratio is the share of the kernel's time one pipe (cube MAC, vector, scalar, MTE1/2/3 data movement,
    fixpipe) was busy; 0.8 is msprof-analyze's line between bound and not bound.
    """
    keys = ["type", "accelerator_core"]
    out = kernels[keys].drop_duplicates().reset_index(drop=True)
    for column in ("block_dim", "input_dtypes", "input_shapes"):
        if column in kernels and kernels[column].notna().any():
            counts = kernels.dropna(subset=[column]).groupby([*keys, column], dropna=False).size().reset_index(name="n")
            usual = counts.sort_values("n", ascending=False, kind="stable").drop_duplicates(keys)[[*keys, column]]
            out = out.merge(usual, on=keys, how="left")
    ratios = [c for c in PIPE_RATIOS if c in kernels and kernels[c].notna().any()]
    if not ratios:
        return out
    weighted = pd.DataFrame({c: kernels[c] * kernels["duration_us"] for c in ratios})
    weights = pd.DataFrame({c: kernels["duration_us"].where(kernels[c].notna()) for c in ratios})
    sums = pd.concat([kernels[keys], weighted], axis=1).groupby(keys, dropna=False).sum(min_count=1)
    totals = pd.concat([kernels[keys], weights], axis=1).groupby(keys, dropna=False).sum(min_count=1)
    means = (sums / totals.where(totals > 0)).reset_index()
    values = means[ratios]
    means["busiest_pipe"] = values.fillna(-1.0).idxmax(axis=1).where(values.notna().any(axis=1))
    means["busiest_pipe_ratio"] = values.max(axis=1)
    return out.merge(means[[*keys, "busiest_pipe", "busiest_pipe_ratio"]], on=keys, how="left")


def operator_stats_from_statistic(op_statistic: pd.DataFrame, step_count: int) -> pd.DataFrame:
    """The same statistics from op_statistic.csv, whose totals cover the whole capture."""
    rows = op_statistic.loc[op_statistic["total_us"].notna() & (op_statistic["total_us"] >= 0)]
    stats = pd.DataFrame(
        {
            "type": rows["type"],
            "accelerator_core": rows.get("accelerator_core"),
            "type_source": "type",
            "count": rows["count"].fillna(0),
            "total_us": rows["total_us"],
            "mean_us": (rows["total_us"] / rows["count"].where(rows["count"] > 0)).fillna(0.0),
            "max_us": rows["max_us"].fillna(0.0) if "max_us" in rows else 0.0,
        }
    )
    return _finish(stats, max(step_count, 1))


def _finish(stats: pd.DataFrame, per_step: int) -> pd.DataFrame:
    total = stats["total_us"].sum()
    stats["count_per_step"] = stats["count"] / per_step
    stats["total_us_per_step"] = stats["total_us"] / per_step
    stats["share_of_compute"] = stats["total_us"] / total if total > 0 else 0.0
    stats = stats.sort_values(["total_us", "type"], ascending=[False, True], kind="stable").reset_index(drop=True)
    stats["position"] = range(1, len(stats) + 1)
    return stats


def misaligned_axis(op_type: str, shapes: str | None) -> str | None:
    """The inner axis of a MatMul (multiple of 256 wanted) or the head dim of FlashAttention (128) that is not aligned.

    Shapes are kernel_details Input Shapes ('M,K;K,N'); only ND MatMul operands and 4-D attention inputs
    (BNSD/BSND, head dim last) are judged; anything else gives None.
    """
    if not shapes:
        return None
    try:
        operands = [[int(v) for v in part.split(",") if v.strip()] for part in shapes.replace('"', "").split(";") if part.strip()]
    except ValueError:
        return None
    if op_type.startswith(("MatMul", "BatchMatMul")) and len(operands) >= 2 and len(operands[0]) >= 2 and len(operands[1]) >= 2:
        for name, value in (("K", operands[0][-1]), ("N", operands[1][-1])):
            if value % 256:
                return f"{name}={value} (not a multiple of 256)"
    elif op_type.startswith("FlashAttention") and operands and len(operands[0]) == 4 and operands[0][-1] % 128:
        return f"head dim D={operands[0][-1]} (not a multiple of 128)"
    return None
