"""Explicit resource limits on input files, each with the option that lifts it.

A file over ``--max-file-size`` (the run's ``RunOptions.max_file_bytes``, read from ``runoptions.current()``) is
skipped with a message saying so (the default is far above the largest profiler file seen, so only a wrong or
damaged file trips it); a compressed trace whose content would expand past ``MAX_EXPANSION`` times its size, or
past the file-size limit, is refused as a decompression bomb. Metadata JSON files have their own fixed plausibility cap in the readers.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from advisor.ingest.model import FileProblem
from advisor.runoptions import current

MAX_EXPANSION = 200  # compressed traces shrink 10-30×; 200× is content built to expand

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
    """Raise FileProblem when a file of ``size`` bytes is over the run's file-size limit."""
    limit = current().max_file_bytes
    if size > limit:
        raise FileProblem(f"is {format_size(size)}, over the {format_size(limit)} --max-file-size limit; "
                          f"rerun with --max-file-size {_suggest(size)} to read it")


def _suggest(size: int) -> str:
    if size < 1 << 30:
        return f"{-(-size // (1 << 20))}M"
    return f"{-(-size // (1 << 30))}G"


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; FileProblem for anything else.

    The file is opened without blocking (a FIFO with no writer would otherwise wait forever) and checked to
    be a regular file on the open descriptor; at most ``limit + 1`` bytes are read, whatever the file claims
    its size is (``/dev/zero`` claims 0, a sparse file its full size). OSError for a file that cannot be
    opened (missing, permission denied).
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(descriptor)
    except OSError:
        os.close(descriptor)
        raise
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        raise FileProblem(f"is not a regular file (it is {_kind(status.st_mode)})")
    with os.fdopen(descriptor, "rb", buffering=0) as handle:
        if status.st_size > limit:
            raise FileProblem(f"is {format_size(status.st_size)}, over the {format_size(limit)} this file can have")
        chunks, total = [], 0
        while total <= limit:
            chunk = handle.read(min(limit + 1 - total, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise FileProblem(f"is over the {format_size(limit)} this file can have")
        return b"".join(chunks)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


@contextmanager
def open_binary(path: Path) -> Iterator[BinaryIO]:
    """Open an input file for reading; a ``.gz`` file is decompressed as it is read, within the limits.

    The decompressed stream may not exceed ``MAX_EXPANSION`` times the compressed size nor the file-size
    limit; a corrupt or cut-off gzip stream raises FileProblem when the damage is reached.
    """
    if path.suffix != ".gz":
        with path.open("rb") as handle:
            yield handle
        return
    allowed = min(MAX_EXPANSION * max(path.stat().st_size, 1), current().max_file_bytes)
    with path.open("rb") as raw, gzip.GzipFile(fileobj=raw) as unpacked:
        yield _Bounded(unpacked, allowed)  # type: ignore[misc]


class _Bounded:
    """A read-only view of a decompressing stream that stops at ``allowed`` bytes and names gzip damage."""

    def __init__(self, stream: gzip.GzipFile, allowed: int) -> None:
        self.stream = stream
        self.allowed = allowed
        self.produced = 0

    def read(self, size: int = -1) -> bytes:
        try:
            data = self.stream.read(size if size >= 0 else self.allowed + 1 - self.produced)
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise FileProblem(f"is not a valid gzip file ({exc})") from exc
        except EOFError as exc:
            raise FileProblem("is a truncated gzip file (the compressed stream ends early)") from exc
        self.produced += len(data)
        if self.produced > self.allowed:
            raise FileProblem(
                f"expands past {format_size(self.allowed)} when decompressed (over {MAX_EXPANSION}× its size or the "
                "--max-file-size limit); it looks like a decompression bomb — decompress it yourself if it is genuine")
        return data
