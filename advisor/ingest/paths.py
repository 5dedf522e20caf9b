"""How file paths are shown to users: relative to a base directory, so reports do not leak absolute paths."""

from __future__ import annotations

from pathlib import Path


def display_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when it lies inside it, else as given."""
    try:
        return path.resolve().relative_to(base.resolve()).as_posix() or "."
    except (ValueError, OSError):
        return str(path)
