"""Read trace_view.json in one pass into the few columnar tables the facts need.

The file is one JSON array of Chrome-trace events (often a single line of hundreds of MB), streamed in
blocks by ``ingest.jsonstream`` into small typed structs holding only the fields used (other keys are
skipped; ``args``, with its call stacks and counter values, stays raw JSON and is decoded only for device
tasks and process names); each block is reduced at once to the rows the
facts need, and dropped. Decoding therefore holds a few blocks however large the file is; only the kept
rows grow with it.

Processes are identified by their ``process_name`` metadata, never by pid values. ``ts`` is a string of
µs in Ascend traces; the decoder's lax mode turns it into a float64 (0.25 µs resolution at today's
epoch, ample for durations and gaps).
"""

from __future__ import annotations

import re
from sys import intern
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Union

import msgspec
import pandas as pd

from advisor.ingest import jsonstream, pieces
from advisor.ingest.jsonstream import Cut, EventDecoders, array_blocks
from advisor.ingest.kept import API_OPS
from advisor.ingest.kinetosteps import ITERATION
from advisor.ingest.limits import open_binary
from advisor.ingest.model import FileProblem

HOST_PROCESSES = ("Python", "Python GC")
API_PROCESS = "CANN"
DEVICE_PROCESS = "Ascend Hardware"
OVERLAP_PROCESS = "Overlap Analysis"
HCCL_PROCESS = "HCCL"
# The process of the collectives and their tasks: "HCCL" in older CANN, "Communication" from about CANN 8.1.
COMMUNICATION_PROCESSES = (HCCL_PROCESS, "Communication")
NOTIFY_WAIT = "Notify_Wait"  # an HCCL task waiting for a peer's notify; args name the peer ("dst rank", group-local)
COLLECTIVE_OP = "hcom_"  # a collective or P2P op on its communicator's op-level thread (hcom_allReduce__868_0_1)
LAUNCH_FLOW = "HostToDevice"
OVERLAP_LANES = frozenset({"Computing", "Communication", "Communication(Not Overlapped)", "Free"})
# Host events the facts use: step boundaries, data loading, optimizer steps and zero_grad, SyncBatchNorm, the task
# queue's launches (Dequeue@<op>), torch.compile's frame compilations, a serving engine's iterations (GC is kept by
# category).
HOST_EVENTS = re.compile(r"ProfilerStep#|dataloader|Optimizer\.(step|zero_grad)#|SyncBatchNorm|^Dequeue@|"
                         r"^_compile\.compile_inner \(dynamo_timed\)$|" + ITERATION.pattern, re.IGNORECASE)
# What the Ascend runtime's events are (the facts' platform traits and the serving iterations read them): compute
# tasks on the device, a graph replay (aclgraph: aclmdlRIExecuteAsync; GE: aclmdlExecute), a kernel launch, the task
# queue's per-operator launch (Dequeue@, not its event bookkeeping), a synchronous copy.
ASCEND_COMPUTE_TASK = re.compile(r"^(AI_CORE|AI_VECTOR_CORE|AI_CPU|MIX_AIC|MIX_AIV|KERNEL_AICORE|KERNEL_AIVEC|KERNEL_MIX_AIC|"
                                 r"KERNEL_MIX_AIV|KERNEL_AICPU)$")
ASCEND_GRAPH_LAUNCH = re.compile(r"^AscendCL@aclmdl(RI)?Execute(Async)?$")
ASCEND_LAUNCH = re.compile(r"^Node@launch$")
ASCEND_QUEUED_LAUNCH = re.compile(r"^Dequeue@(?!(record|wait|destroy)_event$)")
ASCEND_SYNC_COPY = re.compile(r"^AscendCL@aclrtMemcpy(2d)?$")
ASCEND_GRAPH_CAPTURE = re.compile(r"^AscendCL@aclmdlRICapture")  # aclgraph recording a graph (once per shape)
API_EVENTS = re.compile(
    r"AscendCL@aclopCompileAndExecute$|AscendCL@opCompile$|AscendCL@aclrtSynchronize|Node@launch$|"
    r"AscendCL@aclrt(Malloc|Free)(Physical|Host|Align32)?$|AscendCL@aclrtMemcpy(Async)?(2d)?$|"
    r"AscendCL@aclmdl(RI)?Execute(Async)?$|AscendCL@aclmdlRICapture"
)
FRAMEWORK_OPS = API_OPS["ascend"]  # the framework ops whose calls the facts count (ingest.kept)


