"""A rank's files belong to one capture, and its step breakdown comes from the trace's Overlap Analysis lanes when
step_trace_time.csv is missing: on the real msprof-analyze fixture (a kernel_details.csv of another capture beside a
trace_view.json without step_trace_time.csv) and on rank directories built in the real files' shapes."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pandas as pd
import pytest
from builders import RankSpec, StepRow, build_rank
from conftest import FIXTURES, REAL

from advisor.diagnose import diagnose
from advisor.facts import extract_facts
from advisor.facts.models import BreakdownFact, OperatorFact, StepFact
from advisor.ingest import load_profile
from advisor.ingest.lanes import lane_steps, lane_windows
from advisor.ingest.trace import TraceTables

MSPROF = FIXTURES / "ascend-more" / "msprof-analyze-fixture"
MSPROF_OUT = "x_1_20250101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT"
OUT = "ASCEND_PROFILER_OUTPUT"
YEAR_US = 365 * 86400 * 1e6


def _shift(path: Path, column: str, by_us: float) -> None:
    """Move every time of ``column`` in a CSV the builder wrote by ``by_us`` (its trailing TAB kept)."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    at = rows[0].index(column)
    for row in rows[1:]:
        cell = row[at]
        row[at] = f"{float(cell.strip()) + by_us:.3f}" + ("\t" if cell.endswith("\t") else "")
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(rows)


# --- 1. files of another capture are not merged ------------------------------------------------------------------

def test_the_real_kernel_table_of_another_capture_is_skipped_with_both_time_ranges():
    profile = load_profile(MSPROF)
    (skipped,) = profile.coverage.skipped
    assert skipped.file == f"{MSPROF_OUT}/kernel_details.csv"
    # its Start Time(us) 1699529622… (Nov 2023) against the trace's 1704161511… (Jan 2024)
    assert skipped.reason == (
        f"comes from another capture than {MSPROF_OUT}/trace_view.json: its times (2023-11-09 11:33:42.790 – "
        "11:33:43.307 UTC) do not overlap that file's (2024-01-02 02:11:51.420 – 02:11:51.434 UTC), so it is not "
        "merged with it")
    assert f"{MSPROF_OUT}/kernel_details.csv" not in profile.coverage.read
    assert profile.ranks[0].kernels is None
    assert not extract_facts(profile).of(OperatorFact)  # no MatMul of 14 ms in a 14 ms step of 1.8 ms compute


def test_the_real_report_says_so_and_leaves_the_foreign_operators_out(rulebook):
    report = diagnose(MSPROF, rulebook=rulebook)
    assert report.status == "partial"
    assert [s.file for s in report.coverage.skipped] == [f"{MSPROF_OUT}/kernel_details.csv"]
    assert not report.summary.top_operators


@pytest.mark.parametrize(("file", "column"), [("kernel_details.csv", "Start Time(us)"),
                                              ("memory_record.csv", "Timestamp(us)")])
def test_a_table_whose_times_miss_the_trace_is_skipped(tmp_path, file, column):
    rank_dir = build_rank(tmp_path, RankSpec())
    _shift(rank_dir / OUT / file, column, -YEAR_US)
    profile = load_profile(tmp_path)
    (skipped,) = profile.coverage.skipped
    assert skipped.file.endswith(f"{OUT}/{file}")
    assert skipped.reason.startswith("comes from another capture than ")
    assert f"{OUT}/trace_view.json: its times (2024-11-27" in skipped.reason  # a year before the trace's 2025-11-27
    assert "that file's (2025-11-27 12:34:37" in skipped.reason
    rank = profile.ranks[0]
    assert (rank.kernels is None) == (file == "kernel_details.csv")
    assert (rank.memory_record is None) == (file == "memory_record.csv")


def test_tables_that_overlap_the_trace_are_all_kept(tmp_path):
    build_rank(tmp_path, RankSpec())
    profile = load_profile(tmp_path)
    assert not profile.coverage.skipped
    rank = profile.ranks[0]
    assert rank.kernels is not None and rank.memory_record is not None


def test_without_a_trace_the_kernel_table_is_the_reference(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec(omit=("trace_view.json",)))
    _shift(rank_dir / OUT / "memory_record.csv", "Timestamp(us)", YEAR_US)
    profile = load_profile(tmp_path)
    (skipped,) = profile.coverage.skipped
    assert skipped.file.endswith(f"{OUT}/memory_record.csv")
    assert f"comes from another capture than {skipped.file.rsplit('/', 1)[0]}/kernel_details.csv" in skipped.reason
    assert profile.ranks[0].kernels is not None


def test_the_real_profiles_keep_every_table():
    for path in (REAL, FIXTURES / "ascend-more" / "text-level0-2ranks", FIXTURES / "ascend-more" / "server-rank0"):
        assert not load_profile(path).coverage.skipped, path


# --- 2. the step breakdown from the Overlap Analysis lanes -------------------------------------------------------

