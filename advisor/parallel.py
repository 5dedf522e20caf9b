"""Spread independent pieces of work over the machine's cores in forked worker processes.

The number of processes is the run's ``jobs`` (``RunOptions.jobs``, ``--jobs``) when given, else ``ADVISOR_JOBS``
when set (``1`` turns parallel work off), else the CPUs this process may use (affinity and container quota), at
most 8. Workers are forked after the work is set up, so they start in milliseconds with every
module imported and every table already in memory: only an item's index goes to a worker, and only its
result comes back (pickled). Off Linux the work runs in this process, one piece after the other, with the
same results. Work started inside a worker runs there serially.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import selectors
import signal
import struct
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

JOBS_VARIABLE = "ADVISOR_JOBS"
DEFAULT_MAX_JOBS = 8
CGROUP_V2_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")

Item = TypeVar("Item")
Result = TypeVar("Result")

_in_worker = False
_progress_pipe: int | None = None  # in a worker: where its progress messages go (the parent's display)
_PROGRESS = -2  # the index of a progress frame
_PR_SET_PDEATHSIG = 1


def jobs(chosen: int | None = None) -> int:
    """How many processes parallel work may use (at least 1): ``chosen`` (the run's ``jobs``) when it is 1 or more,
    else ADVISOR_JOBS, else default_jobs()."""
    if chosen is not None and chosen > 0:
        return chosen
    text = os.environ.get(JOBS_VARIABLE, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return default_jobs()


_jobs = jobs  # fork_map's parameter of that name hides the function


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
    """Linux only (elsewhere fork is unsafe (macOS system libraries) or absent (Windows)), and not from a worker
    or from a daemonic multiprocessing process (which may not have children)."""
    return (not _in_worker and sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def progress_heard() -> bool:
    """In a worker of fork_map: whether the parent gave fork_map a ``progress`` listener (worker_progress reaches
    it); False outside workers."""
    return _progress_pipe is not None


def worker_progress(message: tuple) -> bool:
    """In a worker of fork_map: send ``message`` to the ``progress`` listener the parent gave fork_map (called there
    with its items); False outside workers."""
    if _progress_pipe is None:
        return False
    try:
        _send(_progress_pipe, pickle.dumps((_PROGRESS, True, message), pickle.HIGHEST_PROTOCOL))
    except OSError:  # the parent is gone or stopped reading: progress is not worth failing for
        return False
    return True


def fork_map(function: Callable[[Item], Result], items: Sequence[Item], *, jobs: int | None = None,
             progress: Callable[..., None] | None = None, main_works: bool = True) -> list[Result]:
    """``[function(item) for item in items]`` computed by this process and ``jobs(jobs) - 1`` forked workers.

    Each worker starts on one item and then takes the next ones from the front, while this process takes
    the first item and then the last items no worker has started; the pieces of a worker that dies (killed
    for memory, say) are done here too. Results must pickle; an exception raised by any piece is raised here.
    With ``main_works`` False this process only collects: ``jobs(jobs)`` workers do every piece (when there are two
    or more of each), so its memory holds the results and never a piece's working set (a rank's tables, say).

    Workers ignore SIGINT and are killed when this process dies (parent-death signal); when this process is
    interrupted or a piece fails here, the workers are killed at once, so Ctrl-C ends the run promptly
    whatever they are doing. Each worker sends its results through a pipe of its own, read by a thread here,
    so a worker killed while sending can only end its own pipe early. The progress messages workers send
    (``worker_progress``) are passed to ``progress`` here, when given.
    """
    workers = min(_jobs(jobs), len(items)) - (1 if main_works else 0)
    if workers < (1 if main_works else 2) or not can_fork():
        return [function(item) for item in items]
    return _Pool(function, items, workers, main_works, progress).run()


_MISSING = object()
_FRAME = struct.Struct("<Q")


class _Pool:
    """Forked workers for one fork_map call (see there)."""

    def __init__(self, function: Callable[[Any], Any], items: Sequence[Any], workers: int, main_works: bool = True,
                 progress: Callable[..., None] | None = None) -> None:
        self.function, self.items, self.workers, self.main_works = function, items, workers, main_works
        self.progress = progress
        self.offset = 1 if main_works else 0  # workers start on offset .. offset + workers - 1
        context = multiprocessing.get_context("fork")
        self.lock = context.Lock()
        self.next = context.RawValue("q", self.offset + workers)  # the next item a worker may take
        self.end = context.RawValue("q", len(items))  # items from here on were taken by this process
        self.children: dict[int, int] = {}  # pid -> the read end of its pipe
        self.reader: _Reader | None = None

    def run(self) -> list[Any]:
        items = self.items
        results: list[Any] = [_MISSING] * len(items)
        try:
            for first in range(self.offset, self.offset + self.workers):
                self._fork(first)
            self.reader = _Reader(list(self.children.values()), self.progress)
            self.reader.start()
            if self.main_works:
                results[0] = self.function(items[0])
                while (index := self._take_last()) is not None:
                    results[index] = self.function(items[index])
            self.reader.join()
        except BaseException:
            self._stop()
            raise
        self._reap()
        failures = []
        for index, ok, value in self.reader.outcomes():
            if ok:
                results[index] = value
            else:
                failures.append((index, value))
        if failures:
            raise min(failures, key=lambda failure: failure[0])[1]
        for index, result in enumerate(results):
            if result is _MISSING:  # its worker died before sending it
                results[index] = self.function(items[index])
        return results

    def _fork(self, first: int) -> None:
        parent = os.getpid()
        read_end, write_end = os.pipe()
        # SIGINT is held back across the fork: the worker must not see it before it ignores it, and this
        # process receives it right after
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            try:
                with warnings.catch_warnings():
                    # Python 3.12+ warns whenever the process has other OS threads. Here they are the idle pools of
                    # native libraries (Arrow's CPU pool, OpenBLAS), which re-create themselves after a fork through
                    # their own at-fork handlers, and on a terminal the progress line's refresh thread, whose console
                    # a worker never touches (workers get standard streams of their own).
                    warnings.filterwarnings("ignore", message=r"This process .* is multi-threaded", category=DeprecationWarning)
                    pid = os.fork()
            except OSError:
                os.close(read_end)
                os.close(write_end)
                raise
            if pid == 0:  # the worker: never returns
                code = 0
                try:
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                    os.close(read_end)
                    for other in self.children.values():
                        os.close(other)
                    self._work(first, write_end, parent)
                except BaseException:  # noqa: BLE001 (a worker that cannot report just ends; its pieces are redone)
                    code = 1
                finally:
                    os._exit(code)
        finally:
            if os.getpid() == parent:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(write_end)
        self.children[pid] = read_end

    def _work(self, first: int, pipe: int, parent: int) -> None:
        global _progress_pipe
        _become_worker(parent)
        _progress_pipe = pipe if self.progress is not None else None
        index: int | None = first
        while index is not None:
            try:
                payload = pickle.dumps((index, True, self.function(self.items[index])), pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # noqa: BLE001 (sent to the parent, which raises it)
                payload = _pickled_failure(index, exc)
            _send(pipe, payload)
            if os.getppid() != parent:
                return
            index = self._take_next()

    def _take_next(self) -> int | None:
        with self.lock:
            index = self.next.value
            if index >= self.end.value:
                return None
            self.next.value = index + 1
            return index

    def _take_last(self) -> int | None:
        with self.lock:
            index = self.end.value - 1
            if index < self.next.value:
                return None
            self.end.value = index
            return index

    def _stop(self) -> None:
        """Kill the workers now (interrupted, or a piece failed here), ignoring a second Ctrl-C meanwhile."""
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if threading.current_thread() is threading.main_thread() else None
        try:
            for pid in self.children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._reap()
            if self.reader is not None and self.reader.ident is not None:
                self.reader.join()
            else:
                for read_end in self.children.values():
                    os.close(read_end)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _reap(self) -> None:
        for pid in self.children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


class _Reader(threading.Thread):
    """Reads the result frames of every worker's pipe until each ends (the worker finished or died)."""

    def __init__(self, pipes: list[int], progress: Callable[..., None] | None = None) -> None:
        super().__init__(name="advisor-results", daemon=True)
        self.pipes = pipes
        self.progress = progress
        self.received: list[tuple[int, bool, Any]] = []  # unpickled as each arrives: no result is held twice

    def run(self) -> None:
        pending = {pipe: bytearray() for pipe in self.pipes}
        with selectors.DefaultSelector() as selector:
            for pipe in self.pipes:
                selector.register(pipe, selectors.EVENT_READ)
            while pending:
                for key, _events in selector.select():
                    pipe = key.fd
                    try:
                        chunk = os.read(pipe, 1 << 20)
                    except OSError:
                        chunk = b""
                    if chunk:
                        pending[pipe] += chunk
                        self._split(pending[pipe])
                        continue
                    selector.unregister(pipe)
                    os.close(pipe)
                    del pending[pipe]  # a partial frame left here was cut off by the worker's death

    def _split(self, buffer: bytearray) -> None:
        while len(buffer) >= _FRAME.size:
            (length,) = _FRAME.unpack_from(buffer)
            if len(buffer) < _FRAME.size + length:
                return
            frame = memoryview(buffer)[_FRAME.size : _FRAME.size + length]
            try:
                outcome = pickle.loads(frame)
                if outcome[0] == _PROGRESS:
                    if self.progress is not None:
                        self.progress(*outcome[2])
                else:
                    self.received.append(outcome)
            except Exception as exc:  # noqa: BLE001 (a result that does not unpickle fails the run, as a failed piece)
                self.received.append((-1, False, exc))
            finally:
                frame.release()
            del buffer[: _FRAME.size + length]

    def outcomes(self) -> list[tuple[int, bool, Any]]:
        return self.received


def _send(pipe: int, payload: bytes) -> None:
    data = memoryview(_FRAME.pack(len(payload)) + payload)
    while data:
        data = data[os.write(pipe, data):]


def _pickled_failure(index: int, exc: BaseException) -> bytes:
    try:
        return pickle.dumps((index, False, exc), pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 (an exception that does not pickle is sent as its text)
        return pickle.dumps((index, False, RuntimeError(f"{type(exc).__name__}: {exc}")), pickle.HIGHEST_PROTOCOL)


def _become_worker(parent: int) -> None:
    """Mark this forked process as a worker: SIGINT ignored, killed when the parent dies, streams of its own.

    Ctrl-C reaches every process of the terminal's process group; the parent decides what happens, and a
    worker that died of it half-way through sending its result would leave nothing to decide on. The parent's
    stream objects may have been locked by another thread (the progress display) at the moment of the fork;
    a worker flushing them at exit would then wait forever. Workers print nothing.
    """
    global _in_worker
    _in_worker = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if os.getppid() != parent:  # the parent died before the parent-death signal was set
        os._exit(1)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the worker)


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the worker notices between pieces instead
        pass
