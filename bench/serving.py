"""Time advisor on a long vLLM serving trace against the time the trace took to record (issue 27).

    python bench/serving.py                         # 1,000 engine iterations, graphs on and eager, median of 3
    python bench/serving.py --iterations 200 --repeat 1 --keep

Each trace is written by the serving fixtures of ``tests/inference_shapes.py`` in the shape vLLM's profiler leaves on
disk (one gzip Kineto file): one prefill, then ``--iterations - 1`` batch-1 decodes — on piecewise HIP graphs with
~25 ms of host Python before each replay (``vllm_graph_decode_host_bound``, an MI300X) or with every kernel launched
eagerly (``vllm_eager_decode``, an H100). The recorded span is the trace's own: the last event's end minus the first
event's start, in its µs timestamps. ``advisor diagnose DIR --format json -o FILE`` runs under GNU time (wall time,
peak RSS; median of ``--repeat`` runs) after one unmeasured run on a small trace fills the rule-book cache, and the
iterations it found are read from the report's ``summary.phases``. Traces go to ``bench/data/`` (ignored by git) and
are deleted afterwards unless ``--keep``; a kept trace of the same size is reused.
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the fixtures import their neighbours by bare name
import inference_shapes  # noqa: E402

Builder = Callable[..., tuple[Path, "inference_shapes.Truth"]]
VARIANTS: dict[str, Builder] = {"graphs on (HIP graphs, host-bound)": inference_shapes.vllm_graph_decode_host_bound,
                                "eager (enforce_eager, launch-bound)": inference_shapes.vllm_eager_decode}


class _Event(msgspec.Struct):
    ph: str = ""
    ts: float | None = None
    dur: float = 0.0


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]  # noqa: N815 (Kineto's key)


def trace_stats(directory: Path) -> tuple[int, int, float]:
    """(bytes on disk, events, recorded span in s) of the trace files in ``directory``."""
    size, events, first, last = 0, 0, float("inf"), float("-inf")
    for path in sorted(directory.glob("*.pt.trace.json.gz")):
        size += path.stat().st_size
        with gzip.open(path, "rb") as raw:
            trace = msgspec.json.decode(raw.read(), type=_Trace)
        events += len(trace.traceEvents)
        timed = [e for e in trace.traceEvents if e.ts is not None]
        first = min(first, min(e.ts for e in timed))
        last = max(last, max(e.ts + e.dur for e in timed))
    return size, events, (last - first) / 1e6


def measure(command: list[str]) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS MiB, exit code, stderr) of one run: GNU time if present, else this process's clock
    and its children's peak RSS (the largest child so far, so only a bound)."""
    if Path("/usr/bin/time").exists():
        result = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True)
        wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", result.stderr)
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
        hours, minutes, seconds = (float(g or 0) for g in wall.groups())
        return hours * 3600 + minutes * 60 + seconds, int(rss.group(1)) / 1024, result.returncode, result.stderr
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, result.returncode, result.stderr


def found_phases(report: Path) -> dict[str, int]:
    """The iterations per phase that advisor's JSON report found (``summary.phases``), {} without a report."""
    if not report.exists():
        return {}
    return {p["phase"]: p["iterations"] for p in json.loads(report.read_text())["summary"].get("phases") or []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--advisor", default=str(Path(sys.executable).with_name("advisor")))
    parser.add_argument("--iterations", type=int, default=1000, help="engine iterations: one prefill, then decodes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the traces in bench/data/ (and reuse kept ones)")
    args = parser.parse_args()

    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, {len(os.sched_getaffinity(0))} cores, "
          f"Python {platform.python_version()}, ADVISOR_JOBS={os.environ.get('ADVISOR_JOBS', '(all cores)')}")
    compileall.compile_dir(HERE.parent / "advisor", quiet=1)
    with tempfile.TemporaryDirectory() as scratch:  # fills the rule-book cache, unmeasured
        inference_shapes.vllm_eager_decode(Path(scratch) / "warm", decodes=4)
        subprocess.run([args.advisor, "diagnose", str(Path(scratch) / "warm"), "--format", "json", "-o",
                        str(Path(scratch) / "warm.json")], capture_output=True, check=False)

    rows, problems = [], []
    for label, builder in VARIANTS.items():
        data = HERE / "data" / f"serving-{builder.__name__}-{args.iterations}"
        if not (args.keep and any(data.glob("*.pt.trace.json.gz"))):
            shutil.rmtree(data, ignore_errors=True)
            start = time.perf_counter()
            builder(data, decodes=args.iterations - 1)
            print(f"built {data.name} in {time.perf_counter() - start:.1f} s", flush=True)
        size, events, span = trace_stats(data)
        runs, phases = [], {}
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as out:
                report = Path(out) / "report.json"
                runs.append(measure([args.advisor, "diagnose", str(data), "--format", "json", "-o", str(report)]))
                phases = found_phases(report)
            print(f"  {label}: {runs[-1][0]:.2f} s, {runs[-1][1]:.0f} MiB, exit {runs[-1][2]}", flush=True)
        wall = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        found = sum(phases.values())
        shown = " + ".join(f"{n} {p}" for p, n in phases.items()) or "none"
        rows.append(f"| {label} | {args.iterations:,} | {size / 1e6:.1f} MB | {events:,} | {span:.2f} | {wall:.2f} | "
                    f"{rss:.0f} | {runs[-1][2]} | {found:,} ({shown}) | {wall / span:.2f} |")
        if found != args.iterations or any(r[2] for r in runs):
            problems.append(f"{label}: exit {[r[2] for r in runs]}, found {found} of {args.iterations} iterations; "
                            f"stderr tail:\n{runs[-1][3][-2000:]}")
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)

    print("| trace | iterations | size (gzip) | events | recorded span (s) | advisor wall (s, median) | "
          "peak RSS (MiB) | exit | iterations found | wall / span |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    print("\n".join(rows))
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)


if __name__ == "__main__":
    main()
