"""Spread independent pieces of work over the machine's cores in forked worker processes.

The number of processes is ``ADVISOR_JOBS`` when set (``1`` turns parallel work off), else the CPUs this
process may run on. Workers are forked, so they start in milliseconds with every module already imported;
where ``fork`` does not exist (Windows, macOS defaults aside) the work runs in this process, one piece after
the other, with the same results.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

JOBS_VARIABLE = "ADVISOR_JOBS"

Item = TypeVar("Item")
Result = TypeVar("Result")


def jobs() -> int:
    """How many processes parallel work may use (at least 1)."""
    text = os.environ.get(JOBS_VARIABLE, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # no affinity on this OS
        return os.cpu_count() or 1


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def fork_map(function: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
    """``[function(item) for item in items]``, the first in this process and the rest in forked workers.

    ``function`` and its results must pickle (results travel back through a pipe); an exception raised by
    any piece is raised here.
    """
    workers = min(jobs(), len(items)) - 1
    if workers < 1 or not can_fork():
        return [function(item) for item in items]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(function, item) for item in items[1:]]
        first = function(items[0])
        return [first, *(future.result() for future in futures)]
