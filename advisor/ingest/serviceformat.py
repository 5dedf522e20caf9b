"""msServiceProfiler's analysis output as an input format: a directory holding request.csv, batch.csv, kvcache.csv or
forward.csv (``ingest.service``), diagnosed on its own — or, found beside another format's ranks, joining that profile
(``InputFormat.joins``: discovery sets ``Layout.service`` and the profile's readers read it once, not per rank).

Service-level data has no ranks: diagnosed on its own, the directory is the profile's one rank (rank 0), which holds no
device tables; its facts are the service family's, computed once per profile."""

from __future__ import annotations

from pathlib import Path

from advisor.ingest.model import Coverage, InputFormat, Layout, RankData, RankDir
from advisor.ingest.paths import display_path
from advisor.ingest.service import SERVICE_FILES, is_service_file

SERVICE_FORMAT = "msserviceprofiler"


def _rank_at(path: Path, is_dir: bool) -> Path | None:
    """The directory ``path`` (one of the service files) lies in."""
    return path.parent if not is_dir and is_service_file(path) else None


def _layout(found: list[Path], path: Path, base: Path) -> Layout:
    """The first directory of service files found (in discovery's order); the others are named in a warning."""
    directories = list(dict.fromkeys(found))
    chosen = directories[0]
    warnings = [f"msServiceProfiler output in {len(directories) - 1} more director"
                f"{'y' if len(directories) == 2 else 'ies'} was not read (e.g. {display_path(directories[1], path)}); "
                "diagnose each on its own"] if len(directories) > 1 else []
    return Layout(format=SERVICE_FORMAT, ranks=[RankDir(chosen, chosen, 0)], base=base, warnings=warnings,
                  service=chosen)


def _read(found: RankDir, _base: Path, _coverage: Coverage, _survey: bool) -> RankData:
    """The directory as a rank without device tables (its service files are read once per profile)."""
    return RankData(rank=0, path=found.path, output_dir=found.output_dir, export="service")


SERVICE = InputFormat(
    platforms={SERVICE_FORMAT: "ascend"},
    described=f"msServiceProfiler's analysis output (a directory holding {', '.join(SERVICE_FILES)})",
    what="msServiceProfiler output",
    rank_at=_rank_at,
    layout=_layout,
    read=_read,
    joins=True,
)
