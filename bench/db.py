"""Time advisor and msprof-analyze advisor on a large DB export of one rank, in the same run.

    python bench/db.py --msprof /tmp/msprof/bin/msprof-analyze --repeat 3
    python bench/db.py --copies 420 --build-only          # just write bench/data/db-x1000/

The profile is rank 0 of the real DB export (../shared/data/real/ascend-more/db-level1-2ranks) with the rows of its
large tables repeated: every copy shifted by a fixed time (after the last event of the one before) and by a fixed
step in every id that joins the tables (globalTaskId, connectionId, opId, the step id), so each copy is one more step
of the same job with its launches, tasks, collectives and lanes joined as in the real file. The copies are inserted
by SQL into the tables of the real file, so the columns keep their declared types and their storage classes:
PYTORCH_API.startNs/endNs stay TEXT holding text, as the real export writes them; the build checks it
(``SELECT typeof(column)``). Both tools run as in bench/run.py (GNU time: wall and peak RSS of the largest process).
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import shutil
import sqlite3
import statistics
import sys
from contextlib import closing
from pathlib import Path

from run import time_both_tools

HERE = Path(__file__).resolve().parent
REAL_RANK = HERE.parent.parent / "shared" / "data" / "real" / "ascend-more" / "db-level1-2ranks" / "rank0_ascend_pt"
TIME_SHIFT_NS = 200_000_000  # one copy after the other: the real rank spans 172 ms from its first to its last event
ID_SHIFT = 100_000  # above every id of the real rank (connectionId ≤ 10 069)
# table → its columns shifted by time and by id; the other columns are copied as they are
REPEATED = {
    "TASK": (("startNs", "endNs"), ("connectionId", "globalTaskId")),
    "COMPUTE_TASK_INFO": ((), ("globalTaskId",)),
    "TASK_PMU_INFO": ((), ("globalTaskId",)),
    "COMMUNICATION_TASK_INFO": ((), ("globalTaskId", "opId")),
    "COMMUNICATION_OP": (("startNs", "endNs"), ("connectionId", "opId")),
    "CANN_API": (("startNs", "endNs"), ("connectionId",)),
    "PYTORCH_API": (("startNs", "endNs"), ("connectionId",)),
    "CONNECTION_IDS": ((), ("id", "connectionId")),
    "connectionCats": ((), ("connectionId",)),
    "OVERLAP_ANALYSIS": (("startNs", "endNs"), ()),
    "STEP_TIME": (("startNs", "endNs"), ()),
}
STEP_ID_SHIFT = 1  # STEP_TIME.id: one step more per copy


def storage_classes(database: Path) -> dict[tuple[str, str], set[str]]:
    """(table, column) → the storage classes its non-NULL values have, for the repeated tables."""
    with closing(sqlite3.connect(database)) as db:
        return {(table, column): {kind for (kind,) in db.execute(
                    f'SELECT DISTINCT typeof("{column}") FROM "{table}" WHERE "{column}" IS NOT NULL')}
                for table in REPEATED for column in _columns(db, table)}


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]


def _copy_rows(db: sqlite3.Connection, table: str, copies: int) -> None:
    """Insert copies 1 … copies-1 of ``table``'s rows, shifted; an AUTOINCREMENT id is left for SQLite to number."""
    times, ids = REPEATED[table]
    columns = [c for c in _columns(db, table) if not (table == "OVERLAP_ANALYSIS" and c == "id")]

    def value(column: str) -> str:
        if column in times:
            return f'CAST("{column}" AS INTEGER) + k * {TIME_SHIFT_NS}'
        if column in ids:
            return f'"{column}" + k * {ID_SHIFT}'
        if table == "STEP_TIME" and column == "id":
            return f'"{column}" + k * {STEP_ID_SHIFT}'
        return f'"{column}"'

    names = ", ".join(f'"{c}"' for c in columns)
    db.execute(f'WITH RECURSIVE copy(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM copy WHERE k < {copies - 1}) '
               f'INSERT INTO "{table}" ({names}) SELECT {", ".join(value(c) for c in columns)} '
               f'FROM copy, (SELECT * FROM "{table}") ORDER BY k')


def build(out: Path, copies: int) -> Path:
    """``out`` holding rank 0 of the real DB export with its large tables ``copies`` times (built once, then reused)."""
    rank = out / REAL_RANK.name
    database = rank / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    if database.is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(REAL_RANK, rank, copy_function=shutil.copyfile)  # copyfile: the copies are writable
    partial = database.with_name("building.db")
    database.rename(partial)
    with closing(sqlite3.connect(partial)) as db:
        for table in REPEATED:
            if copies > 1:
                _copy_rows(db, table, copies)
        db.commit()
        db.execute("VACUUM")
    real = storage_classes(REAL_RANK / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")
    if (built := storage_classes(partial)) != real:
        changed = {key: (real[key], built.get(key)) for key in real if built.get(key) != real[key]}
        raise SystemExit(f"the copies changed the storage classes of the real file: {changed}")
    partial.rename(database)
    return out


def row_counts(database: Path) -> str:
    with closing(sqlite3.connect(database)) as db:
        return ", ".join(f"{table} {db.execute(f'SELECT count(*) FROM {table}').fetchone()[0]:,}"
                         for table in ("TASK", "PYTORCH_API", "CANN_API", "COMMUNICATION_OP", "STEP_TIME"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--advisor", default=str(Path(sys.executable).with_name("advisor")))
    parser.add_argument("--msprof", default=shutil.which("msprof-analyze"))
    parser.add_argument("--copies", type=int, default=420, help="copies of the large tables (420: ≈ 180 MB)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--build-only", action="store_true")
    args = parser.parse_args()

    data = build(HERE / "data" / f"db-x{args.copies}", args.copies)
    database = next(data.rglob("ascend_pytorch_profiler_0.db"))
    print(f"{database}: {database.stat().st_size / 1e6:.0f} MB; {row_counts(database)}")
    if args.build_only:
        return
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, {len(os.sched_getaffinity(0))} cores, "
          f"Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    compileall.compile_dir(HERE.parent / "advisor", quiet=1)
    print("| tool | wall (s, median) | runs (s) | peak RSS (MiB) | exit |")
    print("|---|---:|---|---:|---:|")
    for name, runs in time_both_tools(data, args.advisor, args.msprof, args.repeat).items():
        walls = ", ".join(f"{r[0]:.2f}" for r in runs)
        print(f"| {name} | {statistics.median(r[0] for r in runs):.2f} | {walls} | "
              f"{statistics.median(r[1] for r in runs):.0f} | {runs[-1][2]} |")
    print(f"load after the runs: {os.getloadavg()[0]:.2f}")  # the VM is shared: a load above the cores skews the times


if __name__ == "__main__":
    main()
