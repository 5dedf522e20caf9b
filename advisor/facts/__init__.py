"""Facts: compute the fact families from a Profile (design §3)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from advisor.facts.cluster import (
    collective_stragglers,
    p2p_waits,
    pipeline_groups,
    pipelines_from_distributed_args,
    pipelines_from_p2p,
    rank_spreads,
    stage_layout,
    stage_spread,
)
from advisor.facts.communication import (
    communication_summary,
    link_summary,
    median_ratios,
    memberships,
    op_traffic,
    outside_waits,
    rank_ranges,
    transit_from_bandwidth,
    transport_summary,
)
from advisor.facts.context import context_fact, core_counts, infer_hardware
from advisor.facts.gpu import analysis_window, gpu_summary, launch_times, step_windows
from advisor.facts.hardware import nominal_bandwidth
from advisor.facts.host import RUNTIME_NAMES, api_calls, dataloader_calls, dataloader_summary, host_summary, sync_calls
from advisor.facts.idle import attribute_idle, spans
from advisor.facts.intervals import intersect, length, merged, subtract, union
from advisor.facts.memory import (
    MAX_TIMES_LISTED,
    allocator_series,
    reserved_drops,
    reserved_unused_at_peak,
    timeline,
    top_allocators,
)
from advisor.facts.models import (
    FACT_FAMILIES,
    AllocationFact,
    ApiFact,
    BottleneckFact,
    BreakdownFact,
    ChainFact,
    CommunicationFact,
    ContentionFact,
    ContextFact,
    DataLoaderFact,
    EnvironmentFact,
    Fact,
    GpuFact,
    HostFact,
    IdleFact,
    LayoutFact,
    LinkFact,
    Mc2Fact,
    MemoryFact,
    ModelFact,
    OperatorFact,
    PipelineFact,
    SequenceFact,
    SpreadFact,
    StepFact,
    StragglerFact,
    TransportFact,
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
    matmul_collective_pairs,
    matmul_overlap_share,
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
from advisor.ingest import Profile, RankData
from advisor.ingest.groups import groups_by_hash
from advisor.parallel import fork_map
from advisor.planners.hccl import DTYPE_BYTES, buffsize_mb
from advisor.planners.mc2 import plan_mc2
from advisor.planners.parallel import plan_parallel
from advisor.usercontext import UserContext

__all__ = [
    "FACT_FAMILIES",
    "AllocationFact",
    "BottleneckFact",
    "BreakdownFact",
    "CommunicationFact",
    "ContextFact",
    "DataLoaderFact",
    "EnvironmentFact",
    "Fact",
    "FactSet",
    "HostFact",
    "IdleFact",
    "MemoryFact",
    "ModelFact",
    "OperatorFact",
    "SpreadFact",
    "StepFact",
    "TransportFact",
    "extract_facts",
]

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


def _source(profile: Profile, rank: RankData, name: str, columns: str) -> str:
    """``file[columns]`` for a fact computed from the text-export file ``name`` (or what stands in for it)."""
    if rank.platform == "gpu":
        return f"{profile.shown(rank.file(name))}[{_KINETO_SOURCES[name]}]"
    return f"{profile.shown(rank.file(name))}[{columns}]"


@dataclass
class FactSet:
    """All facts of one profile, plus problems met while computing them."""

    facts: list[Fact] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def of(self, family: type[Fact]) -> list:
        return [f for f in self.facts if isinstance(f, family)]


def extract_facts(profile: Profile, user: UserContext | None = None) -> FactSet:
    """Compute every fact family this version knows from the profile's tables and what the user told."""
    out = FactSet()
    rank_breakdowns: list[BreakdownFact] = []
    step_numbers: set[int] = set()
    hardware = infer_hardware(profile)
    for facts, warnings, steps, breakdown in fork_map(lambda rank: _rank_facts(profile, rank, hardware, user),
                                                     profile.ranks):
        out.facts.extend(facts)
        out.warnings.extend(warnings)
        step_numbers.update(steps)
        if breakdown is not None:
            rank_breakdowns.append(breakdown)
    out.facts.extend(_link_facts(profile, hardware))
    if rank_breakdowns:
        out.facts.append(_profile_breakdown(rank_breakdowns))
    if len(rank_breakdowns) >= 2:
        out.facts.extend(_spread_facts(rank_breakdowns))
        out.facts.extend(_straggler_facts(profile, rank_breakdowns))
        out.facts.extend(_pipeline_facts(profile, rank_breakdowns))
    out.facts[:0] = [context_fact(profile, sorted(step_numbers)), *_environment_facts(profile, user)]
    if user is not None and user.model is not None:
        out.facts.insert(1, _model_fact(user))
        layout = _layout_fact(user, len(profile.ranks))
        if layout is not None:
            out.facts.insert(2, layout)
    return out


