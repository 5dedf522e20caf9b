"""Spread independent pieces of work over the machine's cores in forked worker processes.

The number of processes is ``--jobs`` (the ``JOBS`` context variable) when given, else ``ADVISOR_JOBS`` when
set (``1`` turns parallel work off), else the CPUs this process may use (affinity and container quota), at
most 8. Workers are forked after the work is set up, so they start in milliseconds with every
module imported and every table already in memory: only an item's index goes to a worker, and only its
result comes back (pickled). Off Linux the work runs in this process, one piece after the other, with the
same results. Work started inside a worker runs there serially.
"""

from __future__ import annotations

import contextvars
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

JOBS_VARIABLE = "ADVISOR_JOBS"
JOBS: contextvars.ContextVar[int | None] = contextvars.ContextVar("JOBS", default=None)
DEFAULT_MAX_JOBS = 8
CGROUP_V2_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")

Item = TypeVar("Item")
Result = TypeVar("Result")

_work: tuple[Callable[[Any], Any], Sequence[Any]] | None = None  # what the forked workers run
_in_worker = False


def jobs() -> int:
    """How many processes parallel work may use (at least 1)."""
    chosen = JOBS.get()
    if chosen is not None and chosen > 0:
        return chosen
    text = os.environ.get(JOBS_VARIABLE, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return default_jobs()


def default_jobs() -> int:
    """The CPUs this process may use — its affinity and its container's CPU quota — at most DEFAULT_MAX_JOBS.

    Each worker holds a rank's tables (or a trace's blocks) while it reads, so the default stays modest on
    large hosts; ``--jobs`` goes higher.
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this OS
        usable = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        usable = min(usable, quota)
    return max(1, min(usable, DEFAULT_MAX_JOBS))


def _cgroup_cpu_quota() -> int | None:
    """Whole CPUs allowed by a cgroup v2 ``cpu.max`` or v1 CFS quota (rounded up), None when unlimited."""
    try:
        fields = CGROUP_V2_CPU_MAX.read_text().split()
    except OSError:
        fields = []
    if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit() and int(fields[1]) > 0:
        return max(1, -(-int(fields[0]) // int(fields[1])))
    try:
        quota = int((CGROUP_V1_CPU / "cpu.cfs_quota_us").read_text())
        period = int((CGROUP_V1_CPU / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return max(1, -(-quota // period)) if quota > 0 and period > 0 else None


def in_worker() -> bool:
    """Whether this process is a worker of fork_map (which must not draw on the terminal)."""
    return _in_worker


def can_fork() -> bool:
    """Linux only: elsewhere fork is unsafe (macOS system libraries) or absent (Windows)."""
    return not _in_worker and sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def fork_map(function: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
    """``[function(item) for item in items]`` computed by this process and ``jobs() - 1`` forked workers.

    This process takes the first item, then the last items no worker has started, while the workers take
    them from the front; the pieces of a worker that dies (killed for memory, say) are done here too.
    Results must pickle; an exception raised by any piece is raised here.
    """
    global _work
    workers = min(jobs(), len(items)) - 1
    if workers < 1 or not can_fork():
        return [function(item) for item in items]
    _work = (function, items)
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_become_worker) as pool:
            futures: list[Future | None] = [None, *(pool.submit(_run, index) for index in range(1, len(items)))]
            try:
                return _share(function, items, futures)
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
    finally:
        _work = None


def _share(function: Callable[[Any], Any], items: Sequence[Any], futures: list[Future | None]) -> list[Any]:
    results: list[Any] = [function(items[0])] + [None] * (len(items) - 1)
    for index in range(len(items) - 1, 0, -1):
        if not futures[index].cancel():  # type: ignore[union-attr]
            break
        futures[index] = None
        results[index] = function(items[index])
    for index, future in enumerate(futures):
        if future is not None:
            try:
                results[index] = future.result()
            except BrokenProcessPool:  # a worker died (killed for memory?): do its piece here
                results[index] = function(items[index])
    return results


def _become_worker() -> None:
    """Mark this forked process as a worker, with standard streams of its own.

    The parent's stream objects may have been locked by another thread (the progress display) at the
    moment of the fork; a worker flushing them at exit would then wait forever. Workers print nothing.
    """
    global _in_worker
    _in_worker = True
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the worker)


def _run(index: int) -> Any:
    function, items = _work  # type: ignore[misc]
    return function(items[index])
