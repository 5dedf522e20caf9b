"""advisor's GPU time breakdown and overlap agree with Holistic Trace Analysis on the same traces (±2 points).

Runs when HTA (``holistictraceanalysis``) is importable; .ci/run installs it and sets ADVISOR_REQUIRE_HTA=1 so
that its absence fails instead of skipping. ``bench/hta_compare.py`` prints the same comparison as a table.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from builders import CUDA_CORE_GEMM, GpuJob, write_gpu_job

from advisor.facts import extract_facts
from advisor.ingest import load_profile

HAVE_HTA = importlib.util.find_spec("hta") is not None
if not HAVE_HTA and os.environ.get("ADVISOR_REQUIRE_HTA"):
    raise RuntimeError("ADVISOR_REQUIRE_HTA is set but holistictraceanalysis is not installed")
pytestmark = pytest.mark.skipif(not HAVE_HTA, reason="holistictraceanalysis is not installed (.ci/run installs it)")

JOBS = {
    "compute-bound": GpuJob(ranks=2, steps=4),
    "launch-bound": GpuJob(ranks=2, steps=4, gemms=0, elementwise=300, elementwise_us=4.0, launch_gap_us=12.0),
    "exposed NCCL": GpuJob(ranks=2, steps=4, nccl_us=6000.0, syncs=2),
    "overlapped NCCL": GpuJob(ranks=2, steps=4, nccl_us=3000.0, nccl_overlapped=True, gemm_name=CUDA_CORE_GEMM),
    "copies and a straggler": GpuJob(ranks=4, steps=4, nccl_us=1000.0, slow_rank=1, slow_extra_us=2000.0,
                                     pageable_copies=4, dataloader_us=2000.0),
}


def hta_figures(trace_dir) -> dict[int, dict[str, float]]:
    """HTA's idle/compute/non-compute % and communication–computation overlap % per rank."""
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(trace_dir))
    breakdown = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
    overlap = analysis.get_comm_comp_overlap(visualize=False).set_index("rank")["comp_comm_overlap_pctg"]
    return {int(rank): {"idle": row["idle_time_pctg"], "compute": row["compute_time_pctg"],
                        "non_compute": row["non_compute_time_pctg"], "overlap": float(overlap.get(rank, float("nan")))}
            for rank, row in breakdown.iterrows()}


def advisor_figures(trace_dir) -> dict[int, dict[str, float | None]]:
    facts = [f for f in extract_facts(load_profile(trace_dir)).facts if f.family == "gpu"]
    return {f.rank: {"idle": 100 * f.idle_ratio, "compute": 100 * f.compute_ratio, "non_compute": 100 * f.non_compute_ratio,
                     "overlap": None if f.comm_comp_overlap is None else 100 * f.comm_comp_overlap} for f in facts}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_idle_compute_and_overlap_agree_with_hta(tmp_path, name):
    write_gpu_job(tmp_path, JOBS[name])
    theirs, ours = hta_figures(tmp_path), advisor_figures(tmp_path)
    assert set(theirs) == set(ours)
    for rank, figures in ours.items():
        for measure in ("idle", "compute", "non_compute"):
            assert figures[measure] == pytest.approx(theirs[rank][measure], abs=2.0), (rank, measure)
        if figures["overlap"] is not None:
            assert figures["overlap"] == pytest.approx(theirs[rank]["overlap"], abs=2.0), (rank, "overlap")


@pytest.mark.parametrize("workers", [0, 4])
def test_the_tutorial_traces_agree_with_hta(tmp_path, workers):
    """The real ResNet-50 traces (V100): HTA reads them from a copy whose only file is the trace."""
    import shutil
    from pathlib import Path

    source = Path(__file__).parent / "fixtures" / "pytorch-tutorial-resnet50" / f"num_workers_{workers}"
    for trace in source.glob("*.json.gz"):
        shutil.copy(trace, tmp_path / trace.name)
    theirs, ours = hta_figures(tmp_path), advisor_figures(tmp_path)
    for measure in ("idle", "compute", "non_compute"):
        assert ours[0][measure] == pytest.approx(theirs[0][measure], abs=2.0), measure
