"""Ascend profiler output as an input format: rank directories (``*_ascend_pt``, ``*_ascend_ms``, or any directory
holding ASCEND_PROFILER_OUTPUT or a profiler_info*.json), numbered from their names, the newest job's kept. A serving
recipe's phase directories (``prof/prefill/…``, ``prof/decode/…``) are one profile: each rank's decode capture is
diagnosed, and the iterations of its prefill capture join it as the prefill phase."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from advisor.ingest.ascend import OUTPUT_DIR, rank_id_from_dir, read_rank
from advisor.ingest.model import Coverage, InputFormat, Layout, RankData, RankDir
from advisor.ingest.paths import display_path


def is_rank_dir(path: Path) -> bool:
    """A directory holding an ASCEND_PROFILER_OUTPUT directory or a profiler_info*.json."""
    return (path / OUTPUT_DIR).is_dir() or any(path.glob("profiler_info*.json"))


def _rank_at(path: Path, is_dir: bool) -> Path | None:
    """The rank directory ``path`` is (or, for its ASCEND_PROFILER_OUTPUT directory, is inside)."""
    if not is_dir:
        return None
    if path.name == OUTPUT_DIR:
        return path.parent
    return path if is_rank_dir(path) else None


PHASE_DIRECTORIES = ("prefill", "decode")  # a serving recipe's capture directory per phase, the diagnosed one last


def _layout(found: list[Path], path: Path, base: Path) -> Layout:
    """The rank directories of the newest job in ``found``, each with a distinct rank; with phase directories, the
    newest job of each phase, each rank's captures paired (``_paired``)."""
    staged = {d: _stage_of(d, path) for d in found}
    ranks, warnings = [], []
    for stage in (None, *PHASE_DIRECTORIES):
        rank_dirs, job_warnings = _newest_job([RankDir(d, d / OUTPUT_DIR, rank_id_from_dir(d), stage)
                                               for d in found if staged[d] == stage], path)
        resolved, rank_warnings = _resolve_ranks(rank_dirs)
        ranks.append(resolved)
        warnings += job_warnings + rank_warnings
    unstaged, *phases = ranks
    if unstaged and any(phases):
        warnings.append(f"{display_path(path, path.parent)} holds captures in phase directories "
                        f"({'/, '.join(PHASE_DIRECTORIES)}/) and outside them; only those outside were read")
        phases = [[] for _ in phases]
    chosen = unstaged or _paired(*phases)
    fmt = "ascend-mindspore" if all(r.path.name.endswith("_ascend_ms") for r in chosen) else "ascend-pytorch"
    return Layout(format=fmt, ranks=chosen, base=base, warnings=warnings)


def _stage_of(rank_dir: Path, path: Path) -> str | None:
    """The phase directory (PHASE_DIRECTORIES) ``rank_dir`` lies in below the path given, else None."""
    try:
        parts = rank_dir.relative_to(path).parts[:-1]
    except ValueError:
        return None
    named = [part.lower() for part in parts if part.lower() in PHASE_DIRECTORIES]
    return named[-1] if named else None


def _paired(prefill: list[RankDir], decode: list[RankDir]) -> list[RankDir]:
    """Each rank's decode capture with its prefill capture as a companion (a rank captured in one phase only is
    diagnosed on that one)."""
    prefills = {d.rank: d for d in prefill}
    ranks = [replace(d, companions=(("prefill", prefills.pop(d.rank).path),) if d.rank in prefills else ())
             for d in decode]
    return sorted(ranks + list(prefills.values()), key=lambda d: d.rank if d.rank is not None else -1)


def _read(found: RankDir, base: Path, coverage: Coverage, survey: bool) -> RankData:
    assert found.rank is not None  # discovery numbered every rank directory
    data = read_rank(found.path, found.output_dir, found.rank, base, coverage, survey=survey, stage=found.stage)
    for stage, companion in found.companions if not survey else ():
        other = read_rank(companion, companion / OUTPUT_DIR, found.rank, base, coverage, stage=stage)
        if other.iterations is None:
            coverage.warnings.append(f"{display_path(companion, base)}: no {stage} iterations found (the capture marks "
                                     f"none and reads back no sampled tokens); the {stage} phase is not described")
            continue
        data.iterations = _joined_iterations(data.iterations, other.iterations)
    return data


def _joined_iterations(own: pd.DataFrame | None, other: pd.DataFrame) -> pd.DataFrame:
    """``own`` iterations with ``other``'s (another capture's, of another phase) numbered after them, in time order:
    the breakdown's steps keep their numbers."""
    if own is None:
        return other
    offset = int(pd.to_numeric(own["step"], errors="coerce").max()) if len(own) else 0
    joined = pd.concat([own, other.assign(step=pd.to_numeric(other["step"], errors="coerce") + offset)],
                       ignore_index=True)
    return joined.sort_values("start", ignore_index=True)


