"""Where the time of ``advisor diagnose`` on one Ascend rank with a large trace_view.json goes, and the trace read split.

    .venv/bin/python bench/trace_parts.py bench/data/cluster-1x10x71 --repeat 3
    .venv/bin/python bench/trace_parts.py bench/data/cluster-1x10x71 --source /tmp/trace-before   # another checkout
    .venv/bin/python bench/trace_parts.py bench/data/cluster-1x10x71 --msprof /tmp/msprof/bin/msprof-analyze

(``bench/generate.py``: ``generate(bench/data/cluster-1x10x71, 1, 10, 71)`` makes the 157.5 MB trace.)

Two parts, each the median of ``--repeat`` runs:

* **The run's phases**, wall time, in fresh processes running ``advisor diagnose PATH -f json -o FILE`` as the
  program does, with ADVISOR_JOBS=1 and =2: the interpreter's start-up (process launch to the first line of the
  wrapper), imports (the command line, then advisor.diagnose and the renderers, pandas and pyarrow with them), the
  rule book, the rank's trace_view.json (``read_trace``), the rank's other files, the rank's facts, the reduce, the
  rules, the report (built and rendered to JSON), and the rest (process exit, discovery, progress).
* **The trace read**, wall time, in this process, one core: the raw I/O (the file read block by block into fresh
  buffers, as the reader does), the msgspec decode of each block into the reader's event structs (minus the I/O),
  the Python pass that keeps the rows (``_collect``), building the tables (``read_trace`` minus the rest); and the
  reference: a typed msgspec decode of every event of the file at once (``msgspec.json.Decoder(list[Struct])`` of a
  Struct with only the fields the facts read, the file's bytes already in memory), with ``args`` left out and
  with ``args`` as ``msgspec.Raw``.

With ``--msprof``, first both tools on the profile, timed as bench/run.py times them (``time_both_tools``: wall and
peak RSS under GNU time, advisor as installed with ADVISOR_JOBS unset).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent


def reference_events(event: type[msgspec.Struct]) -> tuple[type, type]:
    """The reference decode's events: the reader's own event struct (the fields the facts read, args kept raw) and the
    same fields without args."""
    fields = [(f.name, f.type, f.default) for f in msgspec.structs.fields(event) if f.name != "args"]
    return msgspec.defstruct("Minimal", fields, gc=False), event

_WRAPPER = r"""
import json, os, sys, time
began = time.time()
now = time.perf_counter
spent = {"start-up": began - float(os.environ["TRACE_PARTS_LAUNCH"])}
sys.path.insert(0, SOURCE)
mark = now()
from advisor.cli import main
import advisor.cli.program, advisor.cli.diagnose
spent["imports: command line"] = now() - mark
mark = now()
import advisor.diagnose, advisor.render, advisor.ingest.ascendformat, advisor.ingest.trace
spent["imports: diagnose (pandas, pyarrow)"] = now() - mark
modules = sys.modules  # (advisor.diagnose is also the name of a function of the package)
cli_diagnose, cluster, diagnose = modules["advisor.cli.diagnose"], modules["advisor.cluster"], modules["advisor.diagnose"]
ascend, ascendformat = modules["advisor.ingest.ascend"], modules["advisor.ingest.ascendformat"]

def timed(module, name, label):
    original = getattr(module, name)
    def wrapper(*args, **kwargs):
        mark = now()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + now() - mark
    setattr(module, name, wrapper)

