"""Read one large JSON array of events as consecutive byte ranges, on several cores.

The array's bytes (``size`` in all, the events from offset ``first``) are cut near equal fractions; every reader
moves a cut to the first event boundary (``}, {``) within SPLIT_WINDOW after it, the same way, so a range ends
exactly where the next one starts. Each range is decoded as an array on its own by ``jsonstream.array_blocks``. A
range can only decode when the one before it ended at a real event boundary (a cut inside a string or an object
never decodes), so the first range, which starts after the array's ``[``, vouches for the second and so on: when
every range decodes, the events are exactly those of one sequential read. Anything else (no boundary near a cut, a
boundary inside a string, a damaged or truncated file) gives None, and the caller reads the file whole, which names
the problem.

A compressed file cannot be entered in the middle: each reader decompresses it from the start and skips to its
range, which costs a decompression (about 0.3 s per 100 MB) but no decoding.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from advisor import parallel
from advisor.ingest.jsonstream import EVENT_GAP, Cut, EventDecoders, Trailer, array_blocks
from advisor.ingest.limits import open_binary
from advisor.ingest.model import FileProblem
from advisor.runoptions import current

PIECE_BYTES = 32 << 20  # a file is read on several cores when each core gets at least this much of it
SPLIT_WINDOW = 4 << 20  # how far past a cut to look for the next event boundary
_SKIP_BYTES = 4 << 20

Result = TypeVar("Result")


class _NoBoundary(Exception):
    """No event boundary near a cut, or ranges that overlap: the file is read whole instead."""


@dataclass(frozen=True)
class Piece:
    """One range of the array: from ``first`` (the first piece) or the boundary after ``begin``, to the boundary
    after ``end`` (None: to the end of the file, whose closing bytes the last piece reads)."""

    path: Path
    first: int
    begin: int | None
    end: int | None

    @property
    def last(self) -> bool:
        return self.end is None

    def blocks(self, decoders: EventDecoders, cut: Cut, trailer: Trailer | None = None) -> Iterator[tuple[list[Any], int]]:
        """``array_blocks`` over this range (``trailer``: what follows the array, read by the last piece)."""
        with open_binary(self.path) as handle:
            reader = _Range(handle, self)
            yield from array_blocks(reader, b"", reader.start, decoders, cut, trailer if self.last else None)


def stream_size(path: Path) -> int | None:
    """The bytes the file holds once decompressed: its size, or a single-member gzip file's recorded size (ISIZE,
    the size modulo 4 GiB: None when it is smaller than the compressed file, as a wrapped one may be)."""
    try:
        if not path.is_file():
            return None
        size = path.stat().st_size
        if path.suffix != ".gz":
            return size
        with path.open("rb") as handle:
            handle.seek(max(size - 4, 0))
            tail = handle.read(4)
    except OSError:
        return None
    if len(tail) < 4:
        return None
    (recorded,) = struct.unpack("<I", tail)
    return recorded if recorded >= size else None


def large(path: Path) -> bool:
    """Whether the file holds enough bytes for two pieces or more (cheap: no decompression)."""
    size = stream_size(path)
    return size is not None and size >= 2 * PIECE_BYTES


def read_in_pieces(path: Path, first: int, read_piece: Callable[[Piece], Result | None]) -> list[Result] | None:
    """``read_piece`` of each range of ``path``'s array (events from offset ``first``) on the run's cores, in file
    order; None when the file is too small to be worth it, cannot be forked for, or any range does not decode whole
    (``read_piece`` returns None for a range whose events were cut short)."""
    size = stream_size(path)
    options = current()
    if size is None or size <= first or not parallel.can_fork():
        return None
    count = min(parallel.jobs(options.jobs), (size - first) // PIECE_BYTES)
    if count < 2:
        return None
    cuts = [first + index * (size - first) // count for index in range(1, count)]
    pieces = [Piece(path, first, begin, end) for begin, end in zip([None, *cuts], [*cuts, None])]
    try:
        results = parallel.fork_map(read_piece, pieces, jobs=options.jobs, progress=options.progress)
    except (_NoBoundary, FileProblem, RecursionError, OSError, EOFError, msgspec.MsgspecError):
        return None
    return None if any(result is None for result in results) else results


class _Range:
    """A reader of one piece's bytes, followed by ``]`` when the piece ends before the array does."""

    def __init__(self, handle, piece: Piece) -> None:
        self.handle = handle
        self.cut = piece.end
        self.closing = b"" if piece.last else b"]"
        self.held = bytearray()  # bytes read ahead, from stream offset self.offset
        if piece.begin is None:
            _skip(handle, piece.first)
            self.offset = piece.first
        else:
            _skip(handle, piece.begin)
            self.held += _read(handle, SPLIT_WINDOW)
            gap = EVENT_GAP.search(self.held)
            if gap is None:
                raise _NoBoundary
            del self.held[: gap.end() - 1]
            self.offset = piece.begin + gap.end() - 1
        if self.cut is not None and self.offset > self.cut:
            raise _NoBoundary  # the boundary after this piece's cut lies past the next one's
        self.start = self.offset
        self.left: int | None = None  # bytes left to give once the boundary after the cut is known

    def readinto(self, view: memoryview) -> int:
        if self.left is None and self.cut is not None and self.offset + len(self.held) >= self.cut:
            self._find_end()
        limit = len(view) if self.left is None else min(len(view), self.left)
        if self.left is None and self.cut is not None:
            limit = min(limit, max(self.cut - self.offset, len(self.held)))
        if self.held:
            count = min(limit, len(self.held))
            view[:count] = self.held[:count]
            del self.held[:count]
        elif limit:
            count = self.handle.readinto(view[:limit]) if hasattr(self.handle, "readinto") else self._read_into(view[:limit])
        else:
            count = 0
        if count:
            self.offset += count
            if self.left is not None:
                self.left -= count
            return count
        closing, self.closing = self.closing, b""
        view[: len(closing)] = closing
        return len(closing)

    def _read_into(self, view: memoryview) -> int:
        data = self.handle.read(len(view))
        view[: len(data)] = data
        return len(data)

    def _find_end(self) -> None:
        """Read up to SPLIT_WINDOW past the cut and end this piece at the first boundary there."""
        wanted = self.cut + SPLIT_WINDOW - self.offset
        if len(self.held) < wanted:
            self.held += _read(self.handle, wanted - len(self.held))
        gap = EVENT_GAP.search(self.held, self.cut - self.offset, wanted)
        if gap is None:
            raise _NoBoundary
        self.left = gap.start() + 1
        del self.held[self.left:]


def _read(handle, count: int) -> bytes:
    """Up to ``count`` bytes (fewer only at the end of the stream)."""
    chunks, wanted = [], count
    while wanted > 0:
        chunk = handle.read(wanted)
        if not chunk:
            break
        chunks.append(chunk)
        wanted -= len(chunk)
    return b"".join(chunks)


def _skip(handle, offset: int) -> None:
    """Move a freshly opened stream to ``offset``: a seek in a plain file, else a decompression read past."""
    if getattr(handle, "seekable", lambda: False)():
        handle.seek(offset)
        return
    while offset > 0:
        chunk = handle.read(min(offset, _SKIP_BYTES))
        if not chunk:
            raise _NoBoundary
        offset -= len(chunk)
