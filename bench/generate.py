"""Generate a large Ascend cluster profile for benchmarks from the real two-rank fixture.

Each generated rank is a copy of a real rank directory whose kernel_details.csv is repeated
``--kernel-copies`` times (same step, same columns, same quirks: CRLF, trailing TABs, quoted shapes) and
whose trace_view.json array holds its events ``--trace-copies`` times (2.2 MB each, so 450 copies make a
1 GB trace), so the work scales linearly while every file keeps its real format.

    python bench/generate.py --ranks 8 --kernel-copies 200 --trace-copies 10 bench/data/cluster-8x200
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "ascend-level1-2ranks"


def generate(target: Path, ranks: int, kernel_copies: int, trace_copies: int = 1) -> Path:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for rank in range(ranks):
        source = SOURCE / f"rank{rank % 2}_ascend_pt"
        rank_dir = target / f"node{rank // 8}_{3000 + rank}_20250109070000{rank:03d}_ascend_pt"
        shutil.copytree(source, rank_dir)
        for info in rank_dir.glob("profiler_info_*.json"):
            info.rename(rank_dir / f"profiler_info_{rank}.json")
        kernels = rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        header, _, body = kernels.read_bytes().partition(b"\r\n")
        kernels.write_bytes(header + b"\r\n" + body * kernel_copies)
        trace = rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        events = trace.read_bytes().strip()[1:-1]
        with trace.open("wb") as handle:
            handle.write(b"[")
            for copy in range(trace_copies):
                handle.write(events if copy == 0 else b"," + events)
            handle.write(b"]")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--kernel-copies", type=int, default=200)
    parser.add_argument("--trace-copies", type=int, default=1)
    args = parser.parse_args()
    path = generate(args.target, args.ranks, args.kernel_copies, args.trace_copies)
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    print(f"{path}: {args.ranks} ranks, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
