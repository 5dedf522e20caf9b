"""Read the DB export (``ascend_pytorch_profiler_{rank}.db`` and ``analysis.db``) into the same tables as the text export.

The DB stores times as integer ns and sizes in bytes, and most text columns as ids into ``STRING_IDS``
(reference §7). Each reader here turns its tables into the frame the text reader would have built from
the matching file, with the same canonical column names and units (µs, MB, KB), so the facts cannot
tell which export they came from:

* kernel_details ← ``TASK`` ⋈ ``COMPUTE_TASK_INFO`` (+ ``TASK_PMU_INFO`` ratios), plus ``COMMUNICATION_OP``
  as the collective rows; ``Step Id`` from the ``STEP_TIME`` ranges;
* step_trace_time ← analysis.db ``StepTraceTime``; communication.json ← ``CommAnalyzerTime`` and
  ``CommAnalyzerBandwidth``;
* memory_record ← ``MEMORY_RECORD``; operator_memory ← ``OP_MEMORY``; npu_module_mem ← ``NPU_MODULE_MEM``;
* profiler_metadata.json ← ``META_DATA``;
* trace_view.json ← ``PYTORCH_API`` and ``GC_RECORD`` (host), ``CANN_API`` (runtime calls), ``TASK`` (device),
  ``OVERLAP_ANALYSIS`` (lanes, newer CANN) and the ``connectionId`` shared by a launch and its task.

A missing table leaves its table unset (reported like a missing file); a file that is not SQLite is skipped
with the reason. A table without a column it needs leaves out only what it feeds (the file is reported as partly
read, naming the table and the columns) and the file's other tables are read; columns that schemas differ on (``deviceId``, which
``COMMUNICATION_OP`` of DB schema 1.0.0 lacks, ``opType``, shapes, Block Dim) are read as missing. Numbers get the CSV reader's checks (negative,
infinite, implausibly large → missing, with a warning). Table and column names follow the reference;
``OVERLAP_ANALYSIS`` is only named there, so its columns (``type``, ``startNs``, ``endNs``) are assumed.

Every time, size and id column is read as a number by value, not by its declared type: a real export declares
``PYTORCH_API.startNs``/``endNs`` TEXT and stores the numbers as text. A value that is not wholly a number (garbage
text, a blob) is read as missing and counted in a warning naming the table and column.
"""

from __future__ import annotations

import functools
import json
import math
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa

from advisor.ingest.columns import Columns, columns_of
from advisor.intervals import EMPTY, subtract, union
from advisor.ingest.communication import MATRIX_COLUMNS, TRAFFIC_COLUMNS, TRANSPORTS, matrix_op_types
from advisor.ingest.csvtable import plausible_numbers
from advisor.ingest.model import CommunicationTables, CsvTable, FileProblem
from advisor.ingest.trace import (
    API_EVENTS,
    FRAMEWORK_OPS,
    HOST_EVENTS,
    NOTIFY_COLUMNS,
    NOTIFY_WAIT,
    OVERLAP_LANES,
    TraceTables,
)

PROFILER_DB_GLOB = "ascend_pytorch_profiler*.db"
ANALYSIS_DB = "analysis.db"
_MB = 1024.0 * 1024.0
_OVERLAP_TYPES = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
# CANN_API.type (ENUM_API_TYPE) → the prefix trace_view.json gives the call's name (AscendCL@aclrtMemcpy, Node@launch)
_API_LEVELS = {20000: "AscendCL", 15000: "Model", 10000: "Node", 5500: "Hccl", 5000: "Runtime"}
_JOURNALS = ("-wal", "-journal")  # where a writer leaves what the main file does not hold yet
_NULL_TEXT = ("", "N/A", "NA", "n/a", "null", "None")  # text the CSV reader reads as missing
# How much work one query may take: SQLite VM steps per byte of the file (reading a real export takes about 1),
# with a floor for small files, checked every _WORK_CHECK steps. More than that is per-row work a profiler's data
# never needs (computed columns, hostile schemas): the query is stopped and its table left out.
_WORK_PER_BYTE = 50
_WORK_FLOOR = 20_000_000
_WORK_CHECK = 10_000
T = TypeVar("T")


def profiler_db(output_dir: Path) -> Path | None:
    """The rank's ``ascend_pytorch_profiler_{rank}.db`` in ``output_dir``, if the DB export is there."""
    found = sorted(output_dir.glob(PROFILER_DB_GLOB))
    return found[0] if found else None


@contextmanager
def open_db(path: Path) -> Iterator[sqlite3.Connection]:
    """Open a profiler DB read-only; FileProblem when it is not an SQLite database.

    A database is opened immutable (no locks, nothing written beside it), which reads the main file alone. Where a
    writer left part of it in a write-ahead log (``-wal``: WAL mode, the data not yet checkpointed) or a hot rollback
    journal (``-journal``: a transaction cut off), the main file alone is not the database: the files are copied to a
    temporary directory and the copy is opened normally, so SQLite applies the log (or rolls the transaction back)
    there — never in the user's directory.
    """
    journals = [journal for suffix in _JOURNALS if (journal := path.with_name(path.name + suffix)).is_file()
                and journal.stat().st_size > 0]
    with path.open("rb") as handle:
        head = handle.read(16)
    if not head and not journals:
        raise FileProblem("is empty")
    if head and head != b"SQLite format 3\x00":
        raise FileProblem("is not an SQLite database")
    with tempfile.TemporaryDirectory(prefix="advisor-db-") if journals else nullcontext() as place:
        try:
            if place is None:
                connection = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
            else:
                copy = Path(place) / path.name
                for source in (path, *journals):
                    shutil.copyfile(source, Path(place) / source.name)
                connection = sqlite3.connect(copy)
                connection.execute("PRAGMA query_only = 1")
        except (sqlite3.Error, OSError) as exc:
            raise FileProblem(f"cannot be opened as SQLite ({exc})") from exc
        with closing(connection):
            yield connection


