"""Generate an Ascend cluster of any size from the real two-rank fixture, ranks differing as in a real job.

Rank r is a copy of the fixture's rank r % 2 (every file in its real format: CRLF CSVs, the 2.2 MB single-line
trace_view.json, communication.json and communication_matrix.json), about 2.5 MB (operator_details.csv, which
neither tool's advisor reads, is left out), with what makes ranks of one job differ rewritten:

* ``profiler_info_{r}.json`` and a directory ``node{r // 8}_{pid}_{timestamp}_ascend_pt`` (capture times
  milliseconds apart, so discovery sees one job);
* groups of 8 ranks form one communicator (``group_name_{r // 8}``, a data-parallel group listed in
  ``profiler_metadata.json`` ``parallel_group_info`` with its global ranks); its hash replaces the fixture's in
  communication.json and communication_matrix.json, and the matrix's local ranks are renumbered to the rank's own;
* step_trace_time.csv: Computing, Communication(Not Overlapped) and Free vary by a few percent from rank to rank
  (a fixed pseudo-random sequence), with outliers: one rank computes 25 % more (the straggler every other rank
  of its group waits for: its collectives' Wait Time is cut to a tenth), one idles three times as long;
* communication.json: Wait Time (and Idle Time) scaled by the same per-rank factor as exposed communication.

``kernel_copies`` repeats kernel_details.csv's rows and ``trace_copies`` trace_view.json's events (2.2 MB each)
to make big ranks; unchanged large files are hard links to one copy unless ``copy=True``.

    python bench/cluster.py bench/data/cluster-512 --ranks 512
    python bench/cluster.py bench/data/big-8 --ranks 8 --trace-copies 83   # 8 × ~184 MB
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "ascend-level1-2ranks"
FIXTURE_GROUP = "17522688603477080586"
GROUP_SIZE = 8
LEFT_OUT = {"operator_details.csv"}
_START = datetime(2025, 1, 9, 7, 0, 0)


def group_hash(communicator: str) -> str:
    """The communicator hash of communication files (the same function as advisor.ingest.groups, kept here so the
    generator does not import advisor)."""
    high = low = 0
    for char in communicator:
        high = (high * 29 + ord(char)) & 0xFFFFFFFF
        low = (low * 131 + ord(char)) & 0xFFFFFFFF
    return str((high << 32) | low)


def outliers(ranks: int) -> dict[str, int]:
    """Which ranks the generator makes different: the slow (straggler) rank and the idle one."""
    return {"slow": (ranks * 3) // 7, "idle": ranks // 5 if ranks // 5 != (ranks * 3) // 7 else ranks - 1}


def generate_cluster(target: Path, ranks: int, *, kernel_copies: int = 1, trace_copies: int = 1, seed: int = 17,
                     copy: bool = False) -> Path:
    """Write ``ranks`` rank directories under ``target`` (replaced if it exists) and return ``target``."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shared = target.parent / f".{target.name}.shared"  # the big unchanged files once (hard-linked into the ranks)
    if shared.exists():
        shutil.rmtree(shared)
    shared.mkdir()
    big: dict[tuple[int, str], Path] = {}
    for source_rank in (0, 1):
        out = SOURCE / f"rank{source_rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        kernels = shared / f"kernel_details.{source_rank}.csv"
        header, _, body = (out / "kernel_details.csv").read_bytes().partition(b"\r\n")
        kernels.write_bytes(header + b"\r\n" + body * kernel_copies)
        trace = shared / f"trace_view.{source_rank}.json"
        events = (out / "trace_view.json").read_bytes().strip()[1:-1]
        with trace.open("wb") as handle:
            handle.write(b"[")
            for index in range(trace_copies):
                handle.write(events if index == 0 else b"," + events)
            handle.write(b"]")
        big[(source_rank, "kernel_details.csv")] = kernels
        big[(source_rank, "trace_view.json")] = trace
    chosen = outliers(ranks)
    noise = random.Random(seed)
    for rank in range(ranks):
        _write_rank(target, rank, ranks, big, chosen, noise, copy)
    shutil.rmtree(shared)  # the ranks keep their links
    return target


