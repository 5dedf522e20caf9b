"""The floors under issue 30's targets: what any run of advisor on its two large profiles costs before a fact is found.

    .venv/bin/python bench/floors.py --msprof /tmp/msprof/bin/msprof-analyze --repeat 5

Issue 30 asks, on this 2-core machine, for the ~180 MB DB export of one rank (bench/db.py) to be diagnosed ≥ 20×
faster than ``msprof-analyze advisor all`` and the 157.5 MB trace_view.json profile (bench/trace_parts.py) ≥ 40×
faster, each in ≤ ¼ of msprof-analyze's peak RSS. This script measures three floors no reader can go below with the
project's stack (Python, pandas, the standard library's sqlite3, msgspec), each the median of ``--repeat`` runs:

* **imports**: ``import pandas`` alone (what any reader feeding pandas facts loads), and a fresh interpreter importing
  what ``advisor diagnose`` needs (advisor.diagnose and the renderers, with pandas, pyarrow and numpy), wall time and
  peak RSS under GNU time.
* **one SQLite pass**: one query per large table of the DB export counting the non-NULL values of columns the reader
  takes from it (``count(…)``: SQLite steps through every row and column header; no value is converted, no row
  reaches Python), in this process, the file in the page cache. Reading the rows into Python costs more; checking
  their values costs more again.
* **the trace decode**: the issue's reference, a typed msgspec decode of every event of the trace (the reader's own
  event struct without ``args``), the file's bytes already in memory (bench/trace_parts.py).

With ``--msprof`` it also times msprof-analyze on both profiles (bench/run.py's ``time_both_tools``, one run each)
and prints each target next to the sums of its floors.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sqlite3
import statistics
import sys
import time
from contextlib import closing
from pathlib import Path

import msgspec

from run import measure, time_both_tools
from trace_parts import reference_events

HERE = Path(__file__).resolve().parent
DB_PROFILE = HERE / "data" / "db-x420"
TRACE_PROFILE = HERE / "data" / "cluster-1x10x71"
# table → columns advisor/ingest/db.py reads from it (some of them: a floor)
READ_COLUMNS = {
    "TASK": ("startNs", "endNs", "globalTaskId", "connectionId", "taskType", "modelId"),
    "COMPUTE_TASK_INFO": ("globalTaskId", "name"),
    "TASK_PMU_INFO": ("globalTaskId", "name", "value"),
    "PYTORCH_API": ("startNs", "endNs", "name", "connectionId"),
    "CANN_API": ("startNs", "endNs", "name", "connectionId"),
    "COMMUNICATION_OP": ("startNs", "endNs", "opName", "connectionId"),
}


def import_floor(repeat: int) -> dict[str, tuple[float, float]]:
    """(wall s, peak RSS MiB) of a fresh interpreter importing pandas alone, and what ``advisor diagnose`` needs."""
    python = sys.executable
    found = {}
    for label, code in (("import pandas", "import pandas"),
                        ("import advisor.diagnose, advisor.render", "import advisor.diagnose, advisor.render")):
        runs = [measure([python, "-c", code]) for _ in range(repeat)]
        found[label] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    return found


def sqlite_floor(database: Path, repeat: int) -> dict[str, float]:
    """Seconds of one counting pass per table over READ_COLUMNS (median of ``repeat``)."""
    found = {}
    with closing(sqlite3.connect(database)) as db:
        for table, columns in READ_COLUMNS.items():
            query = f"SELECT {', '.join(f'count({c})' for c in columns)} FROM {table}"
            runs = []
            for _ in range(repeat):
                start = time.perf_counter()
                db.execute(query).fetchall()
                runs.append(time.perf_counter() - start)
            found[table] = statistics.median(runs)
    return found


def decode_floor(trace: Path, repeat: int) -> float:
    """Seconds of the typed decode of every event of ``trace`` without args (median of ``repeat``)."""
    sys.path.insert(0, str(HERE.parent))
    from advisor.ingest.trace import _Event

    data = trace.read_bytes()
    decoder = msgspec.json.Decoder(list[reference_events(_Event)[0]], strict=False)
    runs = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        decoder.decode(data)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--msprof", help="msprof-analyze, to print each target next to its floors")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    database = next(DB_PROFILE.rglob("ascend_pytorch_profiler_0.db"), None)
    trace = next(TRACE_PROFILE.rglob("trace_view.json"), None)
    if database is None or trace is None:
        raise SystemExit("build the profiles first: bench/db.py --build-only, and bench/trace_parts.py's generate line")
    print(f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}, load {os.getloadavg()[0]:.2f}")

    imports = import_floor(args.repeat)
    for label, (wall, rss) in imports.items():
        print(f"{label}: {wall:.3f} s, {rss:.0f} MiB")
    scans = sqlite_floor(database, args.repeat)
    print("one SQLite pass: " + ", ".join(f"{t} {s:.3f} s" for t, s in scans.items()) + f"; in all {sum(scans.values()):.3f} s")
    decode = decode_floor(trace, args.repeat)
    print(f"typed decode of every event of {trace.stat().st_size / 1e6:.1f} MB: {decode:.3f} s")

    if args.msprof:
        (pandas, pandas_rss), (advisor, advisor_rss) = imports.values()
        for label, data, speed_up, read in (("~180 MB DB export", DB_PROFILE, 20, sum(scans.values())),
                                            ("157.5 MB trace", TRACE_PROFILE, 40, decode)):
            (msprof,) = time_both_tools(data, "advisor", args.msprof, 1)["msprof-analyze advisor all"]
            print(f"{label}: msprof-analyze {msprof[0]:.2f} s, {msprof[1]:.0f} MiB; target ≤ {msprof[0] / speed_up:.2f} s "
                  f"({speed_up}×) and ≤ {msprof[1] / 4:.0f} MiB; floors (import + read): pandas {pandas + read:.2f} s, "
                  f"{pandas_rss:.0f} MiB; advisor's imports {advisor + read:.2f} s, {advisor_rss:.0f} MiB")
    print(f"load after the runs: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
