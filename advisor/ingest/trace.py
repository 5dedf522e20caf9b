"""Read trace_view.json in one pass into the few columnar tables the facts need.

The file is one JSON array of Chrome-trace events (often a single line of hundreds of MB), streamed in
blocks by ``ingest.jsonstream`` into small typed structs holding only the fields used (every other key —
call stacks, counter values — is skipped by the decoder); each block is reduced at once to the rows the
facts need, and dropped. Memory therefore stays at a few blocks however large the file is.

Processes are identified by their ``process_name`` metadata, never by pid values. ``ts`` is a string of
µs in Ascend traces; the decoder's lax mode turns it into a float64 (0.25 µs resolution at today's
epoch, ample for durations and gaps).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import msgspec
import pandas as pd

from advisor.ingest import jsonstream
from advisor.ingest.jsonstream import Cut, EventDecoders, array_blocks
from advisor.ingest.limits import open_binary
from advisor.ingest.model import FileProblem

HOST_PROCESSES = ("Python", "Python GC")
API_PROCESS = "CANN"
DEVICE_PROCESS = "Ascend Hardware"
OVERLAP_PROCESS = "Overlap Analysis"
LAUNCH_FLOW = "HostToDevice"
OVERLAP_LANES = frozenset({"Computing", "Communication", "Communication(Not Overlapped)", "Free"})
# Host events the facts use: step boundaries, data loading, optimizer steps, SyncBatchNorm (GC is kept by category).
HOST_EVENTS = re.compile(r"ProfilerStep#|dataloader|Optimizer\.step#|SyncBatchNorm", re.IGNORECASE)
API_EVENTS = re.compile(
    r"AscendCL@aclopCompileAndExecute$|AscendCL@aclrtSynchronize|Node@launch$|AscendCL@aclrtFree(Physical)?$"
)
# Framework ops whose calls the facts count: host reads of device values, and ops that fused kernels replace.
FRAMEWORK_OPS = re.compile(
    r"aten::(item|_local_scalar_dense|nonzero|index_put_?|masked_fill_?|_?softmax|rsqrt|neg|cat|silu|gelu|"
    r"native_layer_norm|native_group_norm|one_hot|repeat_interleave|gather)$"
)


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


_DECODERS = EventDecoders.of(_Event)


@dataclass
class TraceTables:
    host: pd.DataFrame  # Python / Python GC X events of interest: name, cat, tid, ts, dur
    apis: pd.DataFrame  # CANN X events of interest: name, tid, ts, dur
    device: pd.DataFrame  # Ascend Hardware X events: stream, name, task_type, ts, dur
    overlap: pd.DataFrame  # Overlap Analysis X events: lane, ts, dur
    launches: pd.DataFrame  # HostToDevice flows paired: launch_ts, device_ts
    truncation: str | None = None  # why only the start of the file was read (a cut-off file), else None


@dataclass
class _Rows:
    """Candidate rows, each starting with its pid; filtered by process once all names are known."""

    names: dict = field(default_factory=dict)
    host: list = field(default_factory=list)
    apis: list = field(default_factory=list)
    device: list = field(default_factory=list)
    overlap: list = field(default_factory=list)
    starts: dict = field(default_factory=dict)
    ends: dict = field(default_factory=dict)
    bad_times: int = 0
    kinds: dict = field(default_factory=dict)  # event name -> the table it goes to ("" for none)


def read_trace(path: Path, warnings: list[str]) -> TraceTables:
    """Decode ``path`` and split it into tables; raise FileProblem when it is not a trace at all."""
    rows = _Rows()
    bad = 0
    cut = Cut()
    with open_binary(path) as handle:
        try:
            for events, dropped in _blocks(handle, cut):
                _collect(events, rows)
                bad += dropped
        except RecursionError as exc:
            raise FileProblem("nests arrays or objects too deeply to be a trace") from exc
    if bad:
        warnings.append(f"{bad} event(s) with fields of unexpected types were ignored")
    by_fields = not rows.names and cut.reason is not None and any((rows.host, rows.apis, rows.device))
    if not rows.names and not by_fields:
        raise FileProblem("has no process_name metadata events; it is not an Ascend trace_view.json")
    if by_fields:
        cut.reason += "; the process names were in the lost part, so events were classified by their own fields"
    if rows.bad_times:
        warnings.append(f"{rows.bad_times} event(s) without a usable ts/dur were ignored")

    def of(process: str, table: list) -> list:
        if by_fields:  # each table already holds only the events whose fields fit it
            return [row[1:] for row in table]
        pids = {pid for pid, name in rows.names.items() if name == process}
        return [row[1:] for row in table if row[0] in pids]

    if by_fields:
        gc = [(name, "GC", tid, ts, dur) for name, cat, tid, ts, dur in of("Python", rows.host) if cat == "GC"]
        host = [row for row in of("Python", rows.host) if row[1] != "GC"]
    else:
        gc = [(name, "GC", tid, ts, dur) for name, _cat, tid, ts, dur in of("Python GC", rows.host)]
        host = of("Python", rows.host)
    paired = [(rows.starts[i], rows.ends[i]) for i in rows.starts.keys() & rows.ends.keys()]
    return TraceTables(
        host=pd.DataFrame(host + gc, columns=["name", "cat", "tid", "ts", "dur"]),
        apis=pd.DataFrame(of(API_PROCESS, rows.apis), columns=["name", "tid", "ts", "dur"]),
        device=pd.DataFrame(of(DEVICE_PROCESS, rows.device), columns=["stream", "name", "task_type", "ts", "dur"]),
        overlap=pd.DataFrame(of(OVERLAP_PROCESS, rows.overlap), columns=["lane", "ts", "dur"]),
        launches=pd.DataFrame(sorted(paired), columns=["launch_ts", "device_ts"]),
        truncation=cut.reason,
    )


def _name_kind(name: str) -> str:
    """Which table an X event without a device task type belongs to, by its name alone."""
    if name in OVERLAP_LANES:
        return "overlap"
    if API_EVENTS.match(name):
        return "api"
    if HOST_EVENTS.search(name) or FRAMEWORK_OPS.match(name):
        return "host"
    return ""


def _collect(events: list[_Event], rows: _Rows) -> None:
    """Keep the rows the facts use from one block of events (``x - x == 0`` rejects NaN and ±inf).

    Names repeat (the same ops every step), so each name is classified once and the answer cached.
    """
    kinds = rows.kinds
    for e in events:
        ph = e.ph
        if ph == "X":
            ts, dur = e.ts, e.dur
            if ts is None or dur is None or dur < 0 or ts - ts != 0 or dur - dur != 0:
                rows.bad_times += 1
                continue
            name = e.name or ""
            args = e.args
            if args is not None and args.task_type is not None:
                rows.device.append((e.pid, e.tid, name, args.task_type, ts, dur))
                continue
            kind = kinds.get(name)
            if kind is None:
                kind = kinds[name] = _name_kind(name)
            if kind == "overlap":
                rows.overlap.append((e.pid, name, ts, dur))
            elif kind == "api":
                rows.apis.append((e.pid, name, e.tid, ts, dur))
            elif kind == "host" or e.cat == "GC":
                rows.host.append((e.pid, name, e.cat or "", e.tid, ts, dur))
        elif ph == "M":
            if e.name == "process_name" and e.args is not None and e.args.name is not None:
                rows.names[e.pid] = e.args.name
        elif e.cat == LAUNCH_FLOW and e.id is not None and e.ts is not None and e.ts - e.ts == 0:
            if ph == "s":
                rows.starts[e.id] = e.ts
            elif ph == "f":
                rows.ends[e.id] = e.ts


def _blocks(handle, cut: Cut) -> Iterator[tuple[list[_Event], int]]:
    """The file's events block by block; it must be one JSON array."""
    head = handle.read(jsonstream.BLOCK_BYTES).lstrip()
    if not head:
        raise FileProblem("is empty")
    if not head.startswith(b"["):
        kind = "an object" if head.startswith(b"{") else "not JSON"
        raise FileProblem(f"is not a JSON array of events (the file holds {kind})")
    return array_blocks(handle, head[1:], 1, _DECODERS, cut)