def _write_rank(target: Path, rank: int, ranks: int, big: dict, chosen: dict[str, int], noise: random.Random,
                copy: bool) -> None:
    source_rank = rank % 2
    source = SOURCE / f"rank{source_rank}_ascend_pt"
    stamp = (_START + timedelta(milliseconds=rank)).strftime("%Y%m%d%H%M%S%f")[:17]
    rank_dir = target / f"node{rank // GROUP_SIZE}_{3000 + rank}_{stamp}_ascend_pt"
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    group, local = rank // GROUP_SIZE, rank % GROUP_SIZE
    members = list(range(group * GROUP_SIZE, min((group + 1) * GROUP_SIZE, ranks)))
    communicator = f"group_name_{group}"
    hashed = group_hash(communicator)
    slow_rank = chosen["slow"]
    compute = 1.0 + noise.uniform(-0.02, 0.02) + (0.25 if rank == slow_rank else 0.0)
    exposed = 1.0 + noise.uniform(-0.03, 0.03)
    free = (1.0 + noise.uniform(-0.05, 0.05)) * (3.0 if rank == chosen["idle"] else 1.0)
    # in the slow rank's group the others wait for it: its own waits shrink
    wait = exposed * (0.1 if rank == slow_rank else 1.0)

    info_source = next(source.glob("profiler_info_*.json"))
    info = json.loads(info_source.read_text())
    info["rank_id"] = rank
    (rank_dir / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=4))
    metadata = json.loads((source / "profiler_metadata.json").read_text())
    metadata["parallel_group_info"] = {communicator: {"group_name": "dp", "group_rank": local, "global_ranks": members}}
    (rank_dir / "profiler_metadata.json").write_text(json.dumps(metadata, indent=4))

    for path in sorted((source / "ASCEND_PROFILER_OUTPUT").iterdir()):
        name = path.name
        if name in LEFT_OUT:
            continue
        destination = out / name
        if (source_rank, name) in big:
            _link(big[(source_rank, name)], destination, copy)
        elif name == "step_trace_time.csv":
            destination.write_bytes(_step_trace(path.read_bytes(), compute, exposed, free))
        elif name == "communication.json":
            destination.write_text(_communication(path.read_text(), hashed, wait))
        elif name == "communication_matrix.json":
            destination.write_text(_matrix(path.read_text(), hashed, source_rank, local))
        else:
            _link(path, destination, copy)


def _link(source: Path, destination: Path, copy: bool) -> None:
    if not copy:
        try:
            os.link(source, destination)
            return
        except OSError:
            pass
    shutil.copyfile(source, destination)


def _step_trace(content: bytes, compute: float, exposed: float, free: float) -> bytes:
    newline = b"\r\n" if b"\r\n" in content else b"\n"
    lines = content.rstrip(newline).split(newline)
    header = lines[0].decode().split(",")
    column = {name: i for i, name in enumerate(header)}
    rows = []
    for line in lines[1:]:
        values = line.decode().split(",")
        number = {name: float(values[i]) if values[i] else 0.0 for name, i in column.items() if name != "Step"}
        computing = number["Computing"] * compute
        not_overlapped = number["Communication(Not Overlapped)"] * exposed
        idle = number["Free"] * free
        overlapped = number.get("Overlapped", 0.0)
        updated = {"Computing": computing, "Communication(Not Overlapped)": not_overlapped, "Free": idle,
                   "Communication": not_overlapped + overlapped, "Stage": computing + not_overlapped + idle - number.get("Bubble", 0.0),
                   "Communication(Not Overlapped and Exclude Receive)": not_overlapped}
        rows.append(",".join(values[i] if name == "Step" else repr(round(updated.get(name, number[name]), 3))
                             for name, i in column.items()))
    return newline.join([lines[0], *(r.encode() for r in rows)]) + newline


def _communication(text: str, hashed: str, wait: float) -> str:
    document = json.loads(text.replace(FIXTURE_GROUP, hashed))
    for step in document.values():
        for ops in step.values():
            for op_name, op in (ops.items() if isinstance(ops, dict) else ()):
                times = op.get("Communication Time Info") if isinstance(op, dict) else None
                if not times or op_name == "Total Op Info":
                    continue
                elapse = times.get("Elapse Time(ms)", 0.0)
                transit = times.get("Transit Time(ms)", 0.0)
                waited = min(times.get("Wait Time(ms)", 0.0) * wait, max(elapse - transit, 0.0))
                times["Wait Time(ms)"] = waited
                times["Idle Time(ms)"] = max(elapse - transit - waited, 0.0)
    return json.dumps(document)


def _matrix(text: str, hashed: str, source_local: int, local: int) -> str:
    """The fixture rank's links (from its local rank 0 or 1) renumbered so that they start at ``local``."""
    swap = {source_local: local, local: source_local}

    def renumber(key: str) -> str:
        found = re.fullmatch(r"(\d+)-(\d+)", key)
        if not found:
            return key
        src, dst = (int(v) for v in found.groups())
        return f"{swap.get(src, src)}-{swap.get(dst, dst)}"

    document = json.loads(text.replace(FIXTURE_GROUP, hashed))
    for step in document.values():
        for kind, ops in step.items():
            if isinstance(ops, dict):
                step[kind] = {op: {renumber(k): v for k, v in links.items()} if isinstance(links, dict) else links
                              for op, links in ops.items()}
    return json.dumps(document)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--kernel-copies", type=int, default=1)
    parser.add_argument("--trace-copies", type=int, default=1)
    parser.add_argument("--copy", action="store_true", help="copy every file instead of hard-linking the big ones")
    args = parser.parse_args()
    path = generate_cluster(args.target, args.ranks, kernel_copies=args.kernel_copies, trace_copies=args.trace_copies,
                            copy=args.copy)
    sizes = [sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) for d in sorted(path.glob("*_ascend_pt"))]
    print(f"{path}: {args.ranks} ranks, {sum(sizes) / 1e6:.1f} MB ({sizes[0] / 1e6:.2f} MB per rank); outliers "
          f"{outliers(args.ranks)}", file=sys.stderr)


if __name__ == "__main__":
    main()
