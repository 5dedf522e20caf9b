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

from advisor.facts.communication import collective_of, op_traffic, tensor_mb
from advisor.facts.models import ChainFact, ContentionFact, Fact, SequenceFact
from advisor.facts.operators import COMMUNICATION_CORES, distinct_steps, in_steps
from advisor.facts.platforms import traits
from advisor.facts.scope import Mc2Pairs, RankScope, file_source
from advisor.ingest.columns import records
from advisor.names import matching

MAX_PAIRS = 150
MATMUL = re.compile(r"^(MatMul|BatchMatMul)", re.IGNORECASE)
_DTYPES = {"FLOAT16": "fp16", "DT_FLOAT16": "fp16", "BF16": "bf16", "DT_BF16": "bf16", "BFLOAT16": "bf16",
           "FLOAT": "fp32", "FLOAT32": "fp32", "DT_FLOAT": "fp32", "INT8": "int8", "DT_INT8": "int8"}


def device_timeline(kernels: pd.DataFrame) -> pd.DataFrame:
    """Every kernel with a start time, as (step, name, type, is_comm, collective, start_us, duration_us, shapes, dtypes),
    in order."""
    if "start_us" not in kernels or kernels["start_us"].isna().all():
        return pd.DataFrame(columns=["step", "name", "type", "is_comm", "collective", "start_us", "duration_us", "shapes",
                                     "dtypes"])
    rows = kernels.loc[kernels["start_us"].notna() & kernels["duration_us"].notna()]
    core = rows["accelerator_core"].fillna("").str.upper() if "accelerator_core" in rows else pd.Series("", index=rows.index)
    name = rows["name"].fillna("")
    is_comm = core.isin(COMMUNICATION_CORES) | name.str.lower().str.startswith("hcom_")
    op_type = rows["type"].where(rows["type"].notna() & (rows["type"] != ""), name) if "type" in rows else name
    timeline = pd.DataFrame(
        {
            "step": pd.to_numeric(rows["step"], errors="coerce") if "step" in rows else pd.NA,
            "name": name.astype(str),
            "type": op_type.astype(str),
            "is_comm": is_comm,
            "collective": [collective_of(t) if c else None for t, c in zip(op_type.astype(str).tolist(), is_comm.tolist())],
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
    types = timeline["type"].to_numpy(dtype=object)
    steps = timeline["step"].to_numpy(dtype=float, na_value=np.nan)
    durations = timeline["duration_us"].to_numpy(dtype=float, na_value=np.nan)
    same_step = (steps[:-1] == steps[1:]) | (np.isnan(steps[:-1]) & np.isnan(steps[1:]))
    keep = same_step & pd.notna(types[1:])
    first_type, second_type = types[:-1][keep], types[1:][keep]
    per_step = max(step_count, 1)
    if not len(first_type):
        return pd.DataFrame(columns=columns)
    type_codes, names = pd.factorize(types, sort=False)
    pair_codes, _ = pd.factorize(type_codes[:-1][keep].astype(np.int64) * len(names) + type_codes[1:][keep], sort=False)
    first_index = np.unique(pair_codes, return_index=True)[1]
    # the sums through pandas (its compensated summation), grouped in order of first appearance
    sums = pd.DataFrame({"first_us": durations[:-1][keep], "second_us": durations[1:][keep]}).groupby(pair_codes, sort=True).sum()
    grouped = pd.DataFrame({
        "first_type": first_type[first_index], "second_type": second_type[first_index],
        "count": np.bincount(pair_codes), "first_us": sums["first_us"].to_numpy(), "second_us": sums["second_us"].to_numpy(),
    })
    grouped["count_per_step"] = grouped["count"] / per_step
    grouped["first_us_per_step"] = grouped["first_us"] / per_step
    grouped["second_us_per_step"] = grouped["second_us"] / per_step
    grouped["total"] = grouped["first_us"] + grouped["second_us"]
    grouped = grouped.sort_values(["total", "first_type", "second_type"], ascending=[False, True, True], kind="stable")
    return grouped.head(limit)[columns].reset_index(drop=True)


def matmul_collective_pairs(timeline: pd.DataFrame, step_count: int, collectives: pd.DataFrame | None = None,
                            groups: dict[str, tuple[str | None, int | None]] | None = None) -> pd.DataFrame:
    """MC2 candidates: MatMul→AllReduce, MatMul→ReduceScatter and AllGather→MatMul on the same data, per shape.

    A pair is a candidate only when the collective carries the MatMul's output (its input for AllGather→MatMul):
    ``collectives`` (step, op_name, group, transit_mb: the op's traffic from communication.json) gives the data the
    collective moved, from which its payload follows (a ring or mesh AllReduce over n ranks moves 2(n − 1)/n of it,
    ReduceScatter and AllGather (n − 1)/n of the full tensor; n from ``groups``: hash → (name, size), unknown n
    allowing the whole range), and the MatMul's side must be within 25 % of it. A collective of a group known by a
    name other than a tensor-parallel one (dp, pp, default_group, …) is not a candidate: a data-parallel gradient
    AllReduce after the last backward MatMul is not what MC2 fuses. Without the collective's traffic there is no
    candidate. Times are means over the pairs of one (pattern, MatMul shape, dtype), so a row never labels a mean of
    several shapes with one of them.
    """
    if len(timeline) < 2 or collectives is None or collectives.empty:
        return pd.DataFrame(columns=MC2_COLUMNS)
    return mc2_candidates(mc2_pairs(timeline, collectives), step_count, groups)


MC2_COLUMNS = ["pattern", "count_per_step", "matmul_us", "comm_us", "m", "k", "n", "dtype", "group", "payload_mb",
               "matmul_mb"]
PAIR_COLUMNS = ["pattern", "step", "op_name", "matmul_us", "comm_us", "shapes", "dtypes", "group", "transit_mb"]


def mc2_pairs(timeline: pd.DataFrame, collectives: pd.DataFrame) -> pd.DataFrame:
    """The first half of ``matmul_collective_pairs``, which needs only one rank: every MatMul→AllReduce,
    MatMul→ReduceScatter and AllGather→MatMul pair of the timeline whose collective is in ``collectives``, with the
    collective's group and the MB it sent (one row per pair, patterns in name order)."""
    if len(timeline) < 2 or collectives is None or collectives.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    kinds = mc2_masks(timeline)
    if not any(mask.any() for mask in kinds.values()):
        return pd.DataFrame(columns=PAIR_COLUMNS)
    nxt = timeline.shift(-1)
    sizes = collectives.assign(step=pd.to_numeric(collectives["step"], errors="coerce").astype("float64"))
    sizes = sizes.groupby(["step", "op_name"], dropna=False, sort=False).agg(
        group=("group", "first"), transit_mb=("transit_mb", "sum")).reset_index()
    found = []
    for pattern, mask in sorted(kinds.items()):
        if not mask.any():
            continue
        first, second = timeline.loc[mask], nxt.loc[mask]
        matmul, comm = (second, first) if pattern == "all_gather_matmul" else (first, second)
        pairs = pd.DataFrame({
            "step": pd.to_numeric(comm["step"], errors="coerce").astype("float64").to_numpy(),
            "op_name": comm["name"].to_numpy(),
            "matmul_us": matmul["duration_us"].to_numpy(), "comm_us": comm["duration_us"].to_numpy(),
            "shapes": matmul["shapes"].fillna("").astype(str).to_numpy(),
            "dtypes": matmul["dtypes"].fillna("").astype(str).to_numpy(),
        }).merge(sizes, on=["step", "op_name"], how="inner")
        if not pairs.empty:
            found.append(pairs.assign(pattern=pattern)[PAIR_COLUMNS])
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=PAIR_COLUMNS)


def mc2_masks(timeline: pd.DataFrame) -> dict[str, pd.Series]:
    """Per MC2 pattern: which rows of the timeline start one of its pairs (a MatMul and then the collective in the
    same step, or an AllGather and then the MatMul)."""
    if len(timeline) < 2:
        return {}
    nxt = timeline.shift(-1)
    same_step = (timeline["step"] == nxt["step"]) | (timeline["step"].isna() & nxt["step"].isna())
    is_matmul = ~timeline["is_comm"] & matching(timeline["type"], MATMUL)
    next_matmul = is_matmul.shift(-1, fill_value=False)
    kinds = {
        "matmul_all_reduce": same_step & is_matmul & (nxt["collective"] == "all_reduce"),
        "matmul_reduce_scatter": same_step & is_matmul & (nxt["collective"] == "reduce_scatter"),
        "all_gather_matmul": same_step & (timeline["collective"] == "all_gather") & next_matmul,
    }
    return {pattern: mask.fillna(False).astype(bool) for pattern, mask in kinds.items()}


def mc2_candidates(pairs: pd.DataFrame, step_count: int,
                   groups: dict[str, tuple[str | None, int | None]] | None = None) -> pd.DataFrame:
    """The second half of ``matmul_collective_pairs``: the pairs of ``mc2_pairs`` whose collective carries the
    MatMul's data in a group that can be tensor-parallel (``groups``: hash → (name, size), from every rank)."""
    groups = groups or {}
    rows = []
    for pattern, of_pattern in pairs.groupby("pattern", sort=True):
        for (shape_text, dtype_text), same in of_pattern.groupby(["shapes", "dtypes"], sort=True):
            m, k, n = _matmul_dims(shape_text)
            dtype = _DTYPES.get(dtype_text.split(";")[0].strip().upper())
            if m is None or k is None or n is None:
                continue
            matmul_mb = m * (k if pattern == "all_gather_matmul" else n) * _BYTES.get(dtype, 2) / 1e6
            chosen = [bool(_tensor_parallel(groups.get(g, (None, None))[0])
                           and _carries(pattern, matmul_mb, t, groups.get(g, (None, None))[1]))
                      for g, t in zip(same["group"], same["transit_mb"])]
            kept = same.loc[chosen]
            if kept.empty:
                continue
            group = str(kept["group"].mode().iloc[0])
            size = groups.get(group, (None, None))[1]
            rows.append({
                "pattern": pattern,
                "count_per_step": len(kept) / max(step_count, 1),
                "matmul_us": float(kept["matmul_us"].mean()),
                "comm_us": float(kept["comm_us"].mean()),
                "m": m, "k": k, "n": n, "dtype": dtype,
                "group": groups.get(group, (None, None))[0] or group,
                "payload_mb": float(kept["transit_mb"].map(lambda t: sum(_payload(pattern, t, size)) / 2).mean()),
                "matmul_mb": matmul_mb,
            })
    return pd.DataFrame(rows, columns=MC2_COLUMNS)


_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "int8": 1}
_TENSOR_PARALLEL = re.compile(r"(tp|tensor.*|tp[_-]cp|cp[_-]tp)", re.IGNORECASE)


