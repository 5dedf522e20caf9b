"""Planners reproduce the seeds' worked examples and follow their decision order."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor.planners.hccl import buffsize_mb, plan_buffsize
from advisor.planners.mc2 import plan_mc2, seed_comm_fit_us
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
    assert abs(plan.predicted_fused_us - 1262) / 1262 < 0.03  # measured fused time in the seed
    assert plan.serial_us == 1874


def test_mc2_cli_prints_the_seed_tiles():
    result = _cli("mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--dtype", "fp16", "--ranks", "8",
                  "--matmul-us", "803", "--comm-us", "1071")
    assert result.returncode == 0, result.stderr
    assert "tiles: {512, 896, 896, 896, 896}" in result.stdout
    data = json.loads(_cli("mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--matmul-us", "803", "--comm-us", "1071",
                           "--json").stdout)
    assert data["tiles"] == [512, 896, 896, 896, 896] and 0.25 < data["predicted_gain_ratio"] < 0.35


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
    ("hccl-buffsize", "--micro-batch", str(1 << 20), "--seq-len", str(1 << 30), "--hidden", str(1 << 20), "--dtype", "fp32",
     "--current", "1", "--communicators", "1024", "--json"),
    ("parallel", "--params-b", "1000000", "--memory-gb", "0.001", "--nodes", str(1 << 20), "--cards-per-node", "1024",
     "--activation-gb", str(1 << 20), "--json"),
])
def test_plans_at_the_ends_of_the_ranges_are_finite(args):
    result = _cli(*args)
    assert result.returncode == 0, result.stderr
    assert "nan" not in result.stdout.lower() and "inf" not in result.stdout.lower()
    assert json.loads(result.stdout).get("nodes_needed", 1) != -1  # 'use more nodes (about -1)' when none can fit
