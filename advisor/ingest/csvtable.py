"""Read the profiler's CSV files into columnar tables, tolerating the variants real files show.

Headers are matched by name (never by position) against a spec of canonical columns with aliases
(``Block Dim|Block Num``, ``Step Id|Step ID`` …). Cells are stripped of spaces and the trailing TAB that
CANN appends to timestamps; ``N/A`` and empty cells become nulls; numeric columns are parsed as floats
(values that are not numbers, infinite, negative or over 1e18 become nulls and are counted in a warning). CRLF or LF line endings, a
UTF-8 BOM and multi-line quoted cells are all accepted. Parsing is done by pyarrow, reading only the
columns the spec asks for — except for a small plain file (ASCII, no quotes, every row complete, every number
written as plain digits), which is split in Python: pyarrow's reader costs a few ms whatever the file's size, and
on such a file the two read the same cells.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pacsv

from advisor.ingest.columns import TEXT_MISSING
from advisor.ingest.model import CsvTable, FileProblem

_NULL_TOKENS = pa.array(["", "N/A", "NA", "n/a", "null", "None"])
_HEADER_PROBE_BYTES = 1 << 20
_PLAIN_BYTES = 1 << 14  # files up to this size are split in Python when they are plain (see _plain_cells)
_NOT_PLAIN = re.compile(rb'["\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\xff]')  # quotes, control characters, non-ASCII
_NULLS = frozenset(_NULL_TOKENS.to_pylist())
# Every numeric column is a time, size, count, ratio or id: none is negative, and none exceeds 1e18
# (µs timestamps are ~1.8e15); such values are damage, and would overflow sums downstream.
_MAX_PLAUSIBLE = 1e18


@dataclass(frozen=True)
class Column:
    """One column a reader wants: its canonical name, the header spellings it accepts, its kind."""

    name: str
    headers: tuple[str, ...]
    kind: Literal["str", "float"] = "str"
    required: bool = False


def read_csv_table(path: Path, columns: tuple[Column, ...], warnings: list[str]) -> CsvTable:
    """Read ``path`` into a table with one column per entry of ``columns`` (absent optional ones omitted): a small
    plain file as columns (what a cluster's survey reads, without building a frame), any other as a frame (its text
    stays in Arrow).

    Raises FileProblem when the file is empty, not text, not CSV, or lacks a required column.
    Row-level problems (ragged rows, non-numeric cells) are appended to ``warnings``.
    """
    head = _read_head(path)
    header = _header_of(head)
    positions = _match_columns(header, columns)
    by_name = {c.name: c for c in columns}
    found = _plain_cells(head, header, positions) if len(head) <= _PLAIN_BYTES else None
    plain = found is not None
    if found is None:
        found = _arrow_cells(path, header, positions, warnings)
    cells, rows = found
    converted = {}
    for name, values in cells.items():
        column = by_name[name]
        converted[name] = _as_float(values, column, warnings) if column.kind == "float" else \
            _as_text(values) if plain else values.to_pandas()
    names = [h.strip() for h in header]
    if plain:
        return CsvTable.of_columns(path, converted, names, rows)
    return CsvTable.of_frame(path, pd.DataFrame(converted, index=pd.RangeIndex(rows)), names)  # one construction


def _arrow_cells(path: Path, header: list[str], positions: dict[str, int], warnings: list[str]
                 ) -> tuple[dict[str, pa.ChunkedArray], int]:
    """The wanted columns' cells (stripped; null tokens null) as pyarrow parses the file, and its row count."""
    include = [header[i] for i in positions.values()]
    bad_rows: list[int] = []

    def on_invalid_row(row: pacsv.InvalidRow) -> str:
        bad_rows.append(row.number if row.number is not None else -1)
        return "skip"

    def parse(cell_type: pa.DataType) -> pa.Table:
        bad_rows.clear()
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(use_threads=True, block_size=16 << 20),
            parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_invalid_row),
            convert_options=pacsv.ConvertOptions(
                include_columns=include,
                column_types={name: cell_type for name in include},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )

    try:
        try:
            table = parse(pa.string())
        except pa.ArrowInvalid as exc:
            if "UTF8" not in str(exc):
                raise
            table = _decode_cells(parse(pa.binary()), warnings)
    except pa.ArrowInvalid as exc:
        raise FileProblem(f"cannot be parsed as CSV ({_first_line(exc)})") from exc
    if bad_rows:
        shown = ", ".join(str(n) for n in bad_rows[:5] if n >= 0)
        where = f" (line {shown}{', …' if len(bad_rows) > 5 else ''})" if shown else ""
        warnings.append(f"{len(bad_rows)} row(s) with the wrong number of fields were skipped{where}")
    cells = {name: _clean(table.column(table.schema.get_field_index(header[position])))
             for name, position in positions.items()}
    return cells, table.num_rows


def _plain_cells(head: bytes, header: list[str], positions: dict[str, int]) -> tuple[dict[str, pa.Array], int] | None:
    """``_arrow_cells`` of a whole file (``head``) that is plain: ASCII without quotes or control characters but TAB,
    its first line the header (no name twice), every other non-empty line as many fields as the header. Splitting at
    line breaks and commas is then the whole CSV syntax. None when the file is not plain."""
    text = head.removeprefix(b"\xef\xbb\xbf")
    if _NOT_PLAIN.search(text) or not text.endswith((b"\n", b"\r")) or len(set(header)) < len(header):
        return None
    lines = text.decode("ascii").splitlines()
    if not lines or lines[0].split(",") != header:
        return None
    rows = [line.split(",") for line in lines[1:] if line]  # pyarrow skips empty lines
    if any(len(row) != len(header) for row in rows):
        return None
    cells = {}
    for name, position in positions.items():
        values = [row[position].strip() for row in rows]
        cells[name] = pa.array([None if value in _NULLS else value for value in values], pa.string())
    return cells, len(rows)