def test_the_real_trace_gives_the_step_breakdown_without_step_trace_time():
    profile = load_profile(MSPROF)
    rank = profile.ranks[0]
    source = rank.source("step_trace")
    assert source.file.name == "trace_view.json" and source.content.startswith("Overlap Analysis lanes")
    assert (f"{MSPROF_OUT}/step_trace_time.csv is missing; the step breakdown of rank 0 comes from the Overlap "
            f"Analysis lanes of {MSPROF_OUT}/trace_view.json") in profile.coverage.warnings
    facts = extract_facts(profile)
    (step,) = facts.of(StepFact)
    assert step.step == 1
    assert step.compute_us == pytest.approx(1788.2505, abs=0.01)  # the Computing lane inside ProfilerStep#1
    assert step.comm_not_overlapped_us == 0.0
    # Preparing: ProfilerStep#1 starts at …420289.011, the first Computing event at …422904.2
    assert step.preparing_us == pytest.approx(2615.2, abs=0.5)
    assert step.free_us == pytest.approx(9481.667 + step.preparing_us, abs=0.5)
    assert step.step_time_us <= 14091.97  # inside the 14.09 ms ProfilerStep
    assert step.sources == [f"{MSPROF_OUT}/trace_view.json[{source.content}]"]
    (breakdown,) = [b for b in facts.of(BreakdownFact) if b.scope == "rank"]
    assert breakdown.dominant_overhead == "free" and breakdown.free_ratio > 0.8


def test_the_real_report_gives_a_verdict(rulebook):
    report = diagnose(MSPROF, rulebook=rulebook)
    assert report.summary.bottleneck == "host"
    assert report.summary.free_ratio > 0.8
    assert "profiling.no_step_breakdown" not in {f.id for f in report.findings}


@pytest.mark.parametrize("rank", [0, 1])
def test_the_lanes_of_the_real_level1_trace_give_what_step_trace_time_says(tmp_path, rank):
    name = f"rank{rank}_ascend_pt"
    shutil.copytree(REAL / name, tmp_path / name)
    (tmp_path / name / OUT / "step_trace_time.csv").unlink()
    built = load_profile(tmp_path).ranks[0].step_trace.frame.iloc[0]
    with (REAL / name / OUT / "step_trace_time.csv").open(newline="") as handle:
        written = next(csv.DictReader(handle))
    assert built["step"] == written["Step"] == "50"
    for column, header in (("computing_us", "Computing"), ("comm_not_overlapped_us", "Communication(Not Overlapped)"),
                           ("communication_us", "Communication"), ("overlapped_us", "Overlapped"), ("free_us", "Free"),
                           ("preparing_us", "Preparing")):
        assert built[column] == pytest.approx(float(written[header]), abs=0.01), header


def test_the_lanes_of_a_built_rank_give_its_rows(tmp_path):
    steps = [StepRow(5, 1344.32, 1921.46, 85.14, 66.46), StepRow(6, 1500.0, 1800.0, 120.0, 10.0)]  # Preparing 2 ms
    build_rank(tmp_path, RankSpec(steps=steps, omit=("step_trace_time.csv",)))
    facts = extract_facts(load_profile(tmp_path))
    found = {s.step: s for s in facts.of(StepFact)}
    for row in steps:
        step = found[row.step]
        assert (step.compute_us, step.comm_not_overlapped_us) == pytest.approx((row.computing, row.comm_not_overlapped))
        assert step.preparing_us == pytest.approx(row.preparing)
        assert step.free_us == pytest.approx(row.free + row.preparing)
        assert step.overlapped_us == pytest.approx(row.overlapped)


def _trace(host, device=(), launches=(), overlap=()) -> TraceTables:
    return TraceTables(host=pd.DataFrame(host, columns=["name", "cat", "tid", "ts", "dur"]),
                       apis=pd.DataFrame(columns=["name", "tid", "ts", "dur"]),
                       device=pd.DataFrame(device, columns=["stream", "name", "task_type", "ts", "dur"]),
                       overlap=pd.DataFrame(overlap, columns=["lane", "ts", "dur"]),
                       launches=pd.DataFrame(launches, columns=["launch_ts", "device_ts"]))


def test_a_step_window_reaches_the_end_of_the_device_work_launched_in_it():
    # ProfilerStep#1 [0, 100), #2 [100, 200): a kernel launched at 190 runs on the device from 250 to 300
    trace = _trace([("ProfilerStep#1", "cpu_op", 1, 0.0, 100.0), ("ProfilerStep#2", "cpu_op", 1, 100.0, 100.0)],
                   device=[(2, "MatMul", "AI_CORE", 250.0, 50.0), (2, "Add", "AI_CORE", 40.0, 20.0)],
                   launches=[(190.0, 250.0), (30.0, 40.0)],
                   overlap=[("Computing", 40.0, 20.0), ("Free", 60.0, 190.0), ("Computing", 250.0, 50.0),
                            ("Computing", 400.0, 10.0)])
    windows = lane_windows(trace)
    assert windows[["step", "start", "end"]].values.tolist() == [[1, 0.0, 100.0], [2, 100.0, 300.0]]
    rows = lane_steps(trace).set_index("step")
    assert rows.loc["1", "computing_us"] == 20.0 and rows.loc["1", "free_us"] == 190.0
    assert rows.loc["1", "preparing_us"] == 40.0
    assert rows.loc["2", "computing_us"] == 50.0  # the lane after the capture's last step (at 400) is no step's
    assert rows.loc["2", "preparing_us"] == 150.0


def test_a_trace_without_profiler_steps_is_one_step():
    trace = _trace([("aten::mm", "cpu_op", 1, 0.0, 10.0)], overlap=[("Computing", 5.0, 20.0), ("Free", 25.0, 5.0)])
    rows = lane_steps(trace)
    assert rows["step"].tolist() == [""]
    assert (rows["computing_us"].iloc[0], rows["free_us"].iloc[0], rows["preparing_us"].iloc[0]) == (20.0, 5.0, 5.0)
