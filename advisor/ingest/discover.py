"""Find what a user-given path holds: one rank, or several, of one of the input formats (``ingest.formats``).

A format that ``joins`` (msServiceProfiler's service-level data) is diagnosed on its own when nothing else is found;
found beside another format's ranks — in the directory given, or anywhere under it — it joins their profile as
``Layout.service`` instead of being left out. Ranks of separate runs (one subdirectory per run) are never merged: the
path is refused, naming them (``ingest.runs``)."""

from __future__ import annotations

import difflib
import os
import stat
from dataclasses import replace
from pathlib import Path

from advisor.errors import InputError
from advisor.ingest import formats
from advisor.ingest.model import Layout
from advisor.ingest.paths import display_path
from advisor.ingest.runs import refuse_separate_runs

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
            layout = fmt.layout([rank], path, rank.parent)
            return _joined(layout, _joining_here(path), path) if is_dir and not fmt.joins else layout
    if not is_dir:
        raise InputError(f"{path}: is a file; {_supported()}")
    found, outside = _walk(path)
    chosen = next((fmt for fmt in formats.FORMATS if found[id(fmt)]), None)
    unfollowed = (f"{len(outside)} symbolic link(s) to directories outside {path} were not followed (e.g. "
                  f"{display_path(outside[0], path)} → {os.readlink(outside[0])}): only links to rank directories are "
                  "read; diagnose another tree by its own path") if outside else None
    if chosen is None:
        raise InputError(f"{path}: no profiler output found; {_supported()}" + (f" ({unfollowed})" if unfollowed else ""))
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


def _walk(root: Path) -> tuple[dict[int, list[Path]], list[Path]]:
    """Per format (by id): the ranks under ``root``, to a depth of four, by path (a directory that is a rank is not
    entered; a directory reached twice through links is read once); and the links to directories outside ``root``
    that were not followed (a link to a rank directory is read; a link to ``/`` must not merge foreign ranks)."""
    found: dict[int, list[Path]] = {id(fmt): [] for fmt in formats.FORMATS}
    seen: set[Path] = set()
    outside: list[Path] = []
    top = root.resolve()
    for current, dirs, files in os.walk(root, followlinks=True):
        here = Path(current)
        real = here.resolve()
        if real in seen or len(here.relative_to(root).parts) > _MAX_DEPTH:
            dirs.clear()
            continue
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
    return found, outside


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
