"""GPU traces through `advisor diagnose`: discovery, the same fact families, the gpu facts, platform gating."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from builders import CUDA_CORE_GEMM, GpuJob, GpuKernel, write_gpu_job, write_kineto_trace
from conftest import REAL

from advisor.diagnose import default_rulebook, diagnose
from advisor.errors import RuleError
from advisor.facts import extract_facts
from advisor.ingest import load_profile
from advisor.rulebook import load_rulebook

# Each injected problem and the GPU rule that must name it (and that must stay quiet on a healthy job).
INJECTED = {
    "launch_bound": (GpuJob(gemms=0, elementwise=300, elementwise_us=4.0, launch_gap_us=12.0), "gpu.launch_bound"),
    "synchronisation": (GpuJob(syncs=3), "gpu.host_sync"),
    # a loader slower than the GPU's 9.8 ms step: the device waits for it every step (a faster one only delays
    # the first step, which the host then runs ahead of — an outlier step, not a data-loading bottleneck)
    "data_loading": (GpuJob(dataloader_us=15000.0), "gpu.slow_dataloader"),
    "cuda_core_gemm": (GpuJob(gemm_name=CUDA_CORE_GEMM), "gpu.cuda_core_gemm"),
    "pageable_copies": (GpuJob(pageable_copies=3), "gpu.pageable_copies"),
    "unfused_optimizer": (GpuJob(optimizer_kernels=200), "gpu.unfused_optimizer"),
    "exposed_nccl": (GpuJob(ranks=2, nccl_us=6000.0), "gpu.exposed_nccl"),
    "straggler": (GpuJob(ranks=4, nccl_us=1000.0, slow_rank=2, slow_extra_us=3000.0), "cluster.uneven_ranks"),
    "allocator": (GpuJob(memory_drops=2), "gpu.allocator_reorganisation"),
    # [memory] events carry host time: counted in the host's ProfilerStep windows, not the later kernel windows
    "allocator_behind_a_slow_loader": (GpuJob(memory_drops=1, dataloader_us=15000.0), "gpu.allocator_reorganisation"),
    "no_step_markers": (GpuJob(step_markers=False), "gpu.no_step_markers"),
    "no_memory_events": (GpuJob(memory=False), "gpu.no_memory_events"),
}


def _rules_fired(report) -> set[str]:
    return {finding.id for finding in report.findings}


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    root = tmp_path_factory.mktemp("healthy")
    write_gpu_job(root, GpuJob())
    return diagnose(root)


@pytest.mark.parametrize("problem", sorted(INJECTED))
def test_each_injected_gpu_problem_is_diagnosed(tmp_path, healthy, problem):
    job, rule = INJECTED[problem]
    write_gpu_job(tmp_path, job)
    report = diagnose(tmp_path)
    assert report.input.format == "pytorch-kineto" and report.status == "complete"
    assert rule in _rules_fired(report)
    assert rule not in _rules_fired(healthy)


def test_a_healthy_job_only_gets_the_dominant_kernel(healthy):
    assert _rules_fired(healthy) == {"gpu.dominant_kernel"}


def _platforms(report) -> set[str]:
    book = default_rulebook()
    return {p for f in report.findings for p in book.rules[f.id].spec.platforms} | {
        p for f in report.findings for rx in f.prescriptions for p in book.knowledge[rx.id].platforms}


def test_gpu_reports_carry_no_ascend_only_rule_or_advice(tmp_path):
    write_gpu_job(tmp_path, GpuJob(ranks=2, nccl_us=6000.0, syncs=2, dataloader_us=3000.0, memory_drops=1))
    report = diagnose(tmp_path)
    book = default_rulebook()
    for finding in report.findings:
        assert "gpu" in book.rules[finding.id].spec.platforms, finding.id
        for prescription in finding.prescriptions:
            assert "gpu" in book.knowledge[prescription.id].platforms, prescription.id
    text = json.dumps([f.model_dump(mode="json") for f in report.findings], ensure_ascii=False)
    for ascend_word in ("HCCL", "AscendCL", "torch_npu", "PYTORCH_NPU_ALLOC_CONF", "TASK_QUEUE_ENABLE"):
        assert ascend_word not in text


def test_ascend_reports_carry_no_gpu_only_rule_or_advice():
    report = diagnose(REAL)
    book = default_rulebook()
    assert report.findings
    for finding in report.findings:
        assert "ascend" in book.rules[finding.id].spec.platforms, finding.id
        for prescription in finding.prescriptions:
            assert "ascend" in book.knowledge[prescription.id].platforms, prescription.id
    assert not any(f.id.startswith("gpu.") for f in report.findings)


def test_a_rule_cannot_recommend_advice_that_does_not_hold_on_its_platform(tmp_path):
    pack = tmp_path / "pack"
    (pack / "rules").mkdir(parents=True)
    source = (default_rulebook().rules["gpu.launch_bound"].path).read_text(encoding="utf-8")
    (pack / "rules" / "team.launch_bound.yaml").write_text(
        source.replace("id: gpu.launch_bound", "id: team.launch_bound").replace("[gpu.cuda_graphs]", "[host.task_queue_level]"),
        encoding="utf-8")
    with pytest.raises(RuleError, match="runs on platforms gpu but recommends host.task_queue_level"):
        load_rulebook([pack], installed=False)


def test_gpu_facts_measure_the_trace(tmp_path):
    write_gpu_job(tmp_path, GpuJob(ranks=2, nccl_us=6000.0, gemm_name=CUDA_CORE_GEMM, pageable_copies=2))
    facts = extract_facts(load_profile(tmp_path)).facts
    gpu = next(f for f in facts if f.family == "gpu" and f.rank == 0)
    # per step: 20 × 400 µs sgemm + 60 × 30 µs element-wise on stream 7, then 6 ms of NCCL nothing overlaps
    assert gpu.fp32_gemm_share == pytest.approx(8000 / 9800)
    assert gpu.comm_comp_overlap == 0.0
    assert gpu.pageable_memcpy_per_step == 2 and gpu.memcpy_us_per_step == pytest.approx(80.0)
    assert gpu.device == "NVIDIA H100" and gpu.steps == 2  # HTA's scope: the last of the 3 steps is left out
    step = next(f for f in facts if f.family == "step" and f.rank == 0 and f.step == 2)
    assert step.compute_us == pytest.approx(9800.0) and step.comm_not_overlapped_us == pytest.approx(6000.0)
    (context,) = [f for f in facts if f.family == "context"]
    assert context.platform == "gpu" and context.format == "pytorch-kineto" and context.hardware == "NVIDIA H100"
    per_rank = [f for f in facts if getattr(f, "rank", None) == 1 and f.family not in ("spread", "straggler")]
    assert {s.split("[")[0] for f in per_rank for s in f.sources} == {"rank1.pt.trace.json"}


def test_nccl_wait_is_attributed_to_the_ranks_that_arrive_early(tmp_path):
    write_gpu_job(tmp_path, GpuJob(ranks=3, nccl_us=1000.0, slow_rank=1, slow_extra_us=3000.0))
    facts = extract_facts(load_profile(tmp_path)).facts
    waits = {f.rank: f for f in facts if f.family == "communication"}
    assert waits[1].wait_us == 0.0 and waits[1].transit_us == pytest.approx(1000.0)
    assert waits[0].wait_us == pytest.approx(3000.0) and waits[2].wait_us == pytest.approx(3000.0)
    straggler = next(f for f in facts if f.family == "straggler")
    assert straggler.rank == 1 and straggler.lost_us == pytest.approx(3000.0)


def test_a_single_trace_file_a_gz_trace_and_a_directory_tree_are_read(tmp_path):
    (path,) = write_gpu_job(tmp_path / "one", GpuJob(syncs=3), suffix=".pt.trace.json.gz")
    assert gzip.decompress(path.read_bytes())
    assert "gpu.host_sync" in _rules_fired(diagnose(path))
    nested = tmp_path / "run" / "node0" / "traces"
    write_gpu_job(nested, GpuJob(ranks=2, nccl_us=500.0))
    profile = load_profile(tmp_path / "run")
    assert [r.rank for r in profile.ranks] == [0, 1] and profile.platform == "gpu"
    assert profile.coverage.read == ["node0/traces/rank0.pt.trace.json", "node0/traces/rank1.pt.trace.json"]


def test_ranks_missing_or_repeated_are_renumbered_with_a_warning(tmp_path):
    kernels = [GpuKernel("ampere_sgemm_128x64_nn", 7, 0.0, 100.0, -20.0)]
    write_kineto_trace(tmp_path / "a.pt.trace.json", kernels, rank=0)
    write_kineto_trace(tmp_path / "b.pt.trace.json", kernels, rank=0)
    write_kineto_trace(tmp_path / "c.pt.trace.json", kernels, rank=None)
    profile = load_profile(tmp_path)
    assert [r.rank for r in profile.ranks] == [0, 1, 2]
    assert "b.pt.trace.json: repeats rank 0 (distributedInfo); numbered rank 1" in profile.coverage.warnings
    assert "c.pt.trace.json: records no rank (distributedInfo); numbered rank 2" in profile.coverage.warnings


def test_a_broken_trace_among_good_ones_is_skipped_and_named(tmp_path):
    write_gpu_job(tmp_path, GpuJob(ranks=2, nccl_us=500.0))
    (tmp_path / "rank1.pt.trace.json").write_bytes(b'{"traceEvents": [{"ph": "X"')
    report = diagnose(tmp_path)
    assert report.status == "partial" and report.input.ranks == [0]
    assert report.coverage.skipped[0].file == "rank1.pt.trace.json"
    assert "truncated before its first complete event" in report.coverage.skipped[0].reason


def test_a_trace_cut_off_mid_write_keeps_the_events_before_the_cut(tmp_path):
    (path,) = write_gpu_job(tmp_path, GpuJob(steps=4))
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.8)])
    report = diagnose(tmp_path)
    assert report.status == "partial" and report.input.ranks == [0]
    (cut,) = report.coverage.partly_read
    assert cut.file == "rank0.pt.trace.json" and "no closing ']'" in cut.reason
    assert report.input.steps[:2] == [1, 2]  # the complete steps before the cut are diagnosed


def test_steps_whose_kernels_are_missing_are_kept_and_called_partial(tmp_path):
    path = write_gpu_job(tmp_path, GpuJob())[0]
    document = json.loads(path.read_text())
    last_kernels = [e for e in document["traceEvents"] if e.get("cat") == "kernel"][-5:]
    document["traceEvents"] = [e for e in document["traceEvents"] if e not in last_kernels]
    path.write_text(json.dumps(document))
    report = diagnose(path)
    assert report.input.steps == [1, 2, 3]
    assert any(w.startswith("rank0.pt.trace.json: ProfilerStep 3: some launches have no GPU activity")
               for w in report.coverage.warnings)


def test_an_ascend_directory_is_not_mistaken_for_traces(tmp_path):
    shutil.copytree(REAL, tmp_path / "prof")
    assert load_profile(tmp_path / "prof").platform == "ascend"


def test_explain_says_a_rule_of_the_other_platform_does_not_run(tmp_path):
    from advisor.explain import explain_lines

    write_gpu_job(tmp_path, GpuJob(syncs=3))
    book = default_rulebook()
    profile = load_profile(tmp_path)
    lines = explain_lines(book.rules["host.online_compilation"], [], extract_facts(profile).facts, profile.platform)
    assert lines[1] == "NOT RUN: the rule runs on ascend profiles; this one is a gpu profile"
