"""The DB reader's faster paths (issue 30) read what the plain ones read, on the shapes large real exports have.

The real export's rows repeated (times and ids shifted, the columns keeping their declared types and storage classes:
PYTORCH_API's times TEXT holding text), the filtered reads against reading every row, and the steps found by binary
search against overlapping and unordered steps.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing

import numpy as np
import pandas as pd
from conftest import FIXTURES

import advisor.ingest.db as db
from advisor.ingest import load_profile

REAL_RANK = FIXTURES / "ascend-more" / "db-level1-2ranks" / "rank0_ascend_pt"
SHIFTED = {"TASK": ("startNs", "endNs", "connectionId", "globalTaskId"), "COMPUTE_TASK_INFO": ("globalTaskId",),
           "TASK_PMU_INFO": ("globalTaskId",), "COMMUNICATION_OP": ("startNs", "endNs", "connectionId", "opId"),
           "CANN_API": ("startNs", "endNs", "connectionId"),
           "PYTORCH_API": ("startNs", "endNs", "connectionId"), "STEP_TIME": ("startNs", "endNs", "id")}


def _repeated(tmp_path, copies: int):
    """Rank 0 of the real DB export with the rows of its large tables ``copies`` times, as bench/db.py builds it."""
    rank = tmp_path / "prof" / REAL_RANK.name
    shutil.copytree(REAL_RANK, rank, copy_function=shutil.copyfile)
    database = rank / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    with closing(sqlite3.connect(database)) as connection:
        for table, shifted in SHIFTED.items():
            columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
            values = ", ".join(_shifted(table, c) if c in shifted else c for c in columns)
            connection.execute(f"WITH RECURSIVE copy(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM copy WHERE k < "
                               f"{copies - 1}) INSERT INTO {table} SELECT {values} FROM copy, (SELECT * FROM {table})")
        connection.commit()
    return tmp_path / "prof", database


def _shifted(table: str, column: str) -> str:
    """SQL: the value of ``column`` in copy ``k``: times 200 ms later, ids 100,000 on, step ids one on."""
    if column.endswith("Ns"):
        return f"CAST({column} AS INTEGER) + k * 200000000"
    return f"{column} + k * {1 if table == 'STEP_TIME' else 100_000}"


def test_the_real_export_repeated_keeps_its_text_times_and_reads_every_copy(tmp_path):
    path, database = _repeated(tmp_path, 4)
    with closing(sqlite3.connect(database)) as connection:
        assert connection.execute("SELECT DISTINCT typeof(startNs), typeof(endNs) FROM PYTORCH_API").fetchall() \
            == [("text", "text")]
    profile = load_profile(path)
    assert not profile.coverage.warnings and not profile.coverage.partly_read and not profile.coverage.skipped
    (rank,) = profile.ranks
    single = load_profile(REAL_RANK).ranks[0]
    assert len(rank.trace.host) == 4 * len(single.trace.host) and len(rank.trace.apis) == 4 * len(single.trace.apis)
    steps = rank.kernels.frame["step"]
    assert sorted(steps.dropna().unique(), key=int) == ["50", "51", "52", "53"]
    assert (steps.value_counts() == single.kernels.frame["step"].value_counts().iloc[0]).all()
    assert rank.trace.host["ts"].dtype == single.trace.host["ts"].dtype == np.float64


def test_reading_only_the_kept_rows_gives_what_reading_every_row_gives(tmp_path, monkeypatch):
    """The rows chosen by name in SQL (host events, runtime calls, PMU ratios) against every row read and chosen in
    Python (what happens where too many names pass for one query), with a NULL start among the rows not kept: the
    number columns keep the type the whole column reads as."""
    path, database = _repeated(tmp_path, 2)
    with closing(sqlite3.connect(database)) as connection:
        connection.execute("UPDATE PYTORCH_API SET startNs = NULL WHERE rowid = (SELECT min(rowid) FROM PYTORCH_API "
                           "WHERE name = (SELECT id FROM STRING_IDS WHERE value = 'aten::empty_strided'))")
        connection.commit()
    filtered = load_profile(path)
    monkeypatch.setattr(db, "_one_of", lambda column, values, most: None)
    every = load_profile(path)
    assert filtered.coverage.warnings == every.coverage.warnings
    for name in ("host", "apis", "device", "launches", "notify", "overlap"):
        pd.testing.assert_frame_equal(getattr(filtered.ranks[0].trace, name), getattr(every.ranks[0].trace, name))
    pd.testing.assert_frame_equal(filtered.ranks[0].kernels.frame, every.ranks[0].kernels.frame)


def test_ids_not_in_string_ids_are_counted_over_every_row_once(tmp_path):
    path, database = _repeated(tmp_path, 3)
    with closing(sqlite3.connect(database)) as connection:
        unknown = connection.execute("SELECT count(*) FROM PYTORCH_API WHERE name = (SELECT name FROM PYTORCH_API "
                                     "ORDER BY rowid LIMIT 1)").fetchone()[0]
        connection.execute("DELETE FROM STRING_IDS WHERE id = (SELECT name FROM PYTORCH_API ORDER BY rowid LIMIT 1)")
        connection.commit()
    warnings = load_profile(path).coverage.warnings
    told = [w for w in warnings if "(column name) are not in STRING_IDS" in w]
    assert len(told) == 1 and told[0].split(": ", 1)[1].startswith(f"{unknown} name id(s)")


def test_each_start_gets_the_first_step_in_order_of_start_that_holds_it():
    steps = pd.DataFrame({"id": [1, 2, 3, 4], "startNs": [0, 5, 8, 30], "endNs": [20, 6, 40, 35]})
    starts = pd.Series([-1, 0, 5, 7, 20, 21, 25, 32, 40, 41, np.nan])
    found = db._step_of(starts, steps)
    assert found.where(found.notna(), None).tolist() == [None, "1", "1", "1", "1", "3", "3", "3", "3", None, None]
    assert db._step_of(pd.Series([], dtype="int64"), steps).tolist() == []


def test_plain_numbers_read_and_warn_as_the_checks_read_and_warn(tmp_path, monkeypatch):
    """The one-pass test for plain values (integers and integers' text) against the full checks on every value: the
    same numbers, types and warnings for text that only looks whole (padded, signed, fractions, too large for 64 bits,
    ``-0``), reals, blobs and NULLs, in a TEXT column and an INTEGER one."""
    values = [5, "17", "0123", "-0", "-42", " 12", "12 ", "1.0", "1e3", "12abc", "abc", "", "9223372036854775807",
              "9223372036854775808", "-9223372036854775808", 2.0, 2.5, float("inf"), b"1", None, "1733800000123456789"]
    database = tmp_path / "n.db"
    with closing(sqlite3.connect(database)) as connection:
        connection.execute("CREATE TABLE T (t TEXT, i INTEGER, n)")
        connection.executemany("INSERT INTO T VALUES (?, ?, ?)", [(v, v, v) for v in values])
        connection.execute("CREATE TABLE P (t TEXT, i INTEGER)")
        connection.executemany("INSERT INTO P VALUES (?, ?)", [("17", 3), ("1733800000123456789", "-5")])
        connection.commit()

    def read() -> tuple[list[str], pd.DataFrame, pd.DataFrame]:
        with db.open_db(database) as connection:
            tables = db.DbTables(connection, warnings := [])
            frames = [tables.select(t, c, numbers=tuple(c)) for t, c in (("T", ["t", "i", "n"]), ("P", ["t", "i"]))]
            return warnings, *frames

    plain = read()
    monkeypatch.setattr(db, "_plain", lambda column: "0")
    full = read()
    assert plain[0] == full[0] and plain[0]
    for fast, checked in zip(plain[1:], full[1:]):
        pd.testing.assert_frame_equal(fast, checked)
    assert plain[2]["t"].dtype == np.int64
