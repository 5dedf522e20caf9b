"""MC2 tile planner: how to split a MatmulAllReduce along M so compute and communication overlap (the Huawei Cloud MC² best-practice article).

Procedure (the Huawei Cloud MC² best-practice article, with the choices of shared/knowledge/seed-formulas.md §A):

1. The bound is the longer of the measured un-fused MatMul and AllReduce times.
2. Short-block candidates are the smallest integers meeting three minimum sizes: a·K·N ≥ 4·2^30,
   b·(K·N/1024 + N) ≥ 6·2^20, c ≥ 3·128. Each is a lower bound, so the short block is max(a, b, c); the
   seed's text says min but its worked example uses the max (I-1). ``short`` overrides it.
3. The short block's times carry a contention factor (1.15 by default; the seed's "15" is a typo, I-2).
4. Communication-bound: the long block's MatMul time equals the short block's communication time;
   compute-bound (the seed only states the other case, so this mirrors it, I-9): the long block's
   communication time equals the short block's MatMul time. The long block is rounded down to 128 (I-6).
5. count = floor((M − m0) / m1); m1 = floor((M − m0) / count / 128)·128; m0 = M − count·m1. The short
   block is the head when communication-bound, the tail when compute-bound.

Cost models: MatMul time is proportional to m (from the measured full MatMul). Communication time is the
seed's fitted 8-rank AllReduce curve over the chunk size x in MiB (I-3), scaled so that the full-size
transfer times the factor equals the measured AllReduce (scale 1.0004 on the seed's own numbers, so the
example is reproduced). The predicted fused time simulates the two pipelines on those costs without the
factor (on the seed's example it predicts 1283 µs against the 1262 µs measured).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

ALIGN = 128
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "half": 2, "fp32": 4, "float": 4, "int8": 1}
CONTENTION = 1.15
_MIB = 1 << 20


def seed_comm_fit_us(x_mib: float) -> float:
    """The Huawei Cloud MC² best-practice article's fitted 8-rank AllReduce time (µs) for x MiB (N = 8192, fp16, its cluster)."""
    if x_mib < 8:
        return -0.9698202 * x_mib**2 + 27.0622573 * x_mib + 14.769
    return 13.58491263 * x_mib + 61.508333


@dataclass(frozen=True)
class Mc2Plan:
    """The tiling and what it is expected to give."""

    bound: str
    candidates: dict[str, int]
    short_initial: int
    short_comm_us: float
    short_mm_us: float
    long_exact: float
    tiles: list[int]
    serial_us: float
    predicted_fused_us: float
    notes: list[str] = field(default_factory=list)

    @property
    def predicted_gain_us(self) -> float:
        return self.serial_us - self.predicted_fused_us

    @property
    def predicted_gain_ratio(self) -> float:
        return self.predicted_gain_us / self.serial_us if self.serial_us else 0.0


def plan_mc2(
    m: int,
    k: int,
    n: int,
    *,
    dtype: str = "fp16",
    ranks: int = 8,
    matmul_us: float,
    comm_us: float | None = None,
    factor: float = CONTENTION,
    short: int | None = None,
) -> Mc2Plan:
    """Plan the tiles of an [M,K]×[K,N] MatmulAllReduce from measured un-fused times."""
    if min(m, k, n) <= 0 or matmul_us <= 0 or (comm_us is not None and comm_us <= 0):
        raise ValueError("M, K, N and the measured times must be positive")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; one of {', '.join(DTYPE_BYTES)}")
    size = DTYPE_BYTES[dtype]
    notes: list[str] = []
    if ranks != 8:
        notes.append(f"the communication curve was fitted on 8 ranks; with {ranks} only its shape is used, scaled to the measured AllReduce")

    def mib(rows: float) -> float:
        return rows * n * size / _MIB

    full_fit = seed_comm_fit_us(mib(m))
    if comm_us is None:
        comm_us = full_fit * factor
        notes.append("no measured AllReduce time: using the Huawei Cloud MC² best-practice article's fitted curve, which belongs to its own cluster")
    scale = comm_us / (full_fit * factor)

    def comm_cost(rows: float) -> float:
        return seed_comm_fit_us(mib(rows)) * scale

    def mm_cost(rows: float) -> float:
        return matmul_us * rows / m

    bound = "communication" if comm_us > matmul_us else "compute"
    candidates = {
        "a": math.ceil(4 * 2**30 / (k * n)),
        "b": math.ceil(6 * _MIB / (k * n / 1024 + n)),
        "c": 3 * ALIGN,
    }
    m0 = short if short is not None else max(candidates.values())
    if short is not None:
        notes.append(f"short block set to {short} by the caller")
    short_comm = comm_cost(m0) * factor
    short_mm = mm_cost(m0) * factor
    if bound == "communication":
        long_exact = short_comm * m / matmul_us  # CostMM⁻¹(t1) with the proportional MatMul model
    else:
        long_exact = _inverse(comm_cost, short_mm, m)
    m1 = max(int(long_exact // ALIGN) * ALIGN, ALIGN)
    if m0 >= m:
        return Mc2Plan(bound, candidates, m0, short_comm, short_mm, long_exact, [m], matmul_us + comm_us,
                       matmul_us + comm_us, [*notes, "M is not larger than the short block: no split"])
    count = (m - m0) // m1
    if count == 0:
        count = 1
        notes.append("the remainder is shorter than one long block: a single long block")
    m1 = ((m - m0) // count) // ALIGN * ALIGN
    m0 = m - count * m1
    if m0 > m1:
        notes.append(f"after integerising, the short block ({m0}) is longer than the long blocks ({m1}); re-balance by measurement")
    tiles = [m0, *[m1] * count] if bound == "communication" else [*[m1] * count, m0]
    fused = _pipeline(tiles, mm_cost, comm_cost)
    return Mc2Plan(bound, candidates, max(candidates.values()) if short is None else short, short_comm, short_mm,
                   long_exact, tiles, matmul_us + comm_us, fused, notes)


def _inverse(cost, target: float, upper: int) -> float:
    """The m in [1, upper] with cost(m) = target (cost increasing), by bisection; ``upper`` if out of range."""
    low, high = 1.0, float(upper)
    if cost(high) <= target:
        return high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if cost(middle) < target else (low, middle)
    return (low + high) / 2


def _pipeline(tiles: list[int], mm_cost, comm_cost) -> float:
    """Finish time of MatMul chunks back to back, each chunk's AllReduce after its MatMul and the previous AllReduce."""
    compute_done = comm_done = 0.0
    for rows in tiles:
        compute_done += mm_cost(rows)
        comm_done = max(comm_done, compute_done) + comm_cost(rows)
    return comm_done
