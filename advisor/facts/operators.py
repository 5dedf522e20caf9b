"""The operator fact family: operator statistics over kernel_details (or op_statistic) tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.facts.context import core_counts_of, device_entry
from advisor.facts.matrix import MATRIX_KERNEL
from advisor.facts.models import Fact, OperatorFact
from advisor.facts.platforms import traits
from advisor.facts.scope import RankScope, float_or_none, file_source
from advisor.ingest.ascend import PIPE_RATIOS
from advisor.ingest.columns import records

COMMUNICATION_CORES = frozenset({"HCCL", "COMMUNICATION"})
COPY_CORES = frozenset({"MEMORY"})  # memory copies and sets of a GPU trace: device time, but not compute
_KERNEL_COLUMNS = "Step Id,Type,Accelerator Core,Duration(us),Block Dim,Input Shapes,Input Data Types,aic_*_ratio,aiv_*_ratio"
_STATISTIC_COLUMNS = "OP Type,Core Type,Count,Total Time(us),Max Time(us)"


UNNAMED = "(kernel without name or type)"


def compute_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows without the collective-communication ops, with a usable operator type.

    Collectives (Accelerator Core HCCL/COMMUNICATION, or names starting with ``hcom_``) and a GPU trace's memory
    copies and sets (MEMORY) are not compute.
    Where Type is unknown (Level0 writes N/A; torch_npu writes 0 for some memset kernels) the kernel Name stands in and
    ``type_source`` says so; a kernel with neither (blank cells, NULL ids) is counted as ``UNNAMED``.
    """
    core = kernels["accelerator_core"] if "accelerator_core" in kernels else pd.Series(None, index=kernels.index, dtype=object)
    name = kernels["name"].fillna("")
    is_comm = (core.fillna("").str.upper().isin(COMMUNICATION_CORES | COPY_CORES)
               | name.str.lower().str.startswith("hcom_"))
    rows = kernels.loc[~is_comm & kernels["duration_us"].notna() & (kernels["duration_us"] >= 0)]
    op_type = rows["type"] if "type" in rows else pd.Series(pd.NA, index=rows.index, dtype="str")
    known = op_type.notna() & ~op_type.astype(str).str.strip().isin(["", "0"])
    named = rows["name"].notna() & (rows["name"].astype(str).str.strip() != "")
    columns = {
        "step": rows["step"] if "step" in rows else pd.NA,
        "type": op_type.where(known, rows["name"].where(named, UNNAMED)),
        "type_source": known.map({True: "type", False: "name"}),
        "accelerator_core": core.loc[rows.index],
        "duration_us": rows["duration_us"],
    }
    columns |= {column: rows[column] for column in ("block_dim", "input_dtypes", "input_shapes", *PIPE_RATIOS)
                if column in rows}
    return pd.DataFrame(columns)  # one construction, not one insert per column


def in_steps(kernels: pd.DataFrame, steps: list[int]) -> pd.DataFrame:
    """The kernel rows that belong to one of ``steps`` (all rows when the table has no step column)."""
    if not steps or "step" not in kernels or kernels["step"].isna().all():
        return kernels
    numbers = pd.to_numeric(kernels["step"], errors="coerce")
    return kernels.loc[numbers.isin(steps)]


