"""Run rank tasks on Dask (the optional extra ``advisor[dask]``): a LocalCluster, an existing cluster, or a Client.

Only ``advisor.cluster`` uses this, and only when a scheduler is asked for; without Dask installed nothing here is
imported. Workers must have the same advisor installed and see the profile at the same path (shared storage);
each task reads one rank and returns its RankFacts (a few hundred KB at most), which the client gathers as they
complete, releasing each from the cluster at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from advisor.errors import InputError
from advisor.parallel import jobs

LOCAL = "local"
CONNECT_TIMEOUT_S = 5  # a scheduler that has not answered by then is unreachable (a reachable one answers in ms)


class DaskRunner:
    """A Dask client for the duration of one diagnosis (``scheduler``: 'local', an address, or a Client; ``jobs``:
    the run's, the number of workers of a LocalCluster)."""

    def __init__(self, scheduler: Any, jobs_chosen: int | None = None) -> None:
        try:
            import distributed
        except ImportError:
            raise InputError(f"scheduler {scheduler!r}: Dask is not installed; install advisor[dask] "
                             "(pip install 'advisor[dask]'), or leave the scheduler unset to use the built-in "
                             "process pool") from None
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
        """``[function(item) for item in items]`` on the cluster's workers, in order; a task's exception is raised here."""
        from distributed import as_completed

        futures = self.client.map(function, list(items), pure=False)
        position = {future.key: index for index, future in enumerate(futures)}
        results: list[Any] = [None] * len(futures)
        try:
            for future, result in as_completed(futures, with_results=True):
                results[position[future.key]] = result
                future.release()
        finally:
            for future in futures:
                future.cancel()
        return results

    def close(self) -> None:
        if not self.owned:
            return
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()
