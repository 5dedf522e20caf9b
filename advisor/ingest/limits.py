"""Explicit resource limits on input files, each with the option that lifts it.

A file over ``--max-file-size`` is skipped with a message saying so (the default is far above the largest
profiler file seen, so only a wrong or damaged file trips it); a compressed trace whose content would
expand past ``MAX_EXPANSION`` times its size, or past the file-size limit, is refused as a decompression
bomb. Metadata JSON files have their own fixed plausibility cap in the readers.
"""

from __future__ import annotations

import contextvars
import re

from advisor.ingest.model import FileProblem

DEFAULT_MAX_FILE_BYTES = 4 << 30
MAX_EXPANSION = 200  # compressed traces shrink 10-30×; 200× is content built to expand

MAX_FILE_BYTES: contextvars.ContextVar[int] = contextvars.ContextVar("MAX_FILE_BYTES", default=DEFAULT_MAX_FILE_BYTES)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``8G``, ``512M``, ``1.5GiB`` or a byte count → bytes; ValueError for anything else."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 8G, 512M, 1.5GiB)")
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * (1 << (10 * " kmgt".index(unit or " "))))


def format_size(size: int) -> str:
    """Bytes as the largest binary unit with one decimal (``5.0 GiB``)."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):.1f} {unit}"
    return f"{size} B"


def check_size(size: int) -> None:
    """Raise FileProblem when a file of ``size`` bytes is over the file-size limit."""
    limit = MAX_FILE_BYTES.get()
    if size > limit:
        raise FileProblem(f"is {format_size(size)}, over the {format_size(limit)} --max-file-size limit; "
                          f"rerun with --max-file-size {_suggest(size)} to read it")


def _suggest(size: int) -> str:
    if size < 1 << 30:
        return f"{-(-size // (1 << 20))}M"
    return f"{-(-size // (1 << 30))}G"