def operator_stats(kernels: pd.DataFrame, step_count: int) -> pd.DataFrame:
    """Per (type, accelerator core): counts and times per step, mean/max duration, share of compute time, and the
    ``pipe_profile`` columns.

    One grouping of the rows (in order of first appearance) serves every column; sums go through one pandas groupby
    (its compensated summation), counts, maxima and usual values through numpy.
    """
    per_step = max(step_count, 1)
    keys = ["type", "accelerator_core"]
    codes = kernels.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    groups = int(codes.max()) + 1 if len(codes) else 0
    first = np.unique(codes, return_index=True)[1]
    duration = kernels["duration_us"].to_numpy(dtype=float, na_value=np.nan)
    summed = {"total_us": duration}
    ratios = [c for c in PIPE_RATIOS if c in kernels and kernels[c].notna().any()]
    for column in ratios:
        ratio = kernels[column].to_numpy(dtype=float, na_value=np.nan)
        summed[f"weighted:{column}"] = ratio * duration
        summed[f"weight:{column}"] = np.where(np.isnan(ratio), np.nan, duration)
    sums = pd.DataFrame(summed).groupby(codes, sort=True).sum(min_count=1)
    count = np.bincount(codes, minlength=groups)
    maxima = np.full(groups, -np.inf)
    np.maximum.at(maxima, codes, duration)
    total = sums["total_us"].to_numpy()
    stats = {
        "type": kernels["type"].to_numpy()[first],
        "accelerator_core": kernels["accelerator_core"].to_numpy()[first],
        "type_source": kernels["type_source"].to_numpy()[first],
        "count": count,
        "total_us": total,
        "mean_us": total / count,
        "max_us": maxima,
    }
    for column in ("block_dim", "input_dtypes", "input_shapes"):
        if column in kernels and kernels[column].notna().any():
            stats[column] = _usual(codes, groups, kernels[column])
    if ratios:
        means = np.column_stack([sums[f"weighted:{c}"].to_numpy() / _positive(sums[f"weight:{c}"].to_numpy())
                                 for c in ratios])
        known = ~np.isnan(means)
        stats["busiest_pipe"] = np.where(known.any(axis=1),
                                         np.array(ratios, dtype=object)[np.where(known, means, -1.0).argmax(axis=1)], np.nan)
        stats["busiest_pipe_ratio"] = np.where(known.any(axis=1), np.where(known, means, -np.inf).max(axis=1), np.nan)
    return _finish(pd.DataFrame(stats), per_step)


def _positive(values: np.ndarray) -> np.ndarray:
    return np.where(values > 0, values, np.nan)


def _usual(codes: np.ndarray, groups: int, values: pd.Series) -> np.ndarray:
    """Per group: its most frequent non-null value, the smallest one among equally frequent (NaN when it has none)."""
    known = values.notna().to_numpy()
    value_codes, uniques = pd.factorize(values[known], sort=True)
    combined = codes[known].astype(np.int64) * max(len(uniques), 1) + value_codes
    pairs, counts = np.unique(combined, return_counts=True)
    group, value = pairs // max(len(uniques), 1), pairs % max(len(uniques), 1)
    order = np.lexsort((value, -counts, group))
    chosen = order[np.r_[True, group[order][1:] != group[order][:-1]]] if len(order) else order
    usual = np.full(groups, np.nan, dtype=object)
    usual[group[chosen]] = np.asarray(uniques, dtype=object)[value[chosen]]
    return usual


