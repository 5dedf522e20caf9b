"""MC2 tile planner: how to split a MatmulAllReduce along M so compute and communication overlap (the Huawei Cloud MC² best-practice article).

Procedure (the Huawei Cloud MC² best-practice article, with the choices of shared/knowledge/seed-formulas.md §A):

1. The bound is the longer of the measured un-fused MatMul and AllReduce times.
2. Short-block candidates are the smallest integers meeting three minimum sizes: a·K·N ≥ 4·2^30,
   b·(K·N/1024 + N) ≥ 6·2^20, c ≥ 3·128. Each is a lower bound, so the short block is max(a, b, c); the
   seed's text says min but its worked example uses the max (I-1), and the plan says so. ``short`` overrides it.
3. t0 = CostMM(m0)·factor, t1 = CostComm(m0)·factor: contention for memory bandwidth while the two run in
   parallel (1.15 by default; the seed's "15" is a typo, I-2).
4. Communication-bound: the long block's MatMul time equals t1, CostMM(m1) = t1; compute-bound (the seed only
   states the other case, so this mirrors it, I-9): CostComm(m1) = t0. m1 is rounded down to 128 (I-6).
5. count = floor((M − m0) / m1); m1 = floor((M − m0) / count / 128)·128; m0 = M − count·m1. The short
   block is the head when communication-bound, the tail when compute-bound. Where m0 would come out longer
   than m1 (no longer AAAB or BAAA), one long block fewer (a guard the seed lacks; at factor 1.0 its example
   would give {896, 640×5}).

Cost curves: measured points per block size (the seed's sweep, m = 256 … 2048) when given, linear between the
points and through (0, 0), the last segment continued past the last point. Otherwise MatMul time is proportional
to m (the line through the measured full MatMul), and AllReduce time is the seed's fitted 8-rank curve over the
chunk size x in MiB (I-3), scaled to the measured AllReduce with the gap the seed's own numbers show: its whole
64 MiB AllReduce measured 1071 µs where the curve gives 931 µs (I-5), so on the seed's example the curve is used
as is. The predicted fused time simulates the two pipelines with every block's times × factor (1475 µs on the
seed's example at 1.15, against 1262 µs measured: the factor is the seed's margin, not a measurement). For given
tiles it is proportional to the factor; where a larger factor changes the tiles, the new ones may be predicted
slightly faster (1.41 → 1.42 on the seed's example: {512, 896×4} at 1809 µs → {640, 1152×3} at 1803 µs).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby, pairwise

ALIGN = 128
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "half": 2, "fp32": 4, "float": 4, "int8": 1}
CONTENTION = 1.15
MANY_TILES = 8  # more blocks than this gets a warning (the seed names no number; its example has 5)
_MIB = 1 << 20

Point = tuple[int, float]  # a measured block: rows along M, time in µs
Cost = Callable[[float], float]


def seed_comm_fit_us(x_mib: float) -> float:
    """The Huawei Cloud MC² best-practice article's fitted 8-rank AllReduce time (µs) for x MiB (N = 8192, fp16, its cluster)."""
    if x_mib < 8:
        return -0.9698202 * x_mib**2 + 27.0622573 * x_mib + 14.769
    return 13.58491263 * x_mib + 61.508333


SEED_GAP = 1071 / seed_comm_fit_us(64)  # 1.1504: the seed's measured whole AllReduce over its curve there


@dataclass(frozen=True)
class Mc2Plan:
    """The tiling and what it is expected to give."""

    bound: str
    candidates: dict[str, int]
    short_initial: int
    factor: float
    matmul_curve: str
    comm_curve: str
    short_comm_us: float  # t1
    short_mm_us: float  # t0
    long_exact: float
    tiles: list[int]
    ranks: int
    serial_us: float
    predicted_fused_us: float
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def predicted_gain_us(self) -> float:
        return self.serial_us - self.predicted_fused_us

    @property
    def predicted_gain_ratio(self) -> float:
        return self.predicted_gain_us / self.serial_us if self.serial_us else 0.0

    @property
    def tiling(self) -> dict[str, int]:
        """The seed's MatmulAllReduce TilingData fields: tileNum blocks of tileM rows first, then tailNum of tailM."""
        runs = [(rows, len(list(same))) for rows, same in groupby(self.tiles)]
        (tile_m, tile_num), (tail_m, tail_num) = [*runs, (0, 0)][:2]
        return {"rankDim": self.ranks, "tileM": tile_m, "tileNum": tile_num, "tailM": tail_m, "tailNum": tail_num}


