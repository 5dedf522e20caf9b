"""Ranks that differ only in how long they wait, and ranks that wait least but wait themselves (issue 26, item 9).

A gap in exposed communication between ranks whose compute and free time are equal is waiting whose cause lies outside
their own work (cluster.uneven_waits, with the actions of that kind of gap); the rank that waits least is named as the
one the others wait for only when it is not itself waiting (its collectives mostly move data).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import Kernel, RankSpec, StepRow, build_rank

import advisor
from advisor.facts import extract_facts
from advisor.facts.models import CommunicationFact, SpreadFact, StragglerFact
from advisor.ingest import load_profile

FIXTURES = Path(__file__).parent / "fixtures"
LEVEL0 = FIXTURES / "ascend-more" / "text-level0-2ranks"
LEVEL1 = FIXTURES / "ascend-level1-2ranks"


def _spread(path, dimension: str) -> SpreadFact:
    return next(f for f in extract_facts(load_profile(path)).of(SpreadFact) if f.dimension == dimension)


def test_the_real_level0_ranks_differ_in_waiting_not_in_compute():
    """Rank 0 waits 16.9 ms more than rank 1 with compute 14 µs apart — but rank 1, which arrives last, then waits 59 ms
    more with rank 0 for members outside the capture, and both leave the AllReduce together: a faster rank 1 would save
    nothing, so the gap is not charged (cluster.uneven_waits stays quiet) and the outside straggler leads."""
    report = advisor.diagnose(LEVEL0)
    ids = [f.id for f in report.findings]
    assert ids[0] == "cluster.straggler_outside_capture"
    assert not {"cluster.uneven_ranks", "cluster.uneven_waits"} & set(ids)
    facts = extract_facts(load_profile(LEVEL0))
    spreads = {f.dimension: f for f in facts.of(SpreadFact)}
    assert spreads["communication"].spread_us == pytest.approx(16899.5, abs=1.0) and spreads["communication"].rank == 1
    assert spreads["compute"].spread_us == pytest.approx(14.3, abs=0.5)
    later = next(f for f in facts.of(CommunicationFact) if f.rank == 1 and f.kind == "collective")
    assert later.outside_wait_share >= 0.5 and later.transit_share < 0.5


def test_the_real_level1_job_keeps_its_findings_and_its_least_waiting_rank_waits_itself():
    ids = [f.id for f in advisor.diagnose(LEVEL1).findings]
    assert ids[:3] == ["cluster.straggler_outside_capture", "host.host_work", "io.blocking_copies"]
    assert "host.many_small_kernels" in ids[3:6]
    assert not {"cluster.uneven_ranks", "cluster.uneven_waits", "cluster.collective_straggler",
                "parallel.pipeline_bubble", "parallel.few_micro_batches"} & set(ids)
    facts = extract_facts(load_profile(LEVEL1))
    (straggler,) = facts.of(StragglerFact)
    assert (straggler.rank, straggler.straggler_waits) == (1, True)
    assert straggler.straggler_transit_share == pytest.approx(0.0385, abs=0.001)
    spread = next(f for f in facts.of(SpreadFact) if f.dimension == "communication")
    assert (spread.rank, spread.slow_rank_waits) == (1, True)
    assert "it waits for others too" in spread.slow_rank_note


def _dp_job(parent, comm_us: dict[int, float], transit: dict[int, float], wait: dict[int, float]) -> Path:
    """Data-parallel ranks with the same compute and free time, one 10 ms AllReduce per step."""
    for rank in comm_us:
        kernels = [k for step in (5, 6) for k in (
            Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 10000.0),
            Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", 10000.0))]
        build_rank(parent, RankSpec(rank=rank, device_id=rank, rank_id=str(rank), kernels=kernels,
                                    steps=[StepRow(s, 10000.0, comm_us[rank], 500.0) for s in (5, 6)],
                                    comm_transit_share=transit[rank], comm_wait_share=wait[rank]))
    return parent




def test_the_late_rank_is_named_when_its_collectives_move_data(tmp_path):
    path = _dp_job(tmp_path, {0: 4000.0, 1: 2000.0}, {0: 0.5, 1: 0.855}, {0: 0.4, 1: 0.1})
    assert _spread(path, "communication").slow_rank_waits is False
    waits = next(f for f in advisor.diagnose(path).findings if f.id == "cluster.uneven_waits")
    assert waits.ranks == [1] and "it is the late one" in waits.explanation


@pytest.mark.parametrize(("transit", "fires"), [(0.9, True), (0.04, False)])
def test_a_straggler_is_only_named_when_it_is_not_waiting_itself(tmp_path, transit, fires):
    # rank 2 waits least in the AllReduce; the step breakdowns are alike
    path = _dp_job(tmp_path, {0: 3000.0, 1: 3000.0, 2: 3000.0}, {0: 0.3, 1: 0.3, 2: transit}, {0: 0.6, 1: 0.6, 2: 0.02})
    (straggler,) = extract_facts(load_profile(path)).of(StragglerFact)
    assert (straggler.rank, straggler.straggler_waits) == (2, not fires)
    found = [f for f in advisor.diagnose(path).findings if f.id == "cluster.collective_straggler"]
    assert bool(found) == fires
    if fires:
        assert found[0].key.endswith("rank 2")
