"""Turn a communication.json document into two tables, collective ops and their per-transport traffic, and a
communication_matrix.json document into the traffic of each link.

The torch_npu layout is ``{"step<N>"|"step": {"p2p"|"collective": {"<op>@<group>": OP_INFO, "Total Op
Info": …}}}``; the msprof command line writes the flat ``{"<op>@<group>": OP_INFO, "total…": …}``. Both
are accepted; CANN's own aggregates ("Total Op Info", keys starting with "total") are dropped, since
they are recomputed from the ops. Times stay in the file's ms (an op's start, ``start_us``, in its µs); sizes
in its decimal MB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from advisor.ingest.columns import Columns, columns_from_rows
from advisor.ingest.model import CommunicationTables, FileProblem

TRANSPORTS = ("HCCS", "PCIE", "RDMA", "SIO", "SDMA")
_STEP_KEY = re.compile(r"^step(\d*)$")
_P2P = re.compile(r"^hcom_(send|receive|batchsendrecv)", re.IGNORECASE)
_RANKED = re.compile(r"^(?P<type>.+)-(?P<stat>top1|middle|bottom[123]|total)$")  # torch_npu's matrix entries per op type
_HCOM_TYPE = re.compile(r"^hcom_([A-Za-z]+)_")  # hcom_allGather__483_3: the op type of one op's name
_TIME_KEYS = {
    "elapse_ms": "Elapse Time(ms)",
    "transit_ms": "Transit Time(ms)",
    "wait_ms": "Wait Time(ms)",
    "synchronization_ms": "Synchronization Time(ms)",
    "idle_ms": "Idle Time(ms)",
}
OP_COLUMNS = ("step", "kind", "op_name", "group", *_TIME_KEYS, "start_us")
TRAFFIC_COLUMNS = ("step", "kind", "op_name", "group", "transport", "size_mb", "time_ms")


def parse_communication(document: dict[str, Any], warnings: list[str]) -> CommunicationTables:
    """Flatten a communication.json document; raise FileProblem if it has no recognisable op."""
    ops: list[tuple[Any, ...]] = []  # OP_COLUMNS
    traffic: list[tuple[Any, ...]] = []  # TRAFFIC_COLUMNS
    malformed = 0
    for step, kind, key, info in _walk(document):
        op_name, _, group = key.partition("@")
        times = info.get("Communication Time Info") if isinstance(info, dict) else None
        if not isinstance(times, dict):
            malformed += 1
            continue
        elapse = _number(times.get(_TIME_KEYS["elapse_ms"]))
        if elapse is None:
            malformed += 1
            continue
        ops.append((step, kind, op_name, group, *(_number(times.get(label)) for label in _TIME_KEYS.values()),
                    _number(times.get("Start Timestamp(us)"))))
        bandwidth = info.get("Communication Bandwidth Info")
        for transport, values in (bandwidth.items() if isinstance(bandwidth, dict) else []):
            if transport not in TRANSPORTS or not isinstance(values, dict):
                continue
            size, time = _number(values.get("Transit Size(MB)")), _number(values.get("Transit Time(ms)"))
            if size or time:
                traffic.append((step, kind, op_name, group, transport, size or 0.0, time or 0.0))
    if malformed:
        warnings.append(f"{malformed} communication op(s) without usable time info were ignored")
    if not ops:
        raise FileProblem("holds no communication op with time info")
    return CommunicationTables.of_columns(columns_from_rows(ops, OP_COLUMNS), columns_from_rows(traffic, TRAFFIC_COLUMNS))


def _walk(document: dict[str, Any]):
    """Yield (step, kind, "op@group", op info) for both the per-step and the flat layout."""
    stepped = [k for k in document if _STEP_KEY.match(str(k))]
    if not stepped:  # msprof command-line layout: ops at the top level, no step, no p2p/collective split
        for key, info in document.items():
            if not str(key).lower().startswith("total"):
                yield None, _kind(str(key)), str(key), info
        return
    for step_key in stepped:
        number = _STEP_KEY.match(step_key).group(1)
        step = int(number) if number else None
        groups = document[step_key]
        for kind in ("collective", "p2p"):
            ops = groups.get(kind) if isinstance(groups, dict) else None
            for key, info in (ops.items() if isinstance(ops, dict) else []):
                if key != "Total Op Info" and not str(key).lower().startswith("total"):
                    yield step, kind, str(key), info


def _kind(op_key: str) -> str:
    return "p2p" if _P2P.match(op_key) else "collective"


def _number(value: Any) -> float | None:
    """A finite, non-negative number, also when written as a string (``"1.98"``); else None."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


