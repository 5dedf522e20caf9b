"""Issue 15: communicators told apart by their hash, waits for ranks outside the capture, transit from Bandwidth Info,
and DB exports whose schema lacks optional columns."""

from __future__ import annotations

import json

import pytest
from builders import (
    PP2_GROUPS,
    Kernel,
    RankSpec,
    StepRow,
    build_pp2_job,
    build_rank,
    build_rank_db,
    drop_db_columns,
)
from conftest import REAL

import advisor
from advisor.facts import CommunicationFact, extract_facts
from advisor.facts.models import StragglerFact
from advisor.ingest import load_profile
from advisor.ingest.groups import group_hash


def test_a_pp2_job_whose_group_names_repeat_is_diagnosed(tmp_path):
    # dp, mp and pp each name two communicators here; keyed on the name, two straggler facts shared an id (exit 70)
    build_pp2_job(tmp_path)
    report = advisor.diagnose(tmp_path)
    assert report.status == "complete" and report.input.ranks == [0, 1, 2, 3]
    stragglers = [f for f in extract_facts(load_profile(tmp_path)).of(StragglerFact)]
    assert len({f.id for f in stragglers}) == len(stragglers) == 4  # dp ×2 and mp ×2 (pp carries only P2P ops)
    by_communicator = {f.communicator: f for f in stragglers}
    assert set(by_communicator) == {"group_name_1", "group_name_2", "group_name_3", "group_name_4"}
    for communicator, fact in by_communicator.items():
        label, ranks = PP2_GROUPS[communicator]
        assert (fact.group, fact.group_id, fact.group_ranks, fact.group_size) == (
            label, group_hash(communicator), ", ".join(map(str, ranks)), 2)
    # stage 1 (ranks 2, 3) arrives late at the mp AllReduce: the stage-0 rank waits 55 % of 800 µs, rank 2 5 %
    mp = by_communicator["group_name_3"]
    assert (mp.rank, mp.max_wait_rank, mp.lost_us) == (2, 0, pytest.approx(800 * 0.5))


def _outside_wait_from_the_files(rank: int) -> float:
    """µs per step rank ``rank`` of the real job spends in its AllReduces after both ranks had arrived, not moving data."""
    documents = [json.loads((REAL / f"rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json").read_text())
                 for r in (0, 1)]
    total = 0.0
    for name, op in documents[rank]["step50"]["collective"].items():
        if name == "Total Op Info":
            continue
        starts = [d["step50"]["collective"][name]["Communication Time Info"]["Start Timestamp(us)"] for d in documents]
        times = op["Communication Time Info"]
        end = times["Start Timestamp(us)"] + times["Elapse Time(ms)"] * 1000
        total += max(end - max(starts) - times["Transit Time(ms)"] * 1000, 0.0)
    return total


def test_the_real_jobs_two_ranks_wait_together_for_six_members_not_profiled():
    # profiler_metadata.json has no parallel_group_info; communication_matrix.json links each rank to local ranks
    # 0–7 of communicator 17522688603477080586: an 8-member group of which ranks 0 and 1 were profiled
    facts = {f.rank: f for f in extract_facts(load_profile(REAL)).of(CommunicationFact)}
    for rank, fact in facts.items():
        assert (fact.group_size, fact.group_ranks_profiled, fact.missing_ranks) == (8, 2, "local ranks 2–7")
        assert fact.outside_wait_us == pytest.approx(_outside_wait_from_the_files(rank), abs=1.0)  # µs epoch floats
        assert 96_000 < fact.outside_wait_us < 97_000 and fact.outside_wait_share > 0.9
        assert fact.transit_from_bandwidth_per_step == 0  # every op's Time Info has its transit
    report = advisor.diagnose(REAL)
    ids = [f.id for f in report.findings]
    assert ids[0] == "cluster.straggler_outside_capture" and "communication.not_transferring" not in ids
    assert "8-rank communicator" in report.findings[0].explanation
    assert "local ranks 2–7" in report.findings[0].explanation
    assert report.findings[0].prescriptions[0].id == "cluster.profile_missing_ranks"