def _rank_facts(profile: Profile, rank: RankData, hardware: str | None, user: UserContext | None
                ) -> tuple[list[Fact], list[str], set[int], BreakdownFact | None]:
    """The facts of one rank (computed on its own core when there are several): facts, warnings, step
    numbers, and the rank's breakdown."""
    facts: list[Fact] = []
    warnings: list[str] = []
    steps = _step_facts(profile, rank, warnings)
    facts.extend(listed_steps(steps, rank.rank, warnings))
    step_numbers = {s.step for s in steps if s.step is not None}
    if not steps and rank.trace is not None:  # no device breakdown, but the host recorded step boundaries
        step_numbers.update(int(n) for n in profiler_step_windows(rank.trace.host)["step"])
    breakdown = _rank_breakdown(rank.rank, steps)
    if breakdown is not None:
        facts.append(breakdown)
    facts.extend(_operator_facts(profile, rank, steps, breakdown))
    facts.extend(_sequence_facts(profile, rank, steps, breakdown))
    facts.extend(_communication_facts(profile, rank, hardware))
    facts.extend(_memory_facts(profile, rank, user))
    facts.extend(_host_facts(profile, rank, breakdown))
    facts.extend(_idle_facts(profile, rank, breakdown))
    return facts, warnings, step_numbers, breakdown


def _step_facts(profile: Profile, rank: RankData, warnings: list[str]) -> list[StepFact]:
    lanes = _steps_from_trace(rank)
    trace_path = profile.shown(rank.file("trace_view.json"))
    if rank.step_trace is not None:
        table, shown = rank.step_trace.frame, profile.shown(rank.step_trace.path)
        source = _source(profile, rank, "step_trace_time.csv", _STEP_COLUMNS)
        if lanes is not None and not _agree(table, lanes):
            warnings.append(f"{shown}: Computing differs by more than 1 % from the Overlap Analysis lanes of {trace_path}")
    elif lanes is not None:
        table, shown = lanes, trace_path
        source = f"{trace_path}[Overlap Analysis: Computing, Communication(Not Overlapped), Communication, Free]"
        warnings.append(f"{profile.shown(rank.file('step_trace_time.csv'))} is missing; the step breakdown of "
                        f"rank {rank.rank} comes from the Overlap Analysis lanes of {trace_path}")
    else:
        return []
    rows, problems = clean_step_rows(table)
    warnings.extend(f"{shown}: {p}" for p in problems)
    facts = []
    for position, row in enumerate(step_breakdown(rows).to_dict("records")):
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
    mean = mean_step(pd.DataFrame([s.model_dump() for s in steps]))
    return BreakdownFact(
        id=f"breakdown:r{rank}",
        sources=sorted({src for s in steps for src in s.sources}),
        scope="rank",
        rank=rank,
        steps=len(steps),
        dominant_overhead=mean["dominant_overhead"],
        **_times(mean),
    )


def _profile_breakdown(ranks: list[BreakdownFact]) -> BreakdownFact:
    mean = mean_step(pd.DataFrame([b.model_dump() for b in ranks]))
    return BreakdownFact(
        id="breakdown:profile",
        sources=sorted({src for b in ranks for src in b.sources}),
        scope="profile",
        steps=max(b.steps for b in ranks),
        dominant_overhead=mean["dominant_overhead"],
        **_times(mean),
    )


