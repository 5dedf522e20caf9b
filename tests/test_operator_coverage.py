"""Operator findings state how much of the step's compute the operator table records (issue 26, item 12 A).

``table_coverage`` (operator facts) is the operator table's device time per step over the step breakdown's compute
time; a finding that matched operator facts carries the lowest as ``operator_table_coverage``, says so in its
explanation below 0.8 and is low below 0.5.
"""

from __future__ import annotations

import pytest
from builders import Kernel, RankSpec, StepRow, build_rank

from advisor.diagnose import diagnose
from advisor.facts.operators import table_coverage
from advisor.findings import PARTIAL_TABLE, THIN_TABLE

SERVER_RANK0 = "tests/fixtures/ascend-more/server-rank0"


def _job(parent, computing: float) -> str:
    """Three steps of 10 ms whose kernel table holds 4 ms of compute: IndexPutV2 (2 ms, on the AI Core) and a MatMul."""
    kernels = [k for step in (5, 6, 7) for k in (
        Kernel(step, "IndexPutV2", "IndexPutV2", "AI_CORE", 2000.0),
        Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 2000.0),
        Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 500.0),
    )]
    rest = (10_000.0 - computing) / 2
    steps = [StepRow(step, computing, rest, rest, preparing=0.0) for step in (5, 6, 7)]
    build_rank(parent, RankSpec(steps=steps, kernels=kernels, kernel_spacing_us=10.0))
    return str(parent)


def _finding(report, rule_id):
    return next(f for f in report.findings if f.id == rule_id)


@pytest.mark.parametrize(("table", "compute", "expected"), [
    (4000.0, 4000.0, 1.0), (4000.0, 9000.0, 4 / 9), (5000.0, 4000.0, 1.0), (4000.0, None, None), (4000.0, 0.0, None)])
def test_table_coverage_is_the_share_of_compute_capped_at_one(table, compute, expected):
    assert table_coverage(table, compute) == (pytest.approx(expected) if expected is not None else None)


def test_a_table_that_records_the_whole_compute_changes_nothing(tmp_path):
    report = diagnose(_job(tmp_path, 4000.0))
    index_put = _finding(report, "affinity.index_put")
    assert index_put.operator_table_coverage == pytest.approx(1.0)
    assert index_put.severity == "high"  # 1.8 ms assumed of a 10 ms step: 18 %, high even counted half
    assert "operator table" not in index_put.explanation
    assert all(f.operator_table_coverage is None for f in report.findings
               if not any(fact.startswith("operator:") for fact in f.trace.facts))


def test_a_table_that_records_part_of_the_compute_says_so(tmp_path):
    report = diagnose(_job(tmp_path, 6000.0))
    index_put = _finding(report, "affinity.index_put")
    assert index_put.operator_table_coverage == pytest.approx(4 / 6) and THIN_TABLE < 4 / 6 < PARTIAL_TABLE
    assert index_put.severity == "high"  # a partial table says so, and keeps the severity
    assert "The operator table records only 67% of rank 0's device compute time per step" in index_put.explanation
    assert "at most low" not in index_put.explanation


def test_a_thin_table_makes_its_findings_low_and_says_why(tmp_path):
    report = diagnose(_job(tmp_path, 9000.0))
    index_put = _finding(report, "affinity.index_put")
    assert index_put.operator_table_coverage == pytest.approx(4 / 9)
    assert index_put.severity == "low" and index_put.estimated_gain_ratio >= 0.01  # medium by its share alone
    assert "records only 44% of rank 0's" in index_put.explanation and "at most low" in index_put.explanation
    zh = _finding(diagnose(_job(tmp_path, 9000.0), lang="zh"), "affinity.index_put")
    assert "算子表只记录了 rank 0 每迭代设备计算时间" in zh.explanation and "至多为低严重度" in zh.explanation


def test_the_real_server_capture_says_its_kernel_table_is_a_third_of_the_compute():
    """21 kernel rows (27.1 ms per step) against the 75.2 ms of Computing in step_trace_time.csv."""
    report = diagnose(SERVER_RANK0)
    (operators,) = {fact["table_coverage"] for fact in report.facts if fact["type"] == "operator"}
    assert operators == pytest.approx(0.361, abs=0.001)
    dominant = _finding(report, "operator.dominant_type")
    assert dominant.key == "FlashAttentionScore" and dominant.severity == "low"
    assert dominant.operator_table_coverage == pytest.approx(operators)
    assert "records only 36% of rank 0's device compute time" in dominant.explanation
    assert all(f.severity == "low" for f in report.findings if f.operator_table_coverage is not None)


def test_gpu_kernels_cover_the_compute():
    report = diagnose("examples/gpu-synthetic-2ranks")
    covered = [f for f in report.findings if f.operator_table_coverage is not None]
    assert covered and all(f.operator_table_coverage == pytest.approx(1.0) for f in covered)
    assert not [f for f in covered if "operator table" in f.explanation]