class _Args(msgspec.Struct, gc=False):
    name: Union[str, None] = None
    task_type: Union[str, None] = msgspec.field(default=None, name="Task Type")
    # raw: a value of any type or size (true, [..], 1e400) must not fail the task's args; read by _model_id
    model_id: msgspec.Raw = msgspec.field(default=msgspec.Raw(b"null"), name="Model Id")


class _NotifyArgs(msgspec.Struct, gc=False):
    peer: Union[int, str, None] = msgspec.field(default=None, name="dst rank")


class _OpArgs(msgspec.Struct, gc=False):
    count: Union[int, float, str, None] = None
    data_type: Union[str, None] = None


class _Event(msgspec.Struct, gc=False):
    ph: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Union[float, None] = None
    dur: Union[float, None] = None
    cat: Union[str, None] = None
    id: Union[int, str, None] = None
    args: msgspec.Raw = msgspec.Raw(b"null")  # decoded only for the few events that need it (see _collect)


_DECODERS = EventDecoders.of(_Event)
_ARGS = msgspec.json.Decoder(_Args, strict=False)
_ARGS_LIST = msgspec.json.Decoder(list[_Args], strict=False)
_NOTIFY_ARGS = msgspec.json.Decoder(_NotifyArgs, strict=False)
_OP_ARGS = msgspec.json.Decoder(_OpArgs, strict=False)
_TASK_TYPE_SEARCH = re.compile(rb'"Task Type"').search  # on raw args, in place
NOTIFY_COLUMNS = ["ts", "dur", "peer"]
COLLECTIVE_COLUMNS = ["name", "ts", "dur", "count", "data_type"]


@dataclass
class TraceTables:
    host: pd.DataFrame  # Python / Python GC X events of interest: name, cat, tid, ts, dur
    apis: pd.DataFrame  # CANN X events of interest: name, tid, ts, dur
    device: pd.DataFrame  # Ascend Hardware X events: stream, name, task_type, ts, dur, model_id (args' Model Id)
    overlap: pd.DataFrame  # Overlap Analysis X events: lane, ts, dur
    launches: pd.DataFrame  # HostToDevice flows paired: launch_ts, device_ts
    truncation: str | None = None  # why only the start of the file was read (a cut-off file), else None
    # HCCL Notify_Wait tasks: ts, dur, peer (the group-local rank waited for); empty where the export has none
    notify: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=NOTIFY_COLUMNS))
    # the collective and P2P ops of the HCCL/Communication process (hcom_*): name, ts, dur, and the element count and
    # data type their args give (None where absent); what a Level0 capture, without communication.json, records of them
    collectives: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLLECTIVE_COLUMNS))


@dataclass
class _Rows:
    """Candidate rows, each starting with its pid; filtered by process once all names are known."""

    names: dict = field(default_factory=dict)
    host: list = field(default_factory=list)
    apis: list = field(default_factory=list)
    device: list = field(default_factory=list)
    overlap: list = field(default_factory=list)
    notify: list = field(default_factory=list)
    collectives: list = field(default_factory=list)
    starts: dict = field(default_factory=dict)
    ends: dict = field(default_factory=dict)
    bad_times: int = 0
    bad_fields: int = 0
    kinds: dict = field(default_factory=dict)  # event name -> the table it goes to ("" for none)

    def extend(self, later: _Rows) -> None:
        """Append the rows of the part of the file that follows this one."""
        self.names.update(later.names)
        for table in ("host", "apis", "device", "overlap", "notify", "collectives"):
            getattr(self, table).extend(getattr(later, table))
        self.starts.update(later.starts)
        self.ends.update(later.ends)
        self.bad_times += later.bad_times
        self.bad_fields += later.bad_fields