def _pipeline_facts(profile: Profile, breakdowns: list[BreakdownFact]) -> list[PipelineFact]:
    """Compute per pipeline stage, the stages from parallel_group_info, else distributed_args, else P2P traffic."""
    compute = {b.rank: b.compute_us for b in breakdowns if b.rank is not None}
    metadata = {r.rank: r.metadata for r in profile.ranks}
    receives = _p2p_receives(profile)
    sources = sorted({profile.shown(r.path / "profiler_metadata.json") for r in profile.ranks if r.metadata}
                     | {src for b in breakdowns for src in b.sources})
    p2p_sources = sorted({f"{profile.shown(r.file('communication.json'))}[p2p: hcom_send/hcom_receive]"
                          for r in profile.ranks if r.communication is not None})
    table = pd.DataFrame([b.model_dump() for b in breakdowns if b.rank is not None])
    for grouping, found in (("parallel_group_info", pipeline_groups(metadata)),
                            ("distributed_args", pipelines_from_distributed_args(metadata)),
                            ("p2p", pipelines_from_p2p(receives.groupby("rank")["group"].agg(set).to_dict()))):
        layout = stage_layout([ranks for _, ranks in found], table)
        facts = []
        for name, ranks in found:
            spread = stage_spread(ranks, compute)
            if spread is not None:
                stage_of = layout["by_stage"]
                facts.append(PipelineFact(
                    id=f"pipeline:{name}", sources=sources + (p2p_sources if grouping == "p2p" else []),
                    group=name, grouping=grouping, rank=spread["slowest_rank"], **spread, **p2p_waits(receives, ranks),
                    pipeline_ranks=" → ".join(map(str, ranks)), stage_ranks=layout["stage_ranks"],
                    slowest_stage_ranks=", ".join(map(str, sorted(stage_of[spread["slowest_stage"]]))),
                    fastest_stage_ranks=", ".join(map(str, sorted(stage_of[spread["fastest_stage"]]))),
                    explains_rank_spread=layout["explains_rank_spread"]))
        if found:
            return facts
    return []


def _p2p_receives(profile: Profile) -> pd.DataFrame:
    """Per (rank, P2P group): wait per step in its receive ops, and the peer rank sharing that group."""
    frame = _group_waits(profile, "p2p", only=("hcom_receive", "hcom_batchsendrecv"))
    members = frame.groupby("group")["rank"].agg(list)
    frame["peer"] = [next((r for r in members[g] if r != rank), None) if len(members[g]) == 2 else None
                     for rank, g in zip(frame["rank"], frame["group"])]
    return frame


