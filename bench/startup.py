"""Start-up time of the commands that read no profile: wall time (median of --repeat runs) and the heavy libraries
each one imported.

    .venv/bin/python bench/startup.py                   # this checkout
    .venv/bin/python bench/startup.py --source /tmp/old # another checkout (e.g. `git archive OLD | tar -x -C /tmp/old`)

Each run is a fresh interpreter running the command line as the `advisor` program does (``from advisor.cli import
main``), with ``--source`` first on sys.path; the interpreter's own start-up (``python -c pass``) is shown too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pandas", "pyarrow", "numpy", "matplotlib", "durable_rules")
COMMANDS = [["--version"], ["--help"], ["diagnose", "--help"], ["rules", "list"]]
_RUN = """
import atexit, json, sys
sys.path.insert(0, {source!r})
atexit.register(lambda: sys.__stderr__.write("LOADED " + json.dumps([m for m in {heavy!r} if m in sys.modules]) + "\\n"))
sys.argv = ["advisor", *sys.argv[1:]]
from advisor.cli import main
main()
"""


def timed(arguments: list[str], source: Path, repeat: int) -> tuple[float, list[str]]:
    times, loaded = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _RUN.format(source=str(source), heavy=HEAVY), *arguments],
                              capture_output=True, text=True, cwd=source, check=False)
        times.append(time.perf_counter() - start)
        loaded = json.loads(next(line for line in done.stderr.splitlines() if line.startswith("LOADED "))[7:])
    return statistics.median(times), loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    bare = statistics.median(_bare() for _ in range(options.repeat))
    print(f"source: {options.source}; Python {sys.version.split()[0]}; median of {options.repeat} runs")
    print(f"| command | wall (s) | heavy libraries imported |\n|---|---:|---|\n| `python -c pass` | {bare:.3f} | |")
    for arguments in COMMANDS:
        seconds, loaded = timed(arguments, options.source.resolve(), options.repeat)
        print(f"| `advisor {' '.join(arguments)}` | {seconds:.3f} | {', '.join(loaded) or 'none'} |")


def _bare() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
