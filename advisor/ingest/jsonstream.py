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
    """
    while True:
        buffer = bytearray(1 + len(pending) + BLOCK_BYTES)
        buffer[0] = ord("[")
        buffer[1 : 1 + len(pending)] = pending
        added = _read_into(handle, memoryview(buffer)[1 + len(pending):])
        if not added:
            break
        filled = 1 + len(pending) + added
        candidates = _last_boundary(buffer, filled)
        decoded = _decode_prefix(buffer, candidates, decoders) if candidates else None
        if decoded is None:  # one event larger than the block, or boundaries only inside strings: read on
            pending = bytes(memoryview(buffer)[1:filled])
            continue
        events, dropped, rest = decoded
        pending = bytes(memoryview(buffer)[rest:filled])
        consumed += rest - 1
        yield events, dropped
    tail = pending.rstrip()
    if trailer is None and tail.endswith(b"]"):
        yield decode_lenient(b"[" + tail, decoders)
        return
    if trailer is not None:
        closed = _closed_array(tail, decoders)
        if closed is not None:
            last_block, trailer.text = closed
            yield last_block
            return
    opened = bytearray(b"[" + tail + b",{")
    complete = _decode_prefix(opened, _last_boundary(opened, len(opened)) or [], decoders)
    if complete is None:
        raise FileProblem("is not a valid JSON array of events (it is truncated before its first complete event)")
    events, dropped, rest = complete
    cut.reason = (f"it is truncated at byte {consumed + len(tail):,} (no closing ']'); "
                  f"the events before byte {consumed + rest - 1:,} were read, the rest of the capture is lost")
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


def _closed_array(tail: bytes, decoders: EventDecoders) -> tuple[tuple[list[Any], int], bytes] | None:
    """The last events and what follows the array, when the array closes inside ``tail`` (tried from the end)."""
    ends = [m.start() for m in _ARRAY_END.finditer(tail)][::-1][:8]
    for end in ends:
        try:
            _SPLITTER.decode(b"[" + tail[: end + 1])
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        return decode_lenient(b"[" + tail[: end + 1], decoders), tail[end + 1:]
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