def _tensor_parallel(name: str | None) -> bool:
    """Whether a communicator named ``name`` can be a tensor-parallel one (unknown names can)."""
    return name is None or _TENSOR_PARALLEL.fullmatch(name) is not None


def _payload(pattern: str, transit_mb: float, ranks: int | None) -> tuple[float, float]:
    """The range of the tensor an MC2 pattern's collective carries (``tensor_mb``), MB."""
    return tensor_mb(pattern.removeprefix("matmul_").removesuffix("_matmul"), transit_mb, ranks)


def _carries(pattern: str, matmul_mb: float, transit_mb: float, ranks: int | None, slack: float = 1.25) -> bool:
    """Whether the collective's payload is the MatMul's output (input for AllGather→MatMul), within ``slack``."""
    if not transit_mb or transit_mb <= 0:
        return False
    low, high = _payload(pattern, transit_mb, ranks)
    return low / slack <= matmul_mb <= high * slack


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
    matmul = timeline.loc[~timeline["is_comm"] & matching(timeline["type"], MATMUL), ["start_us", "duration_us"]]
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


# --- decomposed operators: the chain of kernels one fused operator replaces -----------------------------------------

# One letter per compute kernel type; a pattern is a regular expression over a step's letters (kernels in start
# order, collectives left out), so a chain is found wherever its kernels run back to back.
_TOKENS = (
    ("C", r"Cast.*|MemSet.*"),  # dtype casts (x.float(), .type_as) and the zeroing ReduceMean may need
    ("P", r"Pow.*|Square.*"),
    ("R", r"ReduceMean.*"),
    ("A", r"Adds?|AddV2|Axpy.*"),
    ("Q", r"Rsqrt.*"),
    ("M", r"Muls?|MulV2"),
    ("N", r"Neg.*"),
    ("K", r"Concat.*"),
    ("S", r"Slice.*|StridedSlice.*|AsStrided.*|Split.*"),
    ("W", r"Swish.*|Silu.*"),
)
_TOKEN_RE = [(letter, re.compile(pattern, re.IGNORECASE)) for letter, pattern in _TOKENS]
# KB-FU-02: Cast,Square,ReduceMeanD,Add,Rsqrt,[Cast,Cast,]Mul,Cast,[Cast,]Mul[,Cast] (or Cast,Square,MemSet,ReduceMean,…):
# x·rsqrt(mean(x²) + ε)·w, x² as Pow, Square or x·x; the weight's Mul optional
_RMS_NORM = re.compile(r"(?:C?[PM])?C*RC?AQC*M(?:C*M)?(?:C(?!C?[PM]C*R))?")  # a trailing Cast unless it starts the next
# KB-FU-01: Mul,Slice,Neg,Slice,ConcatD,[Cast,]Mul,Add (or AsStrided): x·cos + rotate_half(x)·sin
_ROTARY = re.compile(r"M?S{0,3}NS{0,3}KC?(?:MA)?")
CHAIN_COLUMNS = ["pattern", "count_per_step", "kernels_per_chain", "us_per_step", "sequence", "adjacent_share"]
SWIGLU_WINDOW = 3  # kernels after the SiLU in which its gate Mul may come (a separate up-projection runs between)


