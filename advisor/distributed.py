"""Run rank tasks on Dask (the optional extra ``ascend-perf-advisor[dask]``): a LocalCluster, an existing cluster, or
a Client.

Only ``advisor.cluster`` uses this, and only when a scheduler is asked for; without Dask installed nothing here is
imported. Workers must have the same advisor installed and see the profile at the same path (shared storage);
each task reads one rank and returns its RankFacts (a few hundred KB at most), which the client gathers as they
complete, releasing each from the cluster at once.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import CancelledError
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from advisor.errors import ClusterGone, InputError
from advisor.parallel import jobs

LOCAL = "local"
CONNECT_TIMEOUT_S = 5  # a scheduler that has not answered by then is unreachable (a reachable one answers in ms)
WORKERLESS_WAIT_S = 30  # how long a run waits for a worker to (re)join a cluster that has none left
_POLL_S = 0.5  # how often a run checks on the scheduler and its workers while it waits for results
_CHATTY = ("distributed", "tornado", "asyncio")  # loggers that would print Dask's tracebacks on standard error


class DaskRunner:
    """A Dask client for the duration of one diagnosis (``scheduler``: 'local', an address, or a Client; ``jobs``:
    the run's, the number of workers of a LocalCluster)."""

    def __init__(self, scheduler: Any, jobs_chosen: int | None = None) -> None:
        try:
            import distributed
        except ImportError:
            raise InputError(f"scheduler {scheduler!r}: Dask is not installed; install the dask extra "
                             "(pip install 'ascend-perf-advisor[dask]'), or leave the scheduler unset to use the "
                             "built-in process pool") from None
        self.cluster = None
        self.owned = True
        if isinstance(scheduler, str) and scheduler == LOCAL:
            self.cluster = distributed.LocalCluster(n_workers=jobs(jobs_chosen), threads_per_worker=1, processes=True,
                                                    dashboard_address=":0")
            self.client = distributed.Client(self.cluster)
        elif isinstance(scheduler, str):
            if scheduler.lower().startswith("tls://"):
                raise InputError(f"scheduler {scheduler!r}: a TLS address needs certificates advisor does not take; "
                                 "from Python, pass a distributed.Client built with your distributed.Security "
                                 "(advisor.diagnose(path, scheduler=client)), or use a tcp:// address on a trusted network")
            try:
                self.client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError, TypeError) as exc:
                raise InputError(f"scheduler {scheduler!r}: cannot connect to the Dask scheduler ({exc})") from None
        elif hasattr(scheduler, "map") and hasattr(scheduler, "submit"):  # a distributed.Client: the caller's
            self.client = scheduler
            self.owned = False
        else:
            raise InputError(f"scheduler: {scheduler!r} is not 'local', a Dask scheduler address or a Dask Client")

    def map(self, function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``[function(item) for item in items]`` on the cluster's workers, in order; a task's exception is raised here.

        ClusterGone when the scheduler goes away, when the cluster has had no worker for WORKERLESS_WAIT_S, or when
        a task kept killing its workers — never a Dask traceback."""
        from distributed import wait

        with _quiet():
            futures = self.client.map(function, list(items), pure=False)
            position = {future.key: index for index, future in enumerate(futures)}
            results: list[Any] = [None] * len(futures)
            pending, workerless_since = set(futures), None
            try:
                while pending:
                    self._check_scheduler()
                    try:
                        done, pending = wait(pending, timeout=_POLL_S, return_when="FIRST_COMPLETED")
                    except TimeoutError:
                        done = set()
                    except CancelledError:  # distributed's Future(s)CancelledError: the scheduler dropped them
                        self._check_scheduler()
                        raise self._lost() from None
                    for future in done:
                        results[position[future.key]] = self._result(future)
                        future.release()
                    workerless_since = None if done else self._check_workers(workerless_since)
            finally:
                if self.client.status == "running":
                    for future in futures:
                        future.cancel()
        return results

    def _where(self) -> str:
        address = getattr(self.client.scheduler, "address", None) if self.cluster is None else None
        return f"the Dask scheduler at {address}" if address else "the Dask scheduler"

    def _check_scheduler(self) -> None:
        if self.client.status != "running":
            raise ClusterGone(f"{self._where()} went away during the run; no report was written (restart the cluster, "
                              "or run without a scheduler to use the built-in process pool)")

    def _check_workers(self, since: float | None) -> float | None:
        """When the cluster has had no worker since ``since`` for WORKERLESS_WAIT_S: ClusterGone; else the new since."""
        if self.client.scheduler_info().get("workers"):
            return None
        now = time.monotonic()
        if since is not None and now - since > WORKERLESS_WAIT_S:
            raise ClusterGone(f"{self._where()} has had no workers for {WORKERLESS_WAIT_S} s; no report was written "
                              "(start workers, or run without a scheduler to use the built-in process pool)")
        return since if since is not None else now

    def _lost(self) -> ClusterGone:
        return ClusterGone(f"{self._where()} lost the run's tasks (it restarted, or the connection to it broke); "
                           "no report was written")

    def _result(self, future: Any) -> Any:
        from distributed import KilledWorker

        if future.status in ("cancelled", "lost"):  # the scheduler forgot it: it went away or restarted
            self._check_scheduler()
            raise self._lost()
        if future.status == "error" and isinstance(error := future.exception(), KilledWorker):
            raise ClusterGone(f"Dask workers died while reading a rank, each time they ran it ({error.args[0]}); "
                              "no report was written (out of memory on the workers?)") from None
        return future.result()

    def close(self) -> None:
        if not self.owned:
            return
        with _quiet():
            self.client.close(timeout=CONNECT_TIMEOUT_S)
            if self.cluster is not None:
                self.cluster.close(timeout=CONNECT_TIMEOUT_S)


@contextmanager
def _quiet() -> Iterator[None]:
    """Dask's own logging and warnings off while advisor talks to the cluster: its problems reach the user as one
    line each (ClusterGone, InputError), not as the tracebacks distributed logs while it reconnects."""
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
               if name.split(".")[0] in _CHATTY]
    disabled = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, was in zip(loggers, disabled):
            logger.disabled = was
