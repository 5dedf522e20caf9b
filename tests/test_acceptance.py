"""Issue #2 acceptance: the diagnosis of the real and sample profiles, checked against their own files."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import REAL, SAMPLE_CLUSTER, SAMPLE_SINGLE

import advisor
from advisor.render import render_markdown

CASES = {
    "real-rank0": (REAL / "rank0_ascend_pt", [REAL / "rank0_ascend_pt"]),
    "real-2ranks": (REAL, [REAL / "rank0_ascend_pt", REAL / "rank1_ascend_pt"]),
    "sample-single": (SAMPLE_SINGLE, [SAMPLE_SINGLE]),
    "sample-cluster": (SAMPLE_CLUSTER, sorted(SAMPLE_CLUSTER.glob("*_ascend_pt"))),
}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(handle)]


@pytest.mark.parametrize("case", CASES)
def test_per_rank_breakdown_equals_step_trace_time(case):
    path, rank_dirs = CASES[case]
    report = advisor.diagnose(path)
    assert [r.rank for r in report.summary.per_rank] == list(range(len(rank_dirs)))
    for summary, rank_dir in zip(report.summary.per_rank, rank_dirs):
        rows = _rows(rank_dir / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
        mean = {k: sum(float(r.get(k) or 0.0) for r in rows) / len(rows)
                for k in ("Computing", "Communication(Not Overlapped)", "Free", "Stage", "Bubble", "Preparing")}
        assert summary.compute_us == pytest.approx(mean["Computing"], rel=1e-3)
        assert summary.comm_not_overlapped_us == pytest.approx(mean["Communication(Not Overlapped)"], rel=1e-3)
        # the host's Preparing before the step's first device task is idle time of the step, as a GPU step's is
        assert summary.free_us == pytest.approx(mean["Free"] + mean["Preparing"], rel=1e-3)
        assert summary.step_time_us == pytest.approx(mean["Stage"] + mean["Bubble"] + mean["Preparing"], rel=1e-3)
        assert summary.steps == len(rows)
        assert summary.bottleneck == "communication"
    assert report.summary.bottleneck == "communication"
    # communication.json says what kind of communication problem it is: in the real job, 1 or 2 of the
    # communicator's 8 members are profiled and sit in the collectives together, waiting for the others
    expected = "cluster.straggler_outside_capture" if case.startswith("real") else "communication.transfer_bound"
    assert report.findings[0].id == expected
    assert "communication.exposed_collectives" not in {f.id for f in report.findings}


@pytest.mark.parametrize("case", CASES)
def test_top_operator_types_and_shares_come_from_kernel_details(case):
    path, rank_dirs = CASES[case]
    report = advisor.diagnose(path)
    shares: dict[tuple[str, str], list[float]] = defaultdict(list)
    for rank_dir in rank_dirs:
        rows = [r for r in _rows(rank_dir / "ASCEND_PROFILER_OUTPUT/kernel_details.csv")
                if r["Accelerator Core"] not in ("HCCL", "COMMUNICATION") and r["Step Id"]]
        total = sum(float(r["Duration(us)"]) for r in rows)
        per_type: dict[tuple[str, str], float] = defaultdict(float)
        for r in rows:
            per_type[(r["Type"], r["Accelerator Core"])] += float(r["Duration(us)"])
        for key, value in per_type.items():
            shares[key].append(value / total)
    expected = sorted(shares, key=lambda k: -sum(shares[k]) / len(shares[k]))[: len(report.summary.top_operators)]
    got = [(op.op_type, op.accelerator_core) for op in report.summary.top_operators]
    assert got[:3] == expected[:3]
    markdown = render_markdown(report)
    for op in report.summary.top_operators[:3]:
        assert op.share_of_compute == pytest.approx(sum(shares[(op.op_type, op.accelerator_core)]) / len(rank_dirs), rel=1e-6)
        assert op.op_type in markdown and f"{op.share_of_compute:.1%}" in markdown


def test_the_synthetic_samples_dominant_operator_is_flagged():
    report = advisor.diagnose(SAMPLE_CLUSTER)
    flagged = [f for f in report.findings if f.id == "operator.dominant_type"]
    assert [f.key for f in flagged] == ["FlashAttentionScore"] and flagged[0].ranks == [0, 1]


def test_the_real_jobs_operators_are_too_spread_to_flag():
    assert not [f for f in advisor.diagnose(REAL).findings if f.id == "operator.dominant_type"]
