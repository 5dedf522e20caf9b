"""RunOptions (advisor/runoptions.py): the one way a run's settings enter it, from the command line and the Python API.

The settings given through ``options=`` must act as the command line's options do — the same messages, the same
reports — in this process, in forked workers and in Dask workers, and leave nothing behind them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import distributed  # a dev dependency (ascend-perf-advisor[dask]), as in test_cluster_scale
import pytest
from conftest import FIXTURES, REAL
from typer.testing import CliRunner

import advisor
from advisor import runoptions
from advisor.cli import app
from advisor.errors import InputError
from advisor.render import render_json
from advisor.runoptions import RunOptions

SINGLE = FIXTURES / "samples" / "single_rank"
TRACE = FIXTURES / "pytorch-tutorial-resnet50" / "num_workers_0"
OUT = "localhost_2231054_20251127192733123_ascend_pt/ASCEND_PROFILER_OUTPUT"


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout


@pytest.fixture(autouse=True)
def _no_settings_from_the_environment(monkeypatch):
    for variable in ("ADVISOR_JOBS", "ADVISOR_SCHEDULER", "ADVISOR_DEEP"):
        monkeypatch.delenv(variable, raising=False)


def test_a_file_size_limit_given_through_run_options_skips_the_file_as_the_command_line_does():
    report = advisor.diagnose(SINGLE, options=RunOptions(max_file_bytes=10 << 10))
    assert {s.file: s.reason for s in report.coverage.skipped}[f"{OUT}/trace_view.json"] == (
        "is 68.2 KiB, over the 10.0 KiB --max-file-size limit; rerun with --max-file-size 1M to read it")
    code, stdout = _cli("diagnose", str(SINGLE), "--max-file-size", "10K", "-f", "json")
    assert code == 3  # partial: a file was skipped
    assert json.loads(stdout) == json.loads(render_json(report))
    assert runoptions.current() == RunOptions()  # nothing is left set after the run
    assert f"{OUT}/trace_view.json" in advisor.diagnose(SINGLE).coverage.read  # the next run has the default limit


def test_the_limit_bounds_a_decompressed_trace_as_the_command_line_does():
    report = advisor.diagnose(TRACE, options=RunOptions(max_file_bytes=2 << 20))
    (skipped,) = report.coverage.skipped
    assert skipped.reason.startswith("expands past 2.0 MiB when decompressed (over 200× its size or the --max-file-size "
                                     "limit); it looks like a decompression bomb")
    code, stdout = _cli("diagnose", str(TRACE), "--max-file-size", "2M", "-f", "json")
    assert report.status == "empty" and code == 4  # the only trace was skipped: nothing diagnosed
    assert json.loads(stdout) == json.loads(render_json(report))


def test_one_job_and_two_give_the_same_report_and_forked_workers_keep_the_limit():
    reports = {jobs: render_json(advisor.diagnose(REAL, options=RunOptions(jobs=jobs, max_file_bytes=1 << 20)))
               for jobs in (1, 2)}
    assert reports[1] == reports[2]
    skipped = {s["file"] for s in json.loads(reports[2])["coverage"]["skipped"]}
    assert skipped == {f"rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json" for r in (0, 1)}


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_progress_listener_hears_of_every_file_read_here_and_in_forked_workers(jobs):
    heard: list[tuple[str, int]] = []
    report = advisor.diagnose(REAL, options=RunOptions(jobs=jobs, progress=lambda file, size: heard.append((file, size))))
    files = {file for file, _size in heard}
    assert set(report.coverage.read) <= files and len(heard) == len(files)
    assert all(size == (Path(report.input.path) / file).stat().st_size for file, size in heard)


def test_compare_takes_the_options_for_both_sides():
    heard: list[str] = []
    advisor.compare(REAL, SINGLE, options=RunOptions(jobs=1, progress=lambda file, _size: heard.append(file)))
    assert any(f.startswith("rank0_ascend_pt/") for f in heard) and any(f.startswith(f"{OUT}/") for f in heard)


def test_dask_workers_get_the_runs_options_without_its_listener():
    local = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = distributed.Client(local)
    try:
        heard: list[str] = []
        options = RunOptions(max_file_bytes=1 << 20, progress=lambda file, _size: heard.append(file))
        on_dask = render_json(advisor.diagnose(REAL, options=replace(options, scheduler=client)))
    finally:
        client.close()
        local.close()
    assert heard == []  # the listener stays in this process, which reads no rank's files on Dask
    assert on_dask == render_json(advisor.diagnose(REAL, options=options))  # the limit reached the Dask worker
    assert heard  # the pool's forked workers send theirs here


def test_the_keywords_of_before_are_taken_over_the_options():
    with pytest.raises(InputError, match="not 'local'"):
        advisor.diagnose(SINGLE, options=RunOptions(scheduler=42))
    assert advisor.diagnose(SINGLE, scheduler="pool", options=RunOptions(scheduler=42)).status == "complete"
    assert RunOptions(scheduler=42, progress=print).portable() == RunOptions()


@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5"])
def test_an_invalid_advisor_jobs_is_an_error_not_ignored(monkeypatch, value):
    """ADVISOR_JOBS that is not a number of processes stops the run with exit 2 and says what to set (the library's
    parallel.jobs still falls back to the cores: only the command line refuses it)."""
    monkeypatch.setenv("ADVISOR_JOBS", value)
    result = CliRunner().invoke(app, ["diagnose", str(SINGLE), "-f", "json"])
    assert result.exit_code == 2
    assert f"ADVISOR_JOBS={value!r} is not a number of processes (1 or more)" in result.stderr


def test_an_env_file_with_a_utf8_bom_is_read(tmp_path):
    from advisor.usercontext import build_context

    env = tmp_path / "env.txt"
    env.write_bytes("\ufeffTASK_QUEUE_ENABLE=1\nHCCL_BUFFSIZE=400\n".encode())
    assert build_context([], [env], None).env == {"TASK_QUEUE_ENABLE": ("1", str(env)), "HCCL_BUFFSIZE": ("400", str(env))}