ASCEND = InputFormat(
    platforms={"ascend-pytorch": "ascend", "ascend-mindspore": "ascend"},
    described="Ascend profiler output (a *_ascend_pt or *_ascend_ms directory, the directory holding several of them "
              "— a cluster —, or an ASCEND_PROFILER_OUTPUT directory)",
    what="Ascend output",
    rank_at=_rank_at,
    layout=_layout,
    read=_read,
)


JOB_GAP_S = 600  # rank directories of one job start capturing within minutes of each other


def _newest_job(found: list[RankDir], path: Path) -> tuple[list[RankDir], list[str]]:
    """The rank directories of the newest run in ``found``, and a warning naming the others when there are several
    (e.g. ``advisor diagnose /tmp``, or a job profiled again into the same directory): rank directories whose
    capture times (``{host}_{pid}_{timestamp}_ascend_pt``) lie more than JOB_GAP_S apart are different runs, and
    merging them would diagnose a cluster that never existed. Directories without a timestamp stay with the newest."""
    timed = sorted((t, str(d.path), d) for d in found if (t := capture_seconds(d.path)) is not None)
    if len(timed) < 2:
        return found, []
    jobs: list[list[RankDir]] = [[timed[0][2]]]
    for (before, _, _), (moment, _, rank_dir) in zip(timed, timed[1:]):
        if moment - before > JOB_GAP_S:
            jobs.append([])
        jobs[-1].append(rank_dir)
    if len(jobs) == 1:
        return found, []
    runs = "; ".join(f"run {number}: {len(job)} rank director{'y' if len(job) == 1 else 'ies'} captured from "
                     f"{_shown_stamp(job[0].path)} (e.g. {display_path(job[0].path, path)})"
                     for number, job in enumerate(jobs, start=1))
    older = {id(d) for job in jobs[:-1] for d in job}
    warning = (f"{display_path(path, path.parent)} holds {len(jobs)} separate runs (captures more than "
               f"{JOB_GAP_S // 60} minutes apart), which are not merged into one cluster: {runs}. Diagnosing the "
               f"newest, run {len(jobs)}; to diagnose another, give the directory of its rank directories alone")
    return [d for d in found if id(d) not in older], [warning]


def _shown_stamp(path: Path) -> str:
    stamp = _capture_time(path)
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[8:10]}:{stamp[10:12]}"


def capture_seconds(path: Path) -> float | None:
    """The capture start in the directory name as seconds (None when the name carries no timestamp)."""
    stamp = _capture_time(path)
    if len(stamp) != 17:
        return None
    try:
        moment = datetime.strptime(stamp[:14], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return moment.timestamp() + int(stamp[14:]) / 1000


def _resolve_ranks(found: list[RankDir]) -> tuple[list[RankDir], list[str]]:
    """Give every directory a distinct rank; for a rank seen twice keep the newest directory."""
    warnings: list[str] = []
    by_rank: dict[int, RankDir] = {}
    unranked: list[RankDir] = []
    for rank_dir in found:
        if rank_dir.rank is None:
            unranked.append(rank_dir)
            continue
        previous = by_rank.get(rank_dir.rank)
        if previous is None:
            by_rank[rank_dir.rank] = rank_dir
            continue
        newer, older = sorted((previous, rank_dir), key=lambda d: _capture_time(d.path), reverse=True)
        by_rank[rank_dir.rank] = newer
        warnings.append(
            f"rank {rank_dir.rank} appears in {newer.path.name} and {older.path.name}; using the newer "
            f"{newer.path.name}"
        )
    next_rank = max(by_rank, default=-1) + 1
    for rank_dir in unranked:
        if not by_rank and len(unranked) == 1:
            by_rank[0] = RankDir(rank_dir.path, rank_dir.output_dir, 0)
            break
        warnings.append(f"{rank_dir.path.name}: no rank id recorded; numbered rank {next_rank}")
        by_rank[next_rank] = RankDir(rank_dir.path, rank_dir.output_dir, next_rank)
        next_rank += 1
    return [by_rank[r] for r in sorted(by_rank)], warnings


def _capture_time(path: Path) -> str:
    """The 17-digit timestamp in ``{worker}_{pid}_{timestamp}_ascend_pt`` (empty when absent)."""
    parts = path.name.split("_")
    return parts[-3] if len(parts) >= 4 and parts[-3].isdigit() else ""
