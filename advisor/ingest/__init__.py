"""Ingest: turn a path on disk into a Profile of typed, columnar tables (design §3).

The readers (and pandas) are imported when a profile is read, not with the package: the rule book and
``--context`` use its limits and models without them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor.ingest.model import Coverage, CsvTable, Layout, Profile, RankData, RankDir
from advisor.parallel import fork_map
from advisor.runoptions import RunOptions, reading

if TYPE_CHECKING:
    from advisor.ingest.service import ServiceData

__all__ = ["Coverage", "CsvTable", "Profile", "RankData", "load_profile", "read_layout_service"]


def load_profile(path: Path, options: RunOptions | None = None) -> Profile:
    """Find the ranks under ``path`` (rank directories, PyTorch traces …) and read each, on several cores when there
    are several (``options``: the run's jobs, file-size limit and progress listener); InputError if there are none."""
    options = options or RunOptions()
    with reading(options):
        return _load(path, options)


def _load(path: Path, options: RunOptions) -> Profile:
    from advisor.ingest.discover import discover
    from advisor.ingest.formats import format_of

    layout = discover(path)
    fmt = format_of(layout.format)
    coverage = Coverage(warnings=list(layout.warnings))

    def read_one(found: RankDir) -> tuple[RankData | None, Coverage]:
        own = Coverage()
        return fmt.read(found, layout.base, own, False), own

    ranks = []
    for rank, rank_coverage in fork_map(read_one, layout.ranks, jobs=options.jobs, progress=options.progress):
        coverage.extend(rank_coverage)
        if rank is not None:
            ranks.append(rank)
    if fmt.finish is not None:
        ranks = fmt.finish(ranks, layout, coverage)
    return Profile(root=path, base=layout.base, format=layout.format, ranks=ranks, coverage=coverage,
                   service=read_layout_service(layout, coverage))


def read_layout_service(layout: Layout, coverage: Coverage) -> ServiceData | None:
    """The msServiceProfiler output discovery found with (or as) the profile, read once for the whole profile (None
    when there is none, or none of its files could be read: ``coverage`` says why)."""
    if layout.service is None:
        return None
    from advisor.ingest.service import read_service

    return read_service(layout.service, layout.base, coverage)
