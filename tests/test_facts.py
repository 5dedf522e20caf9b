"""Facts: step breakdowns and operator statistics checked against the files, read independently."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest
from builders import Kernel, RankSpec, StepRow, build_rank
from conftest import REAL, SAMPLE_CLUSTER, SAMPLE_SINGLE

from advisor.facts import BreakdownFact, ContextFact, OperatorFact, StepFact, extract_facts
from advisor.ingest import load_profile


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return [{k.strip(): (v or "").strip() for k, v in row.items()} for row in csv.DictReader(handle)]


def _rank_dirs(root: Path) -> list[Path]:
    return sorted(p.parent.parent for p in root.rglob("ASCEND_PROFILER_OUTPUT/step_trace_time.csv"))


@pytest.mark.parametrize("root", [REAL, SAMPLE_CLUSTER], ids=["real", "sample"])
def test_step_facts_equal_step_trace_time(root):
    facts = extract_facts(load_profile(root))
    steps = {(f.rank, f.step): f for f in facts.of(StepFact)}
    for rank, rank_dir in enumerate(_rank_dirs(root)):
        for row in _csv_rows(rank_dir / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
            fact = steps[(rank, int(row["Step"]))]
            assert fact.compute_us == pytest.approx(float(row["Computing"]), rel=1e-3)
            assert fact.comm_not_overlapped_us == pytest.approx(float(row["Communication(Not Overlapped)"]), rel=1e-3)
            # free time is Free and the host's Preparing before the step's first device task
            assert fact.free_us == pytest.approx(float(row["Free"]) + float(row["Preparing"]), rel=1e-3)
            assert fact.preparing_us == pytest.approx(float(row["Preparing"]), rel=1e-3)
            assert fact.stage_us == pytest.approx(float(row["Stage"]), rel=1e-3)
            # Stage = span - bubble, the three lanes tile the span, and the step is the span and Preparing
            assert fact.step_time_us - (fact.bubble_us or 0) - fact.preparing_us == pytest.approx(float(row["Stage"]), rel=1e-3)
            assert fact.compute_ratio + fact.communication_ratio + fact.free_ratio == pytest.approx(1.0)


def test_rank_breakdown_is_the_mean_of_its_steps_and_profile_the_mean_of_ranks():
    facts = extract_facts(load_profile(SAMPLE_CLUSTER))
    breakdowns = {b.rank: b for b in facts.of(BreakdownFact)}
    assert breakdowns[0].scope == "rank" and breakdowns[0].steps == 2
    assert breakdowns[0].comm_not_overlapped_us == pytest.approx(1921.46)
    assert breakdowns[1].compute_us == pytest.approx(1384.64)
    assert breakdowns[None].scope == "profile"
    assert breakdowns[None].step_time_us == pytest.approx((3350.92 + 420.0 + 3186.77 + 420.0) / 2)  # with Preparing
    assert breakdowns[None].dominant_overhead == "communication"


@pytest.mark.parametrize("root", [REAL, SAMPLE_CLUSTER], ids=["real", "sample"])
def test_operator_shares_equal_kernel_details(root):
    facts = extract_facts(load_profile(root))
    operators = {(f.rank, f.op_type, f.accelerator_core): f for f in facts.of(OperatorFact)}
    for rank, rank_dir in enumerate(_rank_dirs(root)):
        rows = _csv_rows(rank_dir / "ASCEND_PROFILER_OUTPUT/kernel_details.csv")
        steps = {row["Step Id"] for row in rows if row["Step Id"]}
        totals: dict[tuple[str, str], float] = defaultdict(float)
        for row in rows:
            if row["Accelerator Core"] in ("HCCL", "COMMUNICATION") or not row["Step Id"]:
                continue
            totals[(row["Type"], row["Accelerator Core"])] += float(row["Duration(us)"])
        grand = sum(totals.values())
        assert {(t, c) for (r, t, c) in operators if r == rank} == set(totals)
        for (op_type, core), total in totals.items():
            fact = operators[(rank, op_type, core)]
            assert fact.total_us_per_step == pytest.approx(total / len(steps), rel=1e-6)
            assert fact.share_of_compute == pytest.approx(total / grand, rel=1e-6)
        top = max(totals, key=totals.get)
        assert operators[(rank, *top)].position == 1


def test_real_top_operator_is_foreach_add_list_at_22_percent():
    facts = extract_facts(load_profile(REAL / "rank0_ascend_pt"))
    top = next(f for f in facts.of(OperatorFact) if f.position == 1)
    assert (top.op_type, top.accelerator_core) == ("ForeachAddList", "AI_VECTOR_CORE")
    assert top.share_of_compute == pytest.approx(0.2208, abs=1e-3)
    assert top.count_per_step == 3


def test_context_from_info_files_and_device_info():
    (context,) = extract_facts(load_profile(SAMPLE_SINGLE)).of(ContextFact)
    assert (context.profiler_level, context.torch_npu_version, context.cann_version) == ("Level1", "2.9.0", "8.5.0")
    assert (context.ai_core_count, context.vector_core_count, context.aic_frequency_mhz) == (20, 40, 1650.0)
    assert context.hardware == "Atlas A2/A3 (Ascend 910B/910C)"
    assert context.step_count == 2 and context.has_step_info
    assert any(s.endswith("info.json.0") for s in context.sources)


def test_every_fact_names_its_source_files():
    facts = extract_facts(load_profile(REAL))
    for fact in facts.facts:
        assert fact.sources, fact.id
    step = facts.of(StepFact)[0]
    assert step.sources == ["rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"
                            "[Computing,Communication(Not Overlapped),Free,Communication,Overlapped,Bubble,Preparing]"]


def test_level0_kernels_are_grouped_by_name(tmp_path):
    build_rank(tmp_path, RankSpec(level="Level0", device_id_column=False))
    operators = extract_facts(load_profile(tmp_path)).of(OperatorFact)
    assert {o.type_source for o in operators} == {"name"}
    assert {o.op_type for o in operators} == {"aclnnMatmul_MatMulV3Common_MatMulV3", "FlashAttentionScore", "RmsNorm"}
    assert all(o.accelerator_core is None for o in operators)


def test_op_statistic_is_the_fallback_without_kernel_details(tmp_path):
    build_rank(tmp_path, RankSpec(omit=("kernel_details.csv",)))
    operators = {o.op_type: o for o in extract_facts(load_profile(tmp_path)).of(OperatorFact)}
    assert operators["FlashAttentionScore"].total_us_per_step == pytest.approx(881.64)
    assert operators["FlashAttentionScore"].share_of_compute == pytest.approx(881.64 / (170.4 + 881.64 + 33.06), rel=1e-4)


def test_capture_without_step_info_is_one_whole_step(tmp_path):
    build_rank(tmp_path, RankSpec(with_step_info=False, steps=[StepRow(None, 500.0, 100.0, 400.0)]))
    facts = extract_facts(load_profile(tmp_path))
    (step,) = facts.of(StepFact)
    assert step.step is None and step.free_ratio == pytest.approx((400.0 + 2000.0) / 3000.0)  # Free and Preparing
    (context,) = facts.of(ContextFact)
    assert not context.has_step_info
    flash = next(o for o in facts.of(OperatorFact) if o.op_type == "FlashAttentionScore")
    assert flash.total_us_per_step == pytest.approx(2 * 881.64)  # the whole capture is one "step"


def test_unusable_step_rows_are_dropped_with_a_warning(tmp_path):
    build_rank(tmp_path, RankSpec(steps=[StepRow(5, 100.0, 50.0, 50.0), StepRow(6, -1.0, 50.0, 50.0), StepRow(7, 0.0, 0.0, 0.0)]))
    facts = extract_facts(load_profile(tmp_path))
    assert [s.step for s in facts.of(StepFact)] == [5]
    assert any("2 step row(s) with missing, negative or zero times were ignored" in w for w in facts.warnings)


def test_kernels_outside_profiled_steps_are_not_counted(tmp_path):
    kernels = [Kernel(5, "A", "Add", "AI_VECTOR_CORE", 10.0), Kernel(None, "B", "Mul", "AI_VECTOR_CORE", 99.0)]
    build_rank(tmp_path, RankSpec(steps=[StepRow(5, 10.0, 0.0, 1.0)], kernels=kernels))
    operators = extract_facts(load_profile(tmp_path)).of(OperatorFact)
    assert [(o.op_type, o.share_of_compute) for o in operators] == [("Add", 1.0)]


def test_rank_spreads_name_the_slow_rank():
    from advisor.facts import SpreadFact

    spreads = {s.dimension: s for s in extract_facts(load_profile(SAMPLE_CLUSTER)).of(SpreadFact)}
    communication = spreads["communication"]
    assert (communication.max_rank, communication.min_rank, communication.rank) == (0, 1, 1)
    assert communication.spread_us == pytest.approx(1921.46 - 1716.99)
    assert communication.spread_ratio == pytest.approx((1921.46 - 1716.99) / ((3350.92 + 3186.77) / 2 + 420.0))
    assert (spreads["compute"].rank, spreads["compute"].spread_us) == (1, pytest.approx(1384.64 - 1344.32))
    assert not extract_facts(load_profile(SAMPLE_SINGLE)).of(SpreadFact)  # one rank: nothing to compare


def test_without_step_trace_time_the_breakdown_comes_from_the_overlap_lanes(tmp_path):
    import shutil

    shutil.copytree(REAL / "rank0_ascend_pt", tmp_path / "rank0_ascend_pt")
    (tmp_path / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv").unlink()
    profile = load_profile(tmp_path)
    facts = extract_facts(profile)
    (step,) = facts.of(StepFact)
    written = _csv_rows(REAL / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")[0]
    assert step.step == 50
    assert step.compute_us == pytest.approx(float(written["Computing"]))
    assert step.comm_not_overlapped_us == pytest.approx(float(written["Communication(Not Overlapped)"]))
    assert step.preparing_us == pytest.approx(float(written["Preparing"]))  # ProfilerStep#50's start to the first lane
    assert step.free_us == pytest.approx(float(written["Free"]) + float(written["Preparing"]))
    assert step.sources[0].startswith("rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json[Overlap Analysis")
    assert any("comes from the Overlap Analysis lanes" in w for w in profile.coverage.warnings)


def test_step_trace_that_disagrees_with_the_lanes_is_flagged(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec())
    path = rank_dir / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"
    path.write_text(path.read_text().replace("1344.32", "2000.0"))
    warnings = extract_facts(load_profile(tmp_path)).warnings
    assert any("Computing differs by more than 1 % from the Overlap Analysis lanes" in w for w in warnings)
    assert not extract_facts(load_profile(build_rank(tmp_path / "ok", RankSpec()))).warnings


def test_operator_pipes_and_block_dim_from_kernel_details():
    real = {f.op_type: f for f in extract_facts(load_profile(REAL / "rank0_ascend_pt")).of(OperatorFact)}
    foreach = real["ForeachAddList"]
    assert (foreach.busiest_pipe, foreach.block_dim) == ("aiv_mte2", 48)
    assert foreach.busiest_pipe_ratio == pytest.approx(0.9796, abs=1e-3)
    assert foreach.block_dim_remainder is None  # the real capture has no device info: core count unknown
    sample = {f.op_type: f for f in extract_facts(load_profile(SAMPLE_SINGLE)).of(OperatorFact)}
    attention = sample["FlashAttentionScore"]  # 20 AI Cores in the sample's device info.json
    assert (attention.block_dim, attention.block_dim_remainder, attention.busiest_pipe) == (20, 0, "aic_scalar")


def test_unaligned_matmul_and_attention_shapes():
    from advisor.facts.operators import misaligned_axis

    assert misaligned_axis("MatMulV2", '"4096,3072;3072,8192"') is None
    assert misaligned_axis("MatMulV2", "4096,3000;3000,8192") == "K=3000 (not a multiple of 256)"
    assert misaligned_axis("BatchMatMulV2", "8,4096,3072;3072,1000") == "N=1000 (not a multiple of 256)"
    assert misaligned_axis("FlashAttentionScore", "1,32,4096,96;1,32,4096,96") == "head dim D=96 (not a multiple of 128)"
    assert misaligned_axis("FlashAttentionScore", "4096,3072") is None  # BSH: the head dim is not visible
    assert misaligned_axis("Add", "4096,1000;4096,1000") is None and misaligned_axis("MatMulV2", "x;y") is None
    real = {f.op_type: f for f in extract_facts(load_profile(REAL / "rank0_ascend_pt")).of(OperatorFact)}
    assert real["MatMulV2"].misaligned_axis == "K=1000 (not a multiple of 256)"


def test_collective_time_overlapping_matmul(tmp_path):
    from advisor.facts.models import ContentionFact

    kernels = [Kernel(5, "MatMulV2_1", "MatMulV2", "AI_CORE", 1000.0), Kernel(5, "hcom_allReduce__1", "hcom_allReduce_", "COMMUNICATION", 800.0),
               Kernel(5, "Add_1", "Add", "AI_VECTOR_CORE", 100.0)]
    build_rank(tmp_path, RankSpec(steps=[StepRow(5, 1100.0, 400.0, 50.0)], kernels=kernels, kernel_spacing_us=600.0))
    (contention,) = extract_facts(load_profile(tmp_path)).of(ContentionFact)
    assert contention.matmul_overlap_share == pytest.approx(400.0 / 800.0)  # the MatMul ends 400 µs into the collective