def _group_waits(profile: Profile, kind: str, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Per (rank, communicator group): µs per step waiting in its ``kind`` ops (only those whose names start with ``only``)."""
    rows = []
    for rank in profile.ranks:
        if rank.communication is None:
            continue
        ops = rank.communication.ops
        steps = max(int(ops["step"].nunique(dropna=False)), 1)
        chosen = ops.loc[ops["kind"] == kind]
        for group, group_ops in chosen.groupby("group", sort=True):
            counted = group_ops["op_name"].str.lower().str.startswith(only) if only else slice(None)
            rows.append({"rank": rank.rank, "group": str(group),
                         "wait_us": float(group_ops.loc[counted, "wait_ms"].sum()) * 1000 / steps})
    return pd.DataFrame(rows, columns=["rank", "group", "wait_us"])


def _spread_facts(breakdowns: list[BreakdownFact]) -> list[SpreadFact]:
    table = pd.DataFrame([b.model_dump() for b in breakdowns])
    sources = sorted({src for b in breakdowns for src in b.sources})
    return [
        SpreadFact(id=f"spread:{row['dimension']}", sources=sources, **row)
        for row in rank_spreads(table).to_dict("records")
    ]


def _operator_facts(
    profile: Profile, rank: RankData, steps: list[StepFact], breakdown: BreakdownFact | None
) -> list[OperatorFact]:
    step_numbers = [s.step for s in steps if s.step is not None]
    if rank.kernels is not None:
        kernels = in_steps(compute_kernels(rank.kernels.frame), step_numbers)
        step_count = len(step_numbers) or _distinct_steps(kernels)
        stats = operator_stats(kernels, step_count)
        source = _source(profile, rank, "kernel_details.csv", f"Name,{_KERNEL_COLUMNS}")
    elif rank.op_statistic is not None:
        stats = operator_stats_from_statistic(rank.op_statistic.frame, len(steps))
        source = f"{profile.shown(rank.op_statistic.path)}[{_STATISTIC_COLUMNS}]"
    else:
        return []
    step_time = breakdown.step_time_us if breakdown is not None else None
    cores = core_counts(profile, rank)
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
    return facts


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
    profile: Profile, rank: RankData, steps: list[StepFact], breakdown: BreakdownFact | None
) -> list[Fact]:
    if rank.kernels is None:
        return []
    step_numbers = [s.step for s in steps if s.step is not None]
    timeline = device_timeline(in_steps(rank.kernels.frame, step_numbers))
    if timeline.empty:
        return []
    step_count = len(step_numbers) or _distinct_steps(timeline)
    step_time = breakdown.step_time_us if breakdown is not None and breakdown.step_time_us > 0 else None
    facts: list[Fact] = []
    for index, row in enumerate(kernel_pairs(timeline, step_count).to_dict("records")):
        both = row["first_us_per_step"] + row["second_us_per_step"]
        facts.append(
            SequenceFact(
                id=f"sequence:r{rank.rank}:{index + 1}",
                sources=[_source(profile, rank, "kernel_details.csv", "Step Id,Type,Start Time(us),Duration(us)")],
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
            sources=[_source(profile, rank, "kernel_details.csv", "Step Id,Type,Start Time(us),Duration(us),Input Shapes")],
            rank=rank.rank, share_of_step=min(row["us_per_step"] / step_time, 1.0) if step_time else None, **row))
    overlap = matmul_overlap_share(timeline)
    if overlap is not None:
        facts.append(ContentionFact(id=f"contention:r{rank.rank}",
                                    sources=[_source(profile, rank, "kernel_details.csv", "Type,Accelerator Core,Start Time(us),Duration(us)")],
                                    rank=rank.rank, matmul_overlap_share=overlap))
    if rank.communication is not None:  # MC2 candidates: the collective must carry the MatMul's data
        known = {h: g for r in profile.ranks for h, g in groups_by_hash(r.metadata).items()}
        members = memberships({h: g.global_ranks for h, g in known.items()},
                              {r.rank: r.matrix for r in profile.ranks if r.matrix is not None})
        groups = {h: (known[h].name if h in known else None, members[h].size if h in members else None)
                  for h in set(known) | set(members)}
        collectives = op_traffic(rank.communication.ops, rank.communication.traffic)
        source = [_source(profile, rank, "kernel_details.csv", "Name,Type,Start Time(us),Duration(us),Input Shapes,Input Data Types"),
                  _source(profile, rank, "communication.json", "Communication Bandwidth Info: Transit Size(MB)")]
        for row in matmul_collective_pairs(timeline, step_count, collectives, groups).to_dict("records"):
            facts.append(_mc2_fact(rank.rank, row, step_time, source))
    return facts


def _mc2_fact(rank: int, row: dict, step_time: float | None, sources: list[str]) -> Mc2Fact:
    """An MC2 candidate of one MatMul shape, with the tile plan where the planner applies (MatmulAllReduce)."""
    matmul_us, comm_us, count = row["matmul_us"], row["comm_us"], row["count_per_step"]
    dims = {key: (int(row[key]) if row[key] is not None and not pd.isna(row[key]) else None) for key in ("m", "k", "n")}
    plan = None
    if row["pattern"] == "matmul_all_reduce" and all(dims.values()) and matmul_us > 0 and comm_us > 0:
        plan = plan_mc2(dims["m"], dims["k"], dims["n"], dtype=row["dtype"] or "fp16", matmul_us=matmul_us, comm_us=comm_us)
    gain = max(plan.predicted_gain_us, 0.0) * count if plan else min(matmul_us, comm_us) * count
    return Mc2Fact(
        id=f"mc2:r{rank}:{row['pattern']}:{'x'.join(str(dims[key]) for key in ('m', 'k', 'n'))}:{row['dtype']}",
        sources=sources,
        group=str(row["group"]),
        payload_mb=float(row["payload_mb"]),
        matmul_mb=float(row["matmul_mb"]),
        rank=rank,
        pattern=row["pattern"],
        count_per_step=float(count),
        matmul_us=float(matmul_us),
        comm_us=float(comm_us),
        dtype=row["dtype"],
        bound="communication" if comm_us > matmul_us else "compute",
        tiles=",".join(map(str, plan.tiles)) if plan else None,
        predicted_fused_us=plan.predicted_fused_us if plan else None,
        gain_us_per_step=float(gain),
        gain_share_of_step=min(gain / step_time, 1.0) if step_time else None,
        **dims,
    )


def _communication_facts(profile: Profile, rank: RankData, hardware: str | None) -> list[Fact]:
    """Per kind: where the collectives' time goes (transit checked against Bandwidth Info), and for collectives the
    wait for members of their groups that are not in the profile; per transport: traffic and bandwidth."""
    if rank.communication is None:
        return []
    traffic = rank.communication.traffic
    ops = transit_from_bandwidth(rank.communication.ops, traffic)
    step_count = max(int(ops["step"].nunique(dropna=False)), 1)
    facts: list[Fact] = []
    time_source = _source(profile, rank, "communication.json", "Communication Time Info")
    groups = {h: g.global_ranks for r in profile.ranks for h, g in groups_by_hash(r.metadata).items()}
    members = memberships(groups, {r.rank: r.matrix for r in profile.ranks if r.matrix is not None})
    mine = set(ops.loc[ops["kind"] == "collective", "group"])
    peers = {r.rank: transit_from_bandwidth(r.communication.ops.loc[r.communication.ops["group"].isin(mine)],
                                            r.communication.traffic)
             for r in profile.ranks if r.communication is not None and r.rank != rank.rank
             and r.communication.ops["group"].isin(mine).any()}
    outside = outside_waits(rank.rank, {rank.rank: ops, **peers}, {g: m.size for g, m in members.items()})
    profiled = {g: {rank.rank} | {r for r, o in peers.items() if (o["group"] == g).any()} for g in mine}
    known = [g for g in sorted(mine) if g in members]
    if not outside.empty and outside["outside_ms"].max() > 0:
        group = str(outside.sort_values(["outside_ms", "group"], ascending=[False, True]).iloc[0]["group"])
    else:
        group = max(known, key=lambda g: (members[g].size, g), default=None)
    sources = [time_source]
    if group is not None:
        sources.append(f"{profile.shown(rank.file('communication_matrix.json'))}[src-dst links]"
                       if members[group].global_ranks is None else
                       f"{profile.shown(rank.path / 'profiler_metadata.json')}[parallel_group_info]")
    for row in communication_summary(ops, step_count).to_dict("records"):
        collective = row["kind"] == "collective" and group is not None
        outside_us = float(outside["outside_ms"].sum()) * 1000 / step_count if row["kind"] == "collective" else 0.0
        facts.append(
            CommunicationFact(
                id=f"communication:r{rank.rank}:{row['kind']}",
                sources=sources if collective else [time_source],
                rank=rank.rank,
                kind=row["kind"],
                **{k: float(row[k]) for k in CommunicationFact.model_fields if k in row and k not in ("kind",)},
                group_size=members[group].size if collective else None,
                group_ranks_profiled=len(profiled[group]) if collective else None,
                missing_ranks=members[group].missing(profiled[group]) if collective else None,
                outside_wait_us=outside_us,
                outside_wait_share=min(outside_us / row["elapse_us"], 1.0) if row["elapse_us"] > 0 else 0.0,
            )
        )
    bandwidth_source = _source(profile, rank, "communication.json", "Communication Bandwidth Info")
    for row in transport_summary(traffic, step_count).to_dict("records"):
        nominal = nominal_bandwidth(hardware, row["transport"])
        facts.append(
            TransportFact(
                id=f"transport:r{rank.rank}:{row['transport']}",
                sources=[bandwidth_source],
                rank=rank.rank,
                transport=row["transport"],
                size_mb_per_step=float(row["size_mb_per_step"]),
                time_us_per_step=float(row["time_us_per_step"]),
                bandwidth_gbps=float(row["bandwidth_gbps"]),
                nominal_gbps=nominal,
                utilization=float(row["bandwidth_gbps"]) / nominal if nominal else None,
                ops_per_step=float(row["ops_per_step"]),
                small_op_share=float(row["small_op_share"]),
            )
        )
    return facts


def _straggler_facts(profile: Profile, breakdowns: list[BreakdownFact]) -> list[Fact]:
    """Per communicator seen on 2+ ranks: who the others wait for inside its collectives."""
    rows = _group_waits(profile, "collective")
    sources = {_source(profile, r, "communication.json", "Communication Time Info: Wait Time(ms)")
               for r in profile.ranks if r.communication is not None}
    known = {h: g for r in profile.ranks for h, g in groups_by_hash(r.metadata).items()}
    if rows.empty:
        return []
    members = memberships({h: g.global_ranks for h, g in known.items()},
                          {r.rank: r.matrix for r in profile.ranks if r.matrix is not None})
    mean_step = sum(b.step_time_us for b in breakdowns) / len(breakdowns)
    facts: list[Fact] = []
    for row in collective_stragglers(rows).to_dict("records"):
        group = known.get(row["group"])
        size = members[row["group"]].size if row["group"] in members else None
        # keyed on the communicator's hash: process-group names (dp, mp, …) repeat across communicators
        facts.append(StragglerFact(
            id=f"straggler:{row['group']}", sources=sorted(sources), group=group.name if group else row["group"],
            group_id=row["group"], communicator=group.communicator if group else None,
            group_ranks=rank_ranges(rows.loc[rows["group"] == row["group"], "rank"].tolist()),
            group_size=size if size and size >= 2 else None, ranks=row["ranks"], rank=row["rank"],
            straggler_wait_us=row["straggler_wait_us"], others_wait_us=row["others_wait_us"], lost_us=row["lost_us"],
            lost_share_of_step=min(row["lost_us"] / mean_step, 1.0) if mean_step > 0 else None,
            max_wait_rank=row["max_wait_rank"],
        ))
    return facts


def _link_facts(profile: Profile, hardware: str | None) -> list[Fact]:
    """Per-link traffic of every rank's communication_matrix.json, with the slow links measured against the median."""
    per_rank = []
    for rank in profile.ranks:
        if rank.matrix is None or rank.matrix.empty:
            continue
        groups = {h: (g.name, g.global_ranks) for h, g in groups_by_hash(rank.metadata).items()}
        summary = link_summary(rank.matrix, groups)
        if not summary.empty:
            per_rank.append(summary.assign(rank=rank.rank, source=f"{profile.shown(rank.file('communication_matrix.json'))}"
                                           "[Transport Type,Transit Size(MB),Transit Time(ms)]"))
    if not per_rank:
        return []
    links = pd.concat(per_rank, ignore_index=True)
    links["median_ratio"] = median_ratios(links["bandwidth_gbps"], links["transport"])
    facts: list[Fact] = []
    for row in links.to_dict("records"):
        nominal = nominal_bandwidth(hardware, row["transport"])
        facts.append(LinkFact(
            # keyed on the communicator's hash: process-group names (dp, mp, …) repeat across communicators
            id=f"link:r{row['rank']}:{row['group']}:{row['src_rank']}-{row['dst_rank']}:{row['transport']}",
            sources=[row["source"]], rank=row["rank"], group=str(row["group_name"]), src_rank=int(row["src_rank"]),
            dst_rank=int(row["dst_rank"]), ranks_are_global=bool(row["ranks_are_global"]), transport=row["transport"],
            size_mb_per_step=float(row["size_mb_per_step"]), time_us_per_step=float(row["time_us_per_step"]),
            bandwidth_gbps=float(row["bandwidth_gbps"]), nominal_gbps=nominal,
            utilization=float(row["bandwidth_gbps"]) / nominal if nominal else None,
            median_ratio=None if pd.isna(row["median_ratio"]) else float(row["median_ratio"]),
        ))
    return facts


def _memory_facts(profile: Profile, rank: RankData, user: UserContext | None) -> list[Fact]:
    facts: list[Fact] = []
    if rank.memory_record is not None:
        component, series = allocator_series(rank.memory_record.frame)
        if not series.empty:
            windows, window_source = _memory_windows(profile, rank)
            drops = inside(reserved_drops(series), windows, "timestamp_us")["timestamp_us"]
            unused, unused_ratio = reserved_unused_at_peak(series)
            line = timeline(series)
            records = rank.memory_record.frame
            app = records.loc[records["component"] == "APP", "reserved_mb"]
            sources = [_source(profile, rank, "memory_record.csv", "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB)")]
            if not windows.empty:
                sources.append(window_source)
            hccl = None
            if rank.module_memory is not None:
                modules = rank.module_memory.frame
                hccl_rows = modules.loc[modules["component"] == "HCCL", "reserved_mb"]
                hccl = float(hccl_rows.max()) if hccl_rows.notna().any() else None
                sources.append(f"{profile.shown(rank.module_memory.path)}[Component,Total Reserved(MB)]")
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
        source = f"{profile.shown(rank.operator_memory.path)}[Name,Size(KB)]"
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


def _memory_windows(profile: Profile, rank: RankData) -> tuple[pd.DataFrame, str]:
    """The step windows allocator events are counted in, and their source. A PyTorch trace's [memory] events
    are host-side allocator calls, so its host ProfilerStep windows; on Ascend the device windows of the kernels."""
    if rank.platform == "gpu" and rank.trace is not None:
        windows = profiler_step_windows(rank.trace.host)
        if not windows.empty:
            return windows, f"{profile.shown(rank.file('trace_view.json'))}[ProfilerStep#N windows]"
    windows = kernel_step_windows(rank.kernels.frame) if rank.kernels is not None else pd.DataFrame()
    return windows, _source(profile, rank, "kernel_details.csv", "Step Id,Start Time(us),Duration(us)")


def _host_facts(profile: Profile, rank: RankData, breakdown: BreakdownFact | None) -> list[Fact]:
    if rank.trace is None:
        return []
    trace = rank.trace
    windows = profiler_step_windows(trace.host)
    path = profile.shown(rank.file("trace_view.json"))
    summary = host_summary(trace.host, trace.apis, trace.device, trace.launches, windows, RUNTIME_NAMES[rank.platform])
    step_time = breakdown.step_time_us if breakdown is not None else None
    if step_time is None and not windows.empty:  # no device breakdown: the host's ProfilerStep windows are the step
        step_time = float((windows["end"] - windows["start"]).mean()) or None
    facts: list[Fact] = [
        HostFact(id=f"host:r{rank.rank}", sources=[_source(profile, rank, "trace_view.json", "CANN, Python, Ascend Hardware, HostToDevice")],
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
        facts.append(_gpu_fact(profile, rank))
    return facts


def _idle_facts(profile: Profile, rank: RankData, breakdown: BreakdownFact | None) -> list[IdleFact]:
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
        source = f"{profile.shown(rank.kineto.path)}[kernel, gpu_memcpy, gpu_memset, cuda_runtime, cpu_op]"
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
        copies = spans(trace.device.loc[trace.device["task_type"].fillna("").str.match(names.copy_task)])
        tasks = trace.launches
        source = _source(profile, rank, "trace_view.json", "Overlap Analysis: Free; Python: DataLoader, GC; CANN: AscendCL")
    if windows.empty:
        return []
    apis = trace.apis
    host = {"dataloader": spans(dataloader_calls(trace.host)),
            "compile": spans(apis.loc[apis["name"].str.match(names.compile)]),
            "allocator": spans(apis.loc[apis["name"].str.match(names.allocator)]),
            "gc": spans(trace.host.loc[trace.host["cat"] == "GC"])}
    program_syncs, item_syncs, _allocator_syncs = sync_calls(apis, trace.host, names)  # the allocator's are its idle
    parts = attribute_idle(free, busy, host, spans(program_syncs), copies, tasks, spans(item_syncs))
    item_sync = parts.pop("item_sync")
    count = len(windows)
    step = breakdown.step_time_us if breakdown is not None else float((windows["end"] - windows["start"]).sum()) / count
    idle = length(free) / count
    per_step = {part: value / count for part, value in parts.items()}
    largest = max(per_step, key=lambda part: per_step[part]) if idle > 0 else None
    share = (lambda value, whole: min(value / whole, 1.0) if whole > 0 else 0.0)
    return [IdleFact(
        id=f"idle:r{rank.rank}", sources=[source], rank=rank.rank, steps=count, step_us=step, idle_us=idle,
        idle_share_of_step=share(idle, step), **{f"{part}_us": value for part, value in per_step.items()},
        **{f"{part}_share_of_step": share(value, step) for part, value in per_step.items()},
        largest_part=largest, largest_share_of_idle=share(per_step[largest], idle) if largest else 0.0,
        dataloader_share_of_idle=share(per_step["dataloader"], idle), item_sync_us=item_sync / count,
    )]


def _window_set(windows: pd.DataFrame) -> np.ndarray:
    """Step windows as a sorted interval set."""
    return union(windows[["start", "end"]].to_numpy(float))


def _host_process(rank: RankData) -> str:
    return "cpu_op" if rank.platform == "gpu" else "Python"


def _gpu_fact(profile: Profile, rank: RankData) -> GpuFact:
    trace = rank.kineto
    assert trace is not None
    gpu, steps = analysis_window(trace.gpu, trace.runtime, trace.cpu)
    return GpuFact(id=f"gpu:r{rank.rank}", sources=[f"{profile.shown(trace.path)}[kernel, gpu_memcpy, gpu_memset, cuda_runtime]"],
                   rank=rank.rank, device=trace.device_name, steps=steps, **gpu_summary(gpu, trace.runtime, steps))


def _environment_facts(profile: Profile, user: UserContext | None) -> list[EnvironmentFact]:
    """ENV_VARIABLES of the first rank that recorded them (the same set on every rank), then the user's, which win."""
    values: dict[str, tuple[str, str]] = {}
    for rank in profile.ranks:
        variables = rank.metadata.get("ENV_VARIABLES")
        if isinstance(variables, dict) and variables:
            source = f"{profile.shown(rank.path / 'profiler_metadata.json')}[ENV_VARIABLES]"
            values = {str(k): (str(v), source) for k, v in variables.items() if isinstance(v, (str, int, float))}
            break
    if user is not None:
        values.update(user.env)
    return [
        EnvironmentFact(id=f"environment:{name}", sources=[source], name=name, value=value, is_set=bool(value.strip()),
                        number=_number(value))
        for name, (value, source) in sorted(values.items())
    ]


def _model_fact(user: UserContext) -> ModelFact:
    """The user's settings plus what follows from them (TP across nodes, activation size, HCCL buffer)."""
    settings = user.model
    tp, cards = settings.tensor_parallel, settings.cards_per_node
    activation = None
    if settings.micro_batch_size and settings.sequence_length and settings.hidden_size:
        dtype_bytes = DTYPE_BYTES.get(settings.dtype or "bf16", 2)
        activation = settings.micro_batch_size * settings.sequence_length * settings.hidden_size * dtype_bytes / (1 << 20)
    return ModelFact(
        id="model",
        sources=[user.model_source],
        **settings.model_dump(),
        tp_crosses_nodes=tp > cards if tp and cards else None,
        activation_mb=activation,
        hccl_buffsize_mb=buffsize_mb(settings.micro_batch_size, settings.sequence_length, settings.hidden_size,
                                     DTYPE_BYTES.get(settings.dtype or "bf16", 2)) if activation else None,
    )


def _layout_fact(user: UserContext, rank_count: int) -> LayoutFact | None:
    """The planner's layout for the model in --context, when its size, the device memory and cards per node are known."""
    settings = user.model
    if not (settings.parameters_billion and settings.device_memory_gb and settings.cards_per_node):
        return None
    degrees = (settings.tensor_parallel, settings.pipeline_parallel, settings.data_parallel)
    ranks = degrees[0] * degrees[1] * degrees[2] if all(degrees) else rank_count
    nodes = max(-(-ranks // settings.cards_per_node), 1)
    plan = plan_parallel(settings.parameters_billion, settings.device_memory_gb, settings.cards_per_node, nodes)
    layout = plan.layout
    current = (settings.tensor_parallel, settings.pipeline_parallel)
    return LayoutFact(
        id="layout",
        sources=[user.model_source],
        nodes=nodes,
        recommended_tp=layout.tp,
        recommended_pp=layout.pp,
        recommended_dp=layout.dp,
        zero1=layout.zero1,
        recompute=layout.recompute,
        fits=plan.fits,
        per_card_gb=plan.per_card_gb,
        plan=f"TP={layout.tp} PP={layout.pp} DP={layout.dp}" + (" ZeRO-1" if layout.zero1 else "") + (" recompute" if layout.recompute else ""),
        reasons="; ".join(plan.reasons),
        current_tp=current[0],
        current_pp=current[1],
        matches=(current == (layout.tp, layout.pp)) if all(current) else None,
    )


def _number(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


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
