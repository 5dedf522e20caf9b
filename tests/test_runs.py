"""Runs kept apart (issue 29, item 2): a directory of separate runs — tb-profiler's log-dir convention, one
subdirectory per run — is refused naming each run (exit 2), never merged into one job; the ranks of one job still
merge, wherever they were gathered, and a serving recipe's phase directories stay one profile."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from builders import GpuJob, write_gpu_job
from conftest import FIXTURES, SAMPLE_CLUSTER, SAMPLE_SINGLE
from typer.testing import CliRunner

from advisor.cli import app
from advisor.errors import InputError
from advisor.ingest.discover import discover

TUTORIAL = FIXTURES / "pytorch-tutorial-resnet50"
STAMP = "20251127192733"  # the capture time in the sample rank directories' names


def _invoke(*arguments: str):
    return CliRunner().invoke(app, list(arguments), env={"LANG": "C.UTF-8", "COLUMNS": "100"})


def _refused(path: Path) -> str:
    with pytest.raises(InputError) as refused:
        discover(path)
    return str(refused.value)


def _copy_rank(rank_dir: Path, parent: Path, stamp: str = STAMP) -> Path:
    """A copy of a rank directory under ``parent``, its capture time in the name replaced by ``stamp``."""
    return shutil.copytree(rank_dir, parent / rank_dir.name.replace(STAMP, stamp))


@pytest.fixture
def runs(tmp_path) -> Path:
    """tb-profiler's log directory holding the PyTorch tutorial's two real runs, one subdirectory each."""
    for run in ("num_workers_0", "num_workers_4"):
        shutil.copytree(TUTORIAL / run, tmp_path / "runs" / run)
    return tmp_path / "runs"


def test_a_directory_of_two_runs_exits_2_naming_both(runs):
    result = _invoke("diagnose", str(runs))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    first, second = runs / "num_workers_0", runs / "num_workers_4"
    assert line == (f"advisor: error: {runs}: holds 2 separate runs, which are not merged into one job (they repeat a "
                    f"rank id, or their captures lie more than 10 minutes apart): {first} (rank 0, captured 2021-06-08 "
                    f"09:04); {second} (rank 0, captured 2021-06-09 04:25). Diagnose one by its path (advisor diagnose "
                    f"{first}), or compare two (advisor compare {first} {second})")


def test_the_runs_named_compare_and_diagnose_by_their_paths(runs):
    assert _invoke("diagnose", str(runs / "num_workers_0"), "-f", "json").exit_code == 0
    result = _invoke("compare", str(runs / "num_workers_0"), str(runs / "num_workers_4"), "-f", "json")
    assert result.exit_code == 0, result.stderr


def test_two_copies_of_one_ascend_rank_are_two_runs(tmp_path):
    """Same rank id, same capture time: only the repeated rank tells them apart — found however deep they lie."""
    for run in ("a", "b"):
        _copy_rank(SAMPLE_SINGLE, tmp_path / "logs" / "exp" / run)
    message = _refused(tmp_path / "logs")
    runs = tmp_path / "logs" / "exp"
    assert "holds 2 separate runs" in message
    assert f": {runs / 'a'} (rank 0, captured 2025-11-27 19:27); {runs / 'b'} (rank 0, captured 2025-11-27 19:27). " \
           in message


def test_ranks_gathered_per_node_still_merge(tmp_path):
    """The real 2-rank cluster split into node0/ and node1/: distinct ranks captured together are one job."""
    for node, rank_dir in enumerate(sorted(SAMPLE_CLUSTER.iterdir())):
        _copy_rank(rank_dir, tmp_path / f"node{node}")
    layout = discover(tmp_path)
    assert [r.rank for r in layout.ranks] == [0, 1] and not layout.warnings


def test_distinct_ranks_captured_an_hour_apart_in_two_directories_are_two_runs(tmp_path):
    first, second = sorted(SAMPLE_CLUSTER.iterdir())
    _copy_rank(first, tmp_path / "before")
    _copy_rank(second, tmp_path / "after", stamp="20251127203502")
    message = _refused(tmp_path)
    assert (f"{tmp_path / 'after'} (rank 1, captured 2025-11-27 20:35); {tmp_path / 'before'} (rank 0, captured "
            "2025-11-27 19:27)") in message


@pytest.mark.parametrize(("later_ms", "runs"), [(60_000, 1), (3_600_000, 2)])
def test_traces_of_one_job_per_node_merge_and_an_hour_apart_do_not(tmp_path, later_ms, runs):
    """tensorboard_trace_handler's names ({worker}.{ms}.pt.trace.json) give the capture time; the ranks are distinct
    (distributedInfo), so the time alone tells."""
    for rank, trace in enumerate(write_gpu_job(tmp_path / "written", GpuJob(ranks=2))):
        node = tmp_path / "job" / f"node{rank}"
        node.mkdir(parents=True)
        trace.rename(node / f"host{rank}_{4242 + rank}.{1764271653123 + rank * later_ms}.pt.trace.json")
    if runs == 1:
        assert len(discover(tmp_path / "job").ranks) == 2
    else:
        assert "holds 2 separate runs" in _refused(tmp_path / "job")


def test_a_serving_recipe_s_phase_directories_stay_one_profile(tmp_path):
    """prof/prefill/ and prof/decode/ hold the same rank's captures: one rank, its prefill capture as a companion."""
    prefill = _copy_rank(SAMPLE_SINGLE, tmp_path / "prof" / "prefill")
    decode = _copy_rank(SAMPLE_SINGLE, tmp_path / "prof" / "decode", stamp="20251127193240")
    (rank,) = discover(tmp_path / "prof").ranks
    assert (rank.path, rank.stage, rank.companions) == (decode, "decode", (("prefill", prefill),))


def test_two_serving_runs_each_in_phase_directories_are_two_runs(tmp_path):
    for run, stamp in (("day1", STAMP), ("day2", "20251128101500")):
        for phase in ("prefill", "decode"):
            _copy_rank(SAMPLE_SINGLE, tmp_path / "runs" / run / phase, stamp=stamp)
    message = _refused(tmp_path / "runs")
    assert f"{tmp_path / 'runs' / 'day1'} (rank 0, captured 2025-11-27 19:27); {tmp_path / 'runs' / 'day2'}" in message


def test_an_ascend_rank_with_its_prof_directories_is_one_run(tmp_path):
    rank_dir = _copy_rank(SAMPLE_SINGLE, tmp_path / "job")
    assert any(p.name.startswith("PROF_") for p in rank_dir.iterdir())
    assert [r.path for r in discover(tmp_path).ranks] == [rank_dir]


def test_many_runs_are_counted_past_the_first_eight(tmp_path):
    for run in range(10):
        _copy_rank(SAMPLE_SINGLE, tmp_path / f"run{run}")
    message = _refused(tmp_path)
    assert "holds 10 separate runs" in message and f"{tmp_path / 'run7'} (rank 0" in message
    assert "; and 2 more. Diagnose one" in message and f"{tmp_path / 'run8'}" not in message
