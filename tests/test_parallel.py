"""Work spread over forked processes gives what one process gives, in order, and raises what the work raises."""

from __future__ import annotations

import os

import pytest

from advisor import parallel


def _square_with_pid(number: int) -> tuple[int, int]:
    if number < 0:
        raise ValueError(f"negative: {number}")
    return number * number, os.getpid()


def test_results_come_back_in_order_from_several_processes(monkeypatch):
    monkeypatch.setenv("ADVISOR_JOBS", "3")
    results = parallel.fork_map(_square_with_pid, list(range(7)))
    assert [value for value, _pid in results] == [n * n for n in range(7)]
    assert results[0][1] == os.getpid()  # the first piece runs here
    assert len({pid for _value, pid in results}) > 1


def _dies_in_a_worker(number: int) -> int:
    if parallel.in_worker():
        os._exit(9)  # as if the kernel killed it
    return number + 1


def test_pieces_of_a_worker_that_dies_are_done_here(monkeypatch):
    monkeypatch.setenv("ADVISOR_JOBS", "3")
    assert parallel.fork_map(_dies_in_a_worker, list(range(6))) == [1, 2, 3, 4, 5, 6]


def test_one_job_runs_everything_here(monkeypatch):
    monkeypatch.setenv("ADVISOR_JOBS", "1")
    assert {pid for _value, pid in parallel.fork_map(_square_with_pid, [1, 2, 3])} == {os.getpid()}


@pytest.mark.parametrize("failing", [0, 2])
def test_an_exception_in_any_piece_is_raised_here(monkeypatch, failing):
    monkeypatch.setenv("ADVISOR_JOBS", "2")
    items = [1, 2, 3]
    items[failing] = -5
    with pytest.raises(ValueError, match="negative: -5"):
        parallel.fork_map(_square_with_pid, items)


@pytest.mark.parametrize("value, expected", [("4", 4), ("1", 1), ("0", None), ("many", None), ("", None)])
def test_jobs_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("ADVISOR_JOBS", value)
    assert parallel.jobs() == (expected or parallel.default_jobs())


@pytest.mark.parametrize("v2, v1, expected", [
    ("max 100000\n", None, None),           # cgroup v2, unlimited
    ("150000 100000\n", None, 2),           # 1.5 CPUs: two processes
    ("50000 100000\n", None, 1),
    (None, ("400000", "100000"), 4),        # cgroup v1 quota
    (None, ("-1", "100000"), None),         # cgroup v1, unlimited
    (None, None, None),                     # no cgroup files
])
def test_container_cpu_quota_caps_the_default(monkeypatch, tmp_path, v2, v1, expected):
    if v2 is not None:
        (tmp_path / "cpu.max").write_text(v2)
    if v1 is not None:
        (tmp_path / "cpu.cfs_quota_us").write_text(v1[0])
        (tmp_path / "cpu.cfs_period_us").write_text(v1[1])
    monkeypatch.setattr(parallel, "CGROUP_V2_CPU_MAX", tmp_path / "cpu.max")
    monkeypatch.setattr(parallel, "CGROUP_V1_CPU", tmp_path)
    assert parallel._cgroup_cpu_quota() == expected
    usable = min(len(os.sched_getaffinity(0)), parallel.DEFAULT_MAX_JOBS)
    assert parallel.default_jobs() == (min(usable, expected) if expected else usable)


def _cluster(tmp_path):
    """Four ranks: one straggling, one DB export, one with a broken kernel table and one without a trace."""
    from builders import RankSpec, StepRow, build_rank, build_rank_db

    build_rank(tmp_path, RankSpec(rank=0))
    build_rank(tmp_path, RankSpec(rank=1, steps=[StepRow(5, 2600.0, 900.0, 85.0, 66.0), StepRow(6, 2600.0, 900.0, 85.0, 66.0)]))
    build_rank_db(tmp_path, RankSpec(rank=2))
    broken = build_rank(tmp_path, RankSpec(rank=3, omit=("trace_view.json",)))
    (broken / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_bytes(b"\x00\x01 not a csv")
    return tmp_path


def test_ranks_read_and_analysed_on_several_cores_give_the_serial_report(tmp_path, monkeypatch):
    from advisor.diagnose import diagnose

    profile = _cluster(tmp_path)
    reports = {}
    for jobs in ("1", "3"):
        monkeypatch.setenv("ADVISOR_JOBS", jobs)
        reports[jobs] = diagnose(profile).model_dump(mode="json", exclude={"generated_at"})
    assert reports["3"] == reports["1"]
    coverage = reports["1"]["coverage"]
    assert any("kernel_details.csv" in s["file"] for s in coverage["skipped"]) and coverage["read"]
    assert {f["rank"] for f in reports["1"]["facts"] if f["type"] == "breakdown" and f.get("rank") is not None} >= {0, 1, 2}


def test_the_jobs_option_sets_the_process_count_and_refuses_zero(tmp_path):
    import subprocess
    import sys

    profile = _cluster(tmp_path / "profile")
    reports = {}
    for jobs in ("1", "4"):
        out = tmp_path / f"report-{jobs}.json"
        done = subprocess.run([sys.executable, "-m", "advisor", "diagnose", str(profile), "--jobs", jobs, "-o", str(out)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 3, done.stderr  # partial: one rank's kernel table is broken
        reports[jobs] = out.read_text()
    assert reports["1"] == reports["4"]
    refused = subprocess.run([sys.executable, "-m", "advisor", "diagnose", str(profile), "-j", "0"],
                             capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "--jobs" in refused.stderr and "Traceback" not in refused.stderr


def test_jobs_given_on_the_command_line_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("ADVISOR_JOBS", "5")
    assert parallel.jobs(2) == 2  # RunOptions.jobs, from --jobs
    assert parallel.jobs(None) == parallel.jobs() == 5