class DbTables:
    """Queries over one open DB, with interned strings resolved; every error becomes a FileProblem."""

    def __init__(self, connection: sqlite3.Connection, warnings: list[str]) -> None:
        self.connection = connection
        self.warnings = warnings  # row-level problems, reported against the DB file
        self.left_out: list[str] = []  # tables that could not be read: the file is only partly read
        try:
            schema = connection.execute("SELECT name, sql FROM sqlite_master WHERE type='table'").fetchall()
            self.names = {name for name, _sql in schema}
            self._refused = {name: reason for name, sql in schema if (reason := _computed_on_reading(connection, name, sql))}
            size = connection.execute("PRAGMA page_count").fetchone()[0] * connection.execute("PRAGMA page_size").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise FileProblem(f"is not a readable SQLite database ({exc})") from exc
        self._work_limit = max(_WORK_FLOOR, _WORK_PER_BYTE * size)
        self._work = 0
        connection.set_progress_handler(self._count_work, _WORK_CHECK)
        self._strings: dict[int, str] | None = None
        self._listed: dict[int, str] | bool | None = None  # _listed_names, False where it cannot stand for the ids
        self._no_strings_told = False
        self._checked: set[tuple[str, str]] = set()  # (table, column) whose non-numbers were counted
        self._dtypes: dict[tuple[str, str], str] = {}  # (table, column) → the dtype the whole column reads as
        self._plain: set[tuple[str, str]] = set()  # (table, column) holding only integers and integers' text
        self._numeric: set[tuple[str, str]] = set()  # (table, column) holding those, finite REALs and NULLs only

    def _count_work(self) -> int:
        self._work += _WORK_CHECK
        return self._work > self._work_limit  # non-zero stops the query

    def has(self, table: str) -> bool:
        return table in self.names

    def frame(self, query: str, params: list[object] | tuple[object, ...] = ()) -> pd.DataFrame:
        return self._run(query, lambda: pd.read_sql_query(query, self.connection, params=params or None))

    def array(self, query: str, params: list[object], dtype: list[tuple[str, str]]) -> np.ndarray:
        """The rows of ``query`` as a NumPy record array of ``dtype`` (NULL read as NaN in a float field), without a
        Python object per value kept."""
        return self._run(query, lambda: np.fromiter(self.connection.execute(query, params), dtype=dtype))

    def id_rows(self, source: str, column: str, read_as: str, fields: list[tuple[str, str, str]], condition: str,
                params: list[object]) -> np.ndarray:
        """``array`` of ``column`` (ids, read as the SQL ``read_as``) and ``fields`` (name, SQL, dtype) in the rows of
        ``source`` (a table ``NOT INDEXED``, read in its order, or a join) that meet ``condition``."""
        return self.array(f"SELECT {read_as}, {', '.join(sql for _name, sql, _dtype in fields)} FROM {source} "
                          f"WHERE {condition}", params,
                          [(column, "i8"), *((name, dtype) for name, _sql, dtype in fields)])

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        """The rows of ``query`` as SQLite gives them (ints, floats, text, blobs, None), for a few rows only."""
        return self._run(query, lambda: self.connection.execute(query).fetchall())

    def _run(self, query: str, read: Callable[[], T]) -> T:
        """``read`` the result of ``query`` under the work limit; a refused table or an SQLite error is a FileProblem."""
        for table, reason in self._refused.items():
            if re.search(rf"\b{re.escape(table)}\b", query, re.IGNORECASE):
                raise FileProblem(reason)
        self._work = 0
        try:
            return read()
        except (sqlite3.Error, pd.errors.DatabaseError) as exc:
            if self._work > self._work_limit:
                raise FileProblem(f"has a table that takes more work to read than {self._work_limit:,} SQLite steps, "
                                  "the most a database of its size can need (computed on reading, not stored data)"
                                  ) from exc
            raise FileProblem(f"has a table that cannot be read ({_first_line(exc)})") from exc

    def columns(self, table: str) -> list[str]:
        # table_xinfo: generated columns too (table_info hides them), so reading one is refused for what it is
        return [row[1] for row in self.connection.execute(f"PRAGMA table_xinfo({_quoted(table)})") if row[6] != 1]

    def select(self, table: str, required: list[str], optional: list[str] | tuple[str, ...] = (),
               numbers: tuple[str, ...] = (), where: tuple[str, list[object]] | None = None) -> pd.DataFrame:
        """The columns of ``table``: a missing required one is a FileProblem naming the table and columns, a missing
        optional one is read as NULL (schemas differ: COMMUNICATION_OP of DB schema 1.0.0 has no deviceId); those in
        ``numbers`` are read as numbers (``count_non_numbers``), a numeric column also when every value is NULL.
        ``where`` (a condition and its parameters) reads only the rows it selects, in the table's order, each number
        column typed as the whole column reads (int64 only where every value of the table is a whole number)."""
        present = self.require(table, required)
        self.count_non_numbers(table, [c for c in numbers if c in present])
        condition, params = where or ("", [])
        names = [c for c in required if c not in numbers]
        integers = not optional and all((table, c) in self._plain for c in numbers if c in required)
        if (integers and where and len(names) == 1 and condition.startswith(f"({names[0]} IN (")
                and "IS NULL" not in condition and all(type(p) is int for p in params)):
            # every column an integer: read as NumPy columns, not a Python object per value (the name ids are the
            # integers the condition lists, or REALs equal to them, which name the same)
            found = self.id_rows(f"{table} NOT INDEXED", names[0], f"CAST({names[0]} AS INTEGER)",
                                 _integers([c for c in required if c != names[0]]), condition, params)
            return pd.DataFrame({c: found[c] for c in required})
        if integers and not where and not names and all(self._dtypes[(table, c)] == "int64" for c in required):
            # every row's every column an integer (int64: the table has rows): as NumPy columns too
            found = self.array(f"SELECT {', '.join(sql for _name, sql, _dtype in _integers(required))} FROM {table}",
                               [], [(c, "i8") for c in required])
            return pd.DataFrame({c: found[c] for c in required})
        frame = self.frame("SELECT " + ", ".join(
            (self.number(table, c) if c in numbers else c) if c in present else f"NULL AS {c}" for c in [*required, *optional])
            + f" FROM {table}" + (f" NOT INDEXED WHERE {condition}" if where else ""), params)
        if where:
            frame = frame.astype({c: self._dtypes[(table, c)] for c in numbers if c in present})
        return frame.astype({c: "float64" for c in numbers if c in frame and frame[c].dtype == object})

    def require(self, table: str, columns: list[str] | tuple[str, ...]) -> set[str]:
        """The columns ``table`` has; a FileProblem naming the table and the ``columns`` it lacks."""
        present = set(self.columns(table))
        if missing := [c for c in columns if c not in present]:
            raise FileProblem(f"table {table} lacks the column(s) {', '.join(missing)}")
        return present

    def count_non_numbers(self, table: str, columns: list[str]) -> None:
        """Warn of the values of ``table``'s ``columns`` that ``_number`` reads as missing (not NULL, not a number),
        once per column however often it is read. One pass sorts the values by storage class (``_value_class``):
        integers and integers' text pass every check, a finite REAL or a NULL only the first two (it is no whole
        number), so the checks run only on the rows holding anything else (text, blobs, ±inf) — none in an export."""
        columns = [c for c in columns if (table, c) not in self._checked]
        if not columns:
            return
        self._checked.update((table, c) for c in columns)
        try:
            rows, *packed = self.rows("SELECT count(*), " + ", ".join(f"SUM({_value_class(c)})" for c in columns)
                                      + f" FROM {table}")[0]
        except FileProblem:  # a SUM past 64 bits (2^31 rows), or a table that cannot be read: the checks tell which
            rows, not_plain, other = self._count_classes(table, columns)
        else:
            not_plain = [int(count or 0) & _CLASS_MASK for count in packed]  # finite REALs, NULLs and the rest
            other = [int(count or 0) >> _CLASS_BITS for count in packed]  # the rest: ±inf, text not an integer, blobs
        self._plain.update((table, c) for c, count in zip(columns, not_plain) if not count)
        checked = [c for c, count in zip(columns, other) if count]
        self._numeric.update((table, c) for c, count in zip(columns, other) if not count)
        counts = np.zeros((len(columns), 3))
        counts[:, 2] = np.array(not_plain) - np.array(other)  # finite REALs and NULLs: no whole numbers
        if checked:
            found = self.frame("SELECT " + ", ".join(
                f"SUM(CASE WHEN {_other(c)} THEN {_unless_whole(c, f'NOT {_is_number(c)}')} ELSE 0 END), "
                f"SUM(CASE WHEN {_other(c)} THEN {_unless_whole(c, f'{_is_number(c)} AND NOT {_is_finite(c)}')} "
                "ELSE 0 END), "
                f"SUM(CASE WHEN {_other(c)} THEN {_unless_whole(c, _not_whole(c), null='1')} ELSE 0 END)"
                for c in checked) + f" FROM {table} WHERE " + " OR ".join(_other(c) for c in checked))
            counts[[columns.index(c) for c in checked]] += found.iloc[0].fillna(0).to_numpy().reshape(-1, 3)
        for column, (text, infinite, not_whole) in zip(columns, counts):
            self._dtypes[(table, column)] = "int64" if rows and not (text or infinite or not_whole) else "float64"
            if text:
                self.warnings.append(f"{int(text)} non-numeric value(s) in column {column} of table {table} "
                                     "were treated as missing")
            if infinite:
                self.warnings.append(f"{int(infinite)} infinite value(s) in column {column} of table {table} "
                                     "were treated as missing")

    def _count_classes(self, table: str, columns: list[str]) -> tuple[int, list[int], list[int]]:
        """``count_non_numbers``' first pass without packing two counts in one SUM (which 2^31 rows overflow): the
        rows, and per column the values that are not plain and those that are ``_other``."""
        rows, *counts = self.rows("SELECT count(*), " + ", ".join(
            f"SUM({_value_class(c, packed=False)}), SUM({_other(c)})" for c in columns) + f" FROM {table}")[0]
        counts = [int(count or 0) for count in counts]
        return rows, counts[::2], counts[1::2]

    def number(self, table: str, column: str, bare: bool = False) -> str:
        """``_number`` of ``column`` (``alias.name`` or ``name``) of ``table``; a column found plain
        (``count_non_numbers``) is read with one CAST, which gives what ``_number`` gives for every plain value, and
        one holding only numbers and NULLs by their storage class (``_numeric``)."""
        name = column.rpartition(".")[2]
        if (table, name) in self._plain:
            return f"CAST({column} AS INTEGER)" + ("" if bare else f" AS {name}")
        if (table, name) in self._numeric:
            return _numeric(column) + ("" if bare else f" AS {name}")
        return _number(column, bare)

    def text(self, values: pd.Series, counts: pd.Series | None = None, warn: bool = True) -> pd.Series:
        """STRING_IDS ids → text (values already text are kept; unknown ids become missing), each distinct value
        resolved once. ``counts``: the rows each value stands for (a GROUP BY's), in the warning of ids not found;
        ``warn=False`` for values whose ids were counted already."""
        strings = self._string_ids()
        codes, uniques = pd.factorize(values, use_na_sentinel=False)
        uniques = np.asarray(uniques, dtype=object)
        missing = np.zeros(len(uniques), dtype=bool)

        def resolve(position: int) -> object:
            name, missing[position] = _resolve(strings, uniques[position])
            return name

        names = pd.Series(range(len(uniques)), dtype=object).map(resolve)
        resolved = names.iloc[codes].set_axis(values.index).rename(values.name)
        rows = np.ones(len(codes), dtype="int64") if counts is None else counts.to_numpy("int64")
        missed = int(rows[missing[codes]].sum()) if warn else 0
        if missed and strings:
            where = f" (column {values.name})" if values.name else ""
            self.warnings.append(f"{missed} name id(s){where} are not in STRING_IDS and were read as missing names")
        elif missed and not self.has("STRING_IDS") and not self._no_strings_told:  # said once, not per column
            self._no_strings_told = True
            self.warnings.append("has no STRING_IDS table: the names given as ids in it were read as missing")
        return resolved

    def _string_ids(self) -> dict[int, str]:
        """STRING_IDS as id → text, read once (empty where the table is missing or cannot be read)."""
        if self._strings is None:
            self._strings = {}
            if self.has("STRING_IDS"):
                try:
                    strings = self.frame("SELECT id, value FROM STRING_IDS")
                except FileProblem as exc:
                    self.left_out.append(f"{exc}: every name read as missing")
                else:
                    self._strings = dict(strings.itertuples(index=False))
                    if repeated := int(strings["id"].duplicated().sum()):
                        self.warnings.append(f"{repeated} id(s) of STRING_IDS appear more than once; the last value "
                                             "of each was used")
        return self._strings

    def kept(self, table: str, column: str, keep: Callable[[str], bool]) -> tuple[str, list[object]] | None:
        """The condition selecting the rows of ``table`` (a table or a join) whose ``column`` names (resolved, missing
        read as "") pass ``keep``, found from the column's distinct values, and its parameters; the ids not in
        STRING_IDS are counted over every row here. None where too many names pass for one query's parameters (read every row)."""
        most = self.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        listed = self._listed_names()
        if listed is not None and len(chosen := [i for i, name in listed.items() if keep(name)]) <= most:
            # the ids STRING_IDS lists stand for their names: only the other values (ids it lacks, NULLs, text, REALs)
            # are grouped, which in an export is none; the kept ids listed that the column lacks select no row
            groups = self.rows(f"SELECT {column}, count(*) FROM {table} WHERE {_unlisted(column)} GROUP BY {column}")
        else:
            chosen = []
            groups = self.rows(f"SELECT {column}, count(*) FROM {table} GROUP BY {column}")
        values = pd.Series([value for value, _count in groups], dtype=object, name=column.rpartition(".")[2])
        names = self.text(values, pd.Series([count for _value, count in groups], dtype="int64")).fillna("")
        chosen += [value for value, name in zip(values, names) if keep(name)]
        return _one_of(column, chosen, most)

    def kept_rows(self, source: str, column: str, keep: Callable[[str], bool],
                  fields: list[tuple[str, str, str]]) -> np.ndarray | None:
        """The rows of ``source`` (as ``id_rows``) whose ``column`` holds an id STRING_IDS lists for a name passing
        ``keep``, as a record array of ``column`` (the id) and ``fields`` (name, SQL, dtype), read in the pass that
        looks for the values STRING_IDS does not list (``_unlisted``) instead of after ``kept`` grouped them: the kept
        ids skip that look-up. None where any such value came back (none in an export: ``kept`` then counts them and
        selects by name), where the ids cannot stand for the names or none or too many pass, or where the pass is
        stopped or refused."""
        listed = self._listed_names()
        chosen: list[object] = [i for i, name in listed.items() if keep(name)] if listed is not None else []
        most = self.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        if not 0 < len(chosen) <= most or _NOT_AN_ID in chosen:
            return None
        try:
            found = self.id_rows(source, column, _listed_id(column), fields,
                                 f"{column} IN ({', '.join('?' * len(chosen))}) OR {_unlisted(column)}", chosen)
        except FileProblem:  # kept's queries meet the same and say so in their place
            return None
        return found if np.isin(found[column], chosen).all() else None

    def select_kept(self, table: str, column: str, keep: Callable[[str], bool],
                    numbers: tuple[str, ...]) -> pd.DataFrame:
        """``select`` of ``column`` and ``numbers`` in the rows whose ``column`` names pass ``keep``: where the numbers
        are plain, as NumPy columns in one pass (``kept_rows``), else the rows ``kept`` selects."""
        if (all((table, c) in self._plain for c in numbers)
                and (found := self.kept_rows(f"{table} NOT INDEXED", column, keep, _integers(numbers))) is not None):
            return pd.DataFrame({c: found[c] for c in (column, *numbers)})
        return self.select(table, [column, *numbers], numbers=numbers, where=self.kept(table, column, keep))

    def _listed_names(self) -> dict[int, str] | None:
        """STRING_IDS as id → name (NULL read as "", as ``text`` gives it), where every id is an integer and every name
        text or NULL, so that an integer of a name column stands for the name when ``SELECT id FROM STRING_IDS`` holds
        it; else None, and None until a name was resolved (STRING_IDS read, its warnings given in their place)."""
        if self._strings is None:  # not read yet: read where the names are first resolved, as without this
            return None
        if self._listed is None:
            strings = self._strings
            self._listed = False
            if strings and "STRING_IDS" not in self._refused and all(
                    type(i) is int and (type(name) is str or name is None or (type(name) is float and math.isnan(name)))
                    for i, name in strings.items()):
                self._listed = {i: name if type(name) is str else "" for i, name in strings.items()}
        return self._listed or None


