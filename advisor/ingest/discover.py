"""Find what a user-given path holds: one rank directory, a cluster of them, or an output directory."""

from __future__ import annotations

import gzip
import os
from datetime import datetime, timezone
import zlib
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import InputError
from advisor.ingest.ascend import OUTPUT_DIR, rank_id_from_dir
from advisor.ingest.paths import display_path

_MAX_DEPTH = 4
_SNIFF_BYTES = 64 << 10
_SUPPORTED_HINT = (
    "advisor reads Ascend profiler output (a *_ascend_pt or *_ascend_ms directory, the directory holding several "
    "of them — a cluster —, or an ASCEND_PROFILER_OUTPUT directory) and PyTorch profiler traces (a "
    "*.pt.trace.json[.gz] file, or a directory of them, one per rank)"
)
KINETO_FORMAT = "pytorch-kineto"
TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")


@dataclass(frozen=True)
class RankDir:
    """A rank directory found on disk, and where its ASCEND_PROFILER_OUTPUT files are."""

    path: Path
    output_dir: Path
    rank: int | None


@dataclass(frozen=True)
class Layout:
    """The result of discovery: the rank directories and the base that paths are shown relative to."""

    format: str
    ranks: list[RankDir]
    base: Path
    warnings: list[str]


def discover(path: Path) -> Layout:
    """Classify ``path`` and list its rank directories; raise InputError when it is not a profile."""
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_file():
        if path.name.endswith(TRACE_SUFFIXES) or _looks_like_kineto(path):
            return Layout(format=KINETO_FORMAT, ranks=[RankDir(path, path.parent, None)], base=path.parent, warnings=[])
        raise InputError(f"{path}: is a file; {_SUPPORTED_HINT}")
    if not os.access(path, os.R_OK | os.X_OK):
        raise InputError(f"{path}: directory cannot be read (permission denied)")

    traces: list[Path] = []
    if path.name == OUTPUT_DIR:
        rank_dir = path.parent
        found = [RankDir(rank_dir, path, rank_id_from_dir(rank_dir))]
        base = rank_dir.parent
    elif _is_rank_dir(path):
        found = [RankDir(path, path / OUTPUT_DIR, rank_id_from_dir(path))]
        base = path.parent
    else:
        rank_dirs, traces = _walk(path)
        found = [RankDir(d, d / OUTPUT_DIR, rank_id_from_dir(d)) for d in rank_dirs]
        base = path
    if not found:
        if traces:
            return Layout(format=KINETO_FORMAT, ranks=[RankDir(t, t.parent, None) for t in traces], base=path, warnings=[])
        raise InputError(f"{path}: no profiler output found; {_SUPPORTED_HINT}")

    found, job_warnings = _newest_job(found, path)
    ranks, warnings = _resolve_ranks(found)
    warnings[:0] = job_warnings
    if traces:
        warnings.append(f"{len(traces)} PyTorch trace(s) beside the Ascend output were not read (e.g. "
                        f"{display_path(traces[0], base)}); diagnose them on their own, or compare with advisor compare")
    fmt = "ascend-mindspore" if all(r.path.name.endswith("_ascend_ms") for r in ranks) else "ascend-pytorch"
    return Layout(format=fmt, ranks=ranks, base=base, warnings=warnings)


def _is_rank_dir(path: Path) -> bool:
    return (path / OUTPUT_DIR).is_dir() or any(path.glob("profiler_info*.json"))


_KINETO_KEYS = (b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"')
_KINETO_CATEGORIES = (b'"cpu_op"', b'"cuda_runtime"', b'"kernel"', b'"user_annotation"', b'"python_function"',
                      b'"Operator"', b'"Runtime"', b'"Kernel"', b'"ProfilerStep#')


def _looks_like_kineto(path: Path) -> bool:
    """A .json[.gz] file outside Ascend output whose start is a PyTorch profiler trace: Kineto's header keys, or
    traceEvents holding its event categories (files are named freely in the field, e.g. rank-0.json.gz), or a bare
    array of Chrome trace events as the legacy autograd profiler writes (the reader says why it cannot use one)."""
    if not path.name.endswith((".json", ".json.gz")) or path.parent.name == OUTPUT_DIR or _is_rank_dir(path.parent):
        return False
    if not path.is_file():  # a FIFO or a device named *.json is not read
        return False
    try:
        with (gzip.open(path) if path.name.endswith(".gz") else path.open("rb")) as handle:
            head = handle.read(_SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return False
    start = head.lstrip()
    if start.startswith(b"["):
        return b'"ph"' in head and b'"ts"' in head
    if not start.startswith(b"{"):
        return False
    return any(key in head for key in _KINETO_KEYS) or (
        b'"traceEvents"' in head and any(category in head for category in _KINETO_CATEGORIES))


def _walk(root: Path) -> tuple[list[Path], list[Path]]:
    """The rank directories and the PyTorch traces under ``root`` (``*.pt.trace.json[.gz]``, or any ``.json[.gz]`` whose
    content is one), to a depth of four, by path (a rank directory is not entered; a directory reached twice
    through links is read once)."""
    rank_dirs: list[Path] = []
    traces: list[Path] = []
    seen: set[Path] = set()
    for current, dirs, files in os.walk(root, followlinks=True):
        here = Path(current)
        real = here.resolve()
        if real in seen or len(here.relative_to(root).parts) > _MAX_DEPTH:
            dirs.clear()
            continue
        seen.add(real)
        if here != root and _is_rank_dir(here):
            rank_dirs.append(here)
            dirs.clear()
            continue
        dirs.sort()
        traces.extend(here / name for name in sorted(files)
                      if name.endswith(TRACE_SUFFIXES) or _looks_like_kineto(here / name))
    return rank_dirs, traces


JOB_GAP_S = 600  # rank directories of one job start capturing within minutes of each other


def _newest_job(found: list[RankDir], path: Path) -> tuple[list[RankDir], list[str]]:
    """The rank directories of the newest run in ``found``, and a warning naming the others when there are several
    (e.g. ``advisor diagnose /tmp``, or a job profiled again into the same directory): rank directories whose
    capture times (``{host}_{pid}_{timestamp}_ascend_pt``) lie more than JOB_GAP_S apart are different runs, and
    merging them would diagnose a cluster that never existed. Directories without a timestamp stay with the newest."""
    timed = sorted((t, str(d.path), d) for d in found if (t := _capture_seconds(d.path)) is not None)
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


def _capture_seconds(path: Path) -> float | None:
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
