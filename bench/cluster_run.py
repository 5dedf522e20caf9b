"""Time advisor and msprof-analyze on generated clusters of 8 … 512 ranks (bench/cluster.py), in the same run.

    python bench/cluster_run.py --msprof /tmp/msprof/bin/msprof-analyze               # 8, 32, 128, 512 ranks
    python bench/cluster_run.py --ranks 8 32 --big 8x83                               # + 8 ranks of ~184 MB

For each size: advisor as users run it (triage above 64 ranks), advisor with every rank in depth (ADVISOR_DEEP=all,
what ``--deep all`` sets), and ``msprof-analyze advisor all -d DIR``. Wall time and the peak RSS of the whole process
tree come from GNU time; advisor's main-process peak (its workers left out) from getrusage(RUSAGE_SELF) at exit,
through bench/peak.py. Clusters go to bench/data/ (ignored by git); their big files are hard links to one copy.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cluster import generate_cluster

HERE = Path(__file__).resolve().parent


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB of the process tree, exit code) under GNU time."""
    result = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True,
                            env={**os.environ, **(env or {})})
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", result.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    hours, minutes, seconds = (float(g or 0) for g in wall.groups())
    if result.returncode not in (0, 3):
        print(result.stderr[-2000:], file=sys.stderr)
    return hours * 3600 + minutes * 60 + seconds, int(rss.group(1)) / 1024, result.returncode


def advisor_run(data: Path, deep: str) -> tuple[float, float, float, int]:
    """(wall s, tree peak MiB, main-process peak MiB, exit) of `advisor diagnose DATA -f json -o …`."""
    with tempfile.TemporaryDirectory() as out:
        peak = Path(out) / "peak"
        wall, rss, code = measure([sys.executable, str(HERE / "peak.py"), str(peak), "diagnose", str(data), "-f", "json",
                                   "-o", str(Path(out) / "report.json")], env={"ADVISOR_DEEP": deep})
        main = int(peak.read_text()) / 1024 if peak.exists() else float("nan")
    return wall, rss, main, code


def msprof_run(msprof: str, data: Path) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as out:
        result = measure([msprof, "advisor", "all", "-d", str(data), "-o", out])
    shutil.rmtree(data / "cluster_analysis_output", ignore_errors=True)  # msprof writes into the input
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="*", default=[8, 32, 128, 512])
    parser.add_argument("--msprof", default=shutil.which("msprof-analyze"))
    parser.add_argument("--big", default=None, help="RANKSxTRACE_COPIES: also a cluster of big ranks (8x83: ~184 MB each)")
    parser.add_argument("--no-deep", action="store_true", help="skip the deep-all runs")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}, "
          f"ADVISOR_JOBS={os.environ.get('ADVISOR_JOBS', '(all cores)')}, load {os.getloadavg()[0]:.1f}", flush=True)
    warm = generate_cluster(HERE / "data" / "cluster-warm", 2)
    advisor_run(warm, "auto")  # fills the rule book's cache
    print("| ranks | size | tool | wall (s) | peak RSS, all processes (MiB) | peak RSS, main process (MiB) | exit |")
    print("|---:|---:|---|---:|---:|---:|---:|", flush=True)
    sizes = [(n, 1) for n in args.ranks]
    if args.big:
        ranks, copies = (int(v) for v in args.big.split("x"))
        sizes.append((ranks, copies))
    for ranks, copies in sizes:
        data = generate_cluster(HERE / "data" / f"cluster-{ranks}x{copies}", ranks, trace_copies=copies)
        size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) / 1e6
        modes = ["auto"] if args.no_deep or ranks <= 64 else ["auto", "all"]
        for deep in modes:
            wall, rss, main, code = advisor_run(data, deep)
            tool = "advisor" + (" (triage)" if ranks > 64 and deep == "auto" else " (every rank in depth)")
            print(f"| {ranks} | {size:,.0f} MB | {tool} | {wall:.2f} | {rss:.0f} | {main:.0f} | {code} |", flush=True)
        if args.msprof and copies == 1:
            wall, rss, code = msprof_run(args.msprof, data)
            print(f"| {ranks} | {size:,.0f} MB | msprof-analyze advisor all | {wall:.2f} | {rss:.0f} | – | {code} |", flush=True)


if __name__ == "__main__":
    main()