def _decode_cells(table: pa.Table, warnings: list[str]) -> pa.Table:
    """Cells read as bytes → text; bytes that are not UTF-8 become U+FFFD, counted in a warning per column."""
    columns = []
    for name, column in zip(table.column_names, table.columns):
        try:
            columns.append(pc.cast(column, pa.string()))
            continue
        except pa.ArrowInvalid:
            pass
        values = column.to_pylist()
        bad = 0
        for i, value in enumerate(values):
            try:
                values[i] = value.decode("utf-8")
            except UnicodeDecodeError:
                values[i] = value.decode("utf-8", errors="replace")
                bad += 1
        warnings.append(f"{bad} value(s) in column {name.strip()!r} are not UTF-8 text; their undecodable bytes "
                        "were replaced with U+FFFD")
        columns.append(pa.chunked_array([pa.array(values, pa.string())]))
    return pa.table(columns, names=table.column_names)


def read_header(path: Path) -> list[str]:
    """The header line's cells, as the file writes them."""
    return _header_of(_read_head(path))


def _read_head(path: Path) -> bytes:
    """The file's first MiB (the whole file when smaller)."""
    with path.open("rb") as handle:
        return handle.read(_HEADER_PROBE_BYTES)


def _header_of(head: bytes) -> list[str]:
    if not head.strip():
        raise FileProblem("is empty")
    line = head.split(b"\n", 1)[0]
    if len(line) == len(head) and len(head) == _HEADER_PROBE_BYTES:
        raise FileProblem("has no line break in its first MiB; it is not a profiler CSV")
    text = csv_text(line, "header ")
    return next(csv.reader(io.StringIO(text.rstrip("\r"))), [])


def csv_text(data: bytes, part: str = "") -> str:
    """``data`` decoded as UTF-8 (a BOM dropped); FileProblem when it is not UTF-8 (``part``: what of the file was
    decoded, e.g. "header ") or holds NUL bytes (binary)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileProblem(f"{part}is not UTF-8 text (byte {exc.start})") from exc
    if "\x00" in text:
        raise FileProblem("is binary, not CSV text")
    return text


def _match_columns(header: list[str], columns: tuple[Column, ...]) -> dict[str, int]:
    stripped = [h.strip() for h in header]
    positions: dict[str, int] = {}
    for column in columns:
        for spelling in column.headers:
            if spelling in stripped:
                positions[column.name] = stripped.index(spelling)
                break
        else:
            folded = [h.casefold() for h in stripped]
            for spelling in column.headers:
                if spelling.casefold() in folded:
                    positions[column.name] = folded.index(spelling.casefold())
                    break
    missing = [c.headers[0] for c in columns if c.required and c.name not in positions]
    if missing:
        raise FileProblem(f"lacks the column(s) {', '.join(repr(m) for m in missing)}")
    return positions


def _clean(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Cells stripped of white space, null tokens null."""
    trimmed = pc.utf8_trim_whitespace(values)
    return pc.if_else(pc.is_in(trimmed, value_set=_NULL_TOKENS), pa.scalar(None, pa.string()), trimmed)


def _as_text(values: pa.ChunkedArray) -> np.ndarray:
    """Text cells as objects, a missing one as pandas' text columns give it back (TEXT_MISSING)."""
    text = values.to_numpy(zero_copy_only=False)
    if values.null_count:
        text[pc.is_null(values).to_numpy(zero_copy_only=False)] = TEXT_MISSING
    return text


def _as_float(values: pa.ChunkedArray, column: Column, warnings: list[str]) -> np.ndarray:
    try:
        parsed = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raw = values.to_pandas()
        numbers = pd.to_numeric(raw, errors="coerce").astype("float64")
        bad = int((numbers.isna() & raw.notna()).sum())
        warnings.append(f"{bad} non-numeric value(s) in column {column.headers[0]!r} were treated as missing")
        parsed = numbers.to_numpy()
    unusable = _implausible(parsed, column.headers[0], warnings)
    return np.where(unusable, np.nan, parsed) if unusable.any() else parsed


def plausible_numbers(values: pd.Series, label: str, warnings: list[str]) -> pd.Series:
    """Infinite, negative and implausibly large values become missing, each kind counted in a warning."""
    unusable = _implausible(values.to_numpy(dtype="float64", na_value=np.nan), label, warnings)
    return values.mask(unusable) if unusable.any() else values


def _implausible(array: np.ndarray, label: str, warnings: list[str]) -> np.ndarray:
    """Where ``array`` is infinite, negative or over 1e18; each kind found is counted in a warning."""
    unusable = np.zeros(len(array), dtype=bool)
    for problem, found in (("infinite", np.isinf(array)), ("negative", array < 0),
                           ("implausibly large (over 1e18)", np.isfinite(array) & (array > _MAX_PLAUSIBLE))):
        if found.any():
            warnings.append(f"{int(found.sum())} {problem} value(s) in column {label!r} were treated as missing")
            unusable |= found
    return unusable


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
