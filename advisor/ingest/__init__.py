"""Ingest: turn a path on disk into a Profile of typed, columnar tables (design §3)."""

from __future__ import annotations

from pathlib import Path

from advisor.ingest.ascend import read_rank
from advisor.ingest.discover import discover
from advisor.ingest.model import Coverage, CsvTable, Profile, RankData

__all__ = ["Coverage", "CsvTable", "Profile", "RankData", "load_profile"]


def load_profile(path: Path) -> Profile:
    """Find the rank directories under ``path`` and read each; raises InputError if there are none."""
    layout = discover(path)
    coverage = Coverage(warnings=list(layout.warnings))
    ranks = [read_rank(r.path, r.output_dir, r.rank, layout.base, coverage) for r in layout.ranks if r.rank is not None]
    return Profile(root=path, base=layout.base, format=layout.format, ranks=ranks, coverage=coverage)