def _resolve(strings: dict[int, str], value: object) -> tuple[object, bool]:
    """The name an id stands for, and whether it is an id STRING_IDS lacks; NULL, NaN and text are no ids."""
    if isinstance(value, (int, np.integer)):
        found = strings.get(int(value))
    elif isinstance(value, (float, np.floating)):  # an id column holding NULLs is read as floats (NaN)
        if not math.isfinite(value):
            return None, False
        found = strings.get(int(value)) if float(value).is_integer() else None
    else:  # NULL, or a name already
        return value, False
    return found, found is None


def _one_of(column: str, values: list[object], most: int) -> tuple[str, list[object]] | None:
    """SQL: ``column`` equals one of ``values`` (NULL among them: or is NULL), with the parameters; None for more
    than ``most`` values."""
    present = [value for value in values if value is not None]
    if len(present) > most:
        return None
    parts = [f"{column} IN ({', '.join('?' * len(present))})"] if present else []
    parts += [f"{column} IS NULL"] if len(present) < len(values) else []
    return f"({' OR '.join(parts) or '0'})", present


def _per_table(what: str) -> Callable[[Callable[..., T]], Callable[..., T | None]]:
    """A table reader whose problems leave out only ``what``: a table with an unexpected layout becomes a warning
    against the DB file, and the file's other tables are still read."""
    def wrap(read: Callable[..., T]) -> Callable[..., T | None]:
        @functools.wraps(read)
        def tolerant(db: DbTables, *args: Any) -> T | None:
            try:
                return read(db, *args)
            except FileProblem as exc:
                db.left_out.append(f"{exc}: {what} left out, the other tables read")
                return None
        return tolerant
    return wrap