def read_trace(path: Path, warnings: list[str]) -> TraceTables:
    """Decode ``path`` and split it into tables; raise FileProblem when it is not a trace at all."""
    rows, cut = _read_in_pieces(path) or _read_whole(path)
    if rows.bad_fields:
        warnings.append(f"{rows.bad_fields} event(s) with fields of unexpected types were ignored")
    by_fields = not rows.names and cut.reason is not None and any((rows.host, rows.apis, rows.device))
    if not rows.names and not by_fields:
        raise FileProblem("has no process_name metadata events; it is not an Ascend trace_view.json")
    if by_fields:
        cut.reason += "; the process names were in the lost part, so events were classified by their own fields"
    if rows.bad_times:
        warnings.append(f"{rows.bad_times} event(s) without a usable ts/dur were ignored")

    def pids_of(process: str | tuple[str, ...]) -> set:
        processes = (process,) if isinstance(process, str) else process
        return {pid for pid, name in rows.names.items() if name in processes}

    def of(process: str | tuple[str, ...], table: list) -> list:
        if by_fields:  # each table already holds only the events whose fields fit it
            return [row[1:] for row in table]
        pids = pids_of(process)
        return [row[1:] for row in table if row[0] in pids]

    def frame(process: str | tuple[str, ...], table: list, columns: list[str]) -> pd.DataFrame:
        """The table's rows of ``process`` as a frame, the pid column left out (pandas infers each column's type on
        its own, so the frame is the one the rows without their pid would give, without a copy of every row)."""
        if not by_fields:
            pids = pids_of(process)
            if not pids.issuperset(map(itemgetter(0), table)):
                table = [row for row in table if row[0] in pids]
        found = pd.DataFrame(table, columns=["pid", *columns])
        del found["pid"]
        return found

    host_columns = ["name", "cat", "tid", "ts", "dur"]
    if not by_fields and pids_of("Python GC").isdisjoint(map(itemgetter(0), rows.host)):
        host = frame("Python", rows.host, host_columns)  # no GC process: the Python rows alone
    else:
        if by_fields:
            gc = [(name, "GC", tid, ts, dur) for name, cat, tid, ts, dur in of("Python", rows.host) if cat == "GC"]
            kept = [row for row in of("Python", rows.host) if row[1] != "GC"]
        else:
            gc = [(name, "GC", tid, ts, dur) for name, _cat, tid, ts, dur in of("Python GC", rows.host)]
            kept = of("Python", rows.host)
        host = pd.DataFrame(kept + gc, columns=host_columns)
    paired = [(rows.starts[i], rows.ends[i]) for i in rows.starts.keys() & rows.ends.keys()]
    return TraceTables(
        host=host,
        apis=frame(API_PROCESS, rows.apis, ["name", "tid", "ts", "dur"]),
        device=frame(DEVICE_PROCESS, rows.device, ["stream", "name", "task_type", "ts", "dur", "model_id"]),
        overlap=frame(OVERLAP_PROCESS, rows.overlap, ["lane", "ts", "dur"]),
        launches=pd.DataFrame(sorted(paired), columns=["launch_ts", "device_ts"]),
        truncation=cut.reason,
        notify=frame(COMMUNICATION_PROCESSES, rows.notify, NOTIFY_COLUMNS),
        collectives=frame(COMMUNICATION_PROCESSES, rows.collectives, COLLECTIVE_COLUMNS),
    )


