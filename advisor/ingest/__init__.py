"""Ingest: turn a path on disk into a Profile of typed, columnar tables (design §3)."""

from __future__ import annotations

from pathlib import Path

from advisor.ingest.ascend import Reader, read_rank
from advisor.ingest.discover import KINETO_FORMAT, Layout, RankDir, discover
from advisor.ingest.gpu import attach_nccl_waits, read_gpu_rank
from advisor.ingest.model import Coverage, CsvTable, Profile, RankData
from advisor.parallel import fork_map

__all__ = ["Coverage", "CsvTable", "Profile", "RankData", "load_profile", "number_traces"]


def load_profile(path: Path) -> Profile:
    """Find the rank directories (or PyTorch traces) under ``path`` and read each; InputError if there are none."""
    layout = discover(path)
    coverage = Coverage(warnings=list(layout.warnings))
    if layout.format == KINETO_FORMAT:
        ranks = _read_traces(layout, coverage)
    else:
        ranks = []
        for rank, rank_coverage in fork_map(lambda r: _read_rank(r, layout.base), [r for r in layout.ranks if r.rank is not None]):
            ranks.append(rank)
            coverage.extend(rank_coverage)
    return Profile(root=path, base=layout.base, format=layout.format, ranks=ranks, coverage=coverage)


def _read_rank(found: RankDir, base: Path, survey: bool = False) -> tuple[RankData, Coverage]:
    """One rank directory and what reading it recorded (ranks are read on several cores when there are several);
    ``survey``: only its cluster-level files (see read_rank)."""
    coverage = Coverage()
    return read_rank(found.path, found.output_dir, found.rank, base, coverage, survey=survey), coverage


def number_traces(recorded: list[int]) -> tuple[list[int], list[tuple[int, str]]]:
    """The rank of each trace read (in the order found) from the one it records (-1: none): a missing or repeated one
    gets the next free number. Returns the numbers and, for each renumbered trace, (its index, why) to warn with."""
    numbers = list(recorded)
    taken: set[int] = set()
    renumber = []
    for index, rank in enumerate(recorded):
        if rank < 0 or rank in taken:
            renumber.append(index)
        else:
            taken.add(rank)
    notes = []
    for index in renumber:
        number = next(n for n in range(len(recorded) + len(taken) + 1) if n not in taken)
        why = "records no rank" if recorded[index] < 0 else f"repeats rank {recorded[index]}"
        if recorded[index] >= 0 or len(recorded) > 1:
            notes.append((index, f"{why} (distributedInfo); numbered rank {number}"))
        numbers[index] = number
        taken.add(number)
    return numbers, notes


def _read_traces(layout: Layout, coverage: Coverage) -> list[RankData]:
    """Read every trace; ranks come from distributedInfo, and a missing or repeated one gets the next free number."""
    def read_one(trace: RankDir) -> tuple[RankData | None, Coverage]:
        own = Coverage()
        return Reader(layout.base, own).read(trace.path, read_gpu_rank), own

    found = []
    for rank, trace_coverage in fork_map(read_one, layout.ranks):  # one trace per core
        coverage.extend(trace_coverage)
        if rank is not None:
            found.append(rank)
    reader = Reader(layout.base, coverage)
    for rank in found:
        if rank.kineto is not None and rank.kineto.truncation is not None:
            reader.partly_read(rank.path, rank.kineto.truncation)
    numbers, notes = number_traces([rank.rank for rank in found])
    coverage.warnings.extend(f"{reader.shown(found[index].path)}: {why}" for index, why in notes)
    for rank, number in zip(found, numbers):
        rank.rank = number
    found.sort(key=lambda r: r.rank)
    attach_nccl_waits(found)
    return found