def decomposed_chains(timeline: pd.DataFrame, step_count: int) -> pd.DataFrame:
    """Per decomposed operator found (rms_norm, rotary_embedding, swiglu): chains per step, their kernels, and the
    summed device time of every kernel of the chains per step — the time the fused operator's kernels replace.

    RMSNorm and rotary embedding are runs of back-to-back kernels (the patterns above). SwiGLU is the gated
    activation silu(a) · b: a SiLU (Swish) kernel whose output is multiplied, within the next three kernels, by a
    Mul taking two tensors of the SiLU input's shape (where shapes were recorded; without shapes only a Mul right
    after the SiLU counts); the Slices right before the SiLU (x.chunk(2)) belong to the chain. A SiLU that no
    same-shaped Mul follows (a plain activation, GroupNorm + SiLU) is not SwiGLU. ``adjacent_share`` is the share
    of SwiGLU chains whose Mul comes right after the SiLU (else a separate up-projection runs in between).
    """
    compute = timeline.loc[~timeline["is_comm"].astype(bool)]
    if compute.empty:
        return pd.DataFrame(columns=CHAIN_COLUMNS)
    letters = {t: next((letter for letter, rx in _TOKEN_RE if rx.fullmatch(t)), "x") for t in compute["type"].unique()}
    found: dict[str, list[tuple[list[str], float, bool]]] = {"rms_norm": [], "rotary_embedding": [], "swiglu": []}
    for _, step in compute.groupby(compute["step"].fillna(-1), sort=False):
        types = step["type"].tolist()
        durations = step["duration_us"].to_numpy(dtype=float)
        shapes = step["shapes"].tolist()
        text = "".join(letters[t] for t in types)
        for name, pattern in (("rms_norm", _RMS_NORM), ("rotary_embedding", _ROTARY)):
            for match in pattern.finditer(text):
                span = range(match.start(), match.end())
                found[name].append(([types[i] for i in span], float(durations[match.start():match.end()].sum()), True))
        for at in (i for i, letter in enumerate(text) if letter == "W"):
            gate = _gate(text, shapes, at)
            if gate is None:
                continue
            first = at
            while first > 0 and at - first < 2 and text[first - 1] == "S":
                first -= 1
            chain = [*range(first, at + 1), gate]
            found["swiglu"].append(([types[i] for i in chain], float(durations[chain].sum()), gate == at + 1))
    per_step = max(step_count, 1)
    rows = []
    for name, chains in found.items():
        if not chains:
            continue
        sequences = pd.Series([" → ".join(kernels) for kernels, _, _ in chains]).value_counts()
        rows.append({
            "pattern": name,
            "count_per_step": len(chains) / per_step,
            "kernels_per_chain": sum(len(kernels) for kernels, _, _ in chains) / len(chains),
            "us_per_step": sum(us for _, us, _ in chains) / per_step,
            "sequence": str(sequences.index[0]),
            "adjacent_share": sum(adjacent for _, _, adjacent in chains) / len(chains),
        })
    return pd.DataFrame(rows, columns=CHAIN_COLUMNS)