def parse_points(texts: Iterable[str], where: str, *, max_rows: int, max_us: float) -> list[Point]:
    """``ROWS=US`` texts (a block's rows along M, its measured time in µs) as points; ValueError names ``where``."""
    points = []
    for text in texts:
        rows, equals, us = text.partition("=")
        try:
            point = int(rows), float(us)
        except ValueError:
            point = (0, 0.0)
        if not equals or not (1 <= point[0] <= max_rows and 0 < point[1] <= max_us):
            raise ValueError(f"{where}: {text!r} is not ROWS=US, a block's rows (a whole number from 1 to "
                             f"{max_rows:,}) and its measured time (µs, above 0 and at most {max_us:,.0f}), e.g. 512=170.2")
        points.append(point)
    return points


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
    matmul_points: Sequence[Point] = (),
    comm_points: Sequence[Point] = (),
) -> Mc2Plan:
    """Plan the tiles of an [M,K]×[K,N] MatmulAllReduce from measured un-fused times (and per-block times, if any)."""
    points = [*matmul_points, *comm_points]
    times = [matmul_us, *([] if comm_us is None else [comm_us]), *(us for _, us in points)]
    if min(m, k, n, *(rows for rows, _ in points)) <= 0 or min(times) <= 0:
        raise ValueError("M, K, N and the measured times must be positive")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; one of {', '.join(DTYPE_BYTES)}")
    size = DTYPE_BYTES[dtype]
    notes: list[str] = []

    def mib(rows: float) -> float:
        return rows * n * size / _MIB

    mm_cost = _line(_checked(matmul_points, "MatMul") or [(m, matmul_us)])
    matmul_curve = (_described(matmul_points) if matmul_points
                    else f"proportional to the rows, through the measured {matmul_us:,.0f} µs")
    if comm_points:
        comm_cost = _line(_checked(comm_points, "AllReduce"))
        comm_curve = _described(comm_points)
        if comm_us is None:
            comm_us = comm_cost(m)
            notes.append(f"no measured AllReduce of the whole M: {comm_us:,.0f} µs read off the measured points")
    else:
        full_fit = seed_comm_fit_us(mib(m)) * SEED_GAP
        if comm_us is None:
            comm_us = full_fit
            notes.append("no measured AllReduce time: using the Huawei Cloud MC² best-practice article's fitted curve, "
                         "which belongs to its own cluster")
        if ranks != 8:
            notes.append(f"the communication curve was fitted on 8 ranks; with {ranks} only its shape is used, "
                         "scaled to the measured AllReduce")
        scale = comm_us / full_fit

        def comm_cost(rows: float) -> float:
            return seed_comm_fit_us(mib(rows)) * scale

        comm_curve = (f"the Huawei Cloud MC² article's fitted 8-rank curve × {scale:.3f}, which puts the measured "
                      f"{comm_us:,.0f} µs {SEED_GAP:.4f}× above the curve at M, as the article's 1071 µs was above its fitted 931 µs")

    bound = "communication" if comm_us > matmul_us else "compute"
    candidates = {
        "a": math.ceil(4 * 2**30 / (k * n)),
        "b": math.ceil(6 * _MIB / (k * n / 1024 + n)),
        "c": 3 * ALIGN,
    }
    smallest = max(candidates.values())
    initial = m0 = smallest if short is None else short
    if short is not None:
        notes.append(f"short block set to {short} by the caller")
    elif min(candidates.values()) != smallest:
        notes.append(f"the short block is the largest candidate, {smallest}: the article writes m0 = min(a, b, c) "
                     f"({min(candidates.values())}), but its worked example needs max(a, b, c), "
                     "and each is a minimum size")
    t0, t1 = mm_cost(m0) * factor, comm_cost(m0) * factor
    long_exact = _inverse(mm_cost, t1, m) if bound == "communication" else _inverse(comm_cost, t0, m)

    def planned(tiles: list[int], fused_us: float, extra: list[str]) -> Mc2Plan:
        return Mc2Plan(bound, candidates, initial, factor, matmul_curve, comm_curve, t1, t0, long_exact, tiles, ranks,
                       matmul_us + comm_us, fused_us, _inflation(tiles, smallest), [*notes, *extra])

    if m0 >= m:
        return planned([m], matmul_us + comm_us, ["M is not larger than the short block: no split"])
    m1 = max(int(long_exact // ALIGN) * ALIGN, ALIGN)
    count = (m - m0) // m1
    if count == 0:
        count = 1
        notes.append("the remainder is shorter than one long block: a single long block")
    rest = m - m0
    m1 = rest // count // ALIGN * ALIGN
    while m - count * m1 > m1 and count > 1:  # the short block must stay the short one (AAAB or BAAA)
        notes.append(f"{count} long blocks of {m1} would leave a longer short block ({m - count * m1}): "
                     "one long block fewer")
        count -= 1
        m1 = rest // count // ALIGN * ALIGN
    m0 = m - count * m1
    if m0 > m1:
        notes.append(f"after integerising, the short block ({m0}) is longer than the long blocks ({m1}); re-balance by measurement")
    tiles = [m0, *[m1] * count] if bound == "communication" else [*[m1] * count, m0]
    return planned(tiles, factor * _pipeline(tiles, mm_cost, comm_cost), [])


def _checked(points: Sequence[Point], what: str) -> list[Point]:
    """The points by rows; ValueError when two share their rows or a longer block is faster."""
    ordered = sorted(points)
    for (rows, us), (next_rows, next_us) in pairwise(ordered):
        if rows == next_rows:
            raise ValueError(f"two measured {what} times for {rows} rows")
        if next_us < us:
            raise ValueError(f"the measured {what} time falls from {us:g} µs at {rows} rows to {next_us:g} µs at "
                             f"{next_rows} rows: a longer block cannot be faster; measure again")
    return ordered


def _described(points: Sequence[Point]) -> str:
    rows = sorted(r for r, _ in points)
    return f"measured at {', '.join(map(str, rows))} rows, linear between them"


def _line(points: Sequence[Point]) -> Cost:
    """Time of an m-row block, linear through (0, 0) and the sorted points; past the last one the last segment goes on."""
    rows, times = zip((0, 0.0), *points)

    def cost(m: float) -> float:
        i = min(bisect_left(rows, m, 1), len(rows) - 1)
        return times[i - 1] + (times[i] - times[i - 1]) * (m - rows[i - 1]) / (rows[i] - rows[i - 1])
    return cost


def _inflation(tiles: list[int], smallest: int) -> list[str]:
    """The seed's split inflation: warnings for many blocks, or blocks below the smallest short block."""
    if len(tiles) < 2:
        return []
    short = sorted({t for t in tiles if t < smallest})
    return ([f"{len(tiles)} blocks, more than {MANY_TILES}: each block adds scheduling overhead and many blocks "
             "inflate the fused time (the article's split inflation); measure, and try fewer, longer blocks"]
            if len(tiles) > MANY_TILES else []) + (
            [f"blocks of {', '.join(map(str, short))} rows are shorter than the smallest short block ({smallest}): "
             "small blocks compute and communicate less efficiently (the article's split inflation); measure"]
            if short else [])


def _inverse(cost: Cost, target: float, upper: int) -> float:
    """The m in [1, upper] with cost(m) = target (cost increasing), by bisection; ``upper`` if out of range."""
    low, high = 1.0, float(upper)
    if cost(high) <= target:
        return high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if cost(middle) < target else (low, middle)
    return (low + high) / 2


def _pipeline(tiles: list[int], mm_cost: Cost, comm_cost: Cost) -> float:
    """Finish time of MatMul chunks back to back, each chunk's AllReduce after its MatMul and the previous AllReduce."""
    compute_done = comm_done = 0.0
    for rows in tiles:
        compute_done += mm_cost(rows)
        comm_done = max(comm_done, compute_done) + comm_cost(rows)
    return comm_done
