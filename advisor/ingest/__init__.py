"""Ingest: turn a path on disk into a Profile of typed, columnar tables (design §3)."""

from __future__ import annotations

from pathlib import Path

from advisor.ingest.ascend import Reader, read_rank
from advisor.ingest.discover import KINETO_FORMAT, Layout, RankDir, discover
from advisor.ingest.model import Coverage, CsvTable, Profile, RankData
from advisor.parallel import fork_map

__all__ = ["Coverage", "CsvTable", "Profile", "RankData", "load_profile"]


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


def _read_rank(found: RankDir, base: Path) -> tuple[RankData, Coverage]:
    """One rank directory and what reading it recorded (ranks are read on several cores when there are several)."""
    coverage = Coverage()
    return read_rank(found.path, found.output_dir, found.rank, base, coverage), coverage


def _read_traces(layout: Layout, coverage: Coverage) -> list[RankData]:
    """Read every trace; ranks come from distributedInfo, and a missing or repeated one gets the next free number."""
    from advisor.ingest.gpu import attach_nccl_waits, read_gpu_rank  # it imports facts, which import this package

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
    taken: set[int] = set()
    renumber = []
    for rank in found:
        if rank.rank < 0 or rank.rank in taken:
            renumber.append(rank)
        else:
            taken.add(rank.rank)
    for rank in renumber:
        number = next(n for n in range(len(found) + len(taken) + 1) if n not in taken)
        why = "records no rank" if rank.rank < 0 else f"repeats rank {rank.rank}"
        if rank.rank >= 0 or len(found) > 1:
            coverage.warnings.append(f"{reader.shown(rank.path)}: {why} (distributedInfo); numbered rank {number}")
        rank.rank = number
        taken.add(number)
    found.sort(key=lambda r: r.rank)
    attach_nccl_waits(found)
    return found
