"""Planners reproduce the seeds' worked examples and follow their decision order."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from advisor.planners.hccl import buffsize_mb, plan_buffsize
from advisor.planners.mc2 import MANY_TILES, plan_mc2, seed_comm_fit_us
from advisor.planners.parallel import Layout, per_card_gb, plan_parallel


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", "plan", *args], capture_output=True, text=True, check=False)


# ---- MC2 (seed 001) ----


def test_mc2_reproduces_the_seed_example():
    plan = plan_mc2(4096, 3072, 8192, dtype="fp16", ranks=8, matmul_us=803, comm_us=1071)
    assert plan.bound == "communication"
    assert plan.candidates == {"a": 171, "b": 192, "c": 384} and plan.short_initial == 384
    assert round(plan.short_comm_us) == 164  # 143 µs × 1.15 in the seed
    assert int(plan.long_exact // 128) * 128 == 768  # the seed's first long block before integerising
    assert plan.tiles == [512, 896, 896, 896, 896] and sum(plan.tiles) == 4096
    # every block × 1.15 on the seed's curve; the seed measured 1262 µs (1283 µs before came from the factor cancelling)
    assert round(plan.predicted_fused_us) == 1475
    assert plan.serial_us == 1874


def test_mc2_cli_prints_the_seed_tiles():
    result = _cli("mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--dtype", "fp16", "--ranks", "8",
                  "--matmul-us", "803", "--comm-us", "1071")
    assert result.returncode == 0, result.stderr
    assert "tiles: {512, 896, 896, 896, 896}" in result.stdout
    data = json.loads(_cli("mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--matmul-us", "803", "--comm-us", "1071",
                           "--json").stdout)
    assert data["tiles"] == [512, 896, 896, 896, 896] and 0.2 < data["predicted_gain_ratio"] < 0.25
    assert data["tiling"] == {"rankDim": 8, "tileM": 512, "tileNum": 1, "tailM": 896, "tailNum": 4}
    assert data["factor"] == 1.15 and data["warnings"] == [] and "min(a, b, c) (171)" in data["notes"][0]


def test_mc2_seed_fit_values():
    assert round(seed_comm_fit_us(6), 2) == 142.23 and round(seed_comm_fit_us(14), 2) == 251.70
    assert abs(seed_comm_fit_us(8) - 170.19) < 0.01


def test_mc2_compute_bound_puts_the_short_block_last():
    plan = plan_mc2(4096, 12288, 8192, matmul_us=2400, comm_us=1071)
    assert plan.bound == "compute" and plan.tiles[-1] < plan.tiles[0] and sum(plan.tiles) == 4096
    assert all(t % 128 == 0 for t in plan.tiles[:-1])


def test_mc2_short_override_and_small_m():
    assert plan_mc2(4096, 3072, 8192, matmul_us=803, comm_us=1071, short=256).tiles[0] <= 896
    tiny = plan_mc2(256, 3072, 8192, matmul_us=50, comm_us=80)
    assert tiny.tiles == [256] and "no split" in tiny.notes[-1]


SEED = {"m": 4096, "k": 3072, "n": 8192, "matmul_us": 803, "comm_us": 1071}
SEED_ARGS = ("--m", "4096", "--k", "3072", "--n", "8192", "--matmul-us", "803", "--comm-us", "1071")


def test_mc2_factor_scales_t0_and_t1_and_the_predicted_time():
    plans = {f: plan_mc2(**SEED, factor=f) for f in (1.0, 1.15, 1.5)}
    for f, plan in plans.items():  # the seed: t0 = CostMM(m0) × factor, t1 = CostComm(m0) × factor
        assert plan.short_mm_us == pytest.approx(803 * 384 / 4096 * f)
        assert plan.short_comm_us == pytest.approx(seed_comm_fit_us(6) * f)  # 142.23 µs × f on the seed's example
    assert plans[1.15].tiles == plans[1.0].tiles == [512, 896, 896, 896, 896]
    assert plans[1.5].tiles == [640, 1152, 1152, 1152]
    assert [round(p.predicted_fused_us) for p in plans.values()] == [1283, 1475, 1904]  # was 1454, 1283, 1048
    same_tiles = [plan_mc2(**SEED, factor=1 + i / 100) for i in range(41)]  # {512, 896×4} from 1.00 to 1.40
    assert {tuple(p.tiles) for p in same_tiles} == {(512, 896, 896, 896, 896)}
    assert all(p.predicted_fused_us == pytest.approx(p.factor * 1282.8, abs=0.1) for p in same_tiles)
    lines = {f: _cli("mc2", *SEED_ARGS, "--factor", str(f)).stdout for f in (1.0, 1.15, 1.5)}
    assert "t1 = CostComm(m0) × 1 = 142.2 µs" in lines[1.0] and "t1 = CostComm(m0) × 1.15 = 163.6 µs" in lines[1.15]
    assert "t1 = CostComm(m0) × 1.5 = 213.3 µs" in lines[1.5] and "predicted fused time: 1,904 µs" in lines[1.5]


def test_mc2_keeps_the_short_block_shorter_than_the_long_ones():
    plan = plan_mc2(**SEED, factor=1.0)  # the seed's step 4 alone gives {896, 640×5}
    assert plan.tiles == [512, 896, 896, 896, 896] and int(plan.long_exact // 128) * 128 == 640
    assert "5 long blocks of 640 would leave a longer short block (896): one long block fewer" in plan.notes


def test_mc2_says_the_short_block_is_the_largest_candidate():
    result = _cli("mc2", *SEED_ARGS)
    assert "short-block candidates: a=171, b=192, c=384 → m0 = max(a, b, c) = 384" in result.stdout
    assert ("note: the short block is the largest candidate, 384: the article writes m0 = min(a, b, c) (171), "
            "but its worked example needs max(a, b, c)") in result.stdout
    overridden = _cli("mc2", *SEED_ARGS, "--short", "256").stdout
    assert "→ m0 = --short = 256" in overridden and "min(a, b, c)" not in overridden


def test_mc2_maps_the_tiles_onto_the_tiling_data():
    assert plan_mc2(**SEED, ranks=4).tiling == {"rankDim": 4, "tileM": 512, "tileNum": 1, "tailM": 896, "tailNum": 4}
    compute_bound = plan_mc2(4096, 12288, 8192, matmul_us=2400, comm_us=1071)  # the short block runs last
    assert compute_bound.tiles == [896, 896, 896, 896, 512]
    assert compute_bound.tiling == {"rankDim": 8, "tileM": 896, "tileNum": 4, "tailM": 512, "tailNum": 1}
    assert plan_mc2(256, 3072, 8192, matmul_us=50, comm_us=80).tiling == {
        "rankDim": 8, "tileM": 256, "tileNum": 1, "tailM": 0, "tailNum": 0}
    assert plan_mc2(**SEED, short=128).tiling == {"rankDim": 8, "tileM": 256, "tileNum": 16, "tailM": 0, "tailNum": 0}
    printed = _cli("mc2", *SEED_ARGS).stdout
    assert "TilingData: rankDim = 8, tileM = 512, tileNum = 1, tailM = 896, tailNum = 4" in printed


def test_mc2_uses_measured_points_instead_of_the_curves():
    fit = [(rows, seed_comm_fit_us(rows * 8192 * 2 / 2**20)) for rows in (256, 512, 768, 1024, 2048)]  # seed's sweep
    plan = plan_mc2(**SEED, comm_points=fit)
    assert plan.short_comm_us == pytest.approx((107.50 + 170.19) / 2 * 1.15, abs=0.01)  # 384 rows: halfway, linear
    assert plan.tiles == [512, 896, 896, 896, 896]
    assert plan.comm_curve.startswith("measured at 256, 512, 768, 1024, 2048 rows")
    slower = plan_mc2(**SEED, comm_points=[(rows, 2 * us) for rows, us in fit])
    assert slower.short_comm_us == pytest.approx(2 * plan.short_comm_us) and slower.tiles != plan.tiles
    matmul = plan_mc2(**SEED, matmul_points=[(256, 60), (512, 110), (1024, 210), (2048, 410)])
    assert matmul.short_mm_us == pytest.approx(85 * 1.15)  # 60 µs + half of the 50 µs to 512 rows
    assert matmul.long_exact == pytest.approx(512 + (163.56 - 110) / 100 * 512, abs=0.1)  # CostMM(m1) = t1, points
    beyond = plan_mc2(4096, 3072, 8192, matmul_us=803, comm_points=[(512, 170), (1024, 279)])
    assert beyond.serial_us == pytest.approx(803 + 279 + 109 / 512 * 3072)  # the last segment continued to M
    assert beyond.short_comm_us == pytest.approx(170 * 384 / 512 * 1.15)  # through 0 below the first point
    assert "read off the measured points" in beyond.notes[0]
    result = _cli("mc2", *SEED_ARGS, *[a for rows, us in fit for a in ("--comm-point", f"{rows}={us}")], "--json")
    assert json.loads(result.stdout)["short_comm_us"] == pytest.approx(plan.short_comm_us)
    assert "CostComm: measured at 512, 1024 rows" in _cli("mc2", *SEED_ARGS, "--comm-point", "512=170",
                                                             "--comm-point", "1024=279").stdout


@pytest.mark.parametrize(("points", "message"), [
    (("--comm-point", "512"), "--comm-point: '512' is not ROWS=US"),
    (("--comm-point", "512:170"), "'512:170' is not ROWS=US"),
    (("--matmul-point", "5e2=3"), "--matmul-point: '5e2=3' is not ROWS=US"),
    (("--comm-point", "0=3"), "'0=3' is not ROWS=US"),
    (("--comm-point", "512=nan"), "'512=nan' is not ROWS=US"),
    (("--comm-point", "512=inf"), "'512=inf' is not ROWS=US"),
    (("--comm-point", "512=-1"), "'512=-1' is not ROWS=US"),
    (("--comm-point", "9999999=1"), "'9999999=1' is not ROWS=US"),
    (("--comm-point", "512=170", "--comm-point", "512=171"), "two measured AllReduce times for 512 rows"),
    (("--matmul-point", "512=170", "--matmul-point", "1024=160"),
     "the measured MatMul time falls from 170 µs at 512 rows to 160 µs at 1024 rows"),
])
def test_mc2_rejects_bad_points_in_one_line(points, message):
    result = _cli("mc2", *SEED_ARGS, *points)
    assert result.returncode == 2 and message in result.stderr and result.stdout == "", result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_mc2_warns_when_blocks_get_many_or_small():
    assert plan_mc2(**SEED).warnings == []
    many = plan_mc2(65536, 3072, 8192, matmul_us=803 * 16, comm_us=1071 * 16)
    assert len(many.tiles) == 64 > MANY_TILES
    assert many.tiling == {"rankDim": 8, "tileM": 1024, "tileNum": 64, "tailM": 0, "tailNum": 0}
    assert many.warnings == ["64 blocks, more than 8: each block adds scheduling overhead and many blocks inflate the "
                             "fused time (the article's split inflation); measure, and try fewer, longer blocks"]
    small = _cli("mc2", *SEED_ARGS, "--short", "128").stdout
    assert "warning: 16 blocks, more than 8" in small
    assert "warning: blocks of 256 rows are shorter than the smallest short block (384)" in small


def test_mc2_rejects_bad_input():
    with pytest.raises(ValueError):
        plan_mc2(4096, 0, 8192, matmul_us=803)
    assert _cli("mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--matmul-us", "-1").returncode == 2


# ---- HCCL_BUFFSIZE (seed 003) ----


@pytest.mark.parametrize(
    ("b", "s", "h", "expected"),
    [(1, 4096, 4096, 32), (1, 4096, 8192, 64), (2, 4096, 8192, 128), (4, 8192, 8192, 512), (1, 2048, 5120, 20)],
)
def test_hccl_buffsize_examples(b, s, h, expected):
    assert buffsize_mb(b, s, h, 2) == expected


def test_hccl_buffsize_advice_raises_lowers_or_keeps():
    assert plan_buffsize(4, 8192, 8192, 2).action == "raise"
    lower = plan_buffsize(1, 2048, 5120, 2, current_mb=200, communicators=3)
    assert lower.action == "lower" and lower.memory_change_mb == 2 * 180 * 3
    assert plan_buffsize(2, 4096, 8192, 2).action == "keep"
    result = _cli("hccl-buffsize", "--micro-batch", "4", "--seq-len", "8192", "--hidden", "8192", "--dtype", "bf16")
    assert result.returncode == 0 and result.stdout.startswith("HCCL_BUFFSIZE=512")


# ---- parallel layout (seed 003 §1) ----


def test_parallel_order_of_decisions():
    assert plan_parallel(1, 64, 8, 4).layout == Layout(1, 1, 32)  # fits one card: pure DP
    assert plan_parallel(7, 64, 8, 4).layout == Layout(2, 1, 16)  # smallest TP that fits, DP over the rest
    big = plan_parallel(70, 64, 8, 4)
    assert big.layout == Layout(8, 3, 1)  # TP stops at the node, then the fewest PP stages
    assert big.layout.tp <= 8


def test_parallel_recomputation_and_not_fitting():
    activation_bound = plan_parallel(13, 64, 8, 1, activation_gb=300)
    assert activation_bound.layout.recompute and activation_bound.fits
    huge = plan_parallel(175, 64, 8, 4)
    assert not huge.fits and huge.nodes_needed == 7 and "more nodes" in huge.reasons[-1]


def test_parallel_memory_model():
    assert per_card_gb(10, Layout(1, 1, 1)) == 160
    assert per_card_gb(10, Layout(2, 1, 4, zero1=True)) == 10 * (4 + 3) / 2
    result = _cli("parallel", "--params-b", "70", "--memory-gb", "64", "--nodes", "4")
    assert result.returncode == 0 and result.stdout.startswith("TP=8 PP=3 DP=1")


@pytest.mark.parametrize(("args", "message"), [
    (("mc2", "--m", "99999999999999999999", "--k", "3072", "--n", "8192", "--matmul-us", "803"), "'--m'"),  # MemoryError
    (("mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--matmul-us", "nan"), "'nan' is not a finite number"),
    (("mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--matmul-us", "inf"), "'inf' is not a finite number"),
    (("mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--matmul-us", "803", "--factor", "1e308"),
     "1e+308 is not in the range 1 to 10"),  # was 'cannot convert float NaN to integer'
    (("hccl-buffsize", "--micro-batch", "999999999999", "--seq-len", "8192", "--hidden", "8192"), "'--micro-batch'"),
    (("parallel", "--params-b", "1e308", "--memory-gb", "64"), "1e+308 is not in the range 1e-06 to 1,000,000"),  # was exit 70
    (("parallel", "--params-b", "70", "--memory-gb", "inf"), "'inf' is not a finite number"),
    (("parallel", "--params-b", "70", "--memory-gb", "64", "--nodes", "999999999999"), "'--nodes'"),
])
def test_plan_options_have_finite_ranges(args, message):
    result = _cli(*args)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("args", [
    ("mc2", "--m", str(1 << 20), "--k", str(1 << 20), "--n", str(1 << 20), "--matmul-us", "1e9", "--comm-us", "1e9",
     "--factor", "10", "--ranks", str(1 << 20), "--json"),
    ("mc2", "--m", "1", "--k", "1", "--n", "1", "--matmul-us", "0.001", "--json"),
    ("mc2", "--m", str(1 << 20), "--k", "1", "--n", "1", "--matmul-us", "0.001", "--factor", "10",
     "--comm-point", "1=1e9", "--matmul-point", f"{1 << 20}=0.001", "--json"),
    ("mc2", "--m", str(1 << 20), "--k", str(1 << 20), "--n", str(1 << 20), "--matmul-us", "1e9", "--factor", "10",
     "--comm-point", "1=0.001", "--comm-point", f"{1 << 20}=1e9", "--matmul-point", "1=1e9", "--json"),
    ("hccl-buffsize", "--micro-batch", str(1 << 20), "--seq-len", str(1 << 30), "--hidden", str(1 << 20), "--dtype", "fp32",
     "--current", "1", "--communicators", "1024", "--json"),
    ("parallel", "--params-b", "1000000", "--memory-gb", "0.001", "--nodes", str(1 << 20), "--cards-per-node", "1024",
     "--activation-gb", str(1 << 20), "--json"),
])
def test_plans_at_the_ends_of_the_ranges_are_finite(args):
    result = _cli(*args)
    assert result.returncode == 0, result.stderr
    values = re.sub(r'"(?:[^"\\]|\\.)*"', '""', result.stdout).lower()  # without the texts ('inflate')
    assert "nan" not in values and "inf" not in values
    assert args[0] != "mc2" or "null" not in values  # orjson writes NaN as null
    assert json.loads(result.stdout).get("nodes_needed", 1) != -1  # 'use more nodes (about -1)' when none can fit


@pytest.mark.parametrize(("params_b", "nodes"), [(70, 4), (70, 2), (7, 2), (13, 1), (175, 8), (30, 3)])
def test_the_data_parallel_reason_matches_the_layout(params_b, nodes):
    """TP=8 PP=3 DP=1 on 32 cards said 'data parallelism over the remaining cards' while using 24 of them."""
    plan = plan_parallel(params_b, 64, 8, nodes)
    layout, cards = plan.layout, 8 * nodes
    (reason,) = [r for r in plan.reasons if r.startswith(f"DP={layout.dp}:")] or [""]
    if reason and layout.tp * layout.pp * layout.dp < cards:
        assert f"use {layout.tp * layout.pp * layout.dp} of the {cards} cards" in reason
    assert "remaining cards" not in reason or layout.tp * layout.pp * layout.dp == cards
