"""PyTorch profiler (Kineto) traces as an input format: ``*.pt.trace.json[.gz]`` files, or ``.json[.gz]`` files whose
start is one, one per rank, numbered from the rank each records (distributedInfo). SGLang writes one file per stage of
a rank (``<prefix>-TP-<r>-EXTEND.trace.json.gz``, ``-DECODE``): those of one rank are read as one rank, each
iteration taking its phase from its file."""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from advisor.ingest.ascend import OUTPUT_DIR, Reader
from advisor.ingest.ascendformat import is_rank_dir
from advisor.ingest.gpu import attach_nccl_waits, read_gpu_rank, read_gpu_stages
from advisor.ingest.kineto import rank_hint
from advisor.ingest.model import Coverage, InputFormat, Layout, RankData, RankDir
from advisor.ingest.sniff import trace_problem

KINETO_FORMAT = "pytorch-kineto"
TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
_SNIFF_BYTES = 64 << 10


def _rank_at(path: Path, is_dir: bool) -> Path | None:
    """``path`` when it is a PyTorch trace: by its name, or by its content."""
    return path if not is_dir and (path.name.endswith(TRACE_SUFFIXES) or _looks_like_kineto(path)) else None


_KINETO_KEYS = (b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"')
_KINETO_CATEGORIES = (b'"cpu_op"', b'"cuda_runtime"', b'"kernel"', b'"user_annotation"', b'"python_function"',
                      b'"Operator"', b'"Runtime"', b'"Kernel"', b'"ProfilerStep#')


def _looks_like_kineto(path: Path) -> bool:
    """A .json[.gz] file outside Ascend output whose start is a PyTorch profiler trace: Kineto's header keys, or
    traceEvents holding its event categories (files are named freely in the field, e.g. rank-0.json.gz), or a bare
    array of Chrome trace events as the legacy autograd profiler writes (the reader says why it cannot use one)."""
    if not path.name.endswith((".json", ".json.gz")) or path.parent.name == OUTPUT_DIR or is_rank_dir(path.parent):
        return False
    if not path.is_file():  # a FIFO or a device named *.json is not read
        return False
    try:
        with (gzip.open(path) if path.name.endswith(".gz") else path.open("rb")) as handle:
            head = handle.read(_SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return False
    start = head.lstrip()
    if start.startswith(b"["):
        return b'"ph"' in head and b'"ts"' in head
    if not start.startswith(b"{"):
        return False
    return any(key in head for key in _KINETO_KEYS) or (
        b'"traceEvents"' in head and any(category in head for category in _KINETO_CATEGORIES))


# SGLang's per-stage trace of one tensor-parallel rank, and the phase each stage holds
STAGE_FILE = re.compile(r"^(?P<prefix>.+)-TP-(?P<tp>\d+)-(?P<stage>EXTEND|PREFILL|MIXED|DECODE)\.trace\.json(\.gz)?$")
STAGE_PHASES = {"EXTEND": "prefill", "PREFILL": "prefill", "MIXED": "mixed", "DECODE": "decode"}


def stage_files(path: Path) -> list[tuple[str, Path]]:
    """(phase, file) of each per-stage trace of the rank ``path`` is one of, in stage order (prefill first); [] when
    ``path`` is not a per-stage trace."""
    found = STAGE_FILE.match(path.name)
    if found is None:
        return []
    order = list(STAGE_PHASES)
    siblings = []
    for candidate in sorted(path.parent.iterdir()):
        other = STAGE_FILE.match(candidate.name)
        if other and (other["prefix"], other["tp"]) == (found["prefix"], found["tp"]) and candidate.is_file():
            siblings.append((order.index(other["stage"]), STAGE_PHASES[other["stage"]], candidate))
    return [(phase, file) for _order, phase, file in sorted(siblings, key=lambda s: (s[0], s[2].name))]


def _layout(found: list[Path], _path: Path, base: Path) -> Layout:
    """One rank per trace, and one per group of per-stage traces (the group's first file stands for it)."""
    ranks, grouped = [], set()
    for trace in found:
        stage = STAGE_FILE.match(trace.name)
        if stage is not None:
            key = (trace.parent, stage["prefix"], stage["tp"])
            if key in grouped:
                continue
            grouped.add(key)
            trace = stage_files(trace)[0][1]
        ranks.append(RankDir(trace, trace.parent, None))
    return Layout(format=KINETO_FORMAT, ranks=ranks, base=base, warnings=[])


def _read(found: RankDir, base: Path, coverage: Coverage, _survey: bool) -> RankData | None:
    reader = Reader(base, coverage)
    stages = stage_files(found.path)
    if not stages:
        return reader.read(found.path, read_gpu_rank)
    data = reader.read(found.path, lambda _path, warnings: read_gpu_stages(stages, warnings))
    if data is not None:
        coverage.read.extend(reader.shown(path) for _phase, path in stages if path != found.path)
    return data


def _finish(found: list[RankData], layout: Layout, coverage: Coverage) -> list[RankData]:
    """The traces read, numbered from the rank each records (a missing or repeated one gets the next free number),
    in rank order, with NCCL waits matched across them."""
    reader = Reader(layout.base, coverage)
    for rank in found:
        if rank.kineto is not None and rank.kineto.truncation is not None:
            reader.partly_read(rank.path, rank.kineto.truncation)
    numbers, notes = number_traces([rank.rank for rank in found])
    coverage.warnings.extend(f"{reader.shown(found[index].path)}: {why}" for index, why in notes)
    for rank, number in zip(found, numbers):
        rank.rank = number
    found.sort(key=lambda r: r.rank)
    attach_nccl_waits(found)
    return found


def number_traces(recorded: list[int]) -> tuple[list[int], list[tuple[int, str]]]:
    """The rank of each trace read (in the order found) from the one it records (-1: none): a missing or repeated one
    gets the next free number. Returns the numbers and, for each renumbered trace, (its index, why) to warn with."""
    numbers = list(recorded)
    taken: set[int] = set()
    renumber = []
    for index, rank in enumerate(recorded):
        if rank < 0 or rank in taken:
            renumber.append(index)
        else:
            taken.add(rank)
    notes = []
    for index in renumber:
        number = next(n for n in range(len(recorded) + len(taken) + 1) if n not in taken)
        why = "records no rank" if recorded[index] < 0 else f"repeats rank {recorded[index]}"
        if recorded[index] >= 0 or len(recorded) > 1:
            notes.append((index, f"{why} (distributedInfo); numbered rank {number}"))
        numbers[index] = number
        taken.add(number)
    return numbers, notes


KINETO = InputFormat(
    platforms={KINETO_FORMAT: "gpu"},
    described="PyTorch profiler traces (a *.pt.trace.json[.gz] file, or a directory of them, one per rank)",
    what="PyTorch trace(s)",
    rank_at=_rank_at,
    layout=_layout,
    read=_read,
    finish=_finish,
    rank_hint=rank_hint,
    not_one=trace_problem,
)
