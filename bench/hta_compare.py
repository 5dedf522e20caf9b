"""advisor's GPU figures against Holistic Trace Analysis' on the same PyTorch traces, side by side, with timings.

Writes the traces of tests/test_hta_agreement.py (and, with --steps, a larger job) under bench/data/hta/, runs
HTA's temporal breakdown and communication–computation overlap and advisor's `gpu` facts on each, and prints
a Markdown table (percentages per rank, the largest difference, wall time of each tool in this process).

    make crosscheck                                # installs HTA into .venv
    .venv/bin/python bench/hta_compare.py --steps 200
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from builders import GpuJob, write_gpu_job  # noqa: E402
from test_hta_agreement import JOBS, advisor_figures, hta_figures  # noqa: E402

MEASURES = ("idle", "compute", "non_compute", "overlap")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=0, help="also time a 2-rank job with this many steps")
    parser.add_argument("--out", type=Path, default=HERE / "data" / "hta")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    jobs = dict(JOBS)
    if args.steps:
        jobs[f"{args.steps} steps, exposed NCCL"] = GpuJob(ranks=2, steps=args.steps, nccl_us=3000.0, syncs=1)
    print("| trace | rank | idle % advisor / HTA | compute % | non-compute % | overlap % | max diff (pp) | advisor s | HTA s |")
    print("|---|---:|---|---|---|---|---:|---:|---:|")
    for name, job in jobs.items():
        directory = args.out / name.replace(" ", "-").replace(",", "")
        shutil.rmtree(directory, ignore_errors=True)
        write_gpu_job(directory, job)
        started = time.perf_counter()
        ours = advisor_figures(directory)
        ours_s = time.perf_counter() - started
        started = time.perf_counter()
        theirs = hta_figures(directory)
        theirs_s = time.perf_counter() - started
        for rank in sorted(ours):
            cells, worst = [], 0.0
            for measure in MEASURES:
                a, h = ours[rank][measure], theirs[rank][measure]
                if a is None or h != h:
                    cells.append("– / –")
                    continue
                worst = max(worst, abs(a - h))
                cells.append(f"{a:.2f} / {h:.2f}")
            print(f"| {name} | {rank} | {' | '.join(cells)} | {worst:.2f} | {ours_s:.2f} | {theirs_s:.2f} |")


if __name__ == "__main__":
    main()
