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
    assert parallel.jobs() == (expected or len(os.sched_getaffinity(0)))