def pipe_profile(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per (type, core): the usual Block Dim and input dtypes, and the busiest PMU pipe with its duration-weighted mean ratio.

    A ratio is the share of the kernel's time one pipe (cube MAC, vector, scalar, MTE1/2/3 data movement,
    fixpipe) was busy; 0.8 is msprof-analyze's line between bound and not bound.
    """
    columns = ["type", "accelerator_core", "block_dim", "input_dtypes", "input_shapes", "busiest_pipe", "busiest_pipe_ratio"]
    stats = operator_stats(kernels, 1).sort_values("position")
    return stats[[c for c in columns if c in stats]].reset_index(drop=True)


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
    operands = _operands(shapes)
    if operands is None:
        return None
    if op_type.startswith(("MatMul", "BatchMatMul")) and len(operands) >= 2 and len(operands[0]) >= 2 and len(operands[1]) >= 2:
        for name, value in (("K", operands[0][-1]), ("N", operands[1][-1])):
            if value % 256:
                return f"{name}={value} (not a multiple of 256)"
    elif op_type.startswith("FlashAttention") and operands and len(operands[0]) == 4 and operands[0][-1] % 128:
        return f"head dim D={operands[0][-1]} (not a multiple of 128)"
    return None


def _operands(shapes: str | None) -> list[list[int]] | None:
    """The operand dimensions of Input Shapes ('M,K;K,N'), or None when empty or not numbers."""
    if not shapes:
        return None
    try:
        return [[int(v) for v in part.split(",") if v.strip()] for part in shapes.replace('"', "").split(";") if part.strip()]
    except ValueError:
        return None


def degenerate_batch_matmul(shapes: str | None) -> bool:
    """Whether a BatchMatMul's Input Shapes are the affinity guide's degenerate case, a batch of products of width 1:
    a left operand of three or more dimensions with 1 among its last two ([b, n, 1], or [b, 1, n] transposed) and a
    2-D right operand ending in 1 ([n, 1])."""
    operands = _operands(shapes)
    if not operands or len(operands) < 2:
        return False
    left, right = operands[0], operands[1]
    return len(left) >= 3 and 1 in left[-2:] and len(right) == 2 and right[-1] == 1


def degenerate_time(kernels: pd.DataFrame, step_count: int) -> dict[tuple[str, str], float]:
    """Per (type, core) of BatchMatMul kernels: the time per step of those with degenerate Input Shapes, µs."""
    if "input_shapes" not in kernels:
        return {}
    batched = kernels.loc[kernels["type"].astype(str).str.startswith("BatchMatMul")]
    chosen = batched.loc[batched["input_shapes"].map(lambda v: degenerate_batch_matmul(v if isinstance(v, str) else None))]
    times = chosen.groupby([chosen["type"].astype(str), chosen["accelerator_core"].astype(str)])["duration_us"].sum()
    return {key: float(us) / max(step_count, 1) for key, us in times.items()}


def rows_across_steps(kernels: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (type, core) of MatMul kernels in three or more steps: the least and the most, over the steps, of the step's
    largest M — the rows of the left operand, batch dimensions folded in (tokens, in a language model). Padded to a
    fixed length they are equal; batches of varying sequence length make them differ."""
    if "input_shapes" not in kernels or "step" not in kernels:
        return {}
    matmuls = kernels.loc[kernels["type"].astype(str).str.contains("MatMul") & kernels["step"].notna()]
    rows = matmuls["input_shapes"].map(lambda v: _left_rows(v if isinstance(v, str) else None))
    matmuls = matmuls.assign(rows=rows).dropna(subset=["rows"])
    found = {}
    for (op_type, core), same in matmuls.groupby([matmuls["type"].astype(str), matmuls["accelerator_core"].astype(str)]):
        largest = same.groupby("step")["rows"].max()
        if len(largest) >= 3:
            found[(op_type, core)] = (int(largest.min()), int(largest.max()))
    return found


def _left_rows(shapes: str | None) -> float | None:
    """The rows of a MatMul's left operand: the product of all its dimensions but the last."""
    operands = _operands(shapes)
    if not operands or len(operands[0]) < 2:
        return None
    return float(np.prod(operands[0][:-1]))


