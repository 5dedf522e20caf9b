"""Pipeline stages found three ways — parallel_group_info, distributed_args, or P2P traffic — and who waits on whom."""

from __future__ import annotations

import json

from builders import Kernel, RankSpec, StepRow, build_rank

from advisor.facts import extract_facts
from advisor.facts.cluster import pipelines_from_p2p
from advisor.facts.models import PipelineFact
from advisor.ingest import load_profile


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