def _number(column: str, bare: bool = False) -> str:
    """SQL reading ``column`` (``alias.name`` or ``name``) as a finite number, named ``name`` unless ``bare``: NULL
    where it holds anything else (text that is not a number, a blob, ±inf). An integer is taken as it is, without
    the checks (the storage class of most values: it is what the checks would give)."""
    value = (f"CASE WHEN typeof({column}) = 'integer' THEN {column} "
             f"WHEN {_is_number(column)} AND {_is_finite(column)} THEN CAST({column} AS NUMERIC) END")
    return value if bare else f"{value} AS {column.rpartition('.')[2]}"


_FINITE = "1.7976931348623157e308"  # the largest finite REAL
_CLASS_BITS = 32  # count_non_numbers packs two counts in one SUM: the rows of a table number below 2^31
_CLASS_MASK = (1 << _CLASS_BITS) - 1


def _plain(column: str) -> str:
    """SQL: ``column`` holds an integer, or text that is exactly an integer's decimal form (torch_npu writes
    PYTORCH_API's times so): ``_number`` reads it as that integer, and the checks of ``count_non_numbers`` pass it.
    Comparing two TEXT expressions compares the text (no affinity conversion). One CASE: an integer costs one typeof."""
    return f"(CASE typeof({column}) WHEN 'integer' THEN 1 WHEN 'text' THEN {_integer_text(column)} ELSE 0 END)"


def _integer_text(column: str) -> str:
    """SQL: the text in ``column`` is exactly its integer's decimal form."""
    return f"CAST(CAST({column} AS INTEGER) AS TEXT) = CAST({column} AS TEXT)"


def _value_class(column: str, packed: bool = True) -> str:
    """SQL counted by SUM in ``count_non_numbers``: 0 for a plain value (``_plain``), 1 for any other, plus
    2^_CLASS_BITS (``packed``) for one of the rest (``_other``: ±inf, text that is no integer's decimal form, a blob).
    One ``typeof`` per value, whatever its storage class (a REAL took four)."""
    rest = f"{1 + (1 << _CLASS_BITS)}" if packed else "1"
    return (f"CASE typeof({column}) WHEN 'integer' THEN 0 WHEN 'text' THEN CASE WHEN {_integer_text(column)} THEN 0 "
            f"ELSE {rest} END WHEN 'real' THEN CASE WHEN abs({column}) <= {_FINITE} THEN 1 ELSE {rest} END "
            f"WHEN 'null' THEN 1 ELSE {rest} END")


def _unlisted(column: str) -> str:
    """SQL: ``column`` holds anything but an id that STRING_IDS lists (``DbTables._listed_names``)."""
    return f"(CASE typeof({column}) WHEN 'integer' THEN {column} NOT IN (SELECT id FROM STRING_IDS) ELSE 1 END)"


def _integers(columns: list[str] | tuple[str, ...]) -> list[tuple[str, str, str]]:
    """``DbTables.id_rows`` fields reading plain ``columns`` (``count_non_numbers``) as int64."""
    return [(c, f"CAST({c} AS INTEGER)", "i8") for c in columns]


_NOT_AN_ID = -(1 << 63)  # what _listed_id reads for a value that is no integer


def _listed_id(column: str) -> str:
    """SQL: ``column``'s integer, ``_NOT_AN_ID`` for any other value (NULL, text, a REAL, a blob)."""
    return f"CASE typeof({column}) WHEN 'integer' THEN {column} ELSE {_NOT_AN_ID} END"


def _other(column: str) -> str:
    """SQL: ``column`` holds none of an integer, integer's text, finite REAL or NULL — the values ``_number``
    needs its checks for."""
    return (f"(CASE WHEN {_plain(column)} THEN 0 WHEN typeof({column}) = 'null' THEN 0 WHEN typeof({column}) = 'real' "
            f"THEN NOT (abs({column}) <= {_FINITE}) ELSE 1 END)")


def _numeric(column: str) -> str:
    """SQL: what ``_number`` gives for a column without ``_other`` values, by storage class (a REAL is its own
    CAST AS NUMERIC)."""
    return (f"CASE typeof({column}) WHEN 'integer' THEN {column} WHEN 'real' THEN {column} "
            f"WHEN 'text' THEN CAST({column} AS INTEGER) END")


def _unless_whole(column: str, check: str, null: str = "0") -> str:
    """SQL: 0 where ``column`` holds an integer, ``null`` where it is NULL, else ``check`` (counted by SUM)."""
    return f"CASE typeof({column}) WHEN 'integer' THEN 0 WHEN 'null' THEN {null} ELSE ({check}) END"


def _not_whole(column: str) -> str:
    """SQL: ``_number`` does not read ``column`` as an integer (a fraction, a number too large for 64 bits; text that
    is not a number is counted as such)."""
    return f"typeof(CAST({column} AS NUMERIC)) <> 'integer'"


def _is_number(column: str) -> str:
    """SQL: ``column`` holds a number, or text that is wholly one. Comparing a value with its CAST converts text by
    numeric affinity, which takes only text that is wholly a number (``' 12 '``, ``'1.5e3'``); CAST alone reads
    ``'abc'`` as 0 and ``'12abc'`` as 12."""
    return f"({column} = CAST({column} AS NUMERIC))"


def _is_finite(column: str) -> str:
    """SQL: the number in ``column`` is finite (SQLite stores ±inf as REAL; NaN it stores as NULL). Taken as REAL:
    ``abs`` of the smallest 64-bit integer overflows."""
    return f"(abs(CAST({column} AS REAL)) <= 1.7976931348623157e308)"