def _two_of(tmp_path, members: list[int]):
    """Ranks 0 and 1 of a dp communicator with ``members``: both wait 5 % and idle 90 % of each AllReduce, together."""
    groups = {"group_name_0": {"group_name": "dp", "group_rank": 0, "global_ranks": members}}
    for rank in (0, 1):
        build_rank(tmp_path, RankSpec(rank=rank, device_id=rank, rank_id=str(rank), groups=groups,
                                      comm_transit_share=0.05, comm_wait_share=0.05))
    return advisor.diagnose(tmp_path)


def test_two_of_eight_members_profiled_name_the_six_missing_by_global_rank(tmp_path):
    report = _two_of(tmp_path, list(range(8)))
    (finding,) = [f for f in report.findings if f.id == "cluster.straggler_outside_capture"]
    assert finding.ranks == [0, 1] and "(ranks 2–7)" in finding.explanation
    # after both arrived (the same start), each waits the 95 % of the 1987.92 µs op that moves nothing
    assert finding.estimated_gain_us == pytest.approx(1987.92 * 0.95, rel=1e-6)
    assert "communication.not_transferring" not in [f.id for f in report.findings]


def test_a_wholly_profiled_group_keeps_the_ordinary_waiting_finding(tmp_path):
    report = _two_of(tmp_path, [0, 1])
    ids = [f.id for f in report.findings]
    assert "communication.not_transferring" in ids and "cluster.straggler_outside_capture" not in ids
    assert all(f["outside_wait_us"] == 0 for f in report.facts if f["type"] == "communication")


