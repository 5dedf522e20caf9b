"""Where the bundled data directories (rules/, knowledge/, reports/) are on disk.

In a wheel they are installed under ``advisor/_data/``; in a source checkout (editable install, tests)
they are the top-level directories of the repository.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory holding the bundled ``rules``, ``knowledge`` or ``reports`` data."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"bundled data directory {name!r} is missing from the installation")