def _computed_on_reading(connection: sqlite3.Connection, table: str, sql: str | None) -> str | None:
    """Why ``table`` is not read, where its values would be computed on reading rather than stored: a virtual table
    (a module's code runs per row) or virtual generated columns. A profiler writes neither."""
    if (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
        return f"table {table} is a virtual table (its rows are computed on reading), not data a profiler writes"
    computed = [row[1] for row in connection.execute(f"PRAGMA table_xinfo({_quoted(table)})") if row[6] == 2]
    if computed:
        return (f"table {table} computes the column(s) {', '.join(computed)} on reading (generated columns), "
                "not data a profiler writes")
    return None


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _us(ns: pd.Series) -> pd.Series:
    """Integer ns → float µs without the 256 ns rounding of converting today's epoch ns to float first."""
    values = pd.to_numeric(ns, errors="coerce")
    if values.dtype.kind != "i":  # NULLs or REALs: no integer ns to keep exact
        return values.astype("float64") / 1000.0
    whole = values.astype("int64")
    return (whole // 1000).astype("float64") + (whole % 1000).astype("float64") / 1000.0


def _table(db: DbTables, path: Path, frame: pd.DataFrame, text: tuple[str, ...] = ()) -> CsvTable:
    """A CsvTable like the CSV reader's: ``text`` columns through Arrow strings, numbers checked as it does."""
    frame = frame.reset_index(drop=True)
    for column in frame.columns:
        if column in text:
            values = frame[column].astype(object)
            missing = values.isna() | values.isin(_NULL_TEXT)
            frame[column] = pa.array(values.where(~missing, None).tolist(), type=pa.string()).to_pandas()
        else:
            numbers = pd.to_numeric(frame[column], errors="coerce").astype("float64")
            bad = int((numbers.isna() & frame[column].notna()).sum())
            if bad:
                db.warnings.append(f"{bad} non-numeric value(s) in column {column!r} were treated as missing")
            frame[column] = plausible_numbers(numbers, column, db.warnings)
    return CsvTable.of_frame(path, frame)


# --- the profiler DB ------------------------------------------------------------------------------------

@_per_table("profiler metadata (META_DATA)")
def read_metadata(db: DbTables, path: Path) -> dict[str, Any] | None:
    if not db.has("META_DATA"):
        return None
    metadata: dict[str, Any] = {}
    for name, value in db.frame("SELECT name, value FROM META_DATA").itertuples(index=False):
        try:
            metadata[str(name)] = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            metadata[str(name)] = value
        except RecursionError as exc:
            raise FileProblem(f"table META_DATA: the value of {str(name)[:80]!r} nests arrays or objects too deeply "
                              "to be read") from exc
    return metadata


_NPU_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # e.g. Ascend910B, Ascend910_9392


@_per_table("the device's name (NPU_INFO)")
def read_npu_name(db: DbTables) -> str | None:
    """The name NPU_INFO gives the rank's device (the lowest id's, where it lists several), e.g. 'Ascend910B'; None
    without the table or a name shaped like one (anything else is not what the profiler writes, and is left out)."""
    if not db.has("NPU_INFO"):
        return None
    order = "id" if "id" in db.require("NPU_INFO", ("name",)) else "rowid"  # id only orders the devices
    names = db.frame("SELECT name FROM NPU_INFO WHERE typeof(name) = 'text' AND length(name) <= 64 "
                     f"ORDER BY {order} LIMIT 1")["name"]
    name = str(names.iloc[0]).strip() if len(names) else ""
    return name if _NPU_NAME.match(name) else None


def step_ranges(db: DbTables) -> pd.DataFrame:
    """STEP_TIME's steps with an id, a start and an end, in order of start."""
    if not db.has("STEP_TIME"):
        return pd.DataFrame(columns=["id", "startNs", "endNs"])
    steps = db.select("STEP_TIME", ["id", "startNs", "endNs"], numbers=("id", "startNs", "endNs"))
    return steps.dropna().sort_values("startNs", kind="stable").reset_index(drop=True)


def _step_of(starts_ns: pd.Series, steps: pd.DataFrame) -> pd.Series:
    """The STEP_TIME id whose [start, end] holds each start, as text like kernel_details' Step Id: of the steps
    (in order of start) that begin at or before it, the first that ends at or after it — the first whose running
    maximum of ends reaches it, found by binary search."""
    starts = starts_ns.to_numpy()
    reach = np.maximum.accumulate(steps["endNs"].to_numpy())
    first = np.searchsorted(reach, starts, side="left")  # the first step whose running end is >= the start
    begun = np.searchsorted(steps["startNs"].to_numpy(), starts, side="right")  # how many steps begin by it
    found = (first < begun) & ~pd.isna(starts)
    labels = np.array([str(int(step_id)) for step_id in steps["id"]], dtype=object)
    out = pd.Series(None, index=starts_ns.index, dtype=object)
    out[found] = labels[first[found]]
    return out


@_per_table("kernel_details (TASK, COMPUTE_TASK_INFO)")
def read_kernels(db: DbTables, path: Path) -> CsvTable | None:
    if not db.has("TASK") or not db.has("COMPUTE_TASK_INFO"):
        return None
    task_columns = db.require("TASK", ("startNs", "endNs", "globalTaskId"))
    info_columns = db.require("COMPUTE_TASK_INFO", ("globalTaskId", "name"))
    block = "blockNum" if "blockNum" in info_columns else "blockDim"
    db.count_non_numbers("TASK", [c for c in ("startNs", "endNs", "globalTaskId", "deviceId", "modelId")
                                  if c in task_columns])
    db.count_non_numbers("COMPUTE_TASK_INFO", [block] if block in info_columns else [])

    def column(alias: str, present: set[str], name: str, as_name: str | None = None) -> str:
        return f"{alias}.{name} AS {as_name or name}" if name in present else f"NULL AS {as_name or name}"

    tasks = db.frame(
        "SELECT " + ", ".join([
            db.number("TASK", "t.startNs"), db.number("TASK", "t.endNs"), db.number("TASK", "t.globalTaskId"), "c.name",
            db.number("TASK", "t.deviceId") if "deviceId" in task_columns else "NULL AS deviceId",
            db.number("TASK", "t.modelId") if "modelId" in task_columns else "NULL AS modelId",
            column("c", info_columns, "opType"), column("c", info_columns, "taskType"),
            f"{db.number('COMPUTE_TASK_INFO', f'c.{block}', bare=True)} AS block" if block in info_columns else "NULL AS block",
            column("c", info_columns, "inputShapes"), column("c", info_columns, "inputDataTypes")])
        + " FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId"
    )
    frame = pd.DataFrame({
        "start_ns": tasks["startNs"], "device_id": pd.to_numeric(tasks["deviceId"], errors="coerce").astype("float64"),
        "name": db.text(tasks["name"]), "type": db.text(tasks["opType"]),
        "accelerator_core": db.text(tasks["taskType"]), "duration_us": _us(tasks["endNs"] - tasks["startNs"]),
        "start_us": _us(tasks["startNs"]), "input_shapes": db.text(tasks["inputShapes"]),
        "input_dtypes": db.text(tasks["inputDataTypes"]),
        "block_dim": pd.to_numeric(tasks["block"], errors="coerce").astype("float64"),
        "model_id": pd.to_numeric(tasks["modelId"], errors="coerce").astype("float64"),
    })
    if nameless := int((tasks["name"].isna() & tasks["opType"].isna()).sum()):
        db.warnings.append(f"{nameless} compute task(s) in COMPUTE_TASK_INFO have neither a name nor an operator type "
                           "(NULL ids): counted as kernels without name or type")
    if db.has("TASK_PMU_INFO"):
        ratios = _pmu_ratios(db, lambda name: str(name).endswith("_ratio"))  # the only ones kept
        if ratios is not None:
            ratios = ratios.reindex(tasks["globalTaskId"]).reset_index(drop=True)
            for column in ratios.columns:
                if str(column).endswith("_ratio"):
                    frame[str(column)] = ratios[column].astype("float64").to_numpy()
    if db.has("COMMUNICATION_OP"):
        frame = pd.concat([frame, _collective_rows(db)], ignore_index=True)
    frame = frame.sort_values("start_ns", kind="stable")
    steps = step_ranges(db)
    frame.insert(0, "step", _step_of(frame["start_ns"], steps) if not steps.empty else None)
    return _table(db, path, frame.drop(columns="start_ns"),
                  ("step", "name", "type", "accelerator_core", "input_shapes", "input_dtypes"))


def _pmu_ratios(db: DbTables, keep: Callable[[str], bool]) -> pd.DataFrame | None:
    """The TASK_PMU_INFO rows whose names pass ``keep``, pivoted as ``pivot_table(index="globalTaskId",
    columns="name", values="value", aggfunc="first")`` does. Where the task ids are plain integers and the names ids
    STRING_IDS lists, read as NumPy columns (in one pass where STRING_IDS lists every name, ``kept_rows``) and pivoted
    by ``_first_values``; else the frame of the rows ``kept`` selects is pivoted (None where it is empty)."""
    required, numbers = ["globalTaskId", "name", "value"], ("globalTaskId", "value")
    db.require("TASK_PMU_INFO", required)
    db.count_non_numbers("TASK_PMU_INFO", list(numbers))
    plain = ("TASK_PMU_INFO", "globalTaskId") in db._plain
    fields = [*_integers(["globalTaskId"]), ("value", db.number("TASK_PMU_INFO", "value", bare=True), "f8")]
    listed = db._listed_names()
    source = "TASK_PMU_INFO NOT INDEXED"
    if listed is not None and plain and (found := db.kept_rows(source, "name", keep, fields)) is not None:
        return _first_values(found, listed)
    ratio = db.kept("TASK_PMU_INFO", "name", keep)
    listed = db._listed_names()
    if (plain and ratio is not None and listed is not None and "IS NULL" not in ratio[0]
            and all(type(value) is int and value in listed for value in ratio[1])):
        return _first_values(db.id_rows(source, "name", "CAST(name AS INTEGER)", fields, *ratio), listed)
    pmu = db.select("TASK_PMU_INFO", required, numbers=numbers, where=ratio)
    if pmu.empty:
        return None
    pmu["name"] = db.text(pmu["name"], warn=False)
    return pmu.pivot_table(index="globalTaskId", columns="name", values="value", aggfunc="first")


def _first_values(found: np.ndarray, listed: dict[int, str]) -> pd.DataFrame:
    """The records of task ids (``globalTaskId``), name ids (``name``) and values pivoted with ``first`` semantics in
    NumPy: the first valid value of each task and name in table order, two ids of one name one column, a name without
    a value no column."""
    found = found[~np.isnan(found["value"])]
    ids = np.unique(found["name"])
    names = sorted({listed[int(i)] for i in ids})  # two ids of one name are one column, as pivot_table has it
    position = {name: k for k, name in enumerate(names)}
    column = np.array([position[listed[int(i)]] for i in ids], dtype=np.int64)[np.searchsorted(ids, found["name"])]
    tasks, row = np.unique(found["globalTaskId"], return_inverse=True)
    first = np.unique(row * len(names) + column, return_index=True)[1]  # the first row of each task and name
    values = np.full((len(tasks), len(names)), np.nan)
    values[row[first], column[first]] = found["value"][first]
    return pd.DataFrame(values, index=pd.Index(tasks, name="globalTaskId"), columns=pd.Index(names, name="name"))


@_per_table("the collectives of kernel_details (COMMUNICATION_OP)")
def _collective_rows(db: DbTables) -> pd.DataFrame | None:
    """COMMUNICATION_OP as kernel_details' collective rows; deviceId and opType are optional (schema 1.0.0 has no
    deviceId), and without opType the op name stands for the type, as kernel_details has it."""
    ops = db.select("COMMUNICATION_OP", ["opName", "startNs", "endNs"], ["opType", "deviceId"],
                    numbers=("startNs", "endNs", "deviceId"))
    names = db.text(ops["opName"])
    return pd.DataFrame({
        "start_ns": ops["startNs"], "device_id": pd.to_numeric(ops["deviceId"], errors="coerce").astype("float64"),
        "name": names, "type": db.text(ops["opType"]).where(ops["opType"].notna(), names),
        "accelerator_core": "COMMUNICATION", "duration_us": _us(ops["endNs"] - ops["startNs"]),
        "start_us": _us(ops["startNs"]),
    })


@_per_table("memory_record (MEMORY_RECORD)")
def read_memory_record(db: DbTables, path: Path) -> CsvTable | None:
    if not db.has("MEMORY_RECORD"):
        return None
    rows = db.select("MEMORY_RECORD", ["component", "timestamp", "totalReserved"], ["totalAllocated", "totalActive"],
                     numbers=("timestamp", "totalReserved", "totalAllocated", "totalActive"))
    return _table(db, path, pd.concat([pd.DataFrame({
        "component": db.text(rows["component"]), "timestamp_us": _us(rows["timestamp"]),
        "allocated_mb": rows["totalAllocated"] / _MB, "reserved_mb": rows["totalReserved"] / _MB,
        "active_mb": rows["totalActive"] / _MB,
    }), _process_memory(db)], ignore_index=True), ("component",))


@_per_table("the APP rows of memory_record (NPU_MEM)")
def _process_memory(db: DbTables) -> pd.DataFrame | None:
    """NPU_MEM's ``app`` rows as memory_record.csv's APP rows, which torch_npu writes from them: the device memory the
    process holds (DDR + HBM, bytes), reserved only."""
    if not db.has("NPU_MEM"):
        return None
    rows = db.select("NPU_MEM", ["type", "hbm", "timestampNs"], ["ddr"], numbers=("ddr", "hbm", "timestampNs"))
    app = rows.loc[db.text(rows["type"]).astype(str).str.lower() == "app"]
    return pd.DataFrame({"component": "APP", "timestamp_us": _us(app["timestampNs"]),
                         "reserved_mb": (app["ddr"].fillna(0) + app["hbm"]) / _MB})


@_per_table("operator_memory (OP_MEMORY)")
def read_operator_memory(db: DbTables, path: Path) -> CsvTable | None:
    if not db.has("OP_MEMORY"):
        return None
    rows = db.select("OP_MEMORY", ["name", "size"], ["allocationTime"], numbers=("size", "allocationTime"))
    return _table(db, path, pd.DataFrame({
        "name": db.text(rows["name"]), "size_kb": rows["size"] / 1024.0, "allocation_us": _us(rows["allocationTime"]),
    }), ("name",))


@_per_table("npu_module_mem (NPU_MODULE_MEM)")
def read_module_memory(db: DbTables, path: Path) -> CsvTable | None:
    if not db.has("NPU_MODULE_MEM"):
        return None
    rows = db.select("NPU_MODULE_MEM", ["moduleId", "totalReserved"], numbers=("moduleId", "totalReserved"))
    modules = dict(db.frame("SELECT id, name FROM ENUM_MODULE").itertuples(index=False)) if db.has("ENUM_MODULE") else {}
    return _table(db, path, pd.DataFrame({
        "component": rows["moduleId"].map(lambda m: modules.get(m, str(m))), "reserved_mb": rows["totalReserved"] / _MB,
    }), ("component",))


@_per_table("the trace tables (TASK, CANN_API, PYTORCH_API)")
def read_trace_tables(db: DbTables) -> TraceTables | None:
    """The trace_view tables the facts use, from the DB's host, runtime and device tables."""
    if not db.has("TASK"):
        return None
    notify = _notify_waits(db)
    return TraceTables(host=_timed(db, _host_events(db)), apis=_timed(db, _api_events(db)),
                       device=_timed(db, _device_tasks(db)), overlap=_timed(db, _overlap(db)), launches=_launches(db),
                       notify=_timed(db, notify if notify is not None else pd.DataFrame(columns=NOTIFY_COLUMNS)))


def _device_tasks(db: DbTables) -> pd.DataFrame:
    """TASK as trace_view's device lanes, without the collectives' own tasks: a task sharing its connectionId with a
    COMMUNICATION_OP, with neither compute nor communication task info, is the op itself, which trace_view shows in the
    HCCL process, not as a device task (an export may type it AI_CORE)."""
    db.count_non_numbers("TASK", ["startNs", "endNs", "streamId"])
    numbers = ", ".join(db.number("TASK", f"t.{c}") for c in ("startNs", "endNs", "streamId"))
    op = ["t.connectionId IN (SELECT connectionId FROM COMMUNICATION_OP)"] \
        if _has_columns(db, "COMMUNICATION_OP", "connectionId") else ["0"]
    joins, name = "", "NULL"
    if _has_columns(db, "COMPUTE_TASK_INFO", "globalTaskId", "name"):
        joins, name = " LEFT JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId", "c.name"
        op.append("c.globalTaskId IS NULL")
    if _has_columns(db, "COMMUNICATION_TASK_INFO", "globalTaskId"):
        op.append("t.globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)")
    device = db.frame(f"SELECT {numbers}, t.taskType, {name} AS name FROM TASK t{joins} "
                      f"WHERE NOT coalesce({' AND '.join(op)}, 0)")
    task_type = db.text(device["taskType"])
    return pd.DataFrame({
        "stream": device["streamId"], "name": db.text(device["name"]).fillna(task_type), "task_type": task_type,
        "ts": _us(device["startNs"]), "dur": _us(device["endNs"] - device["startNs"]),
    }).sort_values("ts", kind="stable").reset_index(drop=True)


def _has_columns(db: DbTables, table: str, *columns: str) -> bool:
    return db.has(table) and set(columns) <= set(db.columns(table))


@_per_table("the Notify_Wait tasks of the trace (COMMUNICATION_TASK_INFO)")
def _notify_waits(db: DbTables) -> pd.DataFrame:
    """The HCCL Notify_Wait tasks (COMMUNICATION_TASK_INFO ⋈ TASK) with the group-local rank each waits for, its
    dstRank, as trace_view's Notify_Wait events name it (``dst rank``); only the joined rows of the task types named
    Notify_Wait are read: in one pass (``kept_rows``) where the numbers are plain and STRING_IDS lists every type,
    else (and where there are none, typed as before) the rows ``kept`` selects, counting the ids STRING_IDS lacks."""
    if not db.has("COMMUNICATION_TASK_INFO"):
        return pd.DataFrame(columns=NOTIFY_COLUMNS)
    db.require("COMMUNICATION_TASK_INFO", ("globalTaskId", "taskType", "dstRank"))
    db.count_non_numbers("COMMUNICATION_TASK_INFO", ["dstRank"])
    joined = "COMMUNICATION_TASK_INFO i JOIN TASK t ON i.globalTaskId = t.globalTaskId"
    numbers = (("TASK", "t.startNs"), ("TASK", "t.endNs"), ("COMMUNICATION_TASK_INFO", "i.dstRank"))
    plain = all((table, c.partition(".")[2]) in db._plain for table, c in numbers)
    found = db.kept_rows(joined, "i.taskType", _notify_wait, _integers([c for _table, c in numbers])) if plain else None
    if found is not None and len(found):
        waits = pd.DataFrame({"taskType": found["i.taskType"],
                              **{c.partition(".")[2]: found[c] for _table, c in numbers}})
    else:
        condition, params = db.kept(joined, "i.taskType", _notify_wait) or ("1", [])
        waits = db.frame(f"SELECT i.taskType, {', '.join(db.number(table, c) for table, c in numbers)} "
                         f"FROM {joined} WHERE {condition}", params)
    waits = waits.loc[(db.text(waits["taskType"], warn=False) == NOTIFY_WAIT)
                      & waits["dstRank"].between(0, (1 << 20) - 1)]
    waits = pd.DataFrame({"ts": _us(waits["startNs"]), "dur": _us(waits["endNs"] - waits["startNs"]),
                          "peer": waits["dstRank"].astype("int64")})
    return waits.sort_values("ts", kind="stable").reset_index(drop=True)


def _notify_wait(name: str) -> bool:
    return name == NOTIFY_WAIT


def _timed(db: DbTables, events: pd.DataFrame) -> pd.DataFrame:
    """The events with a usable start and a non-negative duration, as the trace_view reader keeps them."""
    usable = events["ts"].notna() & events["dur"].notna() & (events["dur"] >= 0)
    if not usable.all():
        db.warnings.append(f"{int((~usable).sum())} event(s) without a usable ts/dur were ignored")
    return events.loc[usable].reset_index(drop=True)


def _events(db: DbTables, table: str, keep: Callable[[str], bool]) -> pd.DataFrame:
    """The events of ``table`` whose names pass ``keep``: only their rows are read where a query can name them
    (``DbTables.kept``, which counts the ids STRING_IDS lacks)."""
    columns = ["name", "tid", "ts", "dur"]
    if not db.has(table):
        return pd.DataFrame(columns=columns)
    numbers = ("globalTid", "startNs", "endNs")
    db.require(table, ["name", *numbers])
    db.count_non_numbers(table, list(numbers))
    rows = db.select_kept(table, "name", keep, numbers)
    names = db.text(rows["name"], warn=False).fillna("")
    mask = _passing(names, keep)
    return pd.DataFrame({"name": names[mask], "tid": rows["globalTid"][mask], "ts": _us(rows["startNs"][mask]),
                         "dur": _us(rows["endNs"][mask] - rows["startNs"][mask])}).reset_index(drop=True)


def _passing(names: pd.Series, keep: Callable[[Any], bool]) -> pd.Series:
    """``keep`` of each name, called once per distinct name (a table repeats a few hundred names over its rows)."""
    codes, uniques = pd.factorize(names, use_na_sentinel=False)
    return pd.Series(np.array([bool(keep(name)) for name in uniques], dtype=bool)[codes], index=names.index)


def _api_events(db: DbTables) -> pd.DataFrame:
    """CANN_API's calls that the facts use, named as trace_view.json names them: the DB keeps the bare name
    (``launch``) and its level in ``type`` (10000, node), the trace joins them (``Node@launch``)."""
    if not db.has("CANN_API"):
        return pd.DataFrame(columns=["name", "tid", "ts", "dur"])
    numbers = ("type", "globalTid", "startNs", "endNs")
    db.require("CANN_API", ["name", *numbers])
    db.count_non_numbers("CANN_API", list(numbers))
    rows = db.select_kept("CANN_API", "name", lambda name: any(API_EVENTS.match(f"{level}@{name}")
                                                                for level in _API_LEVELS.values()), numbers)
    names = rows["type"].map(_API_LEVELS).astype(object) + "@" + db.text(rows["name"], warn=False).astype(object)
    keep = names.notna() & _passing(names.fillna(""), lambda n: API_EVENTS.match(n) is not None)
    return pd.DataFrame({"name": names[keep], "tid": rows["globalTid"][keep], "ts": _us(rows["startNs"][keep]),
                         "dur": _us(rows["endNs"][keep] - rows["startNs"][keep])}).reset_index(drop=True)


def _host_events(db: DbTables) -> pd.DataFrame:
    ops = _events(db, "PYTORCH_API", lambda n: HOST_EVENTS.search(n) is not None or FRAMEWORK_OPS.match(n) is not None)
    ops.insert(1, "cat", "")
    if db.has("GC_RECORD"):
        gc = db.select("GC_RECORD", ["globalTid", "startNs", "endNs"], numbers=("globalTid", "startNs", "endNs"))
        ops = pd.concat([ops, pd.DataFrame({"name": "GC", "cat": "GC", "tid": gc["globalTid"], "ts": _us(gc["startNs"]),
                                            "dur": _us(gc["endNs"] - gc["startNs"])})], ignore_index=True)
    return ops


def _overlap(db: DbTables) -> pd.DataFrame:
    if not db.has("OVERLAP_ANALYSIS"):
        return _overlap_of_tasks(db)
    rows = db.select("OVERLAP_ANALYSIS", ["type", "startNs", "endNs"], numbers=("type", "startNs", "endNs"))
    lanes = rows["type"].map(_OVERLAP_TYPES)
    keep = lanes.isin(OVERLAP_LANES)
    return pd.DataFrame({"lane": lanes[keep], "ts": _us(rows["startNs"][keep]),
                         "dur": _us(rows["endNs"][keep] - rows["startNs"][keep])}).reset_index(drop=True)


_NOT_COMPUTE = ("AicpuKernel", "AivKernel")  # compute task names CANN leaves out of Computing (MC2's AI CPU/AIV parts)


def _overlap_of_tasks(db: DbTables) -> pd.DataFrame:
    """The Overlap Analysis lanes of a DB without OVERLAP_ANALYSIS (exports of older CANN, as rank 1 of the real DB
    export), as CANN computes them and msprof-analyze does for DB data: Computing = the union of the compute tasks
    (TASK ⋈ COMPUTE_TASK_INFO, names ending in AicpuKernel or AivKernel left out), Communication = the union of
    COMMUNICATION_OP, Communication(Not Overlapped) = Communication − Computing, Free = the gaps between them, from
    the first to the last (rank 0 of the real export, which has OVERLAP_ANALYSIS, spans exactly that). Empty without
    compute task info."""
    columns = ["lane", "ts", "dur"]
    if not (_has_columns(db, "TASK", "globalTaskId", "startNs", "endNs")
            and _has_columns(db, "COMPUTE_TASK_INFO", "globalTaskId", "name")):
        return pd.DataFrame(columns=columns)
    db.count_non_numbers("TASK", ["startNs", "endNs"])
    numbers = ", ".join(db.number("TASK", f"t.{c}") for c in ("startNs", "endNs"))
    compute = db.frame(f"SELECT {numbers}, c.name FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId")
    names = db.text(compute["name"]).fillna("").astype(str)
    compute = compute.loc[~names.str.endswith(_NOT_COMPUTE)]
    if compute.empty:
        return pd.DataFrame(columns=columns)
    spans = lambda frame: np.column_stack([_us(frame["startNs"]).to_numpy(float),  # noqa: E731
                                           _us(frame["endNs"]).to_numpy(float)])
    computing = union(spans(compute))
    communication = union(spans(db.select("COMMUNICATION_OP", ["startNs", "endNs"], numbers=("startNs", "endNs")))
                          if _has_columns(db, "COMMUNICATION_OP", "startNs", "endNs") else EMPTY)
    busy = union(np.concatenate([computing, communication]))
    lanes = {"Computing": computing, "Communication": communication,
             "Communication(Not Overlapped)": subtract(communication, computing),
             "Free": subtract(np.array([[busy[0, 0], busy[-1, 1]]]), busy) if len(busy) else EMPTY}
    return pd.DataFrame([(lane, start, end - start) for lane, found in lanes.items() for start, end in found],
                        columns=columns).sort_values("ts", kind="stable").reset_index(drop=True)


def _launches(db: DbTables) -> pd.DataFrame:
    """Each runtime call with a connectionId paired with the first device task of that connectionId, as trace_view's
    HostToDevice flow pairs them: a collective's launch shares its connectionId with all of the collective's tasks."""
    if not db.has("CANN_API"):
        return pd.DataFrame(columns=["launch_ts", "device_ts"])
    db.count_non_numbers("CANN_API", ["startNs"])
    db.count_non_numbers("TASK", ["startNs"])
    paired = db.frame(f"SELECT {db.number('CANN_API', 'a.startNs', bare=True)} AS launch, "
                      f"MIN({db.number('TASK', 't.startNs', bare=True)}) AS device FROM CANN_API a JOIN TASK t "
                      "ON a.connectionId = t.connectionId WHERE a.connectionId IS NOT NULL "
                      "GROUP BY a.rowid ORDER BY launch, device")
    return pd.DataFrame({"launch_ts": _us(paired["launch"]), "device_ts": _us(paired["device"])})


# --- analysis.db ----------------------------------------------------------------------------------------

_STEP_COLUMNS = {"deviceId": "device_id", "step": "step", "computing": "computing_us",
                 "communication_not_overlapped": "comm_not_overlapped_us", "overlapped": "overlapped_us",
                 "communication": "communication_us", "free": "free_us", "stage": "stage_us", "bubble": "bubble_us",
                 "preparing": "preparing_us"}


@_per_table("step_trace_time (StepTraceTime)")
def read_step_trace(db: DbTables, path: Path) -> CsvTable | None:
    if not db.has("StepTraceTime"):
        return None
    present = [c for c in _STEP_COLUMNS if c in db.columns("StepTraceTime")]
    missing = {"computing", "communication_not_overlapped", "free"} - set(present)
    if missing:
        raise FileProblem(f"table StepTraceTime lacks the column(s) {', '.join(sorted(missing))}")
    rows = db.select("StepTraceTime", present, numbers=tuple(c for c in present if c != "step"))
    rows = rows.rename(columns=_STEP_COLUMNS)
    if "step" in rows:
        rows["step"] = rows["step"].map(lambda s: None if s is None or s == "" else str(s).removeprefix("step"))
    return _table(db, path, rows, ("step",))


@_per_table("communication (CommAnalyzerTime, CommAnalyzerBandwidth)")
def read_communication(db: DbTables, warnings: list[str]) -> CommunicationTables | None:
    if not db.has("CommAnalyzerTime"):
        return None
    timed = ("elapse_time", "transit_time", "wait_time", "synchronization_time", "idle_time")
    times = db.select("CommAnalyzerTime", ["hccl_op_name", "group_name", *timed, "step", "type"], ["start_timestamp"],
                      numbers=(*timed, "start_timestamp"))
    ops = pd.DataFrame({
        "step": times["step"].map(_step_number), "kind": times["type"].map(lambda t: "p2p" if t == "p2p" else "collective"),
        "op_name": times["hccl_op_name"].astype(str), "group": times["group_name"].astype(str),
        "elapse_ms": times["elapse_time"], "transit_ms": times["transit_time"], "wait_ms": times["wait_time"],
        "synchronization_ms": times["synchronization_time"], "idle_ms": times["idle_time"],
        "start_us": pd.to_numeric(times["start_timestamp"], errors="coerce").astype("float64"),
    })
    unusable = ops["elapse_ms"].isna() | (ops["elapse_ms"] < 0)
    if unusable.any():
        warnings.append(f"{int(unusable.sum())} communication op(s) without usable time info were ignored")
    ops = ops.loc[~unusable].reset_index(drop=True)
    if ops.empty:
        raise FileProblem("holds no communication op with time info")
    traffic = pd.DataFrame(columns=list(TRAFFIC_COLUMNS))
    if db.has("CommAnalyzerBandwidth"):
        bandwidth = db.select("CommAnalyzerBandwidth", ["hccl_op_name", "group_name", "transport_type", "transit_size",
                                                         "transit_time", "step", "type"],
                              numbers=("transit_size", "transit_time"))
        traffic = pd.DataFrame({
            "step": bandwidth["step"].map(_step_number),
            "kind": bandwidth["type"].map(lambda t: "p2p" if t == "p2p" else "collective"),
            "op_name": bandwidth["hccl_op_name"].astype(str), "group": bandwidth["group_name"].astype(str),
            "transport": bandwidth["transport_type"].astype(str), "size_mb": bandwidth["transit_size"].astype("float64"),
            "time_ms": bandwidth["transit_time"].astype("float64"),
        })
        # one row per packet size of the op's Size Distribution, each repeating the transport's totals: keep one
        traffic = traffic.drop_duplicates(["step", "kind", "op_name", "group", "transport"])
        traffic = traffic.loc[traffic["transport"].isin(TRANSPORTS)
                              & ((traffic["size_mb"] > 0) | (traffic["time_ms"] > 0))].reset_index(drop=True)
    return CommunicationTables.of_frames(ops, traffic)


@_per_table("communication_matrix (CommAnalyzerMatrix)")
def read_matrix(db: DbTables) -> Columns | None:
    """CommAnalyzerMatrix as communication_matrix.json's rows, each link's traffic counted once (``matrix_op_types``:
    the ``-total`` rows where there are any, else the per-op rows summed)."""
    if not db.has("CommAnalyzerMatrix"):
        return None
    rows = db.select("CommAnalyzerMatrix", ["hccl_op_name", "group_name", "src_rank", "dst_rank", "transport_type",
                                             "transit_size", "transit_time", "step", "type"],
                     numbers=("src_rank", "dst_rank", "transit_size", "transit_time"))
    keys = zip(rows["step"].astype(str), rows["type"].astype(str), rows["hccl_op_name"].astype(str),
               rows["group_name"].astype(str))
    matrix = pd.DataFrame({
        "step": rows["step"].map(_step_number), "kind": rows["type"].map(lambda t: "p2p" if t == "p2p" else "collective"),
        "op_type": matrix_op_types(list(keys)), "group": rows["group_name"].astype(str), "src": rows["src_rank"],
        "dst": rows["dst_rank"], "transport": rows["transport_type"].astype(str), "size_mb": rows["transit_size"],
        "time_ms": rows["transit_time"],
    })
    counted = matrix["op_type"].notna()
    usable = matrix[["src", "dst", "size_mb", "time_ms"]].ge(0).all(axis=1)  # NaN is not ≥ 0
    if unusable := int((counted & ~usable).sum()):
        db.warnings.append(f"{unusable} link(s) without usable ranks, size or time were ignored")
    matrix = matrix.loc[counted & usable].astype({"src": "int64", "dst": "int64"})
    if matrix.empty:
        return None
    return columns_of(matrix.groupby(list(MATRIX_COLUMNS[:-2]), sort=False, dropna=False)[["size_mb", "time_ms"]].sum()
                      .reset_index())


def _step_number(value: object) -> int | None:
    text = str(value).removeprefix("step") if value is not None else ""
    return int(text) if text.isdigit() else None
