"""Issue 15: an MC2 candidate is a tensor-parallel MatMul whose collective carries its output, one per MatMul shape."""

from __future__ import annotations

import pytest
from builders import Kernel, RankSpec, StepRow, build_rank

import advisor
from advisor.facts import extract_facts
from advisor.facts.models import Mc2Fact
from advisor.ingest import load_profile

OUTPUT_MB = 4096 * 8192 * 2 / 1e6  # the fp16 output of [4096, 3072] × [3072, 8192]


def _job(tmp_path, group: dict | None, size_mb: float, shapes=("4096,3072;3072,8192",), durations=(803.0,)):
    """Two ranks; per step each MatMul is followed by an AllReduce that sent ``size_mb`` over HCCS."""
    kernels = [
        k
        for step in (5, 6)
        for index, (shape, duration) in enumerate(zip(shapes, durations))
        for k in (Kernel(step, f"MatMulV2_{index}", "MatMulV2", "AI_CORE", duration, shapes=shape),
                  Kernel(step, f"hcom_allReduce__1_{index}_1", "hcom_allReduce_", "COMMUNICATION", 1071.0))
    ]
    for rank in (0, 1):
        build_rank(tmp_path, RankSpec(rank=rank, device_id=rank, rank_id=str(rank), kernels=kernels,
                                      groups=group, comm_size_mb=size_mb, syncs_per_step=0, dataloader_us=50.0,
                                      steps=[StepRow(s, 803.0 * len(shapes), 1071.0 * len(shapes), 150.0) for s in (5, 6)]))
    return tmp_path


def _tp(name: str) -> dict:
    return {"group_name_0": {"group_name": name, "group_rank": 0, "global_ranks": [0, 1]}}


def test_a_tensor_parallel_all_reduce_of_the_matmul_output_is_a_candidate(tmp_path):
    # 2 ranks: a ring AllReduce sends 2(n − 1)/n = 1× its payload, so 67.1 MB sent is the 67.1 MB output
    _job(tmp_path, _tp("tp"), OUTPUT_MB)
    facts = extract_facts(load_profile(tmp_path)).of(Mc2Fact)
    assert {(f.rank, f.group, f.m, f.k, f.n) for f in facts} == {(0, "tp", 4096, 3072, 8192), (1, "tp", 4096, 3072, 8192)}
    assert all(f.payload_mb == pytest.approx(OUTPUT_MB) and f.matmul_mb == pytest.approx(OUTPUT_MB) for f in facts)
    report = advisor.diagnose(tmp_path)
    assert "mc2.matmul_all_reduce" in {f.id for f in report.findings}


def test_a_data_parallel_gradient_all_reduce_is_not_a_candidate_and_hides_nothing(tmp_path):
    # the same kernels and sizes, but the AllReduce belongs to the dp group: gradients, not a TP layer's output
    _job(tmp_path, _tp("dp"), OUTPUT_MB)
    assert extract_facts(load_profile(tmp_path)).of(Mc2Fact) == []
    ids = {f.id for f in advisor.diagnose(tmp_path).findings}
    assert not {i for i in ids if i.startswith("mc2.")}
    assert "communication.transfer_bound" in ids  # no longer suppressed by a false MC2 candidate


def test_an_all_reduce_of_another_size_is_not_a_candidate(tmp_path):
    # no group names in the metadata: a 25 MB gradient bucket after a MatMul with a 67 MB output does not carry it
    _job(tmp_path, None, 25.0)
    assert extract_facts(load_profile(tmp_path)).of(Mc2Fact) == []
    assert "communication.transfer_bound" in {f.id for f in advisor.diagnose(tmp_path).findings}


def test_each_matmul_shape_has_its_own_times(tmp_path):
    # two shapes with the same output size but 803 µs and 400 µs: a mean of 601.5 µs must not carry either label
    _job(tmp_path, _tp("tp"), OUTPUT_MB, shapes=("4096,3072;3072,8192", "8192,1024;1024,4096"), durations=(803.0, 400.0))
    facts = [f for f in extract_facts(load_profile(tmp_path)).of(Mc2Fact) if f.rank == 0]
    assert sorted((f.m, f.k, f.n, f.matmul_us, f.count_per_step) for f in facts) == [
        (4096, 3072, 8192, 803.0, 1.0), (8192, 1024, 4096, 400.0, 1.0)]
    assert len({f.id for f in facts}) == 2
    findings = [f for f in advisor.diagnose(tmp_path).findings if f.id == "mc2.matmul_all_reduce"]
    assert sorted(f.key for f in findings) == ["[4096, 3072] × [3072, 8192] fp16", "[8192, 1024] × [1024, 4096] fp16"]
    by_key = {f.key: f.explanation for f in findings}
    assert "803 µs + 1,071 µs" in by_key["[4096, 3072] × [3072, 8192] fp16"]
    assert "400 µs + 1,071 µs" in by_key["[8192, 1024] × [1024, 4096] fp16"]
