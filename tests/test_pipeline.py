"""Pipeline stages found three ways — parallel_group_info, distributed_args, or P2P traffic — and who waits on whom;
each rank as a stage (also a pipeline's only profiled rank): its neighbours, micro-batches and bubble (issue 26, item 9).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from builders import Kernel, RankSpec, StepRow, build_1f1b_job, build_rank, one_f_one_b

import advisor
from advisor.facts import extract_facts
from advisor.facts.cluster import P2pActivity, micro_batches, p2p_direction, pipelines_from_p2p, schedule_bubble, \
    stage_position
from advisor.facts.models import CommunicationFact, PipelineFact, SpreadFact, StageFact
from advisor.ingest import load_profile

SERVER_RANK0 = Path(__file__).parent / "fixtures" / "ascend-more" / "server-rank0"


def _stage_kernels(rank: int, last: int) -> list[Kernel]:
    """A MatMul, then a receive from the previous stage and a send to the next, in steps 5 and 6."""
    kernels = []
    for step in (5, 6):
        kernels.append(Kernel(step, f"MatMul_{rank}", "MatMulV3", "AI_CORE", 500.0))
        if rank > 0:
            kernels.append(Kernel(step, f"hcom_receive__{rank}_0_1", "hcom_receive_", "COMMUNICATION", 1000.0,
                                  group=f"g{rank - 1}{rank}"))
        if rank < last:
            kernels.append(Kernel(step, f"hcom_send__{rank}_0_1", "hcom_send_", "COMMUNICATION", 1000.0,
                                  group=f"g{rank}{rank + 1}"))
    return kernels


def _pipeline(tmp_path, metadata: dict | None = None) -> list[PipelineFact]:
    compute = {0: 14000.0, 1: 10000.0, 2: 10500.0}
    waits = {0: 0.05, 1: 0.6, 2: 0.1}  # rank 1 waits longest in its receives, from rank 0 (the slow stage)
    for rank in compute:
        build_rank(tmp_path, RankSpec(rank=rank, device_id=rank, rank_id=str(rank), kernels=_stage_kernels(rank, 2),
                                      steps=[StepRow(s, compute[rank], 1000.0, 500.0) for s in (5, 6)],
                                      comm_wait_share=waits[rank], comm_transit_share=0.3))
    if metadata is not None:
        for info in tmp_path.glob("*/profiler_metadata.json"):
            info.write_text(json.dumps({**json.loads(info.read_text()), **metadata}))
    return extract_facts(load_profile(tmp_path)).of(PipelineFact)


def test_stages_are_inferred_from_p2p_traffic_without_metadata(tmp_path):
    (pipeline,) = _pipeline(tmp_path)
    assert (pipeline.grouping, pipeline.group, pipeline.stages) == ("p2p", "p2p:0-2", 3)
    assert (pipeline.slowest_stage, pipeline.slowest_rank, pipeline.max_compute_us) == (0, 0, 14000.0)
    assert (pipeline.max_p2p_wait_rank, pipeline.waits_on_rank) == (1, 0)
    assert pipeline.max_p2p_wait_us == 600.0  # 60 % of the 1000 µs receive, per step
    assert any("communication.json[p2p" in s for s in pipeline.sources)


def test_distributed_args_give_the_stages_when_there_is_no_group_info(tmp_path):
    args = {"distributed_args": {"world_size": 3, "pipeline_model_parallel_size": 3, "tensor_model_parallel_size": 1}}
    (pipeline,) = _pipeline(tmp_path, args)
    assert (pipeline.grouping, pipeline.group, pipeline.stages, pipeline.slowest_rank) == ("distributed_args", "pp0", 3, 0)
    assert pipeline.waits_on_rank == 0


def test_parallel_group_info_comes_first(tmp_path):
    groups = {"parallel_group_info": {"group_name_7": {"group_name": "pp", "group_rank": 0, "global_ranks": [0, 1, 2]}},
              "distributed_args": {"world_size": 3, "pipeline_model_parallel_size": 3}}
    (pipeline,) = _pipeline(tmp_path, groups)
    assert (pipeline.grouping, pipeline.group) == ("parallel_group_info", "group_name_7")


def test_p2p_chains_ignore_rings_and_shared_groups():
    assert pipelines_from_p2p({0: {"a"}, 1: {"a", "b"}, 2: {"b", "c"}, 3: {"c"}}) == [("p2p:0-3", [0, 1, 2, 3])]
    assert pipelines_from_p2p({0: {"a", "c"}, 1: {"a", "b"}, 2: {"b", "c"}}) == []  # a ring: no ends
    assert pipelines_from_p2p({0: {"a"}, 1: {"a"}, 2: {"a"}}) == []  # a group of three is not a P2P pair


def _stages(path) -> dict[int, StageFact]:
    return {f.rank: f for f in extract_facts(load_profile(path)).of(StageFact)}


def _activity(sends=0.0, receives=0.0, batched=0.0, first=None, groups=1) -> P2pActivity:
    per_group = {f"g{i}": (sends / groups, receives / groups) for i in range(groups)}
    return P2pActivity(sends, receives, batched, first, per_group, 0.0, 0.0)


@pytest.mark.parametrize(("name", "direction"), [
    ("hcom_send__822_0", "send"), ("hcom_receive__612_3_1", "receive"), ("hcom_batchSendRecv__128_4_1", "both"),
    ("Send#0", "send"), ("Recv#2", "receive"), ("SendRecv#1", "both"), ("hcom_allReduce__612_0_1", None)])
def test_p2p_ops_are_told_by_their_names(name, direction):
    assert p2p_direction(name) == direction


@pytest.mark.parametrize(("activity", "before", "after", "position"), [
    (_activity(sends=1.0, first="send"), 0, 0, "first"),  # server-rank0: one send, nothing received
    (_activity(receives=4.0, first="receive"), 0, 0, "last"),
    (_activity(sends=4.0, receives=4.0, first="send"), 0, 1, "first"),
    (_activity(sends=4.0, receives=4.0, first="receive"), 1, 0, "last"),
    (_activity(sends=4.0, receives=4.0, first="receive"), 0, 0, "unknown"),  # a middle or the last stage
    (_activity(sends=8.0, receives=8.0, first="receive", groups=2), 0, 0, "middle"),  # one communicator per neighbour
    (_activity(sends=8.0, receives=8.0, first="receive"), 1, 1, "middle"),
    (_activity(batched=8.0, first="both"), 0, 1, "first"),  # batchSendRecv: the neighbour's number tells
    (_activity(batched=8.0, first="both"), 1, 0, "last"),
    (_activity(batched=8.0, first="both"), 0, 0, "unknown"),
])
def test_a_stage_is_placed_by_its_neighbours_and_its_first_p2p_op(activity, before, after, position):
    assert stage_position(activity, before, after) == position


def test_micro_batches_are_the_transfers_to_one_neighbour_per_step():
    assert micro_batches(_activity(sends=1.0, first="send"), "first") == 1.0
    assert micro_batches(_activity(sends=4.0, receives=4.0), "last") == 4.0
    assert micro_batches(_activity(sends=8.0, receives=8.0), "middle") == 4.0  # both neighbours in one communicator
    assert micro_batches(_activity(sends=8.0, receives=8.0, groups=2), "middle") == 4.0
    assert micro_batches(_activity(batched=8.0, first="both"), "first") is None  # no direction, no count
    assert micro_batches(_activity(sends=4.0, receives=4.0), "unknown") is None


def test_the_schedule_bubble_is_gpipes_share_of_the_step():
    assert schedule_bubble(4, 4.0) == pytest.approx(3 / 7)
    assert schedule_bubble(2, 1.0) == 0.5
    assert schedule_bubble(8, 32.0) == pytest.approx(7 / 39)
    assert schedule_bubble(4, None) is None


def test_the_simulated_1f1b_schedule_idles_the_first_stage_as_the_formula_says():
    # equal stages, transfers 3 % of a forward: the first stage waits (p - 1)/(m + p - 1) of its step in receives
    for stages, micro in ((4, 4), (2, 8), (4, 12)):
        actions = one_f_one_b(stages, micro, [1000.0] * stages, [2000.0] * stages, 30.0)[0]
        step = actions[-1].start_us + actions[-1].duration_us
        waited = sum(a.wait_us for a in actions if a.kind == "receive")
        assert waited / step == pytest.approx(schedule_bubble(stages, micro), abs=0.01)


def test_every_stage_of_a_profiled_1f1b_pipeline_is_placed_with_its_bubble(tmp_path):
    stages = _stages(build_1f1b_job(tmp_path))
    assert [stages[r].position for r in range(4)] == ["first", "middle", "middle", "last"]
    assert [(stages[r].prev_rank, stages[r].next_rank) for r in range(4)] == [(None, 1), (0, 2), (1, 3), (2, None)]
    assert {(f.grouping, f.stages, f.micro_batches) for f in stages.values()} == {("p2p", 4, 4.0)}
    first = stages[0]
    assert (first.sends_per_step, first.receives_per_step, first.bubble_us) == (4.0, 4.0, 9600.0)
    assert first.bubble_share_of_step == pytest.approx(9600 / first.step_time_us)
    assert first.schedule_bubble_share == pytest.approx(3 / 7)
    assert stages[3].bubble_us < stages[2].bubble_us < stages[1].bubble_us < first.bubble_us


def test_the_bubble_finding_names_the_stage_its_micro_batches_and_what_reduces_it(tmp_path):
    report = advisor.diagnose(build_1f1b_job(tmp_path))
    bubble = next(f for f in report.findings if f.id == "parallel.pipeline_bubble")
    assert (bubble.key, bubble.ranks, bubble.gain_basis) == ("p2p:0-3", [0, 1, 2, 3], "assumed")
    assert "Rank 0 is the first stage" in bubble.explanation and "4 micro-batch(es)" in bubble.explanation
    assert "(p − 1)/(m + p − 1) = 43%" in bubble.explanation
    actions = " ".join(bubble.prescriptions[0].actions)
    assert "micro-batches per step" in actions and "virtual" in actions and "Rebalance" in actions
    assert "GPipe" in bubble.prescriptions[0].stated_gain
    # the receive waits are the pipeline's: no rank is blamed for them
    assert not {"cluster.uneven_ranks", "cluster.uneven_waits", "cluster.collective_straggler"} & {f.id for f in report.findings}


def test_a_pipelines_only_profiled_rank_is_still_a_stage(tmp_path):
    (first,) = _stages(build_1f1b_job(tmp_path, profiled=[0])).values()
    assert (first.grouping, first.position, first.stage, first.stages, first.stages_at_least) == ("own_ops", "first", 0, None, 2)
    assert (first.next_rank, first.neighbours) == (1, "communicator-local rank 1 after it")
    assert (first.micro_batches, first.bubble_us) == (4.0, 9600.0)
    assert first.schedule_bubble_share == pytest.approx(1 / 5)  # at least 2 stages: a lower bound


@pytest.mark.parametrize(("layout", "metadata", "expected"), [
    ("pairs", None, ("own_ops", 0, 1, True, None)),  # one communicator per neighbour, each numbered 0 and 1
    ("pp", None, ("own_ops", 0, 2, True, None)),  # the P2P ops in the pp group: its local ranks
    ("pp", "pp", ("parallel_group_info", 0, 2, False, 4)),  # parallel_group_info maps them to global ranks
])
def test_a_middle_stage_alone_finds_both_neighbours(tmp_path, layout, metadata, expected):
    (middle,) = _stages(build_1f1b_job(tmp_path, profiled=[1], layout=layout, metadata=metadata)).values()
    grouping, prev_rank, next_rank, local, stages = expected
    assert (middle.position, middle.micro_batches, middle.bubble_us) == ("middle", 4.0, 6800.0)
    assert (middle.grouping, middle.prev_rank, middle.next_rank, middle.stages) == (grouping, prev_rank, next_rank, stages)
    assert middle.neighbours.startswith("communicator-local rank" if local else "rank")


def test_batched_p2p_ops_give_the_bubble_but_no_micro_batch_count(tmp_path):
    stages = _stages(build_1f1b_job(tmp_path, profiled=[2], batched=True, metadata="distributed_args"))
    middle = stages[2]
    assert (middle.grouping, middle.position, middle.prev_rank, middle.next_rank) == ("distributed_args", "middle", 1, 3)
    assert (middle.batched_per_step, middle.sends_per_step, middle.micro_batches) == (16.0, 0.0, None)
    assert middle.bubble_us == 4700.0  # the Wait Time of the batchSendRecv ops, not step_trace's Bubble (receives only)


def test_a_chain_of_profiled_stages_that_goes_on_is_not_the_whole_pipeline(tmp_path):
    stages = _stages(build_1f1b_job(tmp_path, profiled=[1, 2]))
    assert [(f.position, f.stage, f.stages, f.stages_at_least) for f in stages.values()] == [
        ("middle", None, None, 4), ("middle", None, None, 4)]
    assert stages[1].evidence.endswith("… → 1 → 2 → …")


def test_the_real_single_ranks_one_send_and_no_receive_fit_no_pipeline_schedule():
    # server-rank0 sends 21 MB once per step and receives nothing: a 1F1B stage 0 would also receive the gradients
    (stage,) = _stages(SERVER_RANK0).values()
    assert (stage.rank, stage.grouping, stage.position, stage.stage) == (0, "own_ops", "unknown", None)
    assert (stage.sends_per_step, stage.receives_per_step) == (1.0, 0.0)
    assert stage.p2p_pattern == "inconsistent"
    assert stage.schedule_note.startswith("in step 2 it sends 1 and receives 0 P2P op(s) in communicator ")
    assert "fit no pipeline schedule" in stage.schedule_note
    assert (stage.micro_batches, stage.schedule_bubble_share, stage.bubble_share_of_step) == (None, None, None)
    ids = {f.id for f in advisor.diagnose(SERVER_RANK0).findings}
    assert not {"parallel.few_micro_batches", "parallel.pipeline_bubble"} & ids
    assert "cluster.straggler_outside_capture" in ids  # the collective wait stays with the outside straggler


def test_a_send_without_its_receive_fits_no_schedule_while_1f1b_stages_do(tmp_path):
    from advisor.facts.cluster import p2p_activity

    def ops(*rows):
        return pd.DataFrame(rows, columns=["op_name", "group", "step", "start_us", "wait_ms", "elapse_ms"])

    def op(direction: str, group: str, step: str, start: float) -> tuple:
        return (f"hcom_{direction}__1_{int(start)}_1", group, step, start, 0.0, 1.0)

    one_way = p2p_activity(ops(op("send", "g", "5", 1.0), op("send", "g", "6", 2.0)), 2)
    assert not one_way.fits_schedule and micro_batches(one_way, "first") is None
    # stage 0 of 1F1B with 2 micro-batches: sends activations, receives gradients, in the same communicator
    first = p2p_activity(ops(*[op(d, "g", "5", float(i)) for i, d in enumerate(("send", "send", "receive", "receive"))]), 1)
    assert first.fits_schedule and micro_batches(first, "first") == 2.0
    # equal over the capture but not in each step: step 5 only sends, step 6 only receives
    skewed = p2p_activity(ops(op("send", "g", "5", 1.0), op("receive", "g", "6", 2.0)), 2)
    assert not skewed.fits_schedule and "in step 5 it sends 1 and receives 0" in skewed.schedule_note
    # a middle stage with one communicator per neighbour: each sends and receives as often
    middle = p2p_activity(ops(op("receive", "a", "5", 1.0), op("send", "b", "5", 2.0), op("receive", "b", "5", 3.0),
                              op("send", "a", "5", 4.0)), 1)
    assert middle.fits_schedule
    batched = p2p_activity(ops(("hcom_batchSendRecv__1_0_1", "g", "5", 1.0, 0.0, 1.0)), 1)
    assert batched.fits_schedule  # both directions in one op


def test_a_forward_only_chain_keeps_its_pipeline_but_tells_no_bubble(tmp_path):
    _pipeline(tmp_path)  # each rank receives from the one before and sends to the one after, nothing back
    stages = _stages(tmp_path)
    assert {f.p2p_pattern for f in stages.values()} == {"inconsistent"}
    assert [stages[r].position for r in range(3)] == ["first", "middle", "last"]  # the chain orders them
    assert all(f.micro_batches is None and f.bubble_share_of_step is None for f in stages.values())


def test_1f1b_stages_fit_the_schedule(tmp_path):
    stages = _stages(build_1f1b_job(tmp_path))
    assert {(f.p2p_pattern, f.micro_batches) for f in stages.values()} == {("schedule", 4.0)}
    assert all(f.bubble_share_of_step is not None for f in stages.values())


def test_the_real_single_rank_finds_its_neighbour_in_the_matrix_links(tmp_path):
    # server-rank0's send as communication_matrix.json writes it today: the link 0-8 of the send's communicator
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(SERVER_RANK0 / "rank0_ascend_pt", rank)
    group = "13337953553061386822"
    links = {"0-0": {"Transport Type": "LOCAL", "Transit Size(MB)": 20.97152, "Transit Time(ms)": 0.0276, "Bandwidth(GB/s)": 761.1383},
             "0-8": {"Transport Type": "RDMA", "Transit Size(MB)": 20.97152, "Transit Time(ms)": 0.8638, "Bandwidth(GB/s)": 24.2778}}
    matrix = {"step2": {"p2p": {f"send-top1@{group}": links, f"send-total@{group}": links}, "collective": {}}}
    (rank / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").write_text(json.dumps(matrix))
    (stage,) = _stages(tmp_path).values()
    # the link names its peer; the one send and no receive do not tell which side of it the rank is
    assert (stage.position, stage.next_rank) == ("unknown", None)
    assert stage.neighbours == "P2P peer(s) communicator-local rank 8 (their order in a pipeline not told)"
    assert "communication_matrix.json" in stage.evidence


def test_p2p_time_is_not_a_rank_imbalance(tmp_path):
    # stages 0 and 3 profiled, not neighbours: their receive waits differ by 6 ms, their collectives not at all
    path = build_1f1b_job(tmp_path, profiled=[0, 3])
    facts = extract_facts(load_profile(path))
    spread = next(f for f in facts.of(SpreadFact) if f.dimension == "communication")
    assert spread.spread_us == pytest.approx(0.0, abs=1.0) and spread.p2p_excluded_us > 6000
    report = advisor.diagnose(path)
    ids = {f.id for f in report.findings}
    assert "parallel.pipeline_bubble" in ids and not {"cluster.uneven_ranks", "cluster.uneven_waits"} & ids


def test_collectives_waiting_are_charged_without_the_pipelines_p2p_time(tmp_path):
    # a 3 ms AllReduce, 90 % waiting, of which 300 µs are exposed: the rest of the exposed time is P2P
    path = build_1f1b_job(tmp_path, stages=2, collective_us=3000.0, collective_exposed_us=300.0,
                          collective_wait_share=0.9)
    facts = extract_facts(load_profile(path))
    collective = next(f for f in facts.of(CommunicationFact) if f.rank == 0 and f.kind == "collective")
    assert collective.p2p_us > 1000
    waiting = next(f for f in advisor.diagnose(path).findings if f.id == "communication.not_transferring")
    assert waiting.estimated_gain_us == pytest.approx(300.0)  # not min(exposed with P2P, 2,700 µs of wait)