timed(cli_diagnose, "load_book", "rule book")
timed(ascend, "read_trace", "trace_view.json")
timed(ascendformat, "read_rank", "rank read")
timed(cluster, "rank_facts", "facts: rank")
timed(cluster, "reduce_facts", "facts: reduce")
timed(diagnose, "run_cluster", "cluster run")
timed(diagnose, "analyse", "analyse")
timed(diagnose, "build_report", "report: build")
timed(cli_diagnose, "write_report", "report: render and write")
sys.argv = ["advisor", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
spent["other files"] = spent.pop("rank read") - spent["trace_view.json"]
spent["rules"] = spent.pop("analyse") - spent.pop("cluster run")
with open(os.environ["TRACE_PARTS_OUT"], "w") as handle:
    json.dump(spent, handle)
"""

PHASES = ["start-up", "imports: command line", "imports: diagnose (pandas, pyarrow)", "rule book", "trace_view.json",
          "other files", "facts: rank", "facts: reduce", "rules", "report: build", "report: render and write"]


def run_phases(profile: Path, source: Path, jobs: int) -> dict[str, float]:
    """The phases of one ``advisor diagnose`` run (seconds), with ``total`` and ``rest`` (exit, discovery, …)."""
    with tempfile.TemporaryDirectory() as out:
        found = Path(out) / "phases.json"
        env = {**os.environ, "ADVISOR_JOBS": str(jobs), "TRACE_PARTS_OUT": str(found)}
        env["TRACE_PARTS_LAUNCH"] = repr(time.time())
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _WRAPPER.replace("SOURCE", repr(str(source))), "diagnose", str(profile),
                        "-f", "json", "-o", str(Path(out) / "report.json")], env=env, cwd=source, check=False,
                              capture_output=True, text=True)
        total = time.perf_counter() - start
        if not found.exists():
            raise SystemExit(f"the run failed:\n{done.stderr}")
        spent = json.loads(found.read_text())
    spent["rest"] = total - sum(spent.values())
    spent["total"] = total
    return spent


def trace_split(trace: Path, source: Path, repeat: int) -> dict[str, float]:
    """The trace read of ``source``'s reader on one core, split (see the module's docstring)."""
    sys.path.insert(0, str(source))
    from advisor.ingest import jsonstream, trace as reader
    from advisor.ingest.jsonstream import Cut
    from advisor.runoptions import RunOptions, reading

    def raw_io() -> None:
        with trace.open("rb") as handle:
            while True:
                buffer = bytearray(jsonstream.BLOCK_BYTES + 1)
                if not handle.readinto(memoryview(buffer)[1:]):
                    break

    def decode() -> None:
        with trace.open("rb") as handle:
            for _events, _dropped in reader._blocks(handle, Cut()):
                pass

    def decode_and_keep() -> None:
        rows = reader._Rows()
        with trace.open("rb") as handle:
            for events, _dropped in reader._blocks(handle, Cut()):
                reader._collect(events, rows)

    def whole() -> None:
        with reading(RunOptions(jobs=1)):
            reader.read_trace(trace, [])

    data = trace.read_bytes()
    without_args, with_args_event = reference_events(reader._Event)
    minimal = msgspec.json.Decoder(list[without_args], strict=False)
    with_args = msgspec.json.Decoder(list[with_args_event], strict=False)
    count = len(minimal.decode(data))

    def once(function) -> float:
        gc.collect()
        start = time.perf_counter()
        function()
        return time.perf_counter() - start

    runs = []  # each repeat times the four steps in turn; the parts are differences within one repeat
    for _ in range(repeat):
        io, decoded, kept, total = once(raw_io), once(decode), once(decode_and_keep), once(whole)
        runs.append({"raw I/O": io, "msgspec decode": decoded - io, "Python pass (_collect)": kept - decoded,
                     "tables": total - kept, "read_trace, one core": total,
                     "reference: typed decode, no args": once(lambda: minimal.decode(data)),
                     "reference: typed decode, args raw": once(lambda: with_args.decode(data))})
    return {"events": count, **{name: statistics.median(run[name] for run in runs) for name in runs[0]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="a generated one-rank profile (bench/generate.py)")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--msprof", help="msprof-analyze, to time both tools on the profile first (one run each)")
    args = parser.parse_args()
    source, profile = args.source.resolve(), args.profile.resolve()
    if args.msprof:
        from run import time_both_tools

        print(f"load {os.getloadavg()[0]:.2f}\n| tool | wall (s) | peak RSS (MiB) | exit |\n|---|---:|---:|---:|")
        with tempfile.TemporaryDirectory() as scratch:
            advisor = Path(scratch) / "advisor"  # the program, run from --source
            advisor.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(source)!r})\n"
                               "from advisor.cli import main\nmain()\n")
            advisor.chmod(0o755)
            for name, runs in time_both_tools(profile, str(advisor), args.msprof, 1).items():
                print(f"| {name} | {runs[0][0]:.2f} | {runs[0][1]:.0f} | {runs[0][2]} |")
    trace = next(profile.rglob("trace_view.json"))
    print(f"source: {source}; {trace.stat().st_size / 1e6:.1f} MB trace; Python {sys.version.split()[0]}; "
          f"median of {args.repeat} runs; load {os.getloadavg()[0]:.2f}")
    columns = {}
    for jobs in (1, 2):
        runs = [run_phases(profile, source, jobs) for _ in range(args.repeat)]
        columns[jobs] = {name: statistics.median(run[name] for run in runs) for name in [*PHASES, "rest", "total"]}
    print("| phase | ADVISOR_JOBS=1 (s) | ADVISOR_JOBS=2 (s) |\n|---|---:|---:|")
    for name in [*PHASES, "rest", "total"]:
        print(f"| {name} | {columns[1][name]:.3f} | {columns[2][name]:.3f} |")
    split = trace_split(trace, source, args.repeat)
    print(f"\ntrace read, one core ({split.pop('events'):,} events):\n| part | s |\n|---|---:|")
    for name, seconds in split.items():
        print(f"| {name} | {seconds:.3f} |")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
