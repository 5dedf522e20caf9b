"""Find what a user-given path holds: one rank, or several, of one of the input formats (``ingest.formats``)."""

from __future__ import annotations

import os
from pathlib import Path

from advisor.errors import InputError
from advisor.ingest import formats
from advisor.ingest.model import Layout
from advisor.ingest.paths import display_path

_MAX_DEPTH = 4


def _supported() -> str:
    return "advisor reads " + " and ".join(f.described for f in formats.FORMATS)


def discover(path: Path) -> Layout:
    """Classify ``path`` and list its ranks; raise InputError when it is not a profile."""
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    is_dir = not path.is_file()
    if is_dir and not os.access(path, os.R_OK | os.X_OK):
        raise InputError(f"{path}: directory cannot be read (permission denied)")
    for fmt in formats.FORMATS:  # the path is one rank
        rank = fmt.rank_at(path, is_dir)
        if rank is not None:
            return fmt.layout([rank], path, rank.parent)
    if not is_dir:
        raise InputError(f"{path}: is a file; {_supported()}")
    found = _walk(path)
    chosen = next((fmt for fmt in formats.FORMATS if found[id(fmt)]), None)
    if chosen is None:
        raise InputError(f"{path}: no profiler output found; {_supported()}")
    layout = chosen.layout(found[id(chosen)], path, path)
    for fmt in formats.FORMATS:
        others = found[id(fmt)] if fmt is not chosen else []
        if others:
            layout.warnings.append(f"{len(others)} {fmt.what} beside the {chosen.what} were not read (e.g. "
                                   f"{display_path(others[0], path)}); diagnose them on their own, or compare with "
                                   "advisor compare")
    return layout


def _walk(root: Path) -> dict[int, list[Path]]:
    """Per format (by id): the ranks under ``root``, to a depth of four, by path (a directory that is a rank is not
    entered; a directory reached twice through links is read once)."""
    found: dict[int, list[Path]] = {id(fmt): [] for fmt in formats.FORMATS}
    seen: set[Path] = set()
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
        for name in sorted(files):
            _claim(here / name, False, found)
    return found


def _claim(path: Path, is_dir: bool, found: dict[int, list[Path]]) -> bool:
    """Whether ``path`` is a rank of some format (the first that says so), recorded in ``found``."""
    for fmt in formats.FORMATS:
        rank = fmt.rank_at(path, is_dir)
        if rank is not None:
            found[id(fmt)].append(rank)
            return True
    return False
