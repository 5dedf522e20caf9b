"""One rank's facts: everything that needs only the rank's own tables, computed where the rank is read.

``rank_facts`` turns a RankData into a RankFacts: the rank's final facts (steps, breakdown, operators, kernel
sequences, memory, host, idle) plus the small tables the cross-rank step (``facts.reduce``) needs — the
communication ops and their traffic, the matrix's links and the communicators they show (the reduce summarises every
rank's in one pass), the MatMul→collective pairs that become MC2 candidates once every rank's groups are known, a GPU
rank's NCCL kernels — and a RankMeta, the rank's identity and metadata without its tables. It is what one task
returns (in a forked worker or a Dask worker), so it must pickle and stay small.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor.facts.communication import matrix_members, op_traffic, peer_waits, transit_from_bandwidth
from advisor.facts.context import core_counts_of, device_entry, hardware_from_header
from advisor.facts.gpu import analysis_window, gpu_summary
from advisor.facts.host import (
    OPTIMIZER_STEP,
    RUNTIME_NAMES,
    ZERO_GRAD,
    api_calls,
    compile_calls,
    dataloader_calls,
    dataloader_summary,
    host_summary,
    matching,
    sync_calls,
)
from advisor.facts.idle import attribute_idle, spans, step_outliers
from advisor.facts.memory import (
    MAX_TIMES_LISTED,
    allocator_series,
    reserved_drops,
    reserved_unused_at_peak,
    timeline,
    top_allocators,
)
from advisor.facts.models import (
    AllocationFact,
    ApiFact,
    BreakdownFact,
    ChainFact,
    ContentionFact,
    DataLoaderFact,
    Fact,
    GpuFact,
    HostFact,
    IdleFact,
    MemoryFact,
    OperatorFact,
    SequenceFact,
    StepFact,
)
from advisor.facts.operators import (
    compute_kernels,
    in_steps,
    misaligned_axis,
    operator_stats,
    operator_stats_from_statistic,
)
from advisor.facts.sequences import (
    decomposed_chains,
    device_timeline,
    kernel_pairs,
    matmul_overlap_share,
    mc2_masks,
    mc2_pairs,
)
from advisor.facts.steps import (
    RATIO_COLUMNS,
    TIME_COLUMNS,
    clean_step_rows,
    mean_step,
    step_breakdown,
    steps_from_overlap,
)
from advisor.facts.windows import inside, kernel_step_windows, profiler_step_windows
from advisor.ingest.gpu import nccl_collectives
from advisor.ingest.kinetosteps import launch_times, step_windows
from advisor.ingest.model import RankData
from advisor.intervals import intersect, length, merged, subtract, union
from advisor.usercontext import UserContext

Shown = Callable[[Path], str]
Columns = dict[str, np.ndarray]  # a small table as its columns: pickles and stacks far faster than a DataFrame

_STEP_COLUMNS = "Computing,Communication(Not Overlapped),Free,Communication,Overlapped,Bubble,Preparing"
_KERNEL_COLUMNS = "Step Id,Type,Accelerator Core,Duration(us),Block Dim,Input Shapes,Input Data Types,aic_*_ratio,aiv_*_ratio"
_STATISTIC_COLUMNS = "OP Type,Core Type,Count,Total Time(us),Max Time(us)"
# What a GPU rank's stand-in for each Ascend file was computed from, in its *.pt.trace.json.
_KINETO_SOURCES = {
    "step_trace_time.csv": "ProfilerStep#N windows; kernel, gpu_memcpy, gpu_memset events by launch correlation",
    "kernel_details.csv": "kernel, gpu_memcpy, gpu_memset events: name, ts, dur, args.stream, args.correlation",
    "memory_record.csv": "[memory] instants: Total Allocated, Total Reserved",
    "trace_view.json": "cuda_runtime calls, cpu_op events, kernels by correlation",
    "communication.json": "NCCL kernels matched across ranks: transit = the fastest rank's duration, wait = the rest",
}


@dataclass
class RankMeta:
    """A rank without its tables: who it is, where its files are, and the small documents the profile-wide facts
    read (profiler_info, profiler_metadata, the device's info.json, the capture settings of a PyTorch trace)."""

    rank: int
    path: Path
    output_dir: Path
    platform: str = "ascend"
    export: str = "text"
    stand_ins: dict[str, Path] = field(default_factory=dict)
    profiler_info: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    device_info: dict[str, Any] = field(default_factory=dict)
    device_id: int | None = None
    hardware_hint: str | None = None  # the chip family its kernel_details header tells, if any
    kineto_path: Path | None = None  # a PyTorch trace's file, its GPU and capture settings
    kineto_device_name: str | None = None
    kineto_compute_capability: str | None = None
    kineto_settings: dict[str, bool] | None = None
    info_file: Path | None = None  # its first profiler_info*.json
    device_info_file: Path | None = None  # its first PROF_*/device_*/info.json.*

    def file(self, name: str) -> Path:
        """The file the table of the text export file ``name`` was read from."""
        return self.stand_ins.get(name, self.output_dir / name)

    @classmethod
    def of(cls, rank: RankData) -> RankMeta:
        """The identity and documents of a rank that was read."""
        kineto = rank.kineto
        info = sorted(rank.path.glob("profiler_info*.json")) if rank.platform != "gpu" else []
        device = sorted(rank.path.glob("PROF_*/device_*/info.json.*")) if rank.platform != "gpu" else []
        header = rank.kernels.header if rank.kernels is not None else rank.kernel_header
        return cls(rank=rank.rank, path=rank.path, output_dir=rank.output_dir, platform=rank.platform, export=rank.export,
                   stand_ins=dict(rank.stand_ins), profiler_info=rank.profiler_info, metadata=rank.metadata,
                   device_info=rank.device_info, device_id=rank.device_id,
                   hardware_hint=hardware_from_header(header) if header is not None else None,
                   kineto_path=kineto.path if kineto is not None else None,
                   kineto_device_name=kineto.device_name if kineto is not None else None,
                   kineto_compute_capability=kineto.compute_capability if kineto is not None else None,
                   kineto_settings=kineto.settings if kineto is not None else None,
                   info_file=info[0] if info else None, device_info_file=device[0] if device else None)


@dataclass
class Mc2Pairs:
    """A rank's MatMul→collective pairs; which are MC2 candidates depends on every rank's communicator groups."""

    pairs: pd.DataFrame
    step_count: int
    step_time: float | None
    sources: list[str]


@dataclass
class RankFacts:
    """What one rank's task returns: its facts and the small tables the cross-rank facts need, never its tables.

    The rank's own facts keep their order in the report: ``head`` (steps, breakdown, operators, kernel sequences),
    then the MC2 candidates and the communication facts (computed by the reduce), then ``tail`` (memory, host,
    idle). ``deep`` is False for a rank read only for its cluster-level files (triage).
    """

    meta: RankMeta
    deep: bool = True
    head: list[Fact] = field(default_factory=list)
    tail: list[Fact] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    steps: set[int] = field(default_factory=set)
    breakdown: BreakdownFact | None = None
    needs_cores: bool = False  # its operator facts' Block Dim remainders wait for another rank's core counts
    mc2: Mc2Pairs | None = None
    ops: Columns | None = None  # communication ops, transit checked against Bandwidth Info
    traffic: Columns | None = None  # per op and transport: Bandwidth Info
    matrix: Columns | None = None  # communication_matrix.json's links
    matrix_groups: dict[str, tuple[frozenset[int], int | None]] = field(default_factory=dict)
    nccl: pd.DataFrame | None = None  # a GPU rank's NCCL kernels (matched across ranks by the reduce)
    recorded_rank: int | None = None  # a GPU trace's own rank (distributedInfo), before any renumbering
    truncation: str | None = None  # a GPU trace cut off mid-write: why only its start was read
    peer_waits: dict[int, float] | None = None  # HCCL Notify_Wait µs per step per group-local peer


def rank_facts(rank: RankData, show: Shown, user: UserContext | None, *, deep: bool = True) -> RankFacts:
    """The facts of one rank and what the cross-rank step needs from it (``deep`` False: the rank was read only for
    its cluster-level files)."""
    out = RankFacts(meta=RankMeta.of(rank), deep=deep)
    warnings = out.warnings
    steps = _step_facts(show, rank, warnings)
    out.head.extend(listed_steps(steps, rank.rank, warnings))
    out.steps = {s.step for s in steps if s.step is not None}
    if not steps and rank.trace is not None:  # no device breakdown, but the host recorded step boundaries
        out.steps.update(int(n) for n in profiler_step_windows(rank.trace.host)["step"])
    breakdown = out.breakdown = _rank_breakdown(rank.rank, steps)
    if breakdown is not None:
        out.head.append(breakdown)
    operators, out.needs_cores = _operator_facts(show, rank, steps, breakdown)
    out.head.extend(operators)
    sequences, out.mc2 = _sequence_facts(show, rank, steps, breakdown)
    out.head.extend(sequences)
    out.tail.extend(_memory_facts(show, rank, user))
    out.tail.extend(_host_facts(show, rank, breakdown))
    out.tail.extend(_idle_facts(show, rank, breakdown))
    if rank.platform == "gpu":
        if rank.kineto is not None and rank.kernels is not None:
            out.nccl = nccl_collectives(rank.kineto, rank.kernels.frame["step"])
        out.recorded_rank = rank.kineto.rank if rank.kineto is not None else None
        out.truncation = rank.kineto.truncation if rank.kineto is not None else None
    if rank.trace is not None and not rank.trace.notify.empty:
        windows = profiler_step_windows(rank.trace.host)
        out.peer_waits = peer_waits(inside(rank.trace.notify, windows), max(len(windows), 1))
    if rank.platform != "gpu" and rank.communication is not None:
        out.traffic = columns_of(rank.communication.traffic)
        out.ops = columns_of(transit_from_bandwidth(rank.communication.ops, rank.communication.traffic))
    if rank.matrix is not None and not rank.matrix.empty:
        out.matrix_groups = matrix_members(rank.matrix)
        out.matrix = columns_of(rank.matrix)
    return out


def columns_of(frame: pd.DataFrame) -> Columns:
    """A table as its columns (numpy arrays; text as Python strings)."""
    return {str(name): frame[name].to_numpy() for name in frame.columns}


def _source(show: Shown, rank: RankData, name: str, columns: str) -> str:
    """``file[columns]`` for a fact computed from the text-export file ``name`` (or what stands in for it)."""
    if rank.platform == "gpu":
        return f"{show(rank.file(name))}[{_KINETO_SOURCES[name]}]"
    return f"{show(rank.file(name))}[{columns}]"


def _step_facts(show: Shown, rank: RankData, warnings: list[str]) -> list[StepFact]:
    lanes = _steps_from_trace(rank)
    trace_path = show(rank.file("trace_view.json"))
    if rank.step_trace is not None:
        table, shown = rank.step_trace.frame, show(rank.step_trace.path)
        source = _source(show, rank, "step_trace_time.csv", _STEP_COLUMNS)
        if lanes is not None and not _agree(table, lanes):
            warnings.append(f"{shown}: Computing differs by more than 1 % from the Overlap Analysis lanes of {trace_path}")
    elif lanes is not None:
        table, shown = lanes, trace_path
        source = f"{trace_path}[Overlap Analysis: Computing, Communication(Not Overlapped), Communication, Free]"
        warnings.append(f"{show(rank.file('step_trace_time.csv'))} is missing; the step breakdown of "
                        f"rank {rank.rank} comes from the Overlap Analysis lanes of {trace_path}")
    else:
        return []
    rows, problems = clean_step_rows(table)
    warnings.extend(f"{shown}: {p}" for p in problems)
    facts = []
    for position, row in enumerate(step_breakdown(rows)):
        step = _int_or_none(row.get("step"))
        facts.append(
            StepFact(
                id=f"step:r{rank.rank}:{'s' + str(step) if step is not None else 'n' + str(position)}",
                sources=[source],
                rank=rank.rank,
                step=step,
                **_times(row),
                stage_us=_float_or_none(row.get("stage_us")),
            )
        )
    return facts


MAX_STEP_FACTS = 200


def listed_steps(steps: list[StepFact], rank: int, warnings: list[str]) -> list[StepFact]:
    """The step facts a rank lists: all of them up to MAX_STEP_FACTS, else the slowest, the fastest and evenly
    spaced ones (every figure of the rank, its breakdown included, still covers all its steps)."""
    if len(steps) <= MAX_STEP_FACTS:
        return steps
    times = [s.step_time_us for s in steps]
    keep = {int(i) for i in np.linspace(0, len(steps) - 1, MAX_STEP_FACTS - 2).round()}
    keep |= {times.index(max(times)), times.index(min(times))}
    warnings.append(f"rank {rank}: {len(steps):,} steps; the report lists {len(keep)} of them as step facts (the slowest, "
                    "the fastest and evenly spaced ones) — the breakdown and every other figure cover all of them")
    return [steps[i] for i in sorted(keep)]


def _steps_from_trace(rank: RankData) -> pd.DataFrame | None:
    """Step rows rebuilt from the trace's Overlap Analysis lanes, per kernel (else ProfilerStep) window."""
    if rank.trace is None or rank.trace.overlap.empty:
        return None
    windows = kernel_step_windows(rank.kernels.frame) if rank.kernels is not None else pd.DataFrame()
    if windows.empty:
        windows = profiler_step_windows(rank.trace.host)
    lanes = steps_from_overlap(rank.trace.overlap, windows)
    return lanes if not lanes.empty else None


def _agree(step_trace: pd.DataFrame, lanes: pd.DataFrame) -> bool:
    written, rebuilt = step_trace["computing_us"].sum(), lanes["computing_us"].sum()
    return abs(written - rebuilt) <= 0.01 * max(written, rebuilt, 1e-9)


def _rank_breakdown(rank: int, steps: list[StepFact]) -> BreakdownFact | None:
    if not steps:
        return None
    mean = mean_step(steps)
    return BreakdownFact(
        id=f"breakdown:r{rank}",
        sources=sorted({src for s in steps for src in s.sources}),
        scope="rank",
        rank=rank,
        steps=len(steps),
        dominant_overhead=mean["dominant_overhead"],
        **_times(mean),
    )


def _operator_facts(
    show: Shown, rank: RankData, steps: list[StepFact], breakdown: BreakdownFact | None
) -> tuple[list[OperatorFact], bool]:
    """The operator facts, and whether their Block Dim remainders wait for the core counts of another rank's device
    (this rank's device info.json is missing: the reduce fills them in, see ``facts.reduce``)."""
    step_numbers = [s.step for s in steps if s.step is not None]
    if rank.kernels is not None:
        kernels = in_steps(compute_kernels(rank.kernels.frame), step_numbers)
        step_count = len(step_numbers) or _distinct_steps(kernels)
        stats = operator_stats(kernels, step_count)
        source = _source(show, rank, "kernel_details.csv", f"Name,{_KERNEL_COLUMNS}")
    elif rank.op_statistic is not None:
        stats = operator_stats_from_statistic(rank.op_statistic.frame, len(steps))
        source = f"{show(rank.op_statistic.path)}[{_STATISTIC_COLUMNS}]"
    else:
        return [], False
    step_time = breakdown.step_time_us if breakdown is not None else None
    device = device_entry(rank.device_info)
    cores = core_counts_of(device)
    facts = []
    for row in stats.to_dict("records"):
        share_of_step = min(row["total_us_per_step"] / step_time, 1.0) if step_time else None
        facts.append(
            OperatorFact(
                id=f"operator:r{rank.rank}:{row['position']}",
                sources=[source],
                rank=rank.rank,
                op_type=str(row["type"]),
                accelerator_core=None if pd.isna(row["accelerator_core"]) else str(row["accelerator_core"]),
                type_source=row["type_source"],
                count_per_step=float(row["count_per_step"]),
                total_us_per_step=float(row["total_us_per_step"]),
                mean_us=float(row["mean_us"]),
                max_us=float(row["max_us"]),
                share_of_compute=min(float(row["share_of_compute"]), 1.0),
                share_of_step=share_of_step,
                position=int(row["position"]),
                **_pipe_fields(row, cores),
            )
        )
    return facts, not device


def _pipe_fields(row: dict, cores: dict[str, int | None]) -> dict:
    """Block Dim, its remainder over the core count where known, and the busiest PMU pipe of an operator type."""
    block_dim = _float_or_none(row.get("block_dim"))
    core_count = cores.get("vector" if str(row.get("accelerator_core")) == "AI_VECTOR_CORE" else "cube")
    pipe = row.get("busiest_pipe")
    ratio = _float_or_none(row.get("busiest_pipe_ratio"))
    return {
        "block_dim": int(block_dim) if block_dim is not None else None,
        "block_dim_remainder": int(block_dim) % core_count if block_dim is not None and core_count else None,
        "busiest_pipe": str(pipe).removesuffix("_ratio") if isinstance(pipe, str) else None,
        "busiest_pipe_ratio": min(ratio, 1.0) if ratio is not None else None,
        "input_dtypes": str(row["input_dtypes"]) if isinstance(row.get("input_dtypes"), str) else None,
        "misaligned_axis": misaligned_axis(str(row["type"]), row.get("input_shapes") if isinstance(row.get("input_shapes"), str) else None),
    }


def _sequence_facts(
    show: Shown, rank: RankData, steps: list[StepFact], breakdown: BreakdownFact | None
) -> tuple[list[Fact], Mc2Pairs | None]:
    if rank.kernels is None:
        return [], None
    step_numbers = [s.step for s in steps if s.step is not None]
    timeline = device_timeline(in_steps(rank.kernels.frame, step_numbers))
    if timeline.empty:
        return [], None
    step_count = len(step_numbers) or _distinct_steps(timeline)
    step_time = breakdown.step_time_us if breakdown is not None and breakdown.step_time_us > 0 else None
    facts: list[Fact] = []
    for index, row in enumerate(kernel_pairs(timeline, step_count).to_dict("records")):
        both = row["first_us_per_step"] + row["second_us_per_step"]
        facts.append(
            SequenceFact(
                id=f"sequence:r{rank.rank}:{index + 1}",
                sources=[_source(show, rank, "kernel_details.csv", "Step Id,Type,Start Time(us),Duration(us)")],
                rank=rank.rank,
                first_type=str(row["first_type"]),
                second_type=str(row["second_type"]),
                count_per_step=float(row["count_per_step"]),
                first_us_per_step=float(row["first_us_per_step"]),
                second_us_per_step=float(row["second_us_per_step"]),
                share_of_step=min(both / step_time, 1.0) if step_time else None,
            )
        )
    for row in decomposed_chains(timeline, step_count).to_dict("records"):
        facts.append(ChainFact(
            id=f"chain:r{rank.rank}:{row['pattern']}",
            sources=[_source(show, rank, "kernel_details.csv", "Step Id,Type,Start Time(us),Duration(us),Input Shapes")],
            rank=rank.rank, share_of_step=min(row["us_per_step"] / step_time, 1.0) if step_time else None, **row))
    overlap = matmul_overlap_share(timeline)
    if overlap is not None:
        facts.append(ContentionFact(id=f"contention:r{rank.rank}",
                                    sources=[_source(show, rank, "kernel_details.csv", "Type,Accelerator Core,Start Time(us),Duration(us)")],
                                    rank=rank.rank, matmul_overlap_share=overlap))
    mc2 = None
    if (rank.communication is not None and rank.platform != "gpu"  # MC2 candidates: the collective must carry the MatMul's data
            and any(mask.any() for mask in mc2_masks(timeline).values())):
        # (a GPU rank's collectives, matched from NCCL kernels, carry no traffic: no candidate)
        collectives = op_traffic(rank.communication.ops, rank.communication.traffic)
        source = [_source(show, rank, "kernel_details.csv", "Name,Type,Start Time(us),Duration(us),Input Shapes,Input Data Types"),
                  _source(show, rank, "communication.json", "Communication Bandwidth Info: Transit Size(MB)")]
        pairs = mc2_pairs(timeline, collectives)
        if not pairs.empty:
            mc2 = Mc2Pairs(pairs, step_count, step_time, source)
    return facts, mc2


def _memory_facts(show: Shown, rank: RankData, user: UserContext | None) -> list[Fact]:
    facts: list[Fact] = []
    if rank.memory_record is not None:
        component, series = allocator_series(rank.memory_record.frame)
        if not series.empty:
            windows, window_source = _memory_windows(show, rank)
            drops = inside(reserved_drops(series), windows, "timestamp_us")["timestamp_us"]
            unused, unused_ratio = reserved_unused_at_peak(series)
            line = timeline(series)
            records = rank.memory_record.frame
            app = records.loc[records["component"] == "APP", "reserved_mb"]
            sources = [_source(show, rank, "memory_record.csv", "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB)")]
            if not windows.empty:
                sources.append(window_source)
            hccl = None
            if rank.module_memory is not None:
                modules = rank.module_memory.frame
                hccl_rows = modules.loc[modules["component"] == "HCCL", "reserved_mb"]
                hccl = float(hccl_rows.max()) if hccl_rows.notna().any() else None
                sources.append(f"{show(rank.module_memory.path)}[Component,Total Reserved(MB)]")
            peak = float(app.max()) if app.notna().any() else float(series["reserved_mb"].max())
            capacity = user.model.device_memory_gb * 1024 if user and user.model and user.model.device_memory_gb else None
            if capacity:
                sources.append(user.model_source)
            facts.append(
                MemoryFact(
                    id=f"memory:r{rank.rank}",
                    sources=sources,
                    rank=rank.rank,
                    component=component,
                    peak_allocated_mb=_float_or_none(series["allocated_mb"].max()) or 0.0,
                    peak_reserved_mb=float(series["reserved_mb"].max()),
                    reserved_unused_mb=unused,
                    reserved_unused_ratio=min(unused_ratio, 1.0),
                    reorganisations=len(drops),
                    reorganisations_per_step=len(drops) / max(len(windows), 1),
                    reorganisation_times_us=[float(t) for t in drops.head(MAX_TIMES_LISTED)],
                    steps_observed=len(windows),
                    process_peak_reserved_mb=float(app.max()) if app.notna().any() else None,
                    hccl_reserved_mb=hccl,
                    capacity_mb=capacity,
                    peak_share_of_capacity=min(peak / capacity, 1.0) if capacity else None,
                    timeline_us=[float(t) for t in line["timestamp_us"]],
                    timeline_allocated_mb=[float(v) if v == v else 0.0 for v in line["allocated_mb"]],
                    timeline_reserved_mb=[float(v) for v in line["reserved_mb"]],
                )
            )
    if rank.operator_memory is not None:
        source = f"{show(rank.operator_memory.path)}[Name,Size(KB)]"
        for row in top_allocators(rank.operator_memory.frame).to_dict("records"):
            facts.append(
                AllocationFact(
                    id=f"allocation:r{rank.rank}:{row['position']}",
                    sources=[source],
                    rank=rank.rank,
                    op_name=str(row["name"]),
                    allocations=int(row["allocations"]),
                    allocated_mb=float(row["allocated_mb"]),
                    largest_mb=float(row["largest_mb"]),
                    share_of_allocated=min(float(row["share_of_allocated"]), 1.0),
                    position=int(row["position"]),
                )
            )
    return facts


def _memory_windows(show: Shown, rank: RankData) -> tuple[pd.DataFrame, str]:
    """The step windows allocator events are counted in, and their source. A PyTorch trace's [memory] events
    are host-side allocator calls, so its host ProfilerStep windows; on Ascend the device windows of the kernels."""
    if rank.platform == "gpu" and rank.trace is not None:
        windows = profiler_step_windows(rank.trace.host)
        if not windows.empty:
            return windows, f"{show(rank.file('trace_view.json'))}[ProfilerStep#N windows]"
    windows = kernel_step_windows(rank.kernels.frame) if rank.kernels is not None else pd.DataFrame()
    return windows, _source(show, rank, "kernel_details.csv", "Step Id,Start Time(us),Duration(us)")


def _host_facts(show: Shown, rank: RankData, breakdown: BreakdownFact | None) -> list[Fact]:
    if rank.trace is None:
        return []
    trace = rank.trace
    windows = profiler_step_windows(trace.host)
    path = show(rank.file("trace_view.json"))
    summary = host_summary(trace.host, trace.apis, trace.device, trace.launches, windows, RUNTIME_NAMES[rank.platform])
    step_time = breakdown.step_time_us if breakdown is not None else None
    if step_time is None and not windows.empty:  # no device breakdown: the host's ProfilerStep windows are the step
        step_time = float((windows["end"] - windows["start"]).mean()) or None
    facts: list[Fact] = [
        HostFact(id=f"host:r{rank.rank}", sources=[_source(show, rank, "trace_view.json", "CANN, Python, Ascend Hardware, HostToDevice")],
                 rank=rank.rank, steps=max(len(windows), 1), **summary,
                 gc_share_of_step=min(summary["gc_us_per_step"] / step_time, 1.0) if step_time else None,
                 optimizer_share_of_step=min(summary["optimizer_us_per_step"] / step_time, 1.0) if step_time else None)
    ]
    for row in api_calls(trace.host, windows).to_dict("records"):
        facts.append(ApiFact(id=f"api:r{rank.rank}:{row['name']}", sources=[f"{path}[{_host_process(rank)}: {row['name']}]"],
                             rank=rank.rank, name=row["name"], calls_per_step=float(row["calls_per_step"]),
                             us_per_step=float(row["us_per_step"])))
    loading = dataloader_summary(trace.host, windows)
    if loading is not None:
        share = min(loading["us_per_step"] / step_time, 1.0) if step_time else None
        facts.append(DataLoaderFact(id=f"dataloader:r{rank.rank}", sources=[f"{path}[{_host_process(rank)}: *DataLoader*]"],
                                    rank=rank.rank, share_of_step=share, **loading))
    if rank.kineto is not None and not rank.kineto.gpu.empty:
        facts.append(_gpu_fact(show, rank))
    return facts


def _idle_facts(show: Shown, rank: RankData, breakdown: BreakdownFact | None) -> list[IdleFact]:
    """Where the device's idle time per step goes (``facts.idle``). On a GPU the idle time is measured in the step
    windows of the breakdown; on Ascend it is the Overlap Analysis lane ``Free`` (torch_npu's own idle intervals)
    inside the ProfilerStep windows, else the device step windows without their kernels."""
    if rank.trace is None:
        return []
    trace, names = rank.trace, RUNTIME_NAMES[rank.platform]
    if rank.kineto is not None:
        gpu = rank.kineto.gpu
        if gpu.empty:  # a CPU-only trace: there is no device to be idle
            return []
        windows = step_windows(gpu, rank.kineto.runtime, rank.kineto.cpu)
        busy = merged(gpu.loc[gpu["kind"].isin(["compute", "communication"])])
        free = subtract(_window_set(windows), busy)
        copies = merged(gpu.loc[gpu["kind"] == "memory"])
        tasks = pd.DataFrame({"device_ts": gpu["ts"], "launch_ts": gpu["correlation"].map(launch_times(rank.kineto.runtime))})
        source = f"{show(rank.kineto.path)}[kernel, gpu_memcpy, gpu_memset, cuda_runtime, cpu_op]"
    else:
        kernels = rank.kernels.frame if rank.kernels is not None else pd.DataFrame()
        timed = {"start_us", "duration_us"} <= set(kernels.columns)  # a kernel table may lack Start Time
        busy = spans(kernels[["start_us", "duration_us"]].set_axis(["ts", "dur"], axis=1).dropna() if timed else pd.DataFrame())
        lanes = trace.overlap.loc[trace.overlap["lane"] == "Free"]
        device_windows = kernel_step_windows(kernels)
        windows = profiler_step_windows(trace.host) if not lanes.empty else device_windows
        if windows.empty:
            windows = device_windows if not device_windows.empty else profiler_step_windows(trace.host)
        free = subtract(_window_set(windows), busy) if lanes.empty else intersect(spans(lanes), _window_set(windows))
        copies = spans(trace.device.loc[matching(trace.device["task_type"].fillna(""), names.copy_task)])
        tasks = trace.launches
        source = _source(show, rank, "trace_view.json", "Overlap Analysis: Free; Python: DataLoader, GC; CANN: AscendCL")
    if windows.empty:
        return []
    apis = trace.apis
    host = {"dataloader": spans(dataloader_calls(trace.host)),
            "compile": spans(compile_calls(apis, names)),
            "allocator": spans(apis.loc[matching(apis["name"], names.allocator)]),
            "gc": spans(trace.host.loc[trace.host["cat"] == "GC"]),
            "optimizer": spans(trace.host.loc[matching(trace.host["name"], OPTIMIZER_STEP)]),
            "zero_grad": spans(trace.host.loc[matching(trace.host["name"], ZERO_GRAD)])}
    program_syncs, item_syncs, _allocator_syncs = sync_calls(apis, trace.host, names)  # the allocator's are its idle
    copies = union(np.concatenate([copies, spans(apis.loc[matching(apis["name"], names.copy_call)])]))

    def parts_of(idle: np.ndarray) -> dict[str, float]:
        return attribute_idle(idle, busy, host, spans(program_syncs), copies, tasks, spans(item_syncs))

    parts = parts_of(free)
    item_sync = parts.pop("item_sync")
    count = len(windows)
    step = breakdown.step_time_us if breakdown is not None else float((windows["end"] - windows["start"]).sum()) / count
    idle = length(free) / count
    per_step = {part: value / count for part, value in parts.items()}
    largest = max(per_step, key=lambda part: per_step[part]) if idle > 0 else None
    share = (lambda value, whole: min(value / whole, 1.0) if whole > 0 else 0.0)
    spread = step_outliers(windows, free, parts_of)
    if spread:
        spread["outlier_excess_share_of_step"] = share(spread["outlier_excess_us"], step)
    return [IdleFact(
        id=f"idle:r{rank.rank}", sources=[source], rank=rank.rank, steps=count, step_us=step, idle_us=idle,
        idle_share_of_step=share(idle, step), **{f"{part}_us": value for part, value in per_step.items()},
        **{f"{part}_share_of_step": share(value, step) for part, value in per_step.items()},
        largest_part=largest, largest_share_of_idle=share(per_step[largest], idle) if largest else 0.0,
        dataloader_share_of_idle=share(per_step["dataloader"], idle), item_sync_us=item_sync / count, **spread,
    )]


def _window_set(windows: pd.DataFrame) -> np.ndarray:
    """Step windows as a sorted interval set."""
    return union(windows[["start", "end"]].to_numpy(float))


def _host_process(rank: RankData) -> str:
    return "cpu_op" if rank.platform == "gpu" else "Python"


def _gpu_fact(show: Shown, rank: RankData) -> GpuFact:
    trace = rank.kineto
    assert trace is not None
    gpu, steps = analysis_window(trace.gpu, trace.runtime, trace.cpu)
    return GpuFact(id=f"gpu:r{rank.rank}", sources=[f"{show(trace.path)}[kernel, gpu_memcpy, gpu_memset, cuda_runtime]"],
                   rank=rank.rank, device=trace.device_name, steps=steps, **gpu_summary(gpu, trace.runtime, steps))


def _distinct_steps(kernels: pd.DataFrame) -> int:
    if "step" not in kernels:
        return 1
    return max(int(kernels["step"].dropna().nunique()), 1)


def _times(row) -> dict:
    """The time and ratio fields shared by step and breakdown facts, NaN mapped to None."""
    keys = ("step_time_us", *TIME_COLUMNS, *RATIO_COLUMNS)
    return {k: _float_or_none(row.get(k)) for k in keys}


def _float_or_none(value) -> float | None:
    if value is None or pd.isna(value):
        return None
    return max(float(value), 0.0)


def _int_or_none(value) -> int | None:
    if value is None or pd.isna(value):
        return None
    return int(value)

