"""Read trace_view.json in one pass into the few columnar tables the facts need.

The file is one JSON array of Chrome-trace events (often a single line of hundreds of MB). msgspec first
splits the array into raw element spans without building objects, then decodes the elements chunk by
chunk into small typed structs holding only the fields used (every other key — call stacks, counter
values — is skipped by the decoder). Each chunk is reduced at once to the rows the facts need and then
dropped, so memory stays near the size of the file instead of growing with the number of events.

Processes are identified by their ``process_name`` metadata, never by pid values. ``ts`` is a string of
µs in Ascend traces; the decoder's lax mode turns it into a float64 (0.25 µs resolution at today's
epoch, ample for durations and gaps).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import msgspec
import pandas as pd

from advisor.ingest.model import FileProblem

HOST_PROCESSES = ("Python", "Python GC")
API_PROCESS = "CANN"
DEVICE_PROCESS = "Ascend Hardware"
OVERLAP_PROCESS = "Overlap Analysis"
LAUNCH_FLOW = "HostToDevice"
OVERLAP_LANES = frozenset({"Computing", "Communication", "Communication(Not Overlapped)", "Free"})
# Host events the facts use: step boundaries, data loading, optimizer steps, SyncBatchNorm (GC is kept by category).
HOST_EVENTS = re.compile(r"ProfilerStep#|dataloader|Optimizer\.step#|SyncBatchNorm", re.IGNORECASE)
API_EVENTS = re.compile(r"AscendCL@aclopCompileAndExecute$|AscendCL@aclrtSynchronize|Node@launch$")
CHUNK_EVENTS = 100_000


class _Args(msgspec.Struct):
    name: Union[str, None] = None
    task_type: Union[str, None] = msgspec.field(default=None, name="Task Type")


class _Event(msgspec.Struct):
    ph: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Union[float, None] = None
    dur: Union[float, None] = None
    cat: Union[str, None] = None
    id: Union[int, str, None] = None
    args: Union[_Args, None] = None


_SPLITTER = msgspec.json.Decoder(list[msgspec.Raw])
_CHUNK = msgspec.json.Decoder(list[_Event], strict=False)  # lax: numeric strings become floats
_ONE = msgspec.json.Decoder(_Event, strict=False)
_INF = float("inf")


@dataclass
class TraceTables:
    host: pd.DataFrame  # Python / Python GC X events of interest: name, cat, tid, ts, dur
    apis: pd.DataFrame  # CANN X events of interest: name, tid, ts, dur
    device: pd.DataFrame  # Ascend Hardware X events: stream, name, task_type, ts, dur
    overlap: pd.DataFrame  # Overlap Analysis X events: lane, ts, dur
    launches: pd.DataFrame  # HostToDevice flows paired: launch_ts, device_ts


@dataclass
class _Rows:
    """Candidate rows, each starting with its pid; filtered by process once all names are known."""

    names: dict
    host: list
    apis: list
    device: list
    overlap: list
    starts: dict
    ends: dict
    bad_times: int = 0


def read_trace(path: Path, warnings: list[str]) -> TraceTables:
    """Decode ``path`` and split it into tables; raise FileProblem when it is not a trace at all."""
    data = path.read_bytes()
    if not data.strip():
        raise FileProblem("is empty")
    rows = _Rows(names={}, host=[], apis=[], device=[], overlap=[], starts={}, ends={})
    for chunk in _chunks(data, warnings):
        _collect(chunk, rows)
    del data
    if not rows.names:
        raise FileProblem("has no process_name metadata events; it is not an Ascend trace_view.json")
    if rows.bad_times:
        warnings.append(f"{rows.bad_times} event(s) without a usable ts/dur were ignored")

    def of(process: str, table: list) -> list:
        pids = {pid for pid, name in rows.names.items() if name == process}
        return [row[1:] for row in table if row[0] in pids]

    paired = [(rows.starts[i], rows.ends[i]) for i in rows.starts.keys() & rows.ends.keys()]
    return TraceTables(
        host=pd.DataFrame(of("Python", rows.host) + [(n, "GC", t, s, d) for n, _c, t, s, d in of("Python GC", rows.host)],
                          columns=["name", "cat", "tid", "ts", "dur"]),
        apis=pd.DataFrame(of(API_PROCESS, rows.apis), columns=["name", "tid", "ts", "dur"]),
        device=pd.DataFrame(of(DEVICE_PROCESS, rows.device), columns=["stream", "name", "task_type", "ts", "dur"]),
        overlap=pd.DataFrame(of(OVERLAP_PROCESS, rows.overlap), columns=["lane", "ts", "dur"]),
        launches=pd.DataFrame(sorted(paired), columns=["launch_ts", "device_ts"]),
    )


def _chunks(data: bytes, warnings: list[str]) -> Iterator[list[_Event]]:
    try:
        raws = _SPLITTER.decode(data)
    except msgspec.ValidationError as exc:
        raise FileProblem(f"is not a JSON array of events ({exc})") from exc
    except msgspec.DecodeError as exc:
        raise FileProblem(f"is not a valid JSON array of events ({exc})") from exc
    bad = 0
    for start in range(0, len(raws), CHUNK_EVENTS):
        part = raws[start : start + CHUNK_EVENTS]
        try:
            yield _CHUNK.decode(b"[" + b",".join(part) + b"]")
        except msgspec.ValidationError:  # some element has a field of an unexpected type: keep the good ones
            events = []
            for raw in part:
                try:
                    events.append(_ONE.decode(raw))
                except (msgspec.DecodeError, msgspec.ValidationError):
                    bad += 1
            yield events
    if bad:
        warnings.append(f"{bad} event(s) with fields of unexpected types were ignored")


def _collect(events: list[_Event], rows: _Rows) -> None:
    for e in events:
        if e.ph == "X":
            if not (_finite(e.ts) and _finite(e.dur) and e.dur >= 0):
                rows.bad_times += 1
                continue
            name = e.name or ""
            if e.args is not None and e.args.task_type is not None:
                rows.device.append((e.pid, e.tid, name, e.args.task_type, e.ts, e.dur))
            elif name in OVERLAP_LANES:
                rows.overlap.append((e.pid, name, e.ts, e.dur))
            elif API_EVENTS.match(name):
                rows.apis.append((e.pid, name, e.tid, e.ts, e.dur))
            elif e.cat == "GC" or HOST_EVENTS.search(name):
                rows.host.append((e.pid, name, e.cat or "", e.tid, e.ts, e.dur))
        elif e.ph == "M":
            if e.name == "process_name" and e.args is not None and e.args.name is not None:
                rows.names[e.pid] = e.args.name
        elif e.cat == LAUNCH_FLOW and e.id is not None and _finite(e.ts):
            if e.ph == "s":
                rows.starts[e.id] = e.ts
            elif e.ph == "f":
                rows.ends[e.id] = e.ts


def _finite(value: float | None) -> bool:
    return value is not None and value == value and value not in (_INF, -_INF)
