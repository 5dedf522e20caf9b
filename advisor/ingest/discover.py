"""Find what a user-given path holds: one rank, or several, of one of the input formats (``ingest.formats``).

A format that ``joins`` (msServiceProfiler's service-level data) is diagnosed on its own when nothing else is found;
found beside another format's ranks — in the directory given, or anywhere under it — it joins their profile as
``Layout.service`` instead of being left out. Ranks of separate runs (one subdirectory per run) are never merged: the
path is refused, naming them (``ingest.runs``)."""

from __future__ import annotations

import difflib
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

from advisor.errors import InputError
from advisor.ingest import formats
from advisor.ingest.model import Layout
from advisor.ingest.paths import display_path
from advisor.ingest.runs import refuse_separate_runs
from advisor.ingest.sniff import archive_refusal, describe

_MAX_DEPTH = 4


def _supported() -> str:
    return "advisor reads " + " and ".join(f.described for f in formats.FORMATS)


def discover(path: Path) -> Layout:
    """Classify ``path`` and list its ranks; raise InputError when it is not a profile."""
    try:
        status = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file or directory{_did_you_mean(path)}") from None
    except OSError as exc:  # a name too long for the OS, a loop of links, …
        raise InputError(f"{_shown(path)}: cannot be used ({exc.strerror or exc})") from None
    kind = _special_kind(status.st_mode)
    if kind is not None:
        raise InputError(f"{path}: is a {kind}, not a profile directory or trace file")
    is_dir = stat.S_ISDIR(status.st_mode)
    if is_dir and not os.access(path, os.R_OK | os.X_OK):
        raise InputError(f"{path}: directory cannot be read (permission denied)")
    for fmt in formats.FORMATS:  # the path is one rank
        rank = fmt.rank_at(path, is_dir)
        if rank is not None:
            why = fmt.not_one(rank) if fmt.not_one is not None and not is_dir else None
            if why is not None:
                raise InputError(f"{path}: {why}")
            layout = fmt.layout([rank], path, rank.parent)
            return _joined(layout, _joining_here(path), path) if is_dir and not fmt.joins else layout
    if not is_dir and _is_rank(path.parent) and archive_refusal(path) is None:  # trace_view.json, kernel_details.csv …
        layout = discover(path.parent)
        layout.warnings.append(f"{path}: is one file of the rank {path.parent}; the rank is read whole, its other "
                               "files too (give the directory to say so)")
        return layout
    if not is_dir:
        raise InputError(_no_profile_file(path))
    found, outside, seen = _walk(path)
    chosen = next((fmt for fmt in formats.FORMATS if found[id(fmt)]), None)
    unfollowed = (f"{len(outside)} symbolic link(s) to directories outside {path} were not followed (e.g. "
                  f"{display_path(outside[0], path)} → {os.readlink(outside[0])}): only links to rank directories are "
                  "read; diagnose another tree by its own path") if outside else None
    if chosen is not None and chosen.not_one is not None and not _any_is_one(chosen, found[id(chosen)]):
        first = found[id(chosen)][0]
        count = len(found[id(chosen)])
        raise InputError(f"{path}: holds no profile: {'none of the' if count > 1 else 'the'} {_count(count, 'file')} "
                         f"named as {chosen.what} {'is one' if count > 1 else 'is not one'} "
                         f"({display_path(first, path)}: {chosen.not_one(first)})")
    if chosen is None:
        raise InputError(_no_profile_directory(path, seen) + (f" ({unfollowed})" if unfollowed else ""))
    if not chosen.joins:
        refuse_separate_runs(found[id(chosen)], path)
    layout = chosen.layout(found[id(chosen)], path, path)
    if unfollowed:
        layout.warnings.append(unfollowed)
    for fmt in formats.FORMATS:
        others = found[id(fmt)] if fmt is not chosen else []
        if others and fmt.joins and not chosen.joins:
            layout = _joined(layout, others, path)
        elif others:
            layout.warnings.append(f"{len(others)} {fmt.what} beside the {chosen.what} were not read (e.g. "
                                   f"{display_path(others[0], path)}); diagnose them on their own, or compare with "
                                   "advisor compare")
    return layout


def _did_you_mean(path: Path) -> str:
    """'; did you mean …?' with the names beside ``path`` closest to its own (a typo), or nothing."""
    try:
        siblings = [entry.name for _, entry in zip(range(10_000), os.scandir(path.parent or "."))]
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, siblings, n=3, cutoff=0.75)
    return f"; did you mean {' or '.join(str(path.with_name(name)) for name in close)}?" if close else ""


def _special_kind(mode: int) -> str | None:
    """What a path that is neither a directory nor a regular file is (a device never ends, a FIFO waits for a
    writer): None for a directory or a file."""
    for test, kind in ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return None


