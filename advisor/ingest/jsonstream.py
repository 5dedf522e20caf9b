"""Stream a large JSON array of trace events in blocks, decoding each block into small typed structs.

Both trace formats hold one huge array of Chrome-trace events: trace_view.json *is* the array, a PyTorch
profiler trace has it under ``traceEvents`` inside an object whose other keys come before and after it. The
array is read in blocks of a few MB; each block is cut after the last complete event (a ``}`` followed by
``,`` whose prefix decodes as a JSON array — a cut inside a string never does), decoded by msgspec into the
caller's event struct (every key the struct lacks is skipped by the decoder) and handed over, so memory
stays at a few blocks however large the file is. A file that ends inside the array (a capture stopped while
writing) gives every complete event before the cut, and the cut is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from advisor.ingest.model import FileProblem

BLOCK_BYTES = 16 << 20
TAIL_BYTES = 64 << 10
EVENT_GAP = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\]\s*[,}]")
_BLANKS = b" \t\r\n"
# A JSON string (to its closing quote, or to the end of the bytes when it is cut off) or an event boundary.
_STRING_OR_GAP = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)|\}\s*,\s*\{', re.DOTALL)
_SPLITTER = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass(frozen=True)
class EventDecoders:
    """Decoders for one event struct: a block of events, and one event (to drop only the bad ones)."""

    block: msgspec.json.Decoder
    one: msgspec.json.Decoder

    @classmethod
    def of(cls, event_type: type) -> EventDecoders:
        # lax: numeric strings (Ascend's ts) become floats
        return cls(msgspec.json.Decoder(list[event_type], strict=False), msgspec.json.Decoder(event_type, strict=False))


@dataclass
class Cut:
    """Set when the file ends inside the array (the profiler was stopped while writing)."""

    reason: str | None = None


@dataclass
class Trailer:
    """What follows the array in its enclosing object (``, "key": value …}``), once the stream is over."""

    text: bytes = b""


def array_blocks(handle, pending: bytes, consumed: int, decoders: EventDecoders, cut: Cut,
                 trailer: Trailer | None = None) -> Iterator[tuple[list[Any], int]]:
    """Yield (events, events dropped for bad field types) block by block.

    ``pending`` holds the bytes read so far after the array's ``[`` (``consumed`` bytes of the file precede
    it). Without ``trailer`` the array must end the file; with it, the array ends inside an object and the
    rest of that object is stored in ``trailer.text``.

    Each block is read straight into a fresh buffer that starts with ``[``; the separator after the last
    complete event is overwritten with ``]`` and the buffer decoded in place, so the file's bytes are
    copied once. A buffer is never changed after it decoded: raw values in the events point into it.
    When a block holds no complete event (one event larger than a block), the buffer grows in place and
    decoding is tried again only once the buffer has doubled, so a single huge event costs time and memory
    in proportion to its size. A file cut off after some blocks keeps every event before the cut.
    """
    buffer, filled = _fresh(pending)
    retry_at = 0  # a huge event: decoding is tried again once the buffer holds this much
    yielded = False
    while True:
        if filled == len(buffer):
            buffer = _grown(buffer, filled)
        added = _read_into(handle, memoryview(buffer)[filled:])
        if not added:
            break
        filled += added
        if filled < retry_at:
            continue
        decoded = _decode_last(buffer, filled, decoders)
        if decoded is None:  # one event larger than what was read: read on
            retry_at = 2 * filled
            continue
        events, dropped, rest = decoded
        consumed += rest - 1
        buffer, filled = _fresh(memoryview(buffer)[rest:filled])
        retry_at, yielded = 0, True
        yield events, dropped
    yield from _last_events(buffer, filled, consumed, decoders, cut, trailer, yielded)


def _fresh(pending) -> tuple[bytearray, int]:
    """A new buffer holding ``[`` and ``pending``, with a block of room after them; (buffer, bytes filled)."""
    buffer = bytearray(1 + len(pending) + BLOCK_BYTES)
    buffer[0] = ord("[")
    buffer[1 : 1 + len(pending)] = pending
    return buffer, 1 + len(pending)


def _grown(buffer: bytearray, filled: int) -> bytearray:
    """``buffer`` with a block more room (resized in place where nothing points into it, else copied)."""
    try:
        buffer.extend(bytes(BLOCK_BYTES))
        return buffer
    except BufferError:  # a view of it is still alive
        larger = bytearray(len(buffer) + BLOCK_BYTES)
        larger[:filled] = memoryview(buffer)[:filled]
        return larger


def _reopened(buffer: bytearray, end: int) -> bytearray:
    """``buffer[:end]`` followed by ``,{``, so that the last complete event ends at an event boundary."""
    try:
        del buffer[end:]
        buffer += b",{"
        return buffer
    except BufferError:  # a view of it is still alive
        return bytearray(memoryview(buffer)[:end]) + b",{"


def _last_events(buffer: bytearray, filled: int, consumed: int, decoders: EventDecoders, cut: Cut,
                 trailer: Trailer | None, yielded: bool) -> Iterator[tuple[list[Any], int]]:
    """The events of the bytes left when the file ends (``buffer[1:filled]``): the array closes, or the file is cut."""
    end = filled
    while end > 1 and buffer[end - 1] in _BLANKS:
        end -= 1
    cut_at = consumed + end - 1
    if trailer is None and end > 1 and buffer[end - 1] == ord("]"):
        try:
            events = decode_lenient(memoryview(buffer)[:end], decoders)
        except FileProblem as exc:
            if "was truncated" not in str(exc):  # damaged, not cut off
                raise
        else:
            yield events
            return
    if trailer is not None:
        closed = _closed_array(buffer, end, decoders)
        if closed is not None:
            last_block, trailer.text = closed
            yield last_block
            return
    while end > 1 and buffer[end - 1] in _BLANKS + b",":  # a cut just after an event's separator
        end -= 1
    buffer = _reopened(buffer, end)
    complete = _decode_last(buffer, len(buffer), decoders)
    if complete is None and not yielded:
        raise FileProblem("is not a valid JSON array of events (it is truncated before its first complete event)")
    read_to = consumed
    if complete is not None:
        events, dropped, rest = complete
        read_to += rest - 1
    cut.reason = (f"it is truncated at byte {cut_at:,} (no closing ']'); "
                  f"the events before byte {read_to:,} were read, the rest of the capture is lost")
    if complete is not None:
        yield events, dropped


def _read_into(handle, view: memoryview) -> int:
    """Fill ``view`` from ``handle`` as far as the file goes; the number of bytes read."""
    readinto = getattr(handle, "readinto", None)
    total = 0
    while total < len(view):
        if readinto is not None:
            count = readinto(view[total:])
        else:
            more = handle.read(len(view) - total)
            count = len(more)
            view[total : total + count] = more
        if not count:
            break
        total += count
    return total


def _closed_array(buffer: bytearray, end: int, decoders: EventDecoders) -> tuple[tuple[list[Any], int], bytes] | None:
    """The last events and what follows the array, when the array closes inside ``buffer[1:end]`` (tried from the end)."""
    view = memoryview(buffer)
    ends = [m.start() for m in _ARRAY_END.finditer(view, 1, end)][::-1][:8]
    for close in ends:
        try:
            _SPLITTER.decode(view[: close + 1])
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        return decode_lenient(view[: close + 1], decoders), bytes(view[close + 1 : end])
    return None


def _last_boundary(buffer: bytearray, filled: int) -> list[int] | None:
    """Positions just after the '}' of the last few "}, {" in ``buffer[:filled]``, last first."""
    view = memoryview(buffer)[:filled]
    span = TAIL_BYTES
    while True:
        start = max(filled - span, 0)
        ends = [m.start() + 1 for m in EVENT_GAP.finditer(view, start)]
        if ends or start == 0:
            return ends[::-1][:8] or None
        span *= 8


def _decode_last(buffer: bytearray, filled: int, decoders: EventDecoders) -> tuple[list[Any], int, int] | None:
    """Decode ``buffer[:filled]`` up to its last complete event (see _decode_prefix); None when it holds none.

    The last few "}, {" are tried first; when each of them is inside a string, the bytes are scanned with
    strings skipped, which finds the real boundaries before them.
    """
    candidates = _last_boundary(buffer, filled)
    decoded = _decode_prefix(buffer, candidates, decoders) if candidates else None
    if decoded is None and candidates:
        outside = [m.start() + 1 for m in _STRING_OR_GAP.finditer(memoryview(buffer), 1, filled) if buffer[m.start()] != 0x22]
        decoded = _decode_prefix(buffer, outside[::-1][:8], decoders) if outside else None
    return decoded


def _decode_prefix(buffer: bytearray, candidates: list[int], decoders: EventDecoders) -> tuple[list[Any], int, int] | None:
    """Decode ``buffer`` (starting with '[') up to the last candidate that ends a complete event.

    Returns (events, dropped, index of the next event's '{'); the byte at the chosen candidate is left
    as ']'.
    """
    for end in candidates[:8]:
        saved, buffer[end] = buffer[end], ord("]")
        prefix = memoryview(buffer)[: end + 1]
        try:
            return decoders.block.decode(prefix), 0, buffer.index(b"{", end)
        except msgspec.ValidationError:  # raised where it is met, before the end shows whether the JSON is whole
            try:
                raws = _SPLITTER.decode(prefix)
            except msgspec.DecodeError:
                buffer[end] = saved
                continue
            events, dropped = _decode_each(raws, decoders)
            return events, dropped, buffer.index(b"{", end)
        except msgspec.DecodeError:
            buffer[end] = saved  # the candidate was inside a string: try the one before
    return None


def decode_lenient(array: bytes, decoders: EventDecoders) -> tuple[list[Any], int]:
    """Decode an array of events, dropping the ones whose fields have unexpected types."""
    try:
        return decoders.block.decode(array), 0
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise FileProblem(f"is not a valid JSON array of events ({exc})") from exc
    try:
        raws = _SPLITTER.decode(array)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FileProblem(f"is not a valid JSON array of events ({exc})") from exc
    return _decode_each(raws, decoders)


def _decode_each(raws: list[msgspec.Raw], decoders: EventDecoders) -> tuple[list[Any], int]:
    """Decode events one by one, dropping (and counting) the ones whose fields have unexpected types."""
    events, bad = [], 0
    for raw in raws:
        try:
            events.append(decoders.one.decode(raw))
        except (msgspec.DecodeError, msgspec.ValidationError):
            bad += 1
    return events, bad
