"""A report's time ranges as a Chrome trace (``advisor diagnose --annotate``): the JSON that Perfetto and
chrome://tracing open, with the original traces' events and one named range per time range of each finding.

The ranges keep the clock of the trace they were measured on (each event's ``ts``, µs), so they sit over the events
they are about. The original events of every trace file a range names are copied in: one file keeps its process
ids; where several are (one per rank), a later file's process ids that an earlier file uses are moved to free ones
and every process name gets its rank. The findings' ranges are the threads of one process of their own, named
``advisor findings``: one thread per finding (its number and title), one ``X`` event per range. A file named by a
range that is not a Chrome trace (the DB export's ``.db``) gives its ranges without its events.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from advisor.facts.models import TimeRange
    from advisor.report import Finding, Report

ANNOTATION_PROCESS = "advisor findings"
LOCATE_LEVELS = 3  # a file of ASCEND_PROFILER_OUTPUT is three levels below the directory its shown paths start from
TRACE_NAMES = (".json", ".json.gz")  # what a range's file must be named to be read as a Chrome trace
ID_STRIDE = 1 << 40  # the flow and async ids of the n-th trace merged are moved by n × ID_STRIDE (ids stay unique)
Event = dict[str, Any]


@dataclass
class Annotation:
    """An annotated trace and what went into it."""

    trace: dict[str, Any]
    ranges: int = 0
    findings: int = 0
    merged: list[str] = field(default_factory=list)  # the trace files whose events it holds
    unread: dict[str, str] = field(default_factory=dict)  # file → why its events are not in it


def annotate(report: Report, locate: Callable[[str], Path | None]) -> Annotation:
    """The Chrome trace of ``report``'s time ranges over the events of the traces they name (``locate``: a shown
    path to the file on disk, None when it is not there)."""
    timed = [(number, finding) for number, finding in enumerate(report.findings, 1) if finding.ranges]
    ranks = {r.file: r.rank for _, finding in timed for r in finding.ranges}
    files = sorted(ranks, key=lambda name: (ranks[name], name))
    result = Annotation(trace={})
    events: list[Event] = []
    taken: set[int] = set()
    for name in files:
        try:
            original = read_events(locate(name), name)
        except ValueError as exc:
            result.unread[name] = str(exc)
            continue
        moved = with_own_ids(original, len(result.merged))
        events += with_free_pids(moved, taken, ranks[name] if len(files) > 1 else None)
        result.merged.append(name)
    pid = max(taken, default=0) + 1
    events += [_meta("process_name", pid, 0, name=ANNOTATION_PROCESS), _meta("process_sort_index", pid, 0, sort_index=-1)]
    for number, finding in timed:
        events += [_meta("thread_name", pid, number, name=f"{number}. {finding_name(finding)}"),
                   _meta("thread_sort_index", pid, number, sort_index=number)]
        events += [range_event(finding, r, pid, number) for r in finding.ranges]
    result.trace = {"traceEvents": events, "displayTimeUnit": "ms"}
    result.ranges, result.findings = sum(len(f.ranges) for _, f in timed), len(timed)
    return result


def finding_name(finding: Finding) -> str:
    """A finding's title, with its key where it has one."""
    return f"{finding.title}: {finding.key}" if finding.key else finding.title


def range_event(finding: Finding, time_range: TimeRange, pid: int, tid: int) -> Event:
    """One range of a finding as a complete ("X") event on the annotation process, its args saying where it is from."""
    return {"ph": "X", "name": finding_name(finding), "cat": "advisor", "pid": pid, "tid": tid,
            "ts": time_range.start_us, "dur": time_range.end_us - time_range.start_us,
            "args": {"finding": finding.id, "key": finding.key, "severity": finding.severity,
                     "gain_us_per_step": finding.estimated_gain_us, "field": time_range.field, "rank": time_range.rank,
                     "step": time_range.step, "file": time_range.file}}


def read_events(path: Path | None, name: str) -> list[Event]:
    """The events of a Chrome trace file (a JSON array of events, or an object with ``traceEvents``; gzip or not);
    ValueError saying why when it is none."""
    if path is None:
        raise ValueError("not found")
    if not name.endswith(TRACE_NAMES) or name.endswith("communication.json"):
        raise ValueError("it is not a trace (its ranges are placed by their times alone)")
    try:
        raw = path.read_bytes()
        data = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, EOFError, gzip.BadGzipFile, orjson.JSONDecodeError) as exc:
        raise ValueError(f"not a Chrome trace ({exc})") from exc
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError("it holds no list of trace events")
    return [event for event in events if isinstance(event, dict)]


def with_free_pids(events: list[Event], taken: set[int], rank: int | None) -> list[Event]:
    """``events`` with their integer process ids that ``taken`` holds moved to free ones (``taken`` then holds theirs),
    and, with a ``rank``, every process name saying the rank."""
    pids = {event["pid"] for event in events if isinstance(event.get("pid"), int)}
    fresh = count(max(taken | pids, default=0) + 1)
    moved = {pid: next(fresh) for pid in sorted(pids & taken)}
    taken |= {moved.get(pid, pid) for pid in pids}
    if not moved and rank is None:
        return events
    return [_renamed(_moved(event, moved), rank) for event in events]


def with_own_ids(events: list[Event], index: int) -> list[Event]:
    """The events of the ``index``-th trace merged, their flow and async ``id``/``bind_id`` moved out of the earlier
    traces' way (numbers by index × ID_STRIDE, text prefixed), so that two ranks' launch arrows never join."""
    if index == 0:
        return events
    return [{**event, **{key: _own_id(event[key], index) for key in ("id", "bind_id") if key in event}}
            if "id" in event or "bind_id" in event else event for event in events]


def _own_id(value: Any, index: int) -> Any:
    """One flow or async id of the ``index``-th trace, moved."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value + index * ID_STRIDE
    return f"{index}:{value}" if isinstance(value, str) else value


def _moved(event: Event, moved: dict[int, int]) -> Event:
    """``event`` with its process id moved where ``moved`` says."""
    pid = event.get("pid")
    return {**event, "pid": moved[pid]} if isinstance(pid, int) and pid in moved else event


def _renamed(event: Event, rank: int | None) -> Event:
    """A process-name event saying its ``rank``; every other event as it is."""
    if rank is None or event.get("ph") != "M" or event.get("name") != "process_name":
        return event
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    return {**event, "args": {**args, "name": f"{args.get('name', event.get('pid'))} (rank {rank})"}}


def _meta(kind: str, pid: int, tid: int, **args: Any) -> Event:
    """A metadata ("M") event: a process or thread name or sort index."""
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def trace_json(annotation: Annotation) -> bytes:
    """The annotated trace as JSON bytes."""
    return orjson.dumps(annotation.trace)


def locator(input_path: str | Path) -> Callable[[str], Path | None]:
    """Where a path shown in a report of the profile at ``input_path`` is on disk. Shown paths are relative to the
    directory above the rank, so they are looked for under the input and under each of its parents up to the rank's
    (a profile given as its directory, a rank, its ASCEND_PROFILER_OUTPUT or one of its files)."""
    given = Path(input_path)
    bases = [given, *list(given.parents)[:LOCATE_LEVELS]]

    def locate(shown: str) -> Path | None:
        return next((base / shown for base in bases if (base / shown).is_file()), None)

    return locate