def operator_facts(scope: RankScope) -> list[Fact]:
    """The operator facts; ``needs_cores`` when their Block Dim remainders wait for the core counts of another rank's
    device (this rank's device info.json is missing: the reduce fills them in, see ``facts.reduce``)."""
    show, rank, steps, breakdown = scope.show, scope.rank, scope.steps, scope.breakdown
    step_numbers = [s.step for s in steps if s.step is not None]
    if rank.kernels is not None:
        kernels = in_steps(compute_kernels(rank.kernels.frame), step_numbers)
        step_count = len(step_numbers) or distinct_steps(kernels)
        stats = operator_stats(kernels, step_count)
        degenerate = degenerate_time(kernels, step_count)
        varying = rows_across_steps(kernels)
        source = file_source(show, rank, "kernels", f"Name,{_KERNEL_COLUMNS}")
    elif rank.op_statistic is not None:
        stats = operator_stats_from_statistic(rank.op_statistic.frame, len(steps))
        degenerate, varying = {}, {}
        source = f"{show(rank.op_statistic.path)}[{_STATISTIC_COLUMNS}]"
    else:
        return []
    step_time = breakdown.step_time_us if breakdown is not None else None
    compute = breakdown.compute_us if breakdown is not None else None
    coverage = table_coverage(float(stats["total_us_per_step"].sum()), compute)
    device = device_entry(rank.device_info)
    cores = core_counts_of(device)
    facts = []
    for row in records(stats):
        share_of_step = min(row["total_us_per_step"] / step_time, 1.0) if step_time else None
        facts.append(
            OperatorFact(
                id=f"operator:r{rank.rank}:{row['position']}",
                sources=[source],
                rank=rank.rank,
                op_type=str(row["type"]),
                accelerator_core=None if pd.isna(row["accelerator_core"]) else str(row["accelerator_core"]),
                type_source=row["type_source"],
                count_per_step=float(row["count_per_step"]),
                total_us_per_step=float(row["total_us_per_step"]),
                mean_us=float(row["mean_us"]),
                max_us=float(row["max_us"]),
                share_of_compute=min(float(row["share_of_compute"]), 1.0),
                share_of_step=share_of_step,
                table_coverage=coverage,
                position=int(row["position"]),
                matrix_kernel=bool(MATRIX_KERNEL.search(str(row["type"]))) if traits(rank.platform).types_are_kernels else None,
                degenerate_us_per_step=degenerate.get((str(row["type"]), str(row["accelerator_core"]))),
                **_rows_fields(varying.get((str(row["type"]), str(row["accelerator_core"])))),
                **_pipe_fields(row, cores),
            )
        )
    scope.out.needs_cores = not device
    return facts


def _rows_fields(found: tuple[int, int] | None) -> dict[str, object]:
    """rows_range and rows_ratio of an OperatorFact from ``rows_across_steps``."""
    if found is None:
        return {}
    least, most = found
    return {"rows_range": f"{least:,}–{most:,}", "rows_ratio": most / max(least, 1)}


def table_coverage(table_us_per_step: float, compute_us_per_step: float | None) -> float | None:
    """The share of the step breakdown's compute time that the operator table records (capped at 1: kernels on
    several streams overlap, so their sum can exceed the compute time); None when the compute time is unknown or 0."""
    if not compute_us_per_step:
        return None
    return min(table_us_per_step / compute_us_per_step, 1.0)


def _pipe_fields(row: dict, cores: dict[str, int | None]) -> dict:
    """Block Dim, its remainder over the core count where known, and the busiest PMU pipe of an operator type."""
    block_dim = float_or_none(row.get("block_dim"))
    core_count = cores.get("vector" if str(row.get("accelerator_core")) == "AI_VECTOR_CORE" else "cube")
    pipe = row.get("busiest_pipe")
    ratio = float_or_none(row.get("busiest_pipe_ratio"))
    return {
        "block_dim": int(block_dim) if block_dim is not None else None,
        "block_dim_remainder": int(block_dim) % core_count if block_dim is not None and core_count else None,
        "busiest_pipe": str(pipe).removesuffix("_ratio") if isinstance(pipe, str) else None,
        "busiest_pipe_ratio": min(ratio, 1.0) if ratio is not None else None,
        "input_dtypes": str(row["input_dtypes"]) if isinstance(row.get("input_dtypes"), str) else None,
        "misaligned_axis": misaligned_axis(str(row["type"]), row.get("input_shapes") if isinstance(row.get("input_shapes"), str) else None),
    }


def distinct_steps(kernels: pd.DataFrame) -> int:
    if "step" not in kernels:
        return 1
    return max(int(kernels["step"].dropna().nunique()), 1)
