"""Time advisor and msprof-analyze advisor on the same generated profiles, in the same run.

    python bench/run.py                       # default sizes; msprof-analyze found on PATH or --msprof
    python bench/run.py --msprof /path/to/venv/bin/msprof-analyze --repeat 3

Reports wall time and peak RSS (GNU time) per tool and size, median of --repeat runs. The profiles are
made by bench/generate.py under bench/data/ (ignored by git). Both tools run as installed: advisor's
bytecode is compiled first (``pip install`` does that for msprof-analyze) and one unmeasured run fills its
rule-book cache; advisor uses every core it may run on (``ADVISOR_JOBS``), as it does for users.
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from generate import generate

HERE = Path(__file__).resolve().parent
SIZES = [(2, 1, 1), (8, 50, 1), (8, 200, 10), (1, 10, 90)]  # (ranks, kernel_details copies, trace_view copies)


def measure(command: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of one run under GNU time."""
    result = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", result.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    hours, minutes, seconds = (float(g or 0) for g in wall.groups())
    return hours * 3600 + minutes * 60 + seconds, int(rss.group(1)) / 1024, result.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--advisor", default=str(Path(sys.executable).with_name("advisor")))
    parser.add_argument("--msprof", default=shutil.which("msprof-analyze"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, {len(os.sched_getaffinity(0))} cores, "
          f"Python {platform.python_version()}, ADVISOR_JOBS={os.environ.get('ADVISOR_JOBS', '(all cores)')}")
    compileall.compile_dir(HERE.parent / "advisor", quiet=1)
    warm_up = generate(HERE / "data" / "cluster-2x1x1", 2, 1, 1)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([args.advisor, "diagnose", str(warm_up), "-o", str(Path(out) / "report.json")], capture_output=True, check=False)
    print("| profile | size (trace_view) | tool | wall (s, median) | peak RSS (MiB) | exit |")
    print("|---|---:|---|---:|---:|---:|")
    for ranks, copies, trace_copies in SIZES:
        data = generate(HERE / "data" / f"cluster-{ranks}x{copies}x{trace_copies}", ranks, copies, trace_copies)
        trace_mb = sum(p.stat().st_size for p in data.rglob("trace_view.json")) / 1e6
        size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) / 1e6
        for name, runs in time_both_tools(data, args.advisor, args.msprof, args.repeat).items():
            wall = statistics.median(r[0] for r in runs)
            rss = statistics.median(r[1] for r in runs)
            label = f"{ranks} ranks, kernels ×{copies}, trace ×{trace_copies}"
            print(f"| {label} | {size:.0f} MB ({trace_mb:.0f} MB) | {name} | {wall:.2f} | {rss:.0f} | {runs[-1][2]} |")


def time_both_tools(data: Path, advisor: str, msprof: str | None, repeat: int) -> dict[str, list[tuple]]:
    """``repeat`` measured runs (``measure``) of advisor, and of msprof-analyze advisor all when given, on ``data``."""
    tools = {"advisor": lambda out: [advisor, "diagnose", str(data), "-o", str(out / "report.json")]}
    if msprof:
        tools["msprof-analyze advisor all"] = lambda out: [msprof, "advisor", "all", "-d", str(data), "-o", str(out)]
    found = {}
    for name, command in tools.items():
        runs = []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as out:
                runs.append(measure(command(Path(out))))
            shutil.rmtree(data / "cluster_analysis_output", ignore_errors=True)  # msprof writes into the input
        found[name] = runs
    return found


if __name__ == "__main__":
    main()