def _gate(text: str, shapes: list, silu: int) -> int | None:
    """The position of the Mul that gates the SiLU at ``silu``, or None when none follows close enough."""
    operand = _first_shape(shapes[silu])
    for position in range(silu + 1, min(silu + 1 + SWIGLU_WINDOW, len(text))):
        if text[position] == "W":
            return None
        if text[position] != "M":
            continue
        mul = [s.strip() for s in str(shapes[position] if isinstance(shapes[position], str) else "").replace('"', "").split(";")]
        if operand is None or len(mul) < 2 or not mul[0]:
            if position == silu + 1:  # no shapes recorded: only a Mul right after the SiLU
                return position
            continue
        if mul[0] == operand and mul[1] == operand:
            return position
    return None


def _first_shape(shapes: object) -> str | None:
    if not isinstance(shapes, str):
        return None
    first = shapes.replace('"', "").split(";")[0].strip()
    return first or None


def sequence_facts(scope: RankScope) -> list[Fact]:
    """Kernel pairs, decomposed chains and MatMul contention; the MatMul→collective pairs go to ``mc2`` (the reduce
    tells which are MC2 candidates once every rank's groups are known)."""
    show, rank, steps, breakdown = scope.show, scope.rank, scope.steps, scope.breakdown
    if rank.kernels is None:
        return []
    step_numbers = [s.step for s in steps if s.step is not None]
    timeline = device_timeline(in_steps(rank.kernels.frame, step_numbers))
    if timeline.empty:
        return []
    step_count = len(step_numbers) or distinct_steps(timeline)
    step_time = breakdown.step_time_us if breakdown is not None and breakdown.step_time_us > 0 else None
    facts: list[Fact] = []
    for index, row in enumerate(records(kernel_pairs(timeline, step_count))):
        both = row["first_us_per_step"] + row["second_us_per_step"]
        facts.append(
            SequenceFact(
                id=f"sequence:r{rank.rank}:{index + 1}",
                sources=[file_source(show, rank, "kernels", "Step Id,Type,Start Time(us),Duration(us)")],
                rank=rank.rank,
                first_type=str(row["first_type"]),
                second_type=str(row["second_type"]),
                count_per_step=float(row["count_per_step"]),
                first_us_per_step=float(row["first_us_per_step"]),
                second_us_per_step=float(row["second_us_per_step"]),
                share_of_step=min(both / step_time, 1.0) if step_time else None,
            )
        )
    for row in records(decomposed_chains(timeline, step_count)):
        facts.append(ChainFact(
            id=f"chain:r{rank.rank}:{row['pattern']}",
            sources=[file_source(show, rank, "kernels", "Step Id,Type,Start Time(us),Duration(us),Input Shapes")],
            rank=rank.rank, share_of_step=min(row["us_per_step"] / step_time, 1.0) if step_time else None, **row))
    overlap = matmul_overlap_share(timeline)
    if overlap is not None:
        facts.append(ContentionFact(id=f"contention:r{rank.rank}",
                                    sources=[file_source(show, rank, "kernels", "Type,Accelerator Core,Start Time(us),Duration(us)")],
                                    rank=rank.rank, matmul_overlap_share=overlap))
    if (rank.communication is not None and traits(rank.platform).collectives_carry_traffic  # MC2 candidates: the
            and any(mask.any() for mask in mc2_masks(timeline).values())):  # collective must carry the MatMul's data
        collectives = op_traffic(rank.communication.ops, rank.communication.traffic)
        source = [file_source(show, rank, "kernels", "Name,Type,Start Time(us),Duration(us),Input Shapes,Input Data Types"),
                  file_source(show, rank, "communication", "Communication Bandwidth Info: Transit Size(MB)")]
        pairs = mc2_pairs(timeline, collectives)
        if not pairs.empty:
            scope.out.mc2 = Mc2Pairs(pairs, step_count, step_time, source)
    return facts