def _name_kind(name: str) -> str:
    """Which table an X event without a device task type belongs to, by its name alone."""
    if name in OVERLAP_LANES:
        return "overlap"
    if name == NOTIFY_WAIT:
        return "notify"
    if name.startswith(COLLECTIVE_OP):
        return "collective"
    if API_EVENTS.match(name):
        return "api"
    if HOST_EVENTS.search(name) or FRAMEWORK_OPS.match(name):
        return "host"
    return ""


def _collect(events: list[_Event], rows: _Rows) -> int:
    """Keep the rows the facts use from one block of events; return how many were dropped for bad args.

    ``args`` stays undecoded (skipping call stacks inside a struct costs msgspec more than the rest of the
    event) and is searched in place for a ``"Task Type"`` key (device tasks; a regex reads the raw bytes without
    copying them): only those events and process names decode theirs, the device candidates in one batch. Names
    repeat (the same ops every step), so each name is classified once and the answer cached; most X events are of
    no use and cost one dict look-up, and the common tables are filled here without a call. The names and task
    types of kept rows are interned (one string per distinct name: less memory, and a worker's rows pickle
    smaller). ``x - x == 0`` rejects NaN and ±inf.
    """
    tasks: list[tuple[_Event, msgspec.Raw]] = []
    kinds = rows.kinds
    host, apis, overlap = rows.host, rows.apis, rows.overlap
    task_type_in = _TASK_TYPE_SEARCH
    for e in events:
        ph = e.ph
        if ph == "X":
            ts, dur = e.ts, e.dur
            if ts is None or dur is None or dur < 0 or ts - ts != 0 or dur - dur != 0:
                rows.bad_times += 1
                continue
            args = e.args
            if task_type_in(args):
                tasks.append((e, args))
                continue
            name = e.name or ""
            kind = kinds.get(name)
            if kind is None:
                kind = kinds[name] = _name_kind(name)
            if kind == "":  # most events: a name of no use
                if e.cat == "GC":
                    host.append((e.pid, intern(name), "GC", e.tid, ts, dur))
            elif kind == "host":
                host.append((e.pid, intern(name), e.cat or "", e.tid, ts, dur))
            elif kind == "api":
                apis.append((e.pid, intern(name), e.tid, ts, dur))
            elif kind == "overlap":
                overlap.append((e.pid, intern(name), ts, dur))
            else:
                _keep_by_name(e, rows)
        elif ph == "M":
            if e.name == "process_name":
                name = _process_name(e.args)
                if name is not None:
                    rows.names[e.pid] = name
        elif e.cat == LAUNCH_FLOW and e.id is not None and e.ts is not None and e.ts - e.ts == 0:
            if ph == "s":
                rows.starts[e.id] = e.ts
            elif ph == "f":
                rows.ends[e.id] = e.ts
    return _keep_tasks(tasks, rows) if tasks else 0


def _keep_by_name(e: _Event, rows: _Rows) -> None:
    """File an X event that is not a device task by its name (or GC category)."""
    name = e.name or ""
    kind = rows.kinds.get(name)
    if kind is None:
        kind = rows.kinds[name] = _name_kind(name)
    if kind == "overlap":
        rows.overlap.append((e.pid, intern(name), e.ts, e.dur))
    elif kind == "notify":
        peer = _peer(e.args)
        if peer is not None:
            rows.notify.append((e.pid, e.ts, e.dur, peer))
    elif kind == "collective":
        count, data_type = _op_args(e.args)
        rows.collectives.append((e.pid, name, e.ts, e.dur, count, data_type))
    elif kind == "api":
        rows.apis.append((e.pid, intern(name), e.tid, e.ts, e.dur))
    elif kind == "host" or e.cat == "GC":
        rows.host.append((e.pid, intern(name), e.cat or "", e.tid, e.ts, e.dur))


