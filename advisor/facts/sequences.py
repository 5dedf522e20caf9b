"""Kernel sequences: which operator types follow each other on the device, and MatMul–collective pairs.

Pure functions over kernel_details. The device timeline of a step is every kernel (compute and
collective) ordered by start time; a *pair* is two consecutive kernels. Decomposed patterns show up
as pairs (RMSNorm as Pow→ReduceMean→Add→Rsqrt→Mul, rotary embedding as Neg→ConcatD, a Linear layer as
MatMul→Add), and a MatMul directly followed by an AllReduce of its output is what MC2 fuses.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from advisor.facts.operators import COMMUNICATION_CORES

MAX_PAIRS = 150
MATMUL = re.compile(r"^(MatMul|BatchMatMul)", re.IGNORECASE)
COLLECTIVES = {"allreduce": "all_reduce", "reducescatter": "reduce_scatter", "allgather": "all_gather"}
_DTYPES = {"FLOAT16": "fp16", "DT_FLOAT16": "fp16", "BF16": "bf16", "DT_BF16": "bf16", "BFLOAT16": "bf16",
           "FLOAT": "fp32", "FLOAT32": "fp32", "DT_FLOAT": "fp32", "INT8": "int8", "DT_INT8": "int8"}


def device_timeline(kernels: pd.DataFrame) -> pd.DataFrame:
    """Every kernel with a start time, as (step, type, is_comm, collective, start_us, duration_us, shapes, dtypes), in order."""
    if "start_us" not in kernels or kernels["start_us"].isna().all():
        return pd.DataFrame(columns=["step", "type", "is_comm", "collective", "start_us", "duration_us", "shapes", "dtypes"])
    rows = kernels.loc[kernels["start_us"].notna() & kernels["duration_us"].notna()]
    core = rows["accelerator_core"].fillna("").str.upper() if "accelerator_core" in rows else pd.Series("", index=rows.index)
    name = rows["name"].fillna("")
    is_comm = core.isin(COMMUNICATION_CORES) | name.str.lower().str.startswith("hcom_")
    op_type = rows["type"].where(rows["type"].notna() & (rows["type"] != ""), name) if "type" in rows else name
    timeline = pd.DataFrame(
        {
            "step": pd.to_numeric(rows["step"], errors="coerce") if "step" in rows else pd.NA,
            "type": op_type.astype(str),
            "is_comm": is_comm,
            "collective": [_collective(t) if c else None for t, c in zip(op_type.astype(str), is_comm)],
            "start_us": rows["start_us"],
            "duration_us": rows["duration_us"],
            "shapes": rows["input_shapes"] if "input_shapes" in rows else pd.NA,
            "dtypes": rows["input_dtypes"] if "input_dtypes" in rows else pd.NA,
        }
    )
    return timeline.sort_values(["step", "start_us"], kind="stable", na_position="first").reset_index(drop=True)


def kernel_pairs(timeline: pd.DataFrame, step_count: int, limit: int = MAX_PAIRS) -> pd.DataFrame:
    """Consecutive (first, second) type pairs within a step: count and time per step, the most time first."""
    columns = ["first_type", "second_type", "count_per_step", "first_us_per_step", "second_us_per_step"]
    if len(timeline) < 2:
        return pd.DataFrame(columns=columns)
    following = timeline.shift(-1)
    same_step = (timeline["step"] == following["step"]) | (timeline["step"].isna() & following["step"].isna())
    pairs = pd.DataFrame(
        {
            "first_type": timeline["type"],
            "second_type": following["type"],
            "first_us": timeline["duration_us"],
            "second_us": following["duration_us"],
        }
    ).loc[same_step.fillna(False) & following["type"].notna()]
    per_step = max(step_count, 1)
    grouped = pairs.groupby(["first_type", "second_type"], sort=False).agg(
        count=("first_us", "size"), first_us=("first_us", "sum"), second_us=("second_us", "sum")
    ).reset_index()
    grouped["count_per_step"] = grouped["count"] / per_step
    grouped["first_us_per_step"] = grouped["first_us"] / per_step
    grouped["second_us_per_step"] = grouped["second_us"] / per_step
    grouped["total"] = grouped["first_us"] + grouped["second_us"]
    grouped = grouped.sort_values(["total", "first_type", "second_type"], ascending=[False, True, True], kind="stable")
    return grouped.head(limit)[columns].reset_index(drop=True)


def matmul_collective_pairs(timeline: pd.DataFrame, step_count: int) -> pd.DataFrame:
    """MC2 candidates: MatMul→AllReduce, MatMul→ReduceScatter and AllGather→MatMul, with times and the usual shape."""
    columns = ["pattern", "count_per_step", "matmul_us", "comm_us", "m", "k", "n", "dtype"]
    if len(timeline) < 2:
        return pd.DataFrame(columns=columns)
    nxt = timeline.shift(-1)
    same_step = (timeline["step"] == nxt["step"]) | (timeline["step"].isna() & nxt["step"].isna())
    is_matmul = ~timeline["is_comm"] & timeline["type"].str.match(MATMUL)
    next_matmul = is_matmul.shift(-1, fill_value=False)
    kinds = {
        "matmul_all_reduce": same_step & is_matmul & (nxt["collective"] == "all_reduce"),
        "matmul_reduce_scatter": same_step & is_matmul & (nxt["collective"] == "reduce_scatter"),
        "all_gather_matmul": same_step & (timeline["collective"] == "all_gather") & next_matmul,
    }
    rows = []
    for pattern, mask in sorted(kinds.items()):
        mask = mask.fillna(False).astype(bool)
        if not mask.any():
            continue
        first, second = timeline.loc[mask], nxt.loc[mask]
        matmul, comm = (second, first) if pattern == "all_gather_matmul" else (first, second)
        shapes = (matmul["shapes"].fillna("").astype(str) + "|" + matmul["dtypes"].fillna("").astype(str)).value_counts()
        shape_text, dtype_text = shapes.index[0].split("|", 1)
        m, k, n = _matmul_dims(shape_text)
        rows.append(
            {
                "pattern": pattern,
                "count_per_step": int(mask.sum()) / max(step_count, 1),
                "matmul_us": float(matmul["duration_us"].mean()),
                "comm_us": float(comm["duration_us"].mean()),
                "m": m,
                "k": k,
                "n": n,
                "dtype": _DTYPES.get(dtype_text.split(";")[0].strip().upper()),
            }
        )
    return pd.DataFrame(rows, columns=columns)


def _collective(op_type: str) -> str | None:
    key = re.sub(r"[^a-z]", "", op_type.lower())
    return next((value for word, value in COLLECTIVES.items() if word in key), None)


def _matmul_dims(shapes: str) -> tuple[int | None, int | None, int | None]:
    """(M, K, N) from 'M,K;K,N' (2-D operands; a batch dimension of a 3-D left operand folds into M)."""
    parts = [p for p in shapes.replace('"', "").split(";") if p.strip()]
    if len(parts) < 2:
        return None, None, None
    try:
        left = [int(v) for v in parts[0].split(",") if v.strip()]
        right = [int(v) for v in parts[1].split(",") if v.strip()]
    except ValueError:
        return None, None, None
    if len(left) < 2 or len(right) < 2:
        return None, None, None
    m = 1
    for value in left[:-1]:
        m *= value
    k = left[-1]
    if right[-2] == k:
        return m, k, right[-1]
    if right[-1] == k:  # the right operand is stored transposed, [N, K]
        return m, k, right[-2]
    return m, k, None


def matmul_overlap_share(timeline: pd.DataFrame) -> float | None:
    """Share of the collectives' kernel time during which a MatMul kernel runs (on another stream); None without collectives.

    Overlap is what MC2 and compute-communication overlap aim for, but MatMul and SDMA traffic compete for
    memory bandwidth, so a link that is slow mostly while overlapping is contended rather than faulty.
    """
    comm = timeline.loc[timeline["is_comm"], ["start_us", "duration_us"]]
    if comm.empty or comm["duration_us"].sum() <= 0:
        return None
    matmul = timeline.loc[~timeline["is_comm"] & timeline["type"].str.match(MATMUL), ["start_us", "duration_us"]]
    merged: list[list[float]] = []
    for start, duration in sorted(zip(matmul["start_us"], matmul["duration_us"])):
        end = start + duration
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return 0.0
    starts = np.array([m[0] for m in merged])
    ends = np.array([m[1] for m in merged])
    covered_before = np.concatenate([[0.0], np.cumsum(ends - starts)])  # union length of the first i intervals

    def union_until(t: np.ndarray) -> np.ndarray:
        """Length of the MatMul union before time t."""
        index = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
        partial = np.where(index > 0, np.clip(t - starts[np.maximum(index - 1, 0)], 0, None), 0.0)
        full = covered_before[np.maximum(index - 1, 0)]
        last = np.where(index > 0, np.minimum(partial, (ends - starts)[np.maximum(index - 1, 0)]), 0.0)
        return np.where(index > 0, full + last, 0.0)

    comm_start = comm["start_us"].to_numpy(dtype=float)
    comm_end = comm_start + comm["duration_us"].to_numpy(dtype=float)
    covered = float((union_until(comm_end) - union_until(comm_start)).sum())
    return min(covered / float(comm["duration_us"].sum()), 1.0)
