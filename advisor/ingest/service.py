"""msServiceProfiler's analysis output (MindIE Service) as typed tables: ``request.csv``, ``batch.csv``,
``kvcache.csv``, ``forward.csv`` and its summary files (``*summary.csv``).

Service-level data describes a serving run, not a device: one row per request (its queue wait, first-token latency,
tokens), per scheduled batch (prefill or decode, its size, the KV cache's usage), per KV-cache event and per model
forward. Columns are found by name, never by position, and their names vary by version, so each canonical column
accepts several spellings (compared without case, spaces or the unit in parentheses: ``first_token_latency(ms)``,
``First Token Latency (ms)``); a time column's unit comes from its parentheses (``(ms)``, ``(us)``, ``(s)``; none:
milliseconds, as the tool writes them). A column a version does not write is absent from the table, and a file with
none of the columns read is refused.

A file is streamed in blocks (pyarrow), its wanted columns only, so a huge file costs memory for at most
``MAX_KEPT_ROWS`` rows: past that, every second row kept is dropped and only every second row read after it is kept
(an evenly spaced sample, ``ServiceTable.stride``); the row count stays exact. Every problem with a file — empty, not
text, not CSV, no column read, damaged rows or cells — is a FileProblem or a warning naming the file (through
``ingest.ascend.Reader``), never an exception.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pacsv

from advisor.ingest.ascend import Reader
from advisor.ingest.csvtable import csv_text, read_header
from advisor.ingest.limits import read_bounded
from advisor.ingest.model import Coverage, FileProblem

# The files whose presence makes a directory msServiceProfiler output (compared without case).
SERVICE_FILES = ("request.csv", "batch.csv", "kvcache.csv", "forward.csv")
SUMMARY_SUFFIX = "summary.csv"  # request_summary.csv, batch_summary.csv, service_summary.csv …
MAX_KEPT_ROWS = 1 << 20  # rows of one file held at once; past it the rows kept are an evenly spaced sample
MAX_SUMMARY_BYTES = 1 << 20  # a summary is a few dozen lines
_BLOCK_BYTES = 1 << 20  # the streaming reader holds several blocks at once
_NULLS = ["", "N/A", "NA", "n/a", "null", "None", "-", "nan", "NaN"]
_MAX_PLAUSIBLE = 1e19  # epoch timestamps in ns are ~1.8e18; no latency, size or count comes near either
PHASES = ("prefill", "decode", "mixed")
_PHASE_WORDS = {"prefill": "prefill", "prefills": "prefill", "context": "prefill", "extend": "prefill",
                "decode": "decode", "decodes": "decode", "generation": "decode", "generate": "decode",
                "mix": "mixed", "mixed": "mixed", "hybrid": "mixed", "chunked_prefill": "mixed"}


@dataclass(frozen=True)
class Wanted:
    """A column a file is read for: its canonical name, the spellings it accepts (the documented one first, compared
    as ``normalised`` names), whether it is a time (converted to ms from the unit in its header) or text."""

    name: str
    spellings: tuple[str, ...]
    kind: Literal["number", "time", "phase"] = "number"


REQUEST_COLUMNS = (
    Wanted("ttft_ms", ("first_token_latency", "ttft", "first_token_time", "time_to_first_token"), "time"),
    Wanted("queue_ms", ("queue_wait_time", "queue_time", "queue_latency", "wait_time", "waiting_time"), "time"),
    Wanted("e2e_ms", ("execution_time", "e2e_time", "end_to_end_latency", "e2e_latency", "total_time",
                      "request_latency", "latency"), "time"),
    Wanted("tpot_ms", ("subsequent_token_latency", "tpot", "time_per_output_token", "decode_token_latency"), "time"),
    Wanted("input_tokens", ("recv_token_size", "input_token_num", "input_tokens", "input_len", "prompt_tokens")),
    Wanted("output_tokens", ("reply_token_size", "output_token_num", "generated_token_num", "output_tokens",
                             "output_len", "completion_tokens")),
    Wanted("start_ms", ("start_time", "arrival_time", "arrive_time", "recv_time", "start_timestamp"), "time"),
    Wanted("end_ms", ("end_time", "finish_time", "end_timestamp"), "time"),
)
_KV_USAGE = ("kvcache_usage_rate", "kv_cache_usage_rate", "kvcache_usage", "kv_cache_usage", "kvcache_usage_ratio",
             "kv_cache_utilization", "usage_rate")
BATCH_COLUMNS = (
    Wanted("phase", ("batch_type", "phase", "forward_type"), "phase"),
    Wanted("batch_size", ("batch_size", "bs")),
    Wanted("prefill_batch_size", ("prefill_batch_size", "prefill_bs")),
    Wanted("decode_batch_size", ("decode_batch_size", "decode_bs")),
    Wanted("kv_usage", _KV_USAGE),
    Wanted("max_batch_size", ("max_batch_size", "maxbatchsize", "max_num_seqs")),
    Wanted("start_ms", ("start_time", "start_timestamp"), "time"),
    Wanted("duration_ms", ("during_time", "duration", "exec_time", "batch_time"), "time"),
)
KVCACHE_COLUMNS = (
    Wanted("kv_usage", _KV_USAGE),
    Wanted("time_ms", ("timestamp", "start_time", "time"), "time"),
)
FORWARD_COLUMNS = (
    Wanted("phase", ("batch_type", "phase", "forward_type"), "phase"),
    Wanted("batch_size", ("batch_size", "bs")),
    Wanted("prefill_batch_size", ("prefill_batch_size", "prefill_bs")),
    Wanted("decode_batch_size", ("decode_batch_size", "decode_bs")),
    Wanted("duration_ms", ("during_time", "duration", "forward_time"), "time"),
    Wanted("max_batch_size", ("max_batch_size", "maxbatchsize", "max_num_seqs")),
)
COLUMNS_OF = {"request.csv": REQUEST_COLUMNS, "batch.csv": BATCH_COLUMNS, "kvcache.csv": KVCACHE_COLUMNS,
              "forward.csv": FORWARD_COLUMNS}
# The columns whose absence is worth a warning: without them the file says little.
KEY_COLUMNS = {"request.csv": ("ttft_ms", "queue_ms"), "batch.csv": ("batch_size",), "kvcache.csv": ("kv_usage",),
               "forward.csv": ("batch_size",)}


@dataclass(frozen=True)
class ServiceTable:
    """One of request.csv, batch.csv, kvcache.csv, forward.csv, read: its wanted columns found, by canonical name —
    numbers as float64 (times in ms, missing as NaN), ``phase`` as 'prefill', 'decode', 'mixed' or None — aligned row
    by row. ``rows`` is the file's data row count; the arrays hold every ``stride``-th of them (1: all). ``headers``
    maps each canonical name to the column as the file writes it."""

    path: Path
    headers: dict[str, str]
    columns: dict[str, np.ndarray]
    rows: int
    stride: int = 1
    partial: str | None = None  # why only the start of the file was read (damage met mid-file)

    def get(self, name: str) -> np.ndarray | None:
        return self.columns.get(name)


@dataclass(frozen=True)
class ServiceSummary:
    """A summary file: per metric (normalised name), its statistics by normalised name (``p50``, ``p90``, ``average``,
    ``value`` for a metric written as one value …) and the metric as the file writes it."""

    path: Path
    metrics: dict[str, dict[str, float]]
    written: dict[str, str]


@dataclass(frozen=True)
class ServiceData:
    """msServiceProfiler's analysis output read from one directory (any file may be absent)."""

    directory: Path
    request: ServiceTable | None = None
    batch: ServiceTable | None = None
    kvcache: ServiceTable | None = None
    forward: ServiceTable | None = None
    summaries: tuple[ServiceSummary, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not any((self.request, self.batch, self.kvcache, self.forward, self.summaries))


def is_service_file(path: Path) -> bool:
    """Whether ``path`` is named as one of msServiceProfiler's main output files."""
    return path.name.lower() in SERVICE_FILES


def service_files(directory: Path) -> list[Path]:
    """The service files in ``directory`` (main files first, then summaries, each in name order); none when it cannot
    be listed."""
    try:
        names = sorted(entry.name for entry in os.scandir(directory))
    except OSError:
        return []
    main = {name.lower(): name for name in names if name.lower() in SERVICE_FILES}
    summaries = [name for name in names if name.lower().endswith(SUMMARY_SUFFIX)]
    return [directory / main[name] for name in SERVICE_FILES if name in main] + [directory / name for name in summaries]


def read_service(directory: Path, base: Path, coverage: Coverage) -> ServiceData | None:
    """The service files in ``directory``, each recorded in ``coverage`` as read or skipped (with why); None when none
    could be read."""
    reader = Reader(base, coverage)
    tables: dict[str, ServiceTable] = {}
    summaries = []
    for path in service_files(directory):
        name = path.name.lower()
        if name in COLUMNS_OF:
            spec = COLUMNS_OF[name]
            key = KEY_COLUMNS[name]
            table = reader.read(path, lambda p, warnings, spec=spec, key=key: read_table(p, spec, warnings, key))
            if table is not None:
                if table.partial is not None:
                    reader.partly_read(path, table.partial)
                tables[name.removesuffix(".csv")] = table
        else:
            summary = reader.read(path, read_summary)
            if summary is not None:
                summaries.append(summary)
    data = ServiceData(directory=directory, summaries=tuple(summaries), **tables)
    return None if data.empty else data


def normalised(name: str) -> tuple[str, str]:
    """A column or metric name without case, spaces, hyphens or its unit, and the unit (in parentheses or brackets at
    its end; '' when none): ``'First Token Latency (ms)'`` → ``('first_token_latency', 'ms')``."""
    text = name.strip().lstrip("\ufeff").strip()
    unit = ""
    match = re.search(r"[(\[]([^()\[\]]*)[)\]]\s*$", text)
    if match:
        unit = match.group(1).strip().lower()
        text = text[: match.start()]
    text = re.sub(r"[\s\-/.]+", "_", text.strip().lower()).strip("_")
    return text, unit


_TO_MS = {"": 1.0, "ms": 1.0, "msec": 1.0, "millisecond": 1.0, "milliseconds": 1.0, "us": 1e-3, "µs": 1e-3,
          "μs": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3, "ns": 1e-6, "s": 1e3, "sec": 1e3, "second": 1e3,
          "seconds": 1e3}


def read_table(path: Path, spec: tuple[Wanted, ...], warnings: list[str], key: Iterable[str] = ()) -> ServiceTable:
    """Stream ``path`` into a ServiceTable of the ``spec`` columns it has; FileProblem when it is empty, not CSV text,
    or has none of them. Damaged rows and cells, and ``key`` columns it lacks, are ``warnings``."""
    header = read_header(path)  # FileProblem: empty, binary, no line break in its first MiB, header not UTF-8
    found = _match(header, spec)
    if not found:
        wanted = ", ".join(w.spellings[0] for w in spec)
        raise FileProblem(f"has none of the columns advisor reads ({wanted}); is it msServiceProfiler output?")
    absent = [w.spellings[0] for w in spec if w.name in key and w.name not in found]
    if absent:
        warnings.append(f"no {', '.join(absent)} column: the facts that need it are left out")
    scale = {w.name: _TO_MS.get(normalised(header[found[w.name]])[1])
             for w in spec if w.kind == "time" and w.name in found}
    unknown = [header[found[name]].strip() for name, factor in scale.items() if factor is None]
    if unknown:
        named = ", ".join(repr(u) for u in unknown)
        warnings.append(f"time column(s) {named} in a unit advisor does not know; left out")
        found = {name: index for name, index in found.items() if scale.get(name, 1.0) is not None}
        if not found:
            raise FileProblem("has none of the columns advisor reads in a unit it knows")
    kinds = {w.name: w.kind for w in spec}
    labels = {name: header[index].strip() for name, index in found.items()}
    columns, rows, stride, partial = _stream(path, len(header), found, kinds, labels, warnings)
    if rows == 0:
        raise FileProblem("has a header and no rows")
    for name, factor in scale.items():
        if name in columns and factor not in (None, 1.0):
            columns[name] = columns[name] * factor
    if "kv_usage" in columns:
        columns["kv_usage"] = _as_fraction(columns["kv_usage"], header[found["kv_usage"]].strip(), warnings)
    if stride > 1:
        warnings.append(f"{rows:,} rows: percentiles and shares come from every {stride}th row "
                        f"({len(next(iter(columns.values()))):,} rows) to bound memory; counts are exact")
    return ServiceTable(path=path, headers=labels, columns=columns, rows=rows, stride=stride, partial=partial)


def _match(header: list[str], spec: tuple[Wanted, ...]) -> dict[str, int]:
    """Canonical name → the position of its first spelling in the header (by normalised name)."""
    names = [normalised(cell)[0] for cell in header]
    found: dict[str, int] = {}
    for wanted in spec:
        for spelling in wanted.spellings:
            if spelling in names:
                found[wanted.name] = names.index(spelling)
                break
    return found


def _stream(path: Path, width: int, found: dict[str, int], kinds: dict[str, str], labels: dict[str, str],
            warnings: list[str]) -> tuple[dict[str, np.ndarray], int, int, str | None]:
    """The ``found`` columns of every data row (an evenly spaced sample past MAX_KEPT_ROWS), the row count, the stride
    of the rows kept, and why reading stopped early (None: it did not)."""
    names = [f"c{i}" for i in range(width)]
    bad_rows: list[int] = []

    def on_invalid_row(row: pacsv.InvalidRow) -> str:
        bad_rows.append(row.number if row.number is not None else -1)
        return "skip"

    wanted = {name: f"c{index}" for name, index in found.items()}
    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=_BLOCK_BYTES, use_threads=False),
            parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_invalid_row),
            convert_options=pacsv.ConvertOptions(include_columns=list(dict.fromkeys(wanted.values())),
                                                 column_types={c: pa.binary() for c in wanted.values()},
                                                 null_values=_NULLS, strings_can_be_null=True,
                                                 quoted_strings_can_be_null=True, check_utf8=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        if _no_rows(exc):
            return {name: np.empty(0) for name in found}, 0, 1, None
        raise FileProblem(f"cannot be parsed as CSV ({_first_line(exc)})") from exc
    kept: dict[str, list[np.ndarray]] = {name: [] for name in found}
    problems: dict[tuple[str, str], int] = {}
    rows, stride, held, partial = 0, 1, 0, None
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            break
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            if rows == 0:
                raise FileProblem(f"cannot be parsed as CSV ({_first_line(exc)})") from exc
            partial = f"it cannot be parsed past row {rows:,} ({_first_line(exc)}); the rows before were read"
            break
        count = batch.num_rows
        if count == 0:
            continue
        take = np.arange(-rows % stride, count, stride) if stride > 1 else None
        for name, column in wanted.items():
            cells = batch.column(column)
            values = _phases(cells) if kinds[name] == "phase" else _numbers(cells, labels[name], problems)
            kept[name].append(values if take is None else values[take])
        held += count if take is None else len(take)
        rows += count
        while held > MAX_KEPT_ROWS:  # halve what is held, keep every 2·stride-th row from here on
            for name, parts in kept.items():
                whole = np.concatenate(parts)
                kept[name] = [whole[::2]]
            held = len(kept[next(iter(kept))][0])
            stride *= 2
    if bad_rows:
        shown = ", ".join(str(n) for n in bad_rows[:5] if n >= 0)
        where = f" (line {shown}{', …' if len(bad_rows) > 5 else ''})" if shown else ""
        warnings.append(f"{len(bad_rows)} row(s) with the wrong number of fields were skipped{where}")
    for (label, problem), count in problems.items():
        warnings.append(f"{count:,} {problem} value(s) in column {label!r} were treated as missing")
    columns = {name: np.concatenate(parts) if parts else np.empty(0, dtype=object if kinds[name] == "phase" else float)
               for name, parts in kept.items()}
    return columns, rows, stride, partial


def _no_rows(exc: Exception) -> bool:
    return "Empty CSV file" in str(exc)


def _numbers(cells: pa.Array, name: str, problems: dict[tuple[str, str], int]) -> np.ndarray:
    """Cells as float64, missing as NaN; cells that are no number, negative, infinite or implausibly large are
    missing too, each kind counted in ``problems``."""
    try:
        values = pc.cast(cells, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = np.full(len(cells), np.nan)
        bad = 0
        for index, cell in enumerate(cells.to_pylist()):
            if cell is None:
                continue
            text = cell.strip()
            if text.decode("ascii", "replace") in _NULLS:
                continue
            try:
                values[index] = float(text)
            except ValueError:
                bad += 1
        if bad:
            problems[(name, "non-numeric")] = problems.get((name, "non-numeric"), 0) + bad
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        for problem, found in (("infinite", np.isinf(values)), ("negative", values < 0),
                               ("implausibly large (over 1e19)", np.isfinite(values) & (values > _MAX_PLAUSIBLE))):
            if found.any():
                problems[(name, problem)] = problems.get((name, problem), 0) + int(found.sum())
                values = np.where(found, np.nan, values)
    return values


def _phases(cells: pa.Array) -> np.ndarray:
    """A batch type per row: 'prefill', 'decode', 'mixed', or None for a word advisor does not know."""
    distinct = pc.unique(cells)
    words = [None if w is None else _PHASE_WORDS.get(normalised(w.decode("utf-8", "replace"))[0])
             for w in distinct.to_pylist()]
    index = pc.index_in(cells, value_set=distinct).to_numpy(zero_copy_only=False)
    lookup = np.array(words + [None], dtype=object)
    positions = np.where(np.isnan(index), len(words), index).astype(np.int64) if index.dtype.kind == "f" else index
    return lookup[positions]


def _as_fraction(values: np.ndarray, header: str, warnings: list[str]) -> np.ndarray:
    """KV-cache usage as a fraction: a column that holds values over 1 (and none over 100) is in percent."""
    finite = values[np.isfinite(values)]
    if finite.size and finite.max() > 1.0:
        if finite.max() <= 100.0:
            return values / 100.0
        over = int((finite > 1.0).sum())
        warnings.append(f"{over:,} value(s) of {header!r} over 1 (a usage rate is at most 1) were treated as missing")
        return np.where(values > 1.0, np.nan, values)
    return values


def read_summary(path: Path, _warnings: list[str]) -> ServiceSummary:
    """A summary file as metrics: a table with one row per metric (its first column naming it, statistics in the
    others), two columns of metric and value, or one row with a column per metric. FileProblem when it is too large,
    not text, or holds no number."""
    data = read_bounded(path, MAX_SUMMARY_BYTES)
    if not data.strip():
        raise FileProblem("is empty")
    text = csv_text(data)
    try:
        rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    except csv.Error as exc:
        raise FileProblem(f"cannot be parsed as CSV ({exc})") from exc
    metrics: dict[str, dict[str, float]] = {}
    written: dict[str, str] = {}

    def add(metric: str, stat: str, cell: str) -> None:
        value = _number(cell)
        key = normalised(metric)[0]
        if value is None or not key:
            return
        metrics.setdefault(key, {})[stat] = value
        written.setdefault(key, metric.strip())

    header = [normalised(cell)[0] for cell in rows[0]] if rows else []
    if len(rows) >= 2 and len(header) == 2 and header[1] in ("value", "values", "result"):
        for row in rows[1:]:
            if len(row) >= 2:
                add(row[0], "value", row[1])
    elif len(rows) == 2 and all(_number(cell) is not None for cell in rows[1] if cell.strip()):
        for metric, cell in zip(rows[0], rows[1]):
            add(metric, "value", cell)
    else:
        stats = [_STAT_WORDS.get(name, name) for name in header]
        for row in rows[1:]:
            for stat, cell in zip(stats[1:], row[1:]):
                add(row[0], stat, cell)
    if not metrics:
        raise FileProblem("holds no metric with a number")
    return ServiceSummary(path=path, metrics=metrics, written=written)


_STAT_WORDS = {"avg": "average", "mean": "average", "median": "p50", "50th": "p50", "90th": "p90", "99th": "p99",
               "count": "n", "num": "n", "maximum": "max", "minimum": "min"}


def _number(cell: str) -> float | None:
    try:
        value = float(cell.strip())
    except ValueError:
        return None
    return value if np.isfinite(value) and 0 <= value <= _MAX_PLAUSIBLE else None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