def _shown(path: Path, limit: int = 120) -> str:
    """A path short enough for a message (its start and end around '…')."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit - 40]}…{text[-39:]}"


@dataclass
class _Seen:
    """What a walk met that is no profile: the files (relative paths, the first _NAMED of them), how many files and
    directories, and whether directories deeper than _MAX_DEPTH were left unsearched."""

    files: list[str] = field(default_factory=list)
    file_count: int = 0
    directories: list[str] = field(default_factory=list)
    directory_count: int = 0
    deeper: bool = False


_NAMED = 5


def _walk(root: Path) -> tuple[dict[int, list[Path]], list[Path], _Seen]:
    """Per format (by id): the ranks under ``root``, to a depth of four, by path (a directory that is a rank is not
    entered; a directory reached twice through links is read once); the links to directories outside ``root``
    that were not followed (a link to a rank directory is read; a link to ``/`` must not merge foreign ranks); and
    the files and directories met (for the message when there is no profile)."""
    found: dict[int, list[Path]] = {id(fmt): [] for fmt in formats.FORMATS}
    seen: set[Path] = set()
    outside: list[Path] = []
    met = _Seen()
    top = root.resolve()
    for current, dirs, files in os.walk(root, followlinks=True):
        here = Path(current)
        real = here.resolve()
        if real in seen or len(here.relative_to(root).parts) > _MAX_DEPTH:
            met.deeper = met.deeper or real not in seen
            dirs.clear()
            continue
        if here != root:
            met.directory_count += 1
            if len(met.directories) < _NAMED:
                met.directories.append(here.relative_to(root).as_posix() + "/")
        seen.add(real)
        if here != root and _claim(here, True, found):
            dirs.clear()
            continue
        dirs.sort()
        for name in [d for d in dirs if (here / d).is_symlink()]:
            linked = here / name
            if not linked.resolve().is_relative_to(top) and not _is_rank(linked):
                dirs.remove(name)
                outside.append(linked)
        for name in sorted(files):
            _claim(here / name, False, found)
            met.file_count += 1
            if len(met.files) < _NAMED:
                met.files.append((here / name).relative_to(root).as_posix())
    return found, outside, met


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


_EXPECTED = ("expected *_ascend_pt or *_ascend_ms directories, *.pt.trace.json[.gz] files, or msServiceProfiler's "
             "request.csv and batch.csv")


def _no_profile_directory(path: Path, met: _Seen) -> str:
    """'DIR: is empty', or 'DIR: holds no profile (found N files: a.txt, …; expected …)' with archives among them
    named, and the directories too deep to be searched."""
    if not met.file_count and not met.directory_count:
        return f"{path}: is empty"
    if met.file_count:
        more = ", …" if met.file_count > len(met.files) else ""
        found = f"found {_count(met.file_count, 'file')}: {', '.join(met.files)}{more}"
    else:
        more = ", …" if met.directory_count > len(met.directories) else ""
        directories = f"{met.directory_count} director{'y' if met.directory_count == 1 else 'ies'}"
        found = f"found no file, only {directories}: {', '.join(met.directories)}{more}"
    archives = [name for name in met.files if archive_refusal(path / name) is not None]
    notes = [f"archives are not read: extract {archives[0]} first" if len(archives) == 1 else
             f"archives are not read: extract {', '.join(archives)} first"] if archives else []
    if met.deeper:
        notes.append(f"directories deeper than {_MAX_DEPTH} levels are not searched: give a path closer to the profile")
    return f"{path}: holds no profile ({found}; {_EXPECTED}{''.join('; ' + note for note in notes)})"


def _no_profile_file(path: Path) -> str:
    """Why a file no format reads is refused: an archive (extract it first), or what it holds."""
    refusal = archive_refusal(path)
    if refusal is not None:
        return f"{path}: {refusal}"
    try:
        with path.open("rb") as handle:
            head = handle.read(64 << 10)
        whole = len(head) < 64 << 10
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or exc})"
    return f"{path}: is not a PyTorch profiler trace ({describe(head, whole)}); {_supported()}"


def _any_is_one(fmt, found: list[Path]) -> bool:
    """Whether any of the files ``fmt`` claimed by their names is one of its files (checked in order, up to the
    first that is: a real directory costs one look at one file)."""
    return any(fmt.not_one(rank) is None for rank in found)


def _is_rank(path: Path) -> bool:
    """Whether a directory is one rank of some format."""
    return any(fmt.rank_at(path, True) is not None for fmt in formats.FORMATS)


def _claim(path: Path, is_dir: bool, found: dict[int, list[Path]]) -> bool:
    """Whether ``path`` is a rank of some format (the first that says so), recorded in ``found``."""
    for fmt in formats.FORMATS:
        rank = fmt.rank_at(path, is_dir)
        if rank is not None:
            found[id(fmt)].append(rank)
            return True
    return False


def _joining_here(directory: Path) -> list[Path]:
    """What the files directly in ``directory`` (a rank given as the path) are of a format that joins: the directory
    itself when it holds service files."""
    try:
        names = sorted(entry.name for entry in os.scandir(directory) if not entry.is_dir())
    except OSError:
        return []
    return [found for fmt in formats.FORMATS if fmt.joins for name in names
            if (found := fmt.rank_at(directory / name, False)) is not None]


def _joined(layout: Layout, found: list[Path], path: Path) -> Layout:
    """``layout`` with the first directory of service-level data ``found`` beside its ranks (the others named in a
    warning)."""
    directories = list(dict.fromkeys(found))
    if not directories:
        return layout
    warnings = list(layout.warnings)
    if len(directories) > 1:
        warnings.append(f"msServiceProfiler output in {len(directories) - 1} more director"
                        f"{'y' if len(directories) == 2 else 'ies'} beside the profile was not read (e.g. "
                        f"{display_path(directories[1], path)}); the one read is {display_path(directories[0], path)}")
    return replace(layout, service=directories[0], warnings=warnings)
