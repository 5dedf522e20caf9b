"""Read trace_view.json in one pass into the few columnar tables the facts need.

The file is one JSON array of Chrome-trace events (often one single line of hundreds of MB). It is
decoded once by msgspec into small typed structs holding only the fields used (every other key, the
call stacks included, is skipped by the decoder), then split into tables by process. Processes are
identified by their ``process_name`` metadata, never by pid values. ``ts`` is a string of µs in Ascend
traces; it is converted to float64 (0.25 µs resolution at today's epoch, ample for durations and gaps).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

import msgspec
import pandas as pd

from advisor.ingest.model import FileProblem

HOST_PROCESSES = {"Python", "Python GC"}
API_PROCESS = "CANN"
DEVICE_PROCESS = "Ascend Hardware"
OVERLAP_PROCESS = "Overlap Analysis"
LAUNCH_FLOW = "HostToDevice"


class _Args(msgspec.Struct):
    name: Union[str, None] = None
    task_type: Union[str, None] = msgspec.field(default=None, name="Task Type")


class _Event(msgspec.Struct):
    ph: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Union[str, float, int, None] = None
    dur: Union[float, int, None] = None
    cat: Union[str, None] = None
    id: Union[int, str, None] = None
    args: Union[_Args, None] = None


_DECODER = msgspec.json.Decoder(list[_Event])
_LENIENT = msgspec.json.Decoder(list[msgspec.Raw])
_ONE = msgspec.json.Decoder(_Event)


@dataclass
class TraceTables:
    host: pd.DataFrame  # Python / Python GC X events: name, cat, tid, ts, dur
    apis: pd.DataFrame  # CANN X events: name, tid, ts, dur
    device: pd.DataFrame  # Ascend Hardware X events: stream, name, task_type, ts, dur
    overlap: pd.DataFrame  # Overlap Analysis X events: lane, ts, dur
    launches: pd.DataFrame  # HostToDevice flows paired: launch_ts, device_ts


def read_trace(path: Path, warnings: list[str]) -> TraceTables:
    """Decode ``path`` and split it into tables; raise FileProblem when it is not a trace at all."""
    data = path.read_bytes()
    if not data.strip():
        raise FileProblem("is empty")
    events = _decode(data, warnings)
    del data
    names = {e.pid: e.args.name for e in events if e.ph == "M" and e.name == "process_name" and e.args is not None}
    if not names:
        raise FileProblem("has no process_name metadata events; it is not an Ascend trace_view.json")
    host, apis, device, overlap = [], [], [], []
    flow_starts: dict[object, float] = {}
    flow_ends: dict[object, float] = {}
    bad_times = 0
    for event in events:
        if event.ph == "X":
            ts, dur = _time(event.ts), _duration(event.dur)
            if ts is None or dur is None:
                bad_times += 1
                continue
            process = names.get(event.pid)
            if process in HOST_PROCESSES:
                host.append((event.name or "", event.cat or ("GC" if process == "Python GC" else ""), event.tid, ts, dur))
            elif process == API_PROCESS:
                apis.append((event.name or "", event.tid, ts, dur))
            elif process == DEVICE_PROCESS:
                task_type = event.args.task_type if event.args is not None else None
                device.append((event.tid, event.name or "", task_type, ts, dur))
            elif process == OVERLAP_PROCESS:
                overlap.append((event.name or "", ts, dur))
        elif event.ph in ("s", "f") and event.cat == LAUNCH_FLOW and event.id is not None:
            ts = _time(event.ts)
            if ts is not None:
                (flow_starts if event.ph == "s" else flow_ends)[event.id] = ts
    if bad_times:
        warnings.append(f"{bad_times} event(s) without a usable ts/dur were ignored")
    paired = [(flow_starts[i], flow_ends[i]) for i in flow_starts.keys() & flow_ends.keys()]
    return TraceTables(
        host=pd.DataFrame(host, columns=["name", "cat", "tid", "ts", "dur"]),
        apis=pd.DataFrame(apis, columns=["name", "tid", "ts", "dur"]),
        device=pd.DataFrame(device, columns=["stream", "name", "task_type", "ts", "dur"]),
        overlap=pd.DataFrame(overlap, columns=["lane", "ts", "dur"]),
        launches=pd.DataFrame(sorted(paired), columns=["launch_ts", "device_ts"]),
    )


def _decode(data: bytes, warnings: list[str]) -> list[_Event]:
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError:
        pass  # some event has a field of an unexpected type: decode event by event, keeping the good ones
    except msgspec.DecodeError as exc:
        raise FileProblem(f"is not a valid JSON array of events ({exc})") from exc
    try:
        raws = _LENIENT.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FileProblem(f"is not a JSON array of events ({exc})") from exc
    events, bad = [], 0
    for raw in raws:
        try:
            events.append(_ONE.decode(raw))
        except (msgspec.DecodeError, msgspec.ValidationError):
            bad += 1
    if bad:
        warnings.append(f"{bad} event(s) with fields of unexpected types were ignored")
    return events


def _time(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def _duration(value: object) -> float | None:
    number = _time(value)
    return number if number is not None and number >= 0 else None
