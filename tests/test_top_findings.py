"""The first findings an expert would list, on the bundled real capture and on each synthetic scenario (issue #15).

Each expectation says why. The gains of the findings listed never add up to more than the step.
"""

from __future__ import annotations

import pytest
from builders import (
    GpuJob,
    EVERY_CATEGORY_CONTEXT,
    EVERY_CATEGORY_ENV,
    build_every_category,
    build_pp2_job,
    write_gpu_job,
)
from conftest import FIXTURES, REAL
from test_gpu import INJECTED

from advisor.diagnose import diagnose
from advisor.usercontext import build_context


def _top(report, count: int = 3) -> list[str]:
    return [f.id for f in report.findings[:count]]


def _gains_fit(report) -> None:
    ranks = max(len(report.input.ranks), 1)
    total = sum((f.estimated_gain_us or 0.0) * (len(f.ranks) / ranks if f.ranks else 1.0) for f in report.findings)
    assert total <= report.summary.step_time_us


def test_the_real_two_rank_capture():
    """Both ranks wait ~73 ms together in one AllReduce whose group has 8 members, 2 of them profiled: the wait is for
    ranks outside the capture (96 ms of a 153 ms step, measured). Each step starts with 18–20 ms of Preparing before
    the first device task: the DataLoader (3.5 ms), then a `.to()` of the batch whose stream synchronisation (inside
    aten::_to_copy) leaves the device idle ~10 ms — a blocking copy, measured: 6–7 ms while the host waits in it,
    the rest after it returns. Next the device idles ~25 ms waiting for
    work launched after it drained, but 191 launches at their measured 21 µs explain only ~4 ms (graph mode's share,
    host.many_small_kernels): the rest is host work — 3 ms of it in AscendCL@aclopCompileAndExecute, the legacy aclop
    path, whose fix (jit_compile=False) leads host.host_work's prescription, and most inside aten ops (~130 µs of host
    time per launched kernel), which the Python lane records; an upper bound, measured with with_stack on, and high
    even counted half (15 % of the step). The 19 aclopCompileAndExecute calls' opCompile spans only 373 µs (the binaries are cached):
    no online-compilation finding. The .item() reads block the host 92 ms, but inside the collective's wait: when they
    return the device is still busy with it, so they leave it no idle time of their own — named, with none measured."""
    report = diagnose(REAL)
    assert _top(report, 3) == ["cluster.straggler_outside_capture", "host.host_work", "io.blocking_copies"]
    assert [f.gain_basis for f in report.findings[:3]] == ["measured"] * 3
    # the blocking copy: the device's idle while the host waits in it (7.2 ms on rank 1, 6.1 on rank 0); the 3.7–3.9 ms
    # after it returns, until the forward is queued, is named but not counted (second review, 2026-11-28)
    assert 6_000 < report.findings[2].estimated_gain_us < 7_000 and report.findings[2].severity == "medium"
    assert "3,890 µs of it after they had returned" in report.findings[2].explanation
    assert report.findings[1].instrumented_by == ["with_stack", "record_shapes"] and report.findings[1].severity == "high"
    assert report.findings[1].prescriptions[0].actions[0].startswith("The legacy aclop path")
    (small,) = [f for f in report.findings if f.id == "host.many_small_kernels"]
    assert 3_800 < small.estimated_gain_us < 4_400
    assert "host.online_compilation" not in {f.id for f in report.findings}
    # the HCCL Notify_Wait tasks of both ranks wait for local rank 5 of the communicator (dst rank 5)
    waits = {f["rank"]: f for f in report.facts if f["type"] == "communication" and f["kind"] == "collective"}
    assert {r: f["waited_peer"] for r, f in waits.items()} == {0: 5, 1: 5}
    assert waits[0]["waited_peer_us"] == pytest.approx(101_683, rel=0.001) and waits[0]["waited_peer_share"] > 0.9
    assert "wait longest for local rank 5" in report.findings[0].explanation
    (few,) = [f for f in report.findings if f.id == "profiling.few_steps"]  # one step (ProfilerStep#50) per rank
    assert few.severity == "low" and few.estimated_gain_us is None and report.input.steps == [50]
    (host,) = [f for f in report.facts if f["type"] == "host" and f["rank"] == 0]
    assert host["compile_calls_per_step"] == 19 and host["compile_us_per_step"] == pytest.approx(372.94)
    (item,) = [f for f in report.findings if f.id == "host.item_reads"]
    assert item.estimated_gain_us is None and item.claimed_gain_us == 0.0 and item.severity == "low"
    _gains_fit(report)


