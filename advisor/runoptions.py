"""RunOptions: the settings of one run — how a profile is read and analysed — as one typed object.

The command line makes one from its options (``--jobs``, ``--max-file-size``, ``--scheduler``, ``--deep``, and the
progress line it shows on a terminal); the Python API takes one (``advisor.diagnose(path, options=RunOptions(...))``,
``advisor.compare``); the run hands it down explicitly: ``diagnose.analyse`` → ``ingest.load_profile`` or
``cluster.run`` → each rank task (which carries it to a forked worker or a Dask worker) → ``parallel.fork_map``
(``jobs``, ``progress``) and ``distributed.DaskRunner`` (``jobs``).

The readers deep inside ``ingest`` (the file-size check before a file is parsed, the bound on a decompressed trace,
the progress message of each file read, and the number of pieces a large trace is read in) do not take it as an
argument: they read ``current()``, which only ``reading(options)`` sets, for the duration of the reading a run does
(``load_profile``, ``cluster.run``, and each rank task). Outside a run ``current()`` is the defaults.

What the report says and shows — its language (``lang``), ``--detail``, ``--max-findings``, ``--min-severity`` —
is not a run setting: it is passed where the report is built or rendered (``diagnose(lang=…)``, ``render.View``).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

DEFAULT_MAX_FILE_BYTES = 4 << 30

# Called with (file as shown in reports, size in bytes) before each file of a profile is parsed.
ProgressListener = Callable[[str, int], None]


@dataclass(frozen=True)
class RunOptions:
    """How a run reads and analyses a profile; every field's default is what the command line does without options.

    ``jobs``: processes to read and analyse with (``--jobs``; None: ``ADVISOR_JOBS``, else the usable cores, at most
    8). ``max_file_bytes``: input files larger than this are skipped (``--max-file-size``; a compressed trace may not
    expand past it either). ``progress``: called with (file as shown, size in bytes) before each file is parsed, in
    this process, also for the files forked workers read (the command line's progress line on a terminal); never
    sent to Dask workers (``portable``). ``scheduler``: where a profile's ranks are analysed (``--scheduler``; None:
    ``ADVISOR_SCHEDULER``, else the built-in process pool; 'local', an address, or a ``distributed.Client``).
    ``deep``: 'auto' or 'all' (``--deep``; None: ``ADVISOR_DEEP``, else 'auto'), whether a cluster of more than 64
    ranks is triaged.
    """

    jobs: int | None = None
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    progress: ProgressListener | None = None
    scheduler: Any = None
    deep: str | None = None

    def portable(self) -> RunOptions:
        """These options without what cannot or need not leave this process — the progress listener and the scheduler
        (a Client holds this process's connections) — for a task sent to a Dask worker."""
        return replace(self, progress=None, scheduler=None)


_CURRENT: contextvars.ContextVar[RunOptions] = contextvars.ContextVar("advisor_run_options", default=RunOptions())


def current() -> RunOptions:
    """The options of the reading in progress (see ``reading``); the defaults outside one."""
    return _CURRENT.get()


@contextmanager
def reading(options: RunOptions) -> Iterator[RunOptions]:
    """Make ``options`` what ``current()`` returns while a run reads a profile (the one place it is set)."""
    token = _CURRENT.set(options)
    try:
        yield options
    finally:
        _CURRENT.reset(token)
