"""The block reader of ingest/jsonstream.py on files larger than a block: cut-off files keep every complete
event before the cut, and one event larger than many blocks is read in time and memory proportional to it.

The block size is made small here so that a few kilobytes behave like a trace of hundreds of MB.
"""

from __future__ import annotations

import io
import json
from typing import Union

import msgspec
import pytest

from advisor.ingest import jsonstream
from advisor.ingest.jsonstream import Cut, EventDecoders, Trailer, array_blocks
from advisor.ingest.model import FileProblem


class _Event(msgspec.Struct):
    name: Union[str, None] = None
    ts: Union[float, None] = None


_DECODERS = EventDecoders.of(_Event)


def _events(count: int) -> list[dict]:
    # names with braces and commas inside strings: boundaries that are not boundaries
    return [{"name": f"op{i}" + ("}, {" * (i % 3)), "ts": float(i), "args": {"stack": "x" * (i % 50)}} for i in range(count)]


def _read(data: bytes, trailer: Trailer | None = None) -> tuple[list[str], Cut]:
    cut = Cut()
    handle = io.BytesIO(data)
    head = handle.read(jsonstream.BLOCK_BYTES)
    start = head.index(b"[") + 1
    names = []
    for events, _dropped in array_blocks(handle, head[start:], start, _DECODERS, cut, trailer):
        names.extend(e.name for e in events)
    return names, cut


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(jsonstream, "BLOCK_BYTES", 512)
    monkeypatch.setattr(jsonstream, "TAIL_BYTES", 64)


def _complete_before(events: list[dict], text: bytes, cut: int) -> list[str]:
    """The names of the events whose text ends before byte ``cut`` of ``text``."""
    names, position = [], 1
    for event in events:
        encoded = json.dumps(event).encode()
        position = text.index(encoded, position) + len(encoded)
        if position <= cut:
            names.append(event["name"])
    return names


@pytest.mark.parametrize("fraction", [0.3, 0.51, 0.77, 0.9, 0.999])
def test_a_trace_cut_after_many_blocks_keeps_every_event_before_the_cut(small_blocks, fraction):
    events = _events(300)
    text = json.dumps(events).encode()
    assert len(text) > 20 * jsonstream.BLOCK_BYTES
    cut_at = int(len(text) * fraction)
    names, cut = _read(text[:cut_at])
    assert names == _complete_before(events, text, cut_at)
    assert cut.reason is not None and f"truncated at byte {cut_at:,}" in cut.reason


def test_every_cut_position_of_a_many_block_trace_keeps_the_events_before_it(small_blocks):
    events = _events(120)
    text = json.dumps(events).encode()
    for cut_at in range(len(text) // 3, len(text) - 1, 97):
        names, cut = _read(text[:cut_at])
        assert names == _complete_before(events, text, cut_at), cut_at
        assert cut.reason is not None


def test_a_cut_just_after_a_separator_keeps_the_last_event(small_blocks):
    events = _events(100)
    text = json.dumps(events).encode()
    last = json.dumps(events[-1]).encode()
    cut_at = text.rindex(last) - 1  # "…}, " cut before the last event's "{"
    names, _cut = _read(text[:cut_at])
    assert names == [e["name"] for e in events[:-1]]


def test_a_kineto_array_cut_after_many_blocks_keeps_the_events(small_blocks):
    events = _events(300)
    text = json.dumps({"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms"}).encode()
    cut_at = int(len(text) * 0.8)
    names, cut = _read(text[:cut_at], Trailer())
    assert names == _complete_before(events, text, cut_at)
    assert cut.reason is not None


def test_a_complete_kineto_array_keeps_its_trailer(small_blocks):
    events = _events(200)
    text = json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}).encode()
    trailer = Trailer()
    names, cut = _read(text, trailer)
    assert names == [e["name"] for e in events] and cut.reason is None
    assert json.loads(b"{" + trailer.text.lstrip().lstrip(b",")) == {"displayTimeUnit": "ns"}


def test_a_trace_cut_before_its_first_event_is_still_refused(small_blocks):
    with pytest.raises(FileProblem, match="truncated before its first complete event"):
        _read(b'[{"name": "' + b"y" * 5000)


def test_a_damaged_trace_is_still_refused_not_read_as_cut(small_blocks):
    events = _events(100)
    text = json.dumps(events).encode()
    with pytest.raises(FileProblem, match="is not a valid JSON array of events"):
        _read(text[:-2] + b"NaN]")


def test_one_huge_event_is_decoded_a_bounded_number_of_times(small_blocks, monkeypatch):
    """A single string event of 2,000 blocks: decoding is retried as the buffer doubles, not every block."""
    attempts: list[int] = []
    original = jsonstream._decode_prefix

    def counting(buffer, candidates, decoders):
        attempts.append(len(buffer))
        return original(buffer, candidates, decoders)

    monkeypatch.setattr(jsonstream, "_decode_prefix", counting)
    huge = "}, {" * 10 + "z" * (2000 * jsonstream.BLOCK_BYTES)
    text = json.dumps([{"name": "small"}, {"name": huge}, {"name": "after"}]).encode()
    names, cut = _read(text)
    assert names == ["small", huge, "after"] and cut.reason is None
    # without the doubling the reader tried each of the ~2,000 blocks (quadratic work on a 1 GB string event)
    assert len(attempts) < 40, len(attempts)
    assert sum(attempts) < 8 * len(text)


def test_one_huge_event_does_not_copy_the_pending_bytes_every_block(small_blocks, monkeypatch):
    copies: list[int] = []
    original = jsonstream._fresh

    def counting(pending):
        copies.append(len(pending))
        return original(pending)

    monkeypatch.setattr(jsonstream, "_fresh", counting)
    text = json.dumps([{"name": "y" * (1000 * jsonstream.BLOCK_BYTES)}]).encode()
    names, _cut = _read(text)
    assert len(names) == 1
    assert sum(copies) < 2 * len(text), "the pending bytes were copied into a new buffer block after block"