def test_every_category(tmp_path):
    """The collectives mostly wait (1.4 ms of a 5.9 ms step), the largest single cause; the short kernels' launches
    (0.6 ms, 10 % of the step: high even as an upper bound under with_stack) and the host's 2 ms of preparation before
    each step's first device task come next, measured part by part (the DataLoader's 400 µs first);
    ASCEND_LAUNCH_BLOCKING=1 is high whatever the profile shows (every launch is serialised)."""
    context = tmp_path / "context.yaml"
    context.write_text(EVERY_CATEGORY_CONTEXT)
    report = diagnose(build_every_category(tmp_path / "job"), context=build_context(EVERY_CATEGORY_ENV, [], context))
    assert _top(report, 3) == ["communication.not_transferring", "superkernel.short_kernels", "io.slow_dataloader"]
    assert [f.severity for f in report.findings if f.id == "environment.launch_blocking"] == ["high"]
    _gains_fit(report)


def test_a_pipeline_job_blames_its_slow_stage(tmp_path):
    """PP=2: stage 1 (ranks 2 and 3, identical) computes 40 % more, and stage 0 waits for it in its collectives: the
    stage imbalance is the cause, the waiting its effect."""
    report = diagnose(build_pp2_job(tmp_path))
    assert _top(report, 2) == ["parallel.stage_imbalance", "communication.not_transferring"]
    _gains_fit(report)


@pytest.mark.parametrize("sample", ["single_rank", "cluster_2ranks"])
def test_the_samples_are_transfer_bound(sample):
    """57 % of the step is exposed communication that mostly moves data: the transfer is what to shorten."""
    report = diagnose(FIXTURES / "samples" / sample)
    assert _top(report, 1) == ["communication.transfer_bound"]
    _gains_fit(report)


# The injected GPU problem leads its report; an informational finding (the dominant kernel of a healthy job) never
# precedes it. Problems without a measurable gain (pageable copies, allocator drops that cost no idle time, missing
# markers or memory events, an optimizer loop whose launches the GPU's queued work hides) are named but rank after
# what costs time.
LEADS = {"launch_bound", "synchronisation", "data_loading", "cuda_core_gemm", "exposed_nccl",
         "allocator_behind_a_slow_loader"}


@pytest.mark.parametrize("problem", sorted(INJECTED))
def test_each_injected_gpu_problem(tmp_path, problem):
    job, rule = INJECTED[problem]
    write_gpu_job(tmp_path, job)
    report = diagnose(tmp_path)
    if problem == "straggler":  # rank 2 computes 3 ms more: the others wait for it inside NCCL
        assert _top(report, 1) == ["cluster.uneven_ranks"]
    elif problem == "allocator_behind_a_slow_loader":  # the loader's idle is what costs time
        assert _top(report, 1) == ["gpu.slow_dataloader"]
    elif problem in LEADS:
        assert _top(report, 1) == [rule]
    else:
        assert rule in [f.id for f in report.findings]
    _gains_fit(report)


def test_a_loader_the_host_runs_ahead_of_stalls_only_the_first_step(tmp_path):
    """A 5 ms loader beside a 9.8 ms GPU step: only step 1 waits for it (the host then runs ahead), so the typical
    steps have no idle time to charge to data loading and what step 1 adds is the outlier finding's, measured."""
    write_gpu_job(tmp_path, GpuJob(steps=5, dataloader_us=5000.0))
    report = diagnose(tmp_path)
    (idle,) = [f for f in report.facts if f["type"] == "idle"]
    assert idle["outlier_steps"] == "1" and idle["slowest_idle_part"] == "dataloader"
    assert idle["dataloader_us"] == 0.0 and idle["steps"] == 4
    assert _top(report, 1) == ["host.outlier_steps"]
    assert "gpu.slow_dataloader" not in [f.id for f in report.findings]
    (outliers,) = [f for f in report.findings if f.id == "host.outlier_steps"]
    assert outliers.estimated_gain_us == pytest.approx(5000.0 / 5, rel=0.02)