def _keep_tasks(tasks: list[tuple[_Event, msgspec.Raw]], rows: _Rows) -> int:
    """Decode the args of the device-task candidates in one call; return how many had unusable args."""
    try:
        decoded = _ARGS_LIST.decode(b"[" + b",".join(raw for _e, raw in tasks) + b"]")
    except msgspec.ValidationError:
        decoded = [_one_args(raw) for _e, raw in tasks]
    dropped = 0
    for (e, _raw), args in zip(tasks, decoded):
        if args is None:
            dropped += 1
        elif args.task_type is not None:
            rows.device.append((e.pid, e.tid, intern(e.name or ""), intern(args.task_type), e.ts, e.dur,
                                _model_id(args.model_id)))
        else:  # the key was nested deeper: not a device task
            _keep_by_name(e, rows)
    return dropped


def _model_id(raw: msgspec.Raw) -> int | None:
    """A device task's Model Id: a plain non-negative integer (4294967295 for a single op), else None."""
    digits = bytes(raw)
    return int(digits) if digits.isdigit() and len(digits) <= 20 else None


def _one_args(raw: bytes | msgspec.Raw) -> _Args | None:
    try:
        return _ARGS.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _peer(args: msgspec.Raw) -> int | None:
    """The group-local rank a Notify_Wait waits for (its ``dst rank``), or None when it is not a usable number."""
    try:
        peer = _NOTIFY_ARGS.decode(bytes(args)).peer
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if isinstance(peer, str):
        peer = int(peer) if peer.strip().isdigit() else None
    return peer if peer is not None and 0 <= peer < 1 << 20 else None


def _op_args(args: msgspec.Raw) -> tuple[float | None, str | None]:
    """A collective op's element count and data type (its args' ``count``, ``data_type``), None where unusable."""
    try:
        found = _OP_ARGS.decode(bytes(args))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, None
    count = found.count
    if isinstance(count, str):
        count = float(count) if count.strip().isdigit() else None
    if count is not None and not (0 <= count < 1e15):
        count = None
    return (float(count) if count is not None else None), found.data_type


def _process_name(args: msgspec.Raw) -> str | None:
    decoded = _one_args(bytes(args))
    return decoded.name if decoded is not None else None


def _blocks(handle, cut: Cut) -> Iterator[tuple[list[_Event], int]]:
    """The file's events block by block; it must be one JSON array."""
    head = handle.read(jsonstream.BLOCK_BYTES).lstrip()
    if not head:
        raise FileProblem("is empty")
    if not head.startswith(b"["):
        kind = "an object" if head.startswith(b"{") else "not JSON"
        raise FileProblem(f"is not a JSON array of events (the file holds {kind})")
    return array_blocks(handle, head[1:], 1, _DECODERS, cut)


def _read_whole(path: Path) -> tuple[_Rows, Cut]:
    rows, cut = _Rows(), Cut()
    with open_binary(path) as handle:
        try:
            for events, dropped in _blocks(handle, cut):
                rows.bad_fields += dropped + _collect(events, rows)
        except RecursionError as exc:
            raise FileProblem("nests arrays or objects too deeply to be a trace") from exc
    return rows, cut


def _read_in_pieces(path: Path) -> tuple[_Rows, Cut] | None:
    """The rows of a large file read as consecutive byte ranges on several cores (ingest.pieces); None when not worth
    it or when a range does not decode whole (the file is then read whole, which names the problem)."""
    if not pieces.large(path):
        return None
    with open_binary(path) as handle:
        head = handle.read(64)
    first = len(head) - len(head.lstrip())
    if head[first:first + 1] != b"[":
        return None
    results = pieces.read_in_pieces(path, first + 1, _read_piece)
    if results is None:
        return None
    rows = results[0]
    for piece in results[1:]:
        rows.extend(piece)
    return rows, Cut()


def _read_piece(piece: pieces.Piece) -> _Rows | None:
    """The rows of one byte range (see _read_in_pieces); None when the range does not decode whole."""
    rows, cut = _Rows(), Cut()
    for events, dropped in piece.blocks(_DECODERS, cut):
        rows.bad_fields += dropped + _collect(events, rows)
    return None if cut.reason else rows
