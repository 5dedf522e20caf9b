"""Issue 15: verdicts — io when data loading explains the idle time, pipeline stages before "one slow rank", and
Level0 captures saying that wait cannot be split from transfer."""

from __future__ import annotations

from builders import Kernel, RankSpec, StepRow, build_pp2_job, build_rank

import advisor

MATMULS = [Kernel(step, f"MatMul_{i}", "MatMulV3", "AI_CORE", 2000.0) for step in (5, 6) for i in range(4)]


def _steps(compute: float, comm: float, free: float) -> list[StepRow]:
    return [StepRow(s, compute, comm, free) for s in (5, 6)]


def test_io_when_data_loading_explains_the_idle_time(tmp_path):
    # 35 ms idle per step, the host inside the DataLoader for 30 ms of the step: the idle fact charges it there
    build_rank(tmp_path, RankSpec(steps=_steps(40000.0, 5000.0, 35000.0), kernels=MATMULS, syncs_per_step=0,
                                  dataloader_us=30000.0))
    report = advisor.diagnose(tmp_path)
    assert report.summary.bottleneck == "io" and [r.bottleneck for r in report.summary.per_rank] == ["io"]


def test_host_when_the_idle_time_is_not_data_loading(tmp_path):
    build_rank(tmp_path, RankSpec(steps=_steps(40000.0, 5000.0, 35000.0), kernels=MATMULS, syncs_per_step=0,
                                  dataloader_us=50.0))
    report = advisor.diagnose(tmp_path)
    assert report.summary.bottleneck == "host" and [r.bottleneck for r in report.summary.per_rank] == ["host"]


def test_a_pp_job_ranks_stage_imbalance_first_and_names_both_ranks_of_the_slow_stage(tmp_path):
    # TP=1 PP=2 DP=2: stage 1 (ranks 2 and 3, identical) computes 14 ms, stage 0 (ranks 0 and 1) 10 ms
    build_pp2_job(tmp_path)
    report = advisor.diagnose(tmp_path)
    first = report.findings[0]
    assert (first.id, first.key, first.ranks) == ("parallel.stage_imbalance", "stage 1 of 2", [2, 3])
    assert "Stage 1 (ranks 2, 3)" in first.explanation and "stage 0 (ranks 0, 1)" in first.explanation
    assert first.estimated_gain_us == 2000.0  # the slow stage's compute above the stages' mean
    # the stages explain why the ranks differ: no "one slow rank" finding, and rank 3 is never blamed alone
    assert "cluster.uneven_ranks" not in {f.id for f in report.findings}
    assert [f for f in report.findings if f.id == "parallel.stage_imbalance"] == [first]


def test_a_slow_rank_inside_a_stage_is_still_reported(tmp_path):
    # rank 3 computes 3 ms more than rank 2, its twin on stage 1: the stages no longer explain the spread
    build_pp2_job(tmp_path, compute_us={0: 10000.0, 1: 10000.0, 2: 14000.0, 3: 17000.0})
    report = advisor.diagnose(tmp_path)
    uneven = next(f for f in report.findings if f.id == "cluster.uneven_ranks" and f.key == "compute")
    assert "rank(s) 3 are the ones" in uneven.explanation


def test_ranks_that_are_alike_are_named_together(tmp_path):
    # three data-parallel ranks, 1 and 2 idle alike and longer than 0: both are named, not the higher-numbered one
    for rank, free in ((0, 1000.0), (1, 4000.0), (2, 4000.0)):
        build_rank(tmp_path, RankSpec(rank=rank, device_id=rank, rank_id=str(rank), steps=_steps(40000.0, 5000.0, free),
                                      kernels=MATMULS, syncs_per_step=0, dataloader_us=50.0))
    uneven = next(f for f in advisor.diagnose(tmp_path).findings if f.id == "cluster.uneven_ranks" and f.key == "free")
    assert "rank(s) 1, 2 are the ones" in uneven.explanation


def test_level0_says_wait_cannot_be_split_from_transfer(tmp_path):
    kernels = [Kernel(s, "MatMul_1", "MatMulV3", "AI_CORE", 2000.0) for s in (5, 6)] + [
        Kernel(s, "hcom_allReduce__1_0_1", "hcom_allReduce_", "COMMUNICATION", 3000.0) for s in (5, 6)]
    build_rank(tmp_path, RankSpec(level="Level0", steps=_steps(2000.0, 3000.0, 200.0), kernels=kernels,
                                  omit=("communication.json",), syncs_per_step=0, dataloader_us=50.0))
    report = advisor.diagnose(tmp_path)
    exposed = next(f for f in report.findings if f.id == "communication.exposed_collectives")
    assert "profiler level Level0" in exposed.explanation
    assert "has no communication.json for this rank, which splits collective time into waiting for peers and moving data" in exposed.explanation
    action = " ".join(exposed.prescriptions[0].actions)
    assert "a Level0 (or Level_none) capture does not write it — re-collect at Level1" in action


def test_communication_that_mostly_waits_is_said_as_waiting_and_transfers_stay_communication_bound():
    """The real 2-of-8-rank capture spends 96% of its collectives' time moving no data (the unprofiled ranks arrive
    late): its verdict names the waiting, not the network; the real single rank whose collectives move data stays
    communication-bound."""
    from conftest import REAL, SAMPLE_SINGLE

    from advisor.render.common import report_labels, verdict_sentence

    waiting = advisor.diagnose(REAL)
    assert waiting.summary.bottleneck == "communication"
    assert verdict_sentence(waiting, report_labels(waiting)).startswith(
        "The job is bound by ranks waiting for each other in collectives (96.3% of the time in collectives moves no data")
    moving = advisor.diagnose(SAMPLE_SINGLE)
    assert verdict_sentence(moving, report_labels(moving)).startswith("The job is communication-bound: compute 35.6%")
