"""How file paths are shown to users: relative to a base directory, so reports do not leak absolute paths."""

from __future__ import annotations

import os
from pathlib import Path


def display_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when it lies inside it, else as given (symbolic links are not followed)."""
    inside, outside = os.path.abspath(path), os.path.abspath(base)
    prefix = outside if outside.endswith(os.sep) else outside + os.sep
    if inside.startswith(prefix):  # the common case, told by the strings alone (pathlib's test costs ten times more)
        return inside[len(prefix):].replace(os.sep, "/") or "."
    for where in (_absolute, _resolved):  # resolving (system calls) only when the plain absolute paths do not tell
        inside, outside = where(path), where(base)
        if inside is not None and outside is not None and inside.is_relative_to(outside):
            return inside.relative_to(outside).as_posix() or "."
    return str(path)


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symbolic link loop (Python < 3.13)
        return None


class Shown:
    """``display_path`` against one base, remembered per path (every fact names its files, and resolving paths costs
    system calls)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._seen: dict[Path, str] = {}

    def __call__(self, path: Path) -> str:
        shown = self._seen.get(path)
        if shown is None:
            shown = self._seen[path] = display_path(path, self.base)
        return shown