MATRIX_COLUMNS = ("step", "kind", "op_type", "group", "src", "dst", "transport", "size_mb", "time_ms")


def parse_matrix(document: dict[str, Any], warnings: list[str]) -> Columns:
    """Flatten communication_matrix.json into one row per (step, op type, group, local src → dst link), each link's
    traffic counted once (``matrix_op_types``): from torch_npu's ``-total`` entries, or summed over the per-op entries
    of older torch_npu and of the msprof command line. ``src``/``dst`` are the ranks inside the communicator, as in the
    file.
    """
    entries = [(step, kind, *_op_and_group(key), links) for step, kind, key, links in _walk(document)]
    rows: list[tuple[Any, ...]] = []  # MATRIX_COLUMNS
    malformed = 0
    for (step, kind, _name, group, links), op_type in zip(entries, matrix_op_types([e[:4] for e in entries])):
        for link, values in (links.items() if isinstance(links, dict) and op_type is not None else []):
            src, _, dst = str(link).partition("-")
            size, time = (_number(values.get("Transit Size(MB)")), _number(values.get("Transit Time(ms)"))) \
                if isinstance(values, dict) else (None, None)
            if not (src.isdigit() and dst.isdigit()) or size is None or time is None:
                malformed += 1
                continue
            rows.append((step, kind, op_type, group, int(src), int(dst), str(values.get("Transport Type") or "unknown"),
                         size, time))
    if malformed:
        warnings.append(f"{malformed} link(s) without usable ranks, size or time were ignored")
    if not rows:
        raise FileProblem("holds no link with a size and time")
    return columns_from_rows(_link_totals(rows), MATRIX_COLUMNS)


def _op_and_group(key: str) -> tuple[str, str]:
    name, _, group = key.partition("@")
    return name, group


def matrix_op_types(keys: Sequence[tuple[Any, str, str, str]]) -> list[str | None]:
    """For each matrix entry (step, kind, name, group): the op type its links count under, or None where they are not
    counted, so that each link's traffic is counted once. torch_npu writes, per op type and group, ranked entries
    (``allreduce-top1``, ``-middle``, ``-bottom1..3``: single ops) and their sum (``allreduce-total``); older torch_npu
    and the msprof command line write one entry per op (``hcom_allGather__483_3``). A group with totals in a step counts
    those only; one without counts each op, under the type its name gives (``allgather``), and no ranked entry."""
    totalled = {(step, kind, group) for step, kind, name, group in keys if name.endswith("-total")}

    def op_type(step: Any, kind: str, name: str, group: str) -> str | None:
        ranked = _RANKED.match(name)
        if (step, kind, group) in totalled:
            return ranked["type"] if ranked and ranked["stat"] == "total" else None
        if ranked:
            return None
        named = _HCOM_TYPE.match(name)
        return named[1].lower() if named else name

    return [op_type(*key) for key in keys]


def _link_totals(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows of MATRIX_COLUMNS summed per (step, kind, op type, group, src, dst, transport): each link's traffic."""
    totals: dict[tuple[Any, ...], list[float]] = {}
    for *key, size, time in rows:
        total = totals.setdefault(tuple(key), [0.0, 0.0])
        total[0] += size
        total[1] += time
    return [(*key, size, time) for key, (size, time) in totals.items()]
