"""Separate runs under one directory, kept apart: tb-profiler's log directories hold one subdirectory per run
(``runs/baseline/``, ``runs/after_fix/``), and their ranks must not be merged into a job that never existed.

Ranks in several directories are one run when, directory by directory, they agree: no rank id recorded in two of
them, and capture starts that leave no gap over JOB_GAP_S (10 minutes). The ranks of one job start capturing at the
same step of its schedule, seconds apart, minutes when launched with skew; another run starts after one has ended and
been looked at. Hosts and process ids tell nothing here: a job's ranks are separate processes, often on many hosts.
A serving recipe's phase directories (``prefill/``, ``decode/``) hold the same ranks' captures of each phase: one run.
Ranks directly in one directory are the format's to sort out (``ingest.ascendformat`` keeps the newest job)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from advisor.errors import InputError
from advisor.ingest.ascend import rank_id_from_dir
from advisor.ingest.ascendformat import JOB_GAP_S, PHASE_DIRECTORIES, capture_seconds
from advisor.ingest.kineto import rank_hint

_LISTED = 8  # runs named in the message; the rest are counted
# tensorboard_trace_handler's trace name, {worker}.{time}.pt.trace.json[.gz]: the time since the epoch in ms (older
# PyTorch) or ns
_TRACE_STAMP = re.compile(r"\.(\d{13}|\d{19})\.pt\.trace\.json(?:\.gz)?$")
Member = tuple[tuple[str, ...], Path]  # a rank found: its path's parts below a directory, and the path


@dataclass(frozen=True)
class Run:
    """Ranks found that are one run: where they lie (a directory, or the rank itself when it is alone), how many,
    the rank ids they record, and the capture starts their names record (seconds)."""

    path: Path
    size: int
    ranks: frozenset[int]
    starts: tuple[float, ...]

    def described(self) -> str:
        """'ranks 0, 1, captured 2025-11-27 19:27' (the time as the names record it: Ascend's is local)."""
        ids = sorted(self.ranks)
        ranks = (f"{self.size} rank{'s' if self.size > 1 else ''}, ids not recorded" if not ids
                 else f"rank {ids[0]}" if len(ids) == 1
                 else f"ranks {', '.join(map(str, ids))}" if len(ids) <= 4
                 else f"{len(ids)} ranks, {ids[0]}–{ids[-1]}")
        if not self.starts:
            return ranks
        return f"{ranks}, captured {datetime.fromtimestamp(min(self.starts), timezone.utc):%Y-%m-%d %H:%M}"


def refuse_separate_runs(ranks: list[Path], root: Path) -> None:
    """Raise InputError naming the runs when the ``ranks`` found under ``root`` are several."""
    if len({rank.parent for rank in ranks}) < 2:
        return
    runs = _runs(root, [(rank.relative_to(root).parts, rank) for rank in ranks])
    if len(runs) < 2:
        return
    listed = "; ".join(f"{run.path} ({run.described()})" for run in runs[:_LISTED])
    more = f"; and {len(runs) - _LISTED} more" if len(runs) > _LISTED else ""
    first, second = (shlex.quote(str(run.path)) for run in runs[:2])
    raise InputError(f"{root}: holds {len(runs)} separate runs, which are not merged into one job (they repeat a rank "
                     f"id, or their captures lie more than {JOB_GAP_S // 60} minutes apart): {listed}{more}. Diagnose "
                     f"one by its path (advisor diagnose {first}), or compare two (advisor compare {first} {second})")


def _runs(directory: Path, members: list[Member]) -> list[Run]:
    """The runs under ``directory``: one when its parts — the ranks directly in it, each subdirectory, else its phase
    directories together — are one run each and agree, else the runs of every part. Phase directories beside other
    captures are left to the format, which reads only the others and says so (``ingest.ascendformat``)."""
    below: dict[str, list[Member]] = {}
    for parts, rank in members:
        if len(parts) > 1:
            below.setdefault(parts[0], []).append((parts[1:], rank))
    inner = {name: _runs(directory / name, group) for name, group in sorted(below.items())}
    here = [rank for parts, rank in members if len(parts) == 1]
    parts = [[_alone(directory, here)]] if here else []
    parts += [runs for name, runs in inner.items() if name.lower() not in PHASE_DIRECTORIES]
    phases = [runs for name, runs in inner.items() if name.lower() in PHASE_DIRECTORIES]
    if phases and not parts:
        parts = [_one_or_each(directory, phases, lambda _: True)]
    return _one_or_each(directory, parts, _agree)


def _one_or_each(directory: Path, parts: list[list[Run]], agree: Callable[[list[Run]], bool]) -> list[Run]:
    """One run of ``directory`` when every part is one run and they ``agree``, else the runs of every part."""
    singles = [runs[0] for runs in parts if len(runs) == 1]
    if len(singles) == len(parts) and agree(singles):
        return [Run(directory, sum(run.size for run in singles), frozenset().union(*(run.ranks for run in singles)),
                    tuple(start for run in singles for start in run.starts))]
    return [run for runs in parts for run in runs]


def _agree(runs: list[Run]) -> bool:
    """Whether runs found in sibling directories are one: no rank id in two of them, and their capture starts, taken
    together, leave no gap over JOB_GAP_S."""
    ids = [rank for run in runs for rank in run.ranks]
    starts = sorted(start for run in runs for start in run.starts)
    return len(ids) == len(set(ids)) and all(later - earlier <= JOB_GAP_S for earlier, later in zip(starts, starts[1:]))


def _alone(directory: Path, ranks: list[Path]) -> Run:
    """The ranks directly in ``directory`` as one run. A lone rank that records no id is rank 0, as its format numbers
    it: a process records none when it ran outside a distributed job (torch_npu then writes profiler_info.json, Kineto
    no distributedInfo), so alone it is a run of one process."""
    captures = [_capture(rank) for rank in ranks]
    ids = frozenset(rank for rank, _start in captures if rank is not None)
    starts = tuple(start for _rank, start in captures if start is not None)
    if len(ranks) == 1:
        return Run(ranks[0], 1, ids or frozenset({0}), starts)
    return Run(directory, len(ranks), ids, starts)


def _capture(rank: Path) -> tuple[int | None, float | None]:
    """The rank id a rank found records and its capture start (seconds), None where unknown: an Ascend rank directory's
    profiler_info and ``{host}_{pid}_{timestamp}_ascend_pt`` name, a PyTorch trace's distributedInfo and name."""
    if rank.is_dir():
        return rank_id_from_dir(rank), capture_seconds(rank)
    stamp = _TRACE_STAMP.search(rank.name)
    return rank_hint(rank), (int(stamp[1]) / (1e3 if len(stamp[1]) == 13 else 1e9) if stamp else None)