def test_a_late_profiled_rank_is_not_taken_for_an_outside_one(tmp_path):
    # rank 1 reaches each AllReduce 600 µs after rank 0 in an 8-member group: rank 0's wait is for rank 1,
    # inside the capture; only what both spend after rank 1 arrived counts as waiting for the others
    groups = {"group_name_0": {"group_name": "dp", "group_rank": 0, "global_ranks": list(range(8))}}
    for rank, (duration, wait) in {0: (2600.0, 600.0 / 2600.0), 1: (2000.0, 0.0)}.items():
        kernels = [Kernel(s, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", duration) for s in (5, 6)]
        rank_dir = build_rank(tmp_path, RankSpec(rank=rank, device_id=rank, rank_id=str(rank), groups=groups,
                                                 kernels=kernels, comm_transit_share=1000.0 / duration,
                                                 comm_wait_share=wait))
        path = rank_dir / "ASCEND_PROFILER_OUTPUT/communication.json"
        document = json.loads(path.read_text())
        for step in document.values():
            for op in step["collective"].values():
                op["Communication Time Info"]["Start Timestamp(us)"] += 600.0 if rank == 1 else 0.0
        path.write_text(json.dumps(document))
    facts = {f.rank: f for f in extract_facts(load_profile(tmp_path)).of(CommunicationFact)}
    # both end together: 2000 µs after rank 1 arrived, 1000 of them moving data
    assert facts[0].outside_wait_us == pytest.approx(1000.0) and facts[1].outside_wait_us == pytest.approx(1000.0)
    assert facts[0].wait_us == pytest.approx(600.0)


def test_transit_missing_from_time_info_is_taken_from_bandwidth_info(tmp_path):
    # 440 MB at 18.7 GB/s in Bandwidth Info (23.5 ms of a 30 ms AllReduce), Time Info's Transit Time 0
    kernels = [Kernel(s, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 30000.0) for s in (5, 6)]
    moved_ms = 440.0 / 18.7
    spec = dict(kernels=kernels, steps=[StepRow(s, 2000.0, 30000.0, 500.0) for s in (5, 6)], comm_size_mb=440.0,
                comm_transit_share=moved_ms / 30.0, comm_wait_share=0.05)
    build_rank(tmp_path / "zero", RankSpec(comm_time_info_without_transit=True, **spec))
    build_rank(tmp_path / "whole", RankSpec(**spec))
    fixed, = extract_facts(load_profile(tmp_path / "zero")).of(CommunicationFact)
    written, = extract_facts(load_profile(tmp_path / "whole")).of(CommunicationFact)
    assert fixed.transit_us == pytest.approx(moved_ms * 1000) == pytest.approx(written.transit_us)
    assert fixed.idle_us == pytest.approx(written.idle_us) and fixed.transit_from_bandwidth_per_step == 1.0
    ids = [f.id for f in advisor.diagnose(tmp_path / "zero").findings]
    assert "communication.not_transferring" not in ids and "communication.transfer_bound" in ids


def test_bandwidth_time_is_capped_at_what_the_op_did_not_spend_waiting(tmp_path):
    # a 2 ms op whose HCCS Bandwidth Info sums 1.7 ms × 7 links: the transit cannot exceed elapse − wait
    kernels = [Kernel(5, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 2000.0)]
    rank_dir = build_rank(tmp_path, RankSpec(kernels=kernels, steps=[StepRow(5, 1000.0, 2000.0, 100.0)],
                                             comm_time_info_without_transit=True, comm_transit_share=0.85,
                                             comm_wait_share=0.1))
    path = rank_dir / "ASCEND_PROFILER_OUTPUT/communication.json"
    document = json.loads(path.read_text())
    for op in document["step5"]["collective"].values():
        for transport in ("HCCS", "SDMA"):
            op["Communication Bandwidth Info"][transport]["Transit Time(ms)"] *= 7
    path.write_text(json.dumps(document))
    fact, = extract_facts(load_profile(tmp_path)).of(CommunicationFact)
    assert fact.transit_us == pytest.approx(2000.0 * 0.9) and fact.idle_us == pytest.approx(0.0)


def test_a_db_whose_communication_op_has_no_device_id_is_read_whole(tmp_path):
    # DB schema 1.0.0: COMMUNICATION_OP(opName, …, opType) without deviceId; the whole file used to be skipped
    spec = RankSpec(reserved_drops_per_step=1)
    build_rank_db(tmp_path / "full", spec)
    rank_dir = build_rank_db(tmp_path / "old", spec)
    drop_db_columns(rank_dir / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db", "COMMUNICATION_OP", "deviceId")
    profile = load_profile(tmp_path / "old")
    assert profile.coverage.skipped == [] and profile.coverage.partly_read == [] and not profile.coverage.warnings
    kernels = profile.ranks[0].kernels.frame
    assert (kernels["accelerator_core"] == "COMMUNICATION").sum() == 2
    full = {f.id: f.model_dump(exclude={"sources"}) for f in extract_facts(load_profile(tmp_path / "full")).facts}
    old = {f.id: f.model_dump(exclude={"sources"}) for f in extract_facts(profile).facts}
    assert old == full


def test_a_table_without_a_needed_column_leaves_out_only_what_it_feeds(tmp_path):
    rank_dir = build_rank_db(tmp_path, RankSpec(reserved_drops_per_step=1))
    drop_db_columns(rank_dir / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db", "MEMORY_RECORD", "totalReserved")
    drop_db_columns(rank_dir / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db", "COMMUNICATION_OP", "opName")
    profile = load_profile(tmp_path)
    rank = profile.ranks[0]
    assert profile.coverage.skipped == []
    assert rank.memory_record is None and rank.kernels is not None and rank.trace is not None
    assert (rank.kernels.frame["accelerator_core"] == "COMMUNICATION").sum() == 0  # compute kernels kept
    partly = {p.file.rsplit("/", 1)[-1]: [] for p in profile.coverage.partly_read}
    for p in profile.coverage.partly_read:
        partly[p.file.rsplit("/", 1)[-1]].append(p.reason)
    assert partly == {"ascend_pytorch_profiler_0.db": [
        "table COMMUNICATION_OP lacks the column(s) opName: the collectives of kernel_details (COMMUNICATION_OP) "
        "left out, the other tables read",
        "table MEMORY_RECORD lacks the column(s) totalReserved: memory_record (MEMORY_RECORD) left out, the other "
        "tables read"]}
    report = advisor.diagnose(tmp_path)
    assert report.status == "partial" and any(f["type"] == "operator" for f in report.facts)
