"""One time budget per step (issue #15): gains are charged once, to one bucket, measured before assumed."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import (
    EVERY_CATEGORY_CONTEXT,
    EVERY_CATEGORY_ENV,
    Kernel,
    RankSpec,
    StepRow,
    build_every_category,
    build_pp2_job,
    build_rank,
    write_gpu_job,
)
from conftest import FIXTURES, REAL
from invariants import assert_budget_holds, assert_json_budget_holds, assert_ranking_is_honest
from test_gpu import INJECTED

from advisor.budget import Budget, ancestors, bucket_problem
from advisor.diagnose import analyse, build_report, default_rulebook
from advisor.usercontext import build_context

ROOT = Path(__file__).parent.parent


def test_buckets_nest_and_a_charge_keeps_what_is_left():
    assert ancestors("compute/operator:a/b") == ["compute/operator:a/b", "compute", "step"]
    assert ancestors("step") == ["step"]
    budget = Budget({"step": 100.0, "idle": 30.0, "compute": 60.0, "compute/operator:X": 50.0})
    assert budget.charge("idle/dataloader", 25.0) == 25.0  # a part of idle without a size: idle caps it
    assert budget.charge("idle", 20.0) == 5.0  # the generic idle finding gets the remainder
    assert budget.charge("compute/operator:X", 80.0) == 50.0  # the operator's own time
    assert budget.charge("compute/operator:X", 10.0) == 0.0  # a second finding on the same operator
    assert budget.charge("compute", 40.0) == 10.0
    assert budget.remaining("step") == 10.0 and budget.charge("communication", 15.0) == 10.0
    assert budget.charge("communication/wait", 1.0) == 0.0  # the step is spent


@pytest.mark.parametrize(("path", "problem"), [
    ("step", None), ("idle/dataloader", None), ("compute/operator:{o.op_type}", None), ("communication/wait", None),
    ("memory", "is not a bucket"), ("idle/disk", "idle has no part 'disk'"), ("compute/operator:", "compute has no part"),
    ("communication/dataloader", "communication has no part"),
])
def test_charged_to_names_a_bucket_of_the_tree(path, problem):
    found = bucket_problem(path)
    assert (found is None) if problem is None else (problem in found)


def _profiles(tmp_path_factory) -> dict[str, tuple[Path, object]]:
    """Every profile the tests ship or build, with the user context to diagnose it with."""
    made = tmp_path_factory.mktemp("budget")
    profiles = {
        "real": (REAL, None),
        "single_rank": (FIXTURES / "samples" / "single_rank", None),
        "cluster_2ranks": (FIXTURES / "samples" / "cluster_2ranks", None),
        "tutorial_0": (FIXTURES / "pytorch-tutorial-resnet50" / "num_workers_0", None),
        "tutorial_4": (FIXTURES / "pytorch-tutorial-resnet50" / "num_workers_4", None),
        "torch_cpu": (FIXTURES / "torch-cpu", None),
        "gpu_example": (ROOT / "examples" / "gpu-synthetic-2ranks", None),
        "pp2": (build_pp2_job(made / "pp2"), None),
    }
    context_file = made / "context.yaml"
    context_file.write_text(EVERY_CATEGORY_CONTEXT)
    profiles["every_category"] = (build_every_category(made / "every"),
                                  build_context(EVERY_CATEGORY_ENV, [], context_file))
    for name, (job, _rule) in INJECTED.items():
        write_gpu_job(made / f"gpu_{name}", job)
        profiles[f"gpu_{name}"] = (made / f"gpu_{name}", None)
    return profiles


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    book = default_rulebook()
    return book, {name: (analyse(path, book, context), str(path))
                  for name, (path, context) in _profiles(tmp_path_factory).items()}


def test_every_profile_keeps_the_budget(analyses):
    book, results = analyses
    assert len(results) >= 20
    for name, (analysis, path) in results.items():
        assert_budget_holds(analysis, book), name
        report = build_report(analysis, book, "en", path)
        assert_json_budget_holds(report.model_dump())
        assert_ranking_is_honest(report)
        for finding in report.findings:
            if finding.estimated_gain_us is not None:
                assert finding.gain_basis in ("measured", "assumed") and finding.charged_to, (name, finding.id)


def test_findings_that_claim_the_same_time_share_it(analyses):
    book, results = analyses
    report = build_report(results["every_category"][0], book, "en", "every")
    by_id = {f.id: f for f in report.findings}
    idle = by_id["host.device_idle"]  # the generic idle finding comes after the measured causes of the idle time
    assert idle.gain_basis == "assumed" and idle.estimated_gain_us < idle.claimed_gain_us
    assert idle.shares_time_with and all(other in by_id for other in idle.shares_time_with)


def test_a_healthy_compute_bound_job_has_no_high_finding(tmp_path):
    """Compute 94 % of the step, free 3 % (Preparing included): nothing to recover that the profile shows."""
    kernels = [k for step in (5, 6) for k in (
        Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 6000.0),
        Kernel(step, "FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 3000.0),
        Kernel(step, "RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 500.0),
        Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 300.0),
    )]
    build_rank(tmp_path, RankSpec(steps=[StepRow(5, 9500.0, 300.0, 200.0, 0.0, preparing=100.0),
                                         StepRow(6, 9500.0, 300.0, 200.0, 0.0, preparing=100.0)],
                                  kernels=kernels, kernel_spacing_us=10.0, dataloader_us=50.0))
    book = default_rulebook()
    analysis = analyse(tmp_path, book)
    report = build_report(analysis, book, "en", str(tmp_path))
    assert report.summary.compute_ratio > 0.9 and report.summary.free_ratio < 0.035
    assert not [f.id for f in report.findings if f.severity == "high"]
    assert_budget_holds(analysis, book)
