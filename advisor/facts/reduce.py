"""The cross-rank step: from every rank's RankFacts (facts.rank) to the profile's FactSet.

Each rank was read and its own facts computed by one task; what depends on several ranks is computed here, once:
the communicator groups and their members (parallel_group_info, else the matrices), each rank's communication facts
(which compare its collectives with its peers' to tell waiting for members outside the capture), MC2 candidates
(which need the groups' names and sizes), a GPU job's NCCL waits (its collectives matched across ranks), the link,
spread, straggler and pipeline facts, the profile breakdown, the context and environment. No rank's tables are
needed: the tasks returned the small ones this uses.

``REDUCE_FAMILIES`` lists the cross-rank fact families in report order: those that lead the report (``lead``), those
computed for each rank and placed between its own head and tail facts (``rank``), those that end it (``end``). Each
extractor takes the ProfileScope (for a ``rank`` family, with ``rank`` set to the rank at hand).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from advisor.facts.cluster import (
    P2pActivity,
    collective_stragglers,
    matrix_peers,
    micro_batches,
    neighbour_text,
    open_ends,
    oriented,
    p2p_activity,
    p2p_waits,
    pipeline_groups,
    pipelines_from_distributed_args,
    pipelines_from_p2p,
    rank_spreads,
    schedule_bubble,
    stage_layout,
    stage_position,
    stage_spread,
    waiting_note,
    waits_for_straggler,
    waits_itself,
)
from advisor.facts.communication import (
    Membership,
    OutsideWaits,
    communication_summary,
    largest_tensor,
    link_summary,
    median_ratios,
    memberships_of,
    outside_waits_of_members,
    rank_ranges,
    span_times,
    transport_summary,
    waited_peer,
)
from advisor.facts.context import context_fact, core_counts_of, device_entry
from advisor.facts.hardware import nominal_bandwidth
from advisor.facts.models import (
    BreakdownFact,
    CommunicationFact,
    DataLoaderFact,
    EnvironmentFact,
    Fact,
    HostFact,
    LayoutFact,
    LinkFact,
    Mc2Fact,
    ModelFact,
    OperatorFact,
    PipelineFact,
    SpreadFact,
    StageFact,
    StragglerFact,
    TimeRange,
    TransportFact,
)
from advisor.facts.scope import RankFacts, RankMeta, file_source, metadata_source
from advisor.facts.service import service_facts
from advisor.ingest.columns import Columns, columns_of, records
from advisor.facts.sequences import mc2_candidates
from advisor.facts.steps import mean_step, times
from advisor.facts.windows import longest_ranges
from advisor.ingest.gpu import match_nccl
from advisor.ingest.groups import Group, groups_by_hash
from advisor.ingest.model import Profile
from advisor.planners.hccl import DEFAULT_MB as HCCL_DEFAULT_BUFFSIZE_MB, DTYPE_BYTES, buffsize_mb
from advisor.planners.mc2 import plan_mc2
from advisor.planners.parallel import plan_parallel
from advisor.usercontext import UserContext


@dataclass
class FactSet:
    """All facts of one profile, plus problems met while computing them."""

    facts: list[Fact] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def of(self, family: type[Fact]) -> list:
        return [f for f in self.facts if isinstance(f, family)]


class ProfileScope:
    """What the cross-rank families read: the profile, every rank's RankFacts and their small tables indexed once
    (every rank's ops, traffic and links are summarised in one pass over all ranks: ``every``, their ops with a
    ``rank`` column), the user's context, and for a family run per rank, that rank (``rank``)."""

    def __init__(self, profile: Profile, ranks: list[RankFacts], user: UserContext | None) -> None:
        self.profile = profile
        self.ranks = ranks
        self.user = user
        self.rank: RankFacts | None = None
        self.warnings: list[str] = []  # problems of what the user gave (not of a file a rank read)
        self.hardware = next((r.meta.hardware_hint for r in ranks if r.meta.hardware_hint), None)
        self.breakdowns = [r.breakdown for r in ranks if r.breakdown is not None]
        self.ops: dict[int, Columns] = {r.meta.rank: r.ops for r in ranks if r.ops is not None}
        self.known: dict[str, Group] = {h: g for r in ranks for h, g in groups_by_hash(r.meta.metadata).items()}
        self.members: dict[str, Membership] = memberships_of(
            {h: g.global_ranks for h, g in self.known.items()}, {r.meta.rank: r.matrix_groups for r in ranks if r.matrix_groups})
        # ops made of the trace's collective spans (no communication.json: Level0) get their time split here, from
        # every rank's spans, and their communicators' waits for members outside the profile
        self.every, span_outside = span_times(stacked(self.ops), {g: m.size for g, m in self.members.items()})
        self.spans = {rank for rank, ops in self.ops.items() if "times_from" in ops}  # ranks timed by their spans
        self.steps = step_counts(self.ops)
        every = self.every
        self.in_group = _ranks_by_group(every)  # group → the ranks with any op in it
        collective = every.loc[every["kind"] == "collective"]
        self.collective_groups = {rank: set(groups) for rank, groups in  # rank → the groups of its collectives
                                  collective.groupby("rank", sort=False)["group"].unique().items()}
        self.timed = _ranks_by_group(collective.loc[collective["start_us"].notna()])
        self.summaries = _by_rank(communication_summary(every, self.steps) if not every.empty else None)
        traffic = stacked({r.meta.rank: r.traffic for r in ranks if r.traffic is not None})
        self.transports = _by_rank(transport_summary(traffic, self.steps) if not traffic.empty else None)
        self._outside: dict[str, OutsideWaits | None] = dict(span_outside)
        self.groups = {h: (self.known[h].name if h in self.known else None,
                           self.members[h].size if h in self.members else None)
                       for h in set(self.known) | set(self.members)}

    def of_rank(self, rank: RankFacts) -> ProfileScope:
        """This scope for the families run per rank (the indexes shared)."""
        view = copy.copy(self)
        view.rank = rank
        return view

    def outside(self, group: str) -> OutsideWaits | None:
        """How long (ms over the capture) and where each profiled member of a collective group waits for members
        outside the profile; None when the group's size is unknown or every member is profiled (see
        communication.outside_waits_of_members)."""
        if group not in self._outside:
            size = self.members[group].size if group in self.members else None
            timed = self.timed.get(group, set())  # the members outside_waits_of_members compares
            if size is None or not timed or size <= len(timed):
                self._outside[group] = None
            else:
                members = {r: pd.DataFrame(self.ops[r]) for r in sorted(self.in_group.get(group, ()))}
                self._outside[group] = outside_waits_of_members(group, members, size)
        return self._outside[group]


def stacked(tables: dict[int, Columns]) -> pd.DataFrame:
    """Every rank's table one under the other, with a ``rank`` column (ranks in the order given); a column a table
    lacks is None there."""
    names = list(dict.fromkeys(name for table in tables.values() for name in table))
    if not names:
        names = ["kind", "group", "op_name", "step", "start_us", "wait_ms"]
    lengths = [len(next(iter(table.values()), ())) for table in tables.values()]
    data: dict[str, Any] = {"rank": np.repeat(np.array(list(tables), dtype="int64"), lengths)}
    for name in names:
        parts = [table[name] if name in table else np.full(length, None) for table, length in zip(tables.values(), lengths)]
        data[name] = np.concatenate(parts) if parts else []
    return pd.DataFrame(data)


def step_counts(ops_by_rank: dict[int, Columns]) -> pd.Series:
    """Per rank: the steps its communication ops cover (at least 1)."""
    return pd.Series({rank: max(_distinct(ops["step"]), 1) for rank, ops in ops_by_rank.items()}, dtype="int64")


_NAN = object()


def _distinct(values: np.ndarray) -> int:
    """How many distinct values, a missing one counted once, as ``pd.Series(values).nunique(dropna=False)`` counts
    them (None and NaN apart among objects) without building a Series per rank."""
    if values.dtype != object:
        return len(np.unique(values))  # NaNs count as one value
    cells = values.tolist()
    if any(isinstance(cell, str) for cell in cells):  # pandas reads these as text, where every missing value is one
        return int(pd.Series(values).nunique(dropna=False))
    return len({_NAN if isinstance(cell, float) and cell != cell else cell for cell in cells})


def _ranks_by_group(ops: pd.DataFrame) -> dict[str, set[int]]:
    ranks = ops.groupby("group", sort=False, dropna=False)["rank"].unique()
    return {group: set(members) for group, members in ranks.items()}


def _by_rank(summary: pd.DataFrame | None) -> dict[int, list[dict]]:
    """A summary's rows as records (without their rank), per rank."""
    rows: dict[int, list[dict]] = {}
    for row in records(summary) if summary is not None else []:
        rows.setdefault(row.pop("rank"), []).append(row)
    return rows


def reduce_facts(profile: Profile, ranks: list[RankFacts], user: UserContext | None = None) -> FactSet:
    """The FactSet of a profile from its ranks' RankFacts (in rank order). ``profile.ranks`` are their RankMetas."""
    out = FactSet()
    _attach_nccl(ranks)
    scope = ProfileScope(profile, ranks, user)
    fallback = next((e for r in ranks if (e := device_entry(r.meta.device_info))), None)
    _compare_loading(ranks)
    out.facts.extend(_run("lead", scope))
    for rank in ranks:
        out.facts.extend(_with_cores(rank.head, fallback) if rank.needs_cores and fallback else rank.head)
        out.facts.extend(_run("rank", scope.of_rank(rank)))
        out.facts.extend(rank.tail)
        out.warnings.extend(rank.warnings)
    out.facts.extend(_run("end", scope))
    out.warnings.extend(scope.warnings)
    return out


Place = Literal["lead", "rank", "end"]


@dataclass(frozen=True)
class ReduceFamily:
    """A cross-rank fact family: its extractor and where its facts go (see ``REDUCE_FAMILIES``)."""

    place: Place
    extract: Callable[[ProfileScope], list[Fact]]


def _run(place: Place, scope: ProfileScope) -> list[Fact]:
    return [fact for family in REDUCE_FAMILIES if family.place == place for fact in family.extract(scope)]


def _context_facts(scope: ProfileScope) -> list[Fact]:
    return [context_fact(scope.profile, sorted({step for rank in scope.ranks for step in rank.steps}))]


def _model_facts(scope: ProfileScope) -> list[Fact]:
    user = scope.user
    return [_model_fact(user)] if user is not None and user.model is not None else []


def _layout_facts(scope: ProfileScope) -> list[Fact]:
    user = scope.user
    layout = _layout_fact(user, len(scope.profile.ranks)) if user is not None and user.model is not None else None
    return [layout] if layout is not None else []


def _mc2_facts(scope: ProfileScope) -> list[Fact]:
    rank = scope.rank
    if rank is None or rank.mc2 is None:
        return []
    return [_mc2_fact(rank.meta.rank, row, rank.mc2.step_time, rank.mc2.sources)
            for row in records(mc2_candidates(rank.mc2.pairs, rank.mc2.step_count, scope.groups))]


def _attach_nccl(ranks: list[RankFacts]) -> None:
    """Give each GPU rank the communication ops of its NCCL kernels matched across ranks (2+ ranks only)."""
    tables = {r.meta.rank: r.nccl for r in ranks if r.nccl is not None}
    matched = match_nccl(tables)
    for rank in ranks:
        ops = matched.get(rank.meta.rank)
        if ops is not None:
            rank.ops = columns_of(ops.assign(transit_from_bandwidth=False))
            rank.traffic = None


_BROADCAST = re.compile(r"broadcast", re.IGNORECASE)


def _compare_loading(ranks: list[RankFacts]) -> None:
    """Give each rank's DataLoaderFact what the other ranks with a host timeline wait for batches (the median of their
    DataLoader time per step, 0 for a rank that fetches none) and its own broadcasts per step: one rank loading for
    all — rank 0 reading and broadcasting — shows as a large own time beside 0 (2+ such ranks only)."""
    loads: dict[int, float] = {}
    for rank in ranks:
        if any(isinstance(f, HostFact) for f in (*rank.head, *rank.tail)):
            loads[rank.meta.rank] = next((f.us_per_step for f in (*rank.head, *rank.tail) if isinstance(f, DataLoaderFact)), 0.0)
    if len(loads) < 2:
        return
    for rank in ranks:
        others = [us for r, us in loads.items() if r != rank.meta.rank]
        median = float(np.median(others))
        for facts in (rank.head, rank.tail):
            for i, fact in enumerate(facts):
                if isinstance(fact, DataLoaderFact):
                    facts[i] = fact.model_copy(update={
                        "others_us_per_step": median, "ranks_compared": len(loads),
                        "others_ratio": median / fact.us_per_step if fact.us_per_step > 0 else None,
                        "broadcasts_per_step": _broadcasts_per_step(rank)})


def _broadcasts_per_step(rank: RankFacts) -> float | None:
    """Broadcast collectives of a rank per step (communication ops), None without them."""
    if rank.ops is None or "op_name" not in rank.ops:
        return None
    names = pd.Series(rank.ops["op_name"], dtype=object).astype(str)
    steps = pd.Series(rank.ops["step"]).nunique() if "step" in rank.ops else 1
    return float(names.str.contains(_BROADCAST).sum()) / max(steps, 1)


def _with_cores(facts: list[Fact], device: dict) -> list[Fact]:
    """Operator facts of a rank without a device info.json: Block Dim remainders over another rank's core counts."""
    cores = core_counts_of(device)
    fixed = []
    for fact in facts:
        if isinstance(fact, OperatorFact) and fact.block_dim is not None:
            count = cores.get("vector" if str(fact.accelerator_core) == "AI_VECTOR_CORE" else "cube")
            fact = fact.model_copy(update={"block_dim_remainder": fact.block_dim % count if count else None})
        fixed.append(fact)
    return fixed


def _profile_breakdown(scope: ProfileScope) -> list[Fact]:
    ranks = scope.breakdowns
    if not ranks:
        return []
    mean = mean_step(ranks)
    return [BreakdownFact(
        id="breakdown:profile",
        sources=sorted({src for b in ranks for src in b.sources}),
        scope="profile",
        steps=max(b.steps for b in ranks),
        dominant_overhead=mean["dominant_overhead"],
        **times(mean),
    )]


def _pipeline_facts(cluster: ProfileScope) -> list[Fact]:
    """Compute per pipeline stage, the stages from parallel_group_info, else distributed_args, else P2P traffic."""
    breakdowns = cluster.breakdowns
    if len(breakdowns) < 2:
        return []
    compute = {b.rank: b.compute_us for b in breakdowns if b.rank is not None}
    receives = _p2p_receives(cluster)
    sources = sorted(set(_metadata_sources(cluster)) | {src for b in breakdowns for src in b.sources})
    p2p_sources = _p2p_sources(cluster)
    table = pd.DataFrame([b.model_dump() for b in breakdowns if b.rank is not None])
    grouping, found = _pipelines(cluster, _p2p_activities(cluster))
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
    return facts


def _pipelines(cluster: ProfileScope, activities: dict[int, P2pActivity]) -> tuple[str, list[tuple[str, list[int]]]]:
    """The pipelines (name, ranks in stage order) of the first source that names any: parallel_group_info's 'pp'
    groups, distributed_args, chains of P2P communicators shared by profiled ranks (oriented by their first ops)."""
    metadata = {r.meta.rank: r.meta.metadata for r in cluster.ranks}
    found = pipeline_groups(metadata)
    if found:
        return "parallel_group_info", found
    found = pipelines_from_distributed_args(metadata)
    if found:
        return "distributed_args", found
    chains = pipelines_from_p2p(_p2p_groups(cluster))
    first = {rank: activity.first for rank, activity in activities.items()}
    stages = [oriented(ranks, first) for _, ranks in chains]
    return "p2p", [(f"p2p:{ranks[0]}-{ranks[-1]}", ranks) for ranks in stages]


def _p2p_groups(cluster: ProfileScope) -> dict[int, set[str]]:
    """Each rank's P2P communicators."""
    p2p = cluster.every.loc[(cluster.every["kind"] == "p2p") & cluster.every["group"].notna()]
    return {int(rank): set(groups) for rank, groups in p2p.groupby("rank")["group"].unique().items()}


def _p2p_activities(cluster: ProfileScope) -> dict[int, P2pActivity]:
    """Each rank's P2P ops (counts by direction, the first, receive waits), for the ranks that have any."""
    p2p = cluster.every.loc[cluster.every["kind"] == "p2p"]
    found = {int(rank): p2p_activity(rows, int(cluster.steps[rank])) for rank, rows in p2p.groupby("rank", sort=True)}
    return {rank: activity for rank, activity in found.items() if activity is not None}


def _metadata_sources(cluster: ProfileScope) -> list[str]:
    shown = cluster.profile.shown
    return sorted({found for r in cluster.ranks if r.meta.metadata and (found := metadata_source(shown, r.meta))})


def _p2p_sources(cluster: ProfileScope) -> list[str]:
    profile = cluster.profile
    return sorted({f"{profile.shown(r.meta.file('communication'))}[p2p: hcom_send/hcom_receive]"
                   for r in cluster.ranks if r.ops is not None})


def _stage_facts(cluster: ProfileScope) -> list[Fact]:
    """Each rank as a pipeline stage — its place, neighbours, micro-batches and receive waits (the bubble) — from the
    pipelines found, else from its own P2P ops and links: also a pipeline's only profiled rank."""
    activities = _p2p_activities(cluster)
    grouping, pipelines = _pipelines(cluster, activities)
    placed = {rank: (name, ranks) for name, ranks in pipelines for rank in ranks}
    groups = _p2p_groups(cluster) if grouping == "p2p" else {}
    facts: list[Fact] = []
    for rank_facts in cluster.ranks:
        rank = rank_facts.meta.rank
        activity = activities.get(rank)
        if rank in placed:
            name, ranks = placed[rank]
            ends = open_ends(ranks, groups) if groups else (False, False)
            place = _pipeline_place(rank, name, ranks, grouping, activity, *ends)
            sources = _metadata_sources(cluster) if grouping != "p2p" else _p2p_sources(cluster)
        elif activity is not None:
            place, sources = _own_place(cluster, rank_facts, activity)
        else:
            continue
        facts.append(_stage_fact(cluster, rank_facts, activity, place, sources))
    return facts


def _pipeline_place(rank: int, name: str, ranks: list[int], grouping: str, activity: P2pActivity | None,
                    open_before: bool = False, open_after: bool = False) -> dict:
    """A rank's place in a pipeline whose ranks are known in stage order; a P2P chain may go on beyond either end
    (``open_before``, ``open_after``) to ranks not profiled."""
    index = ranks.index(rank)
    before, after = index > 0 or open_before, index < len(ranks) - 1 or open_after
    position = "middle" if before and after else "first" if after else "last"
    how = {"parallel_group_info": f"the 'pp' group {name} of parallel_group_info",
           "distributed_args": f"distributed_args (pipeline_model_parallel_size {len(ranks)})",
           "p2p": "the P2P communicators it shares with other profiled ranks"}[grouping]
    chain = " → ".join(["…"] * open_before + [str(r) for r in ranks] + ["…"] * open_after)
    prev_rank = ranks[index - 1] if index > 0 else None
    next_rank = ranks[index + 1] if index + 1 < len(ranks) else None
    whole = not (open_before or open_after)
    return {"pipeline": name, "grouping": grouping, "evidence": f"{how}: {chain}", "position": position,
            "stage": index if not open_before else None, "stages": len(ranks) if whole else None,
            "stages_at_least": len(ranks) + open_before + open_after, "prev_rank": prev_rank, "next_rank": next_rank,
            "neighbours": neighbour_text(prev_rank, next_rank, False),
            "micro_batches": micro_batches(activity, position)}


def _own_place(cluster: ProfileScope, rank_facts: RankFacts, activity: P2pActivity) -> tuple[dict, list[str]]:
    """A rank's place from its own P2P ops and, where communication_matrix.json has them, its P2P links."""
    rank, profile = rank_facts.meta.rank, cluster.profile
    before, after, local = _p2p_neighbours(cluster, rank_facts, activity)
    # ops that fit no schedule do not place the rank in a pipeline: sending alone makes no first stage
    position = stage_position(activity, len(before), len(after)) if activity.fits_schedule else "unknown"
    prev_rank = before[-1] if before and position in ("middle", "last") else None
    next_rank = after[0] if after and position in ("middle", "first") else None
    counts = (f"{activity.sends:g} send(s), {activity.receives:g} receive(s) and {activity.batched:g} batchSendRecv "
              f"per step, the first a {activity.first}")
    linked = bool(before or after)
    sources = _p2p_sources_of(cluster, rank_facts) + (
        [f"{profile.shown(rank_facts.meta.file('matrix'))}[p2p src-dst links]"] if linked else [])
    links = "; its P2P links in communication_matrix.json" if linked else ""
    return {"pipeline": f"rank {rank}", "grouping": "own_ops",
            "evidence": f"its own P2P ops ({counts}){links}; no pipeline group recorded",
            "position": position, "stage": 0 if position == "first" else None, "stages": None,
            "stages_at_least": 3 if position == "middle" else 2, "prev_rank": prev_rank, "next_rank": next_rank,
            "neighbours": neighbour_text(prev_rank, next_rank, local) if position != "unknown" or not linked else
            _peer_text(before + after, local),
            "micro_batches": micro_batches(activity, position)}, sources


def _peer_text(peers: list[int], local: bool) -> str:
    """The P2P peers of a rank whose place in a pipeline is not known, in words."""
    word = "communicator-local rank" if local else "rank"
    return f"P2P peer(s) {word} {', '.join(map(str, peers))} (their order in a pipeline not told)"


def _p2p_neighbours(cluster: ProfileScope, rank_facts: RankFacts,
                    activity: P2pActivity) -> tuple[list[int], list[int], bool]:
    """The peers of a rank's P2P communicators in its communication_matrix.json links, numbered below and above it
    (sorted), and whether they are communicator-local ranks (parallel_group_info does not list the communicator)."""
    if rank_facts.matrix is None:
        return [], [], False
    matrix = pd.DataFrame(rank_facts.matrix)
    matrix = matrix.loc[matrix["kind"] == "p2p"]
    rank = rank_facts.meta.rank
    before, after, local = set(), set(), False
    for group in activity.per_group:
        known = cluster.known.get(group)
        ranks = known.global_ranks if known is not None and rank in known.global_ranks else None
        if ranks:
            own = ranks.index(rank)
        else:
            own = cluster.members[group].local_of.get(rank) if group in cluster.members else None
        sends_to, receives_from = matrix_peers(matrix.loc[matrix["group"] == group], own)
        for peer in sends_to | receives_from:
            number = ranks[peer] if ranks and peer < len(ranks) else peer
            local = local or not ranks
            (before if peer < own else after).add(number)
    return sorted(before), sorted(after), local


def _p2p_sources_of(cluster: ProfileScope, rank_facts: RankFacts) -> list[str]:
    return [f"{cluster.profile.shown(rank_facts.meta.file('communication'))}[p2p: Wait Time(ms), op names]"]


def _stage_fact(cluster: ProfileScope, rank_facts: RankFacts, activity: P2pActivity | None, place: dict,
                sources: list[str]) -> StageFact:
    """The stage fact of one rank: its place, and its receive waits (communication.json, else step_trace_time.csv's
    Bubble) against its step."""
    breakdown = rank_facts.breakdown
    if activity is not None:
        bubble, bubble_from = activity.receive_wait_us, "communication.json"
        sources = sources + _p2p_sources_of(cluster, rank_facts)
    else:
        bubble, bubble_from = (breakdown.bubble_us or 0.0) if breakdown is not None else 0.0, "step_trace_time.csv"
    step = breakdown.step_time_us if breakdown is not None else None
    counts = (activity.sends, activity.receives, activity.batched) if activity is not None else (0.0, 0.0, 0.0)
    if activity is None:
        pattern, note = "none", "no P2P op recorded: the pipeline comes from the metadata, its bubble from Bubble"
    else:
        pattern, note = ("schedule" if activity.fits_schedule else "inconsistent"), activity.schedule_note
    told = pattern != "inconsistent"  # a receive that fits no schedule waits for no pipeline's bubble
    return StageFact(
        id=f"stage:r{rank_facts.meta.rank}", rank=rank_facts.meta.rank,
        sources=sorted(set(sources) | set(breakdown.sources if breakdown is not None else [])), **place,
        sends_per_step=counts[0], receives_per_step=counts[1], batched_per_step=counts[2],
        p2p_pattern=pattern, schedule_note=note,
        bubble_us=bubble, bubble_from=bubble_from, step_time_us=step,
        bubble_share_of_step=min(bubble / step, 1.0) if step and told else None,
        schedule_bubble_share=schedule_bubble(place["stages_at_least"], place["micro_batches"]),
    )


def _p2p_receives(cluster: ProfileScope) -> pd.DataFrame:
    """Per (rank, P2P group): wait per step in its receive ops, and the peer rank sharing that group."""
    frame = group_waits(cluster.every, cluster.steps, "p2p", only=("hcom_receive", "hcom_batchsendrecv"))
    members = frame.groupby("group")["rank"].agg(list)
    frame["peer"] = [next((r for r in members[g] if r != rank), None) if len(members[g]) == 2 else None
                     for rank, g in zip(frame["rank"], frame["group"])]
    return frame


def group_waits(every: pd.DataFrame, steps: pd.Series, kind: str, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Per (rank, communicator group): µs per step waiting in its ``kind`` ops (only those whose names start with
    ``only``), from every rank's communication ops (``stacked``, ranks in their order there) and step counts
    (``step_counts``); in one pass, each sum taken as pandas sums that rank's column alone."""
    chosen = every.loc[(every["kind"] == kind) & every["group"].notna()]
    position = pd.factorize(every["rank"])[0][chosen.index.to_numpy()]  # the ranks' order in ``every``
    chosen = chosen.assign(position=position).sort_values(["position", "group"], kind="stable")
    ranks, groups = chosen["rank"].to_numpy(), chosen["group"].astype(str).to_numpy()
    waits = chosen["wait_ms"].to_numpy("float64", na_value=np.nan)
    counted = (chosen["op_name"].str.lower().str.startswith(only).to_numpy(bool) if only and len(chosen)
               else np.ones(len(chosen), bool))
    changes = (ranks[1:] != ranks[:-1]) | (groups[1:] != groups[:-1])
    starts = np.flatnonzero(np.r_[True, changes]) if len(chosen) else []
    rows = []
    for start, end in zip(starts, [*starts[1:], len(chosen)]):
        kept = waits[start:end][counted[start:end]]
        rows.append({"rank": ranks[start].item(), "group": groups[start],
                     "wait_us": float(np.where(np.isnan(kept), 0.0, kept).sum()) * 1000 / int(steps[ranks[start]])})
    return pd.DataFrame(rows, columns=["rank", "group", "wait_us"])


def _spread_facts(scope: ProfileScope) -> list[Fact]:
    """How compute, exposed communication and free time differ across ranks. The P2P ops' time is left out of each
    rank's exposed communication: a pipeline's sends and receives wait on its schedule (the stage facts' bubble), not
    on a late rank."""
    breakdowns = scope.breakdowns
    if len(breakdowns) < 2:
        return []
    table = pd.DataFrame([b.model_dump() for b in breakdowns])
    p2p = table["rank"].map(_p2p_us(scope)).fillna(0.0)
    table["comm_not_overlapped_us"] = (table["comm_not_overlapped_us"] - p2p).clip(lower=0.0)
    sources = sorted({src for b in breakdowns for src in b.sources})
    facts: list[Fact] = []
    for row in records(rank_spreads(table)):
        communication = row["dimension"] == "communication"
        waits = _slow_rank_waits(scope, row["rank"], table) if communication else {}
        facts.append(SpreadFact(id=f"spread:{row['dimension']}", sources=sources, **row, **waits,
                                p2p_excluded_us=float(p2p.max()) if communication else None))
    return facts


def _p2p_us(scope: ProfileScope) -> dict[int, float]:
    """Per rank: its P2P ops' time per step (communication.json), else the profiler's Bubble (hcom_receive time)."""
    found = {b.rank: b.bubble_us or 0.0 for b in scope.breakdowns if b.rank is not None}
    for rank, rows in scope.summaries.items():
        if rank not in scope.spans:  # the trace's spans hold collectives only
            found[rank] = sum(row["elapse_us"] for row in rows if row["kind"] == "p2p")
    return found


def _slow_rank_waits(scope: ProfileScope, rank: int, table: pd.DataFrame) -> dict:
    """The SpreadFact fields saying whether the rank that waits least in the collectives is itself waiting."""
    collective = next((row for row in scope.summaries.get(rank, []) if row["kind"] == "collective"), None)
    mine = table.loc[table["rank"] == rank].iloc[0]
    waits, note = waiting_note(collective["transit_share"] if collective else None,
                               _notify_share(scope, rank, collective), float(mine["comm_not_overlapped_us"]),
                               float(mine["step_time_us"]))
    return {"slow_rank_waits": waits, "slow_rank_note": note}


def _notify_share(scope: ProfileScope, rank: int, collective: dict | None) -> float | None:
    """The rank's HCCL Notify_Wait time per step over its collectives' time (None without either)."""
    notify = next((r.peer_waits for r in scope.ranks if r.meta.rank == rank and r.peer_waits), None)
    if not notify or collective is None or collective["elapse_us"] <= 0:
        return None
    return sum(notify.values()) / collective["elapse_us"]


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


def _communication_facts(cluster: ProfileScope) -> list[Fact]:
    """Per kind: where the collectives' time goes (transit checked against Bandwidth Info), and for collectives the
    wait for members of their groups that are not in the profile; per transport: traffic and bandwidth."""
    rank, hardware = cluster.rank, cluster.hardware
    if rank is None or rank.ops is None:
        return []
    profile, meta = cluster.profile, rank.meta
    step_count = int(cluster.steps[meta.rank])
    facts: list[Fact] = []
    spans = meta.rank in cluster.spans
    time_source = (file_source(profile.shown, meta, "trace", SPAN_SOURCE) if spans else
                   file_source(profile.shown, meta, "communication", "Communication Time Info"))
    members = cluster.members
    mine = cluster.collective_groups.get(meta.rank, set())
    outside = []  # (group, ms waiting for members outside the profile), in group order
    stretches = []  # where this rank waits for them
    for group in sorted(mine):
        waits = cluster.outside(group)
        if waits is not None and meta.rank in waits.ms:
            outside.append((group, waits.ms[meta.rank]))
            stretches += [waits.stretches[meta.rank]] if meta.rank in waits.stretches else []
    profiled = {g: {meta.rank} | cluster.in_group.get(g, set()) for g in mine}
    known = [g for g in sorted(mine) if g in members]
    waited = np.array([ms for _, ms in outside], dtype="float64")
    if outside and np.nanmax(waited) > 0:  # the group waited on most (NaN last), then the first by name
        group = min((o for o in outside if o[1] == o[1]), key=lambda o: (-o[1], o[0]))[0]
    else:
        group = max(known, key=lambda g: (members[g].size, g), default=None)
    if group is None and spans and mine:  # a communicator the capture does not size: the one waited in longest
        group = min(mine)
    sources = [time_source]
    if group is not None and group in members:
        sources.append(f"{profile.shown(meta.file('matrix'))}[src-dst links]"
                       if members[group].global_ranks is None else
                       metadata_source(profile.shown, meta, "parallel_group_info") or
                       f"{profile.shown(meta.path)}[parallel_group_info]")
    member = members.get(group) if group is not None else None
    outside_ms = float(np.where(np.isnan(waited), 0.0, waited).sum())  # as pandas sums a column
    p2p_us = sum(row["elapse_us"] for row in cluster.summaries.get(meta.rank, []) if row["kind"] == "p2p")
    largest = _largest_tensor(rank, members, cluster.user)
    for row in cluster.summaries.get(meta.rank, []):
        collective = row["kind"] == "collective" and group is not None
        outside_us = outside_ms * 1000 / step_count if row["kind"] == "collective" else 0.0
        communicator = _communicator_text(group, member, cluster) if collective else None
        missing = (member.missing(profiled[group]) if member is not None else UNSIZED_MISSING) if collective else None
        facts.append(
            CommunicationFact(
                id=f"communication:r{meta.rank}:{row['kind']}",
                sources=sources if collective else [time_source],
                rank=meta.rank,
                kind=row["kind"],
                **{k: float(row[k]) for k in CommunicationFact.model_fields if k in row and k not in ("kind",)},
                times_from="spans" if spans else "time_info",
                times_note=SPANS_NOTE if spans else "",
                communicator=communicator,
                group_size=member.size if collective and member is not None else None,
                group_ranks_profiled=len(profiled[group]) if collective else None,
                missing_ranks=missing,
                arrival=_arrival(len(profiled[group]), communicator, missing, sum(1 for _, ms in outside if ms > 0))
                if collective else None,
                outside_wait_us=outside_us,
                outside_wait_share=min(outside_us / row["elapse_us"], 1.0) if row["elapse_us"] > 0 else 0.0,
                outside_wait_per_op_us=outside_us / row["ops_per_step"] if row["ops_per_step"] > 0 else 0.0,
                **(waited_peer(rank.peer_waits) if row["kind"] == "collective" else {}),
                p2p_us=p2p_us,
                **(largest if row["kind"] == "collective" else {}),
                ranges=_collective_ranges("outside_wait_us", stretches, profile, rank) if row["kind"] == "collective" else [],
            )
        )
    if rank.traffic is None:
        return facts
    bandwidth_source = file_source(profile.shown, meta, "communication", "Communication Bandwidth Info")
    qos_source = metadata_source(profile.shown, meta, "ENV_VARIABLES")
    for row in cluster.transports.get(meta.rank, []):
        nominal = nominal_bandwidth(hardware, row["transport"])
        facts.append(
            TransportFact(
                id=f"transport:r{meta.rank}:{row['transport']}",
                sources=[bandwidth_source, *([qos_source] if row["transport"] == "RDMA" and qos_source else [])],
                rank=meta.rank,
                transport=row["transport"],
                size_mb_per_step=float(row["size_mb_per_step"]),
                time_us_per_step=float(row["time_us_per_step"]),
                bandwidth_gbps=float(row["bandwidth_gbps"]),
                nominal_gbps=nominal,
                utilization=float(row["bandwidth_gbps"]) / nominal if nominal else None,
                ops_per_step=float(row["ops_per_step"]),
                small_op_share=float(row["small_op_share"]),
                mean_op_mb=float(row["size_mb_per_step"]) / float(row["ops_per_step"]) if row["ops_per_step"] else None,
                **(_rdma_qos(meta, cluster.user) if row["transport"] == "RDMA" else {}),
            )
        )
    return facts


def _collective_ranges(field: str, stretches: list[pd.DataFrame], profile: Profile, rank: RankFacts) -> list[TimeRange]:
    """The longest of a rank's stretches in its collectives (step, start, end: µs on the clock of their start_us) as
    ranges of ``field``, on the rank's trace — the clock of communication.json's Start Timestamp, the local time every
    file of the capture shares — else, without a trace, on its communication.json; each in its op's step, placed
    from the start of that step's ProfilerStep window."""
    if not stretches:
        return []
    every = pd.concat(stretches, ignore_index=True)
    meta = rank.meta
    trace = meta.file("trace")
    shown = profile.shown(trace if trace.exists() else meta.file("communication"))
    found = longest_ranges({field: every[["start", "end"]].to_numpy(float)}, every, meta.rank, shown, rank.step_starts)
    firsts = _first_collectives(rank.ops)
    return [r.model_copy(update={"step_start_us": firsts[r.step], "step_start_from": "first collective"})
            if r.step_start_us is None and r.step in firsts else r for r in found]


def _first_collectives(ops: Columns | None) -> dict[int, float]:
    """Each step's earliest collective start (µs, communication.json's clock): the origin of a step's time ranges where
    no trace gives the ProfilerStep window's."""
    if ops is None or not {"step", "start_us", "kind"} <= ops.keys():
        return {}
    frame = pd.DataFrame({"step": pd.to_numeric(pd.Series(ops["step"]), errors="coerce"),
                          "start": pd.to_numeric(pd.Series(ops["start_us"]), errors="coerce"), "kind": ops["kind"]}).dropna()
    frame = frame.loc[(frame["step"] >= 0) & (frame["kind"] == "collective")]
    return {int(step): float(start) for step, start in frame.groupby("step")["start"].min().items()}


def _largest_tensor(rank: RankFacts, members: dict[str, Membership], user: UserContext | None) -> dict[str, object]:
    """The largest_tensor_* and hccl_buffsize_mb fields of a rank's collective CommunicationFact (``largest_tensor``);
    empty without Bandwidth Info."""
    if rank.ops is None or rank.traffic is None:
        return {}
    sizes = {group: (m.size, m.global_ranks is not None) for group, m in members.items()}
    found = largest_tensor(pd.DataFrame(rank.ops), pd.DataFrame(rank.traffic), sizes)
    if found is None:
        return {}
    low, high = found["low_mb"], found["high_mb"]
    text = _env_values(rank.meta, user, ("HCCL_BUFFSIZE",)).get("HCCL_BUFFSIZE", "")
    buffsize = int(text) if text.isdigit() and int(text) >= 1 else HCCL_DEFAULT_BUFFSIZE_MB
    needed = max(math.ceil(high * 1e6 / 2**20), 1)
    groups = {str(g) for g in pd.Series(rank.ops["group"], dtype=object).dropna() if str(g)} if "group" in rank.ops else set()
    communicators = max(len(groups), 1)
    return {"largest_tensor_mb": low, "largest_tensor_max_mb": high, "largest_tensor_op": found["op"],
            "largest_tensor_kind": found["collective"], "largest_tensor_sent_mb": found["sent_mb"],
            "largest_tensor_buffsize_mb": needed, "communicators": communicators,
            "hccl_buffer_savings_mb": 2 * communicators * max(buffsize - needed, 0),
            "hccl_buffsize_mb": buffsize,
            "largest_tensor_rounds": max(math.ceil(low * 1e6 / (buffsize * 2**20)), 1)}


def _env_values(meta: RankMeta, user: UserContext | None, names: object) -> dict[str, str]:
    """The values of the variables ``names`` as the rank's profiler recorded them (ENV_VARIABLES), --env winning;
    stripped, '' where recorded unset, absent where neither says."""
    recorded = meta.metadata.get("ENV_VARIABLES")
    values = {name: str(value).strip() for name, value in recorded.items() if name in names} \
        if isinstance(recorded, dict) else {}
    return values | {name: value.strip() for name, (value, _source) in (user.env.items() if user else ()) if name in names}


_RDMA_QOS = {"HCCL_RDMA_TC": (132, 255), "HCCL_RDMA_SL": (4, 7)}  # the variables, HCCL's defaults and their ranges


def _rdma_qos(meta: RankMeta, user: UserContext | None) -> dict[str, int | None]:
    """rdma_tc and rdma_sl: what the rank's metadata (or --env) says HCCL marks RDMA packets with — the default where
    recorded unset, None where not recorded or not a number in range."""
    values = _env_values(meta, user, _RDMA_QOS)
    out: dict[str, int | None] = {}
    for name, (default, most) in _RDMA_QOS.items():
        text = values.get(name)
        number = default if text == "" else int(text) if text is not None and text.isdigit() else None
        out[name.removeprefix("HCCL_").lower()] = number if number is not None and number <= most else None
    return out


# Where the time split of a CommunicationFact timed by the trace's spans comes from (in its sources), and that in words
SPAN_SOURCE = "HCCL/Communication process: hcom_* op spans, args count and data_type"
SPANS_NOTE = (" The capture has no communication.json: these times come from the collectives' spans on the trace's HCCL "
              "lane, matched across the profiled ranks by their order, and the transit is an upper bound — each op's "
              "payload at the fastest rate its communicator reached, plus its shortest op.")
UNSIZED_MISSING = "the capture records neither their number nor their ranks: no parallel_group_info, no communication_matrix.json"


def _arrival(profiled: int, communicator: str, missing: str | None, waiting_groups: int) -> str:
    """Who had arrived when the wait for members outside the profile began, and for whom they wait, in words."""
    where = communicator if waiting_groups < 2 else f"its {waiting_groups} communicators with unprofiled members (most in {communicator})"
    whom = "members that were not profiled" + (f" ({missing})" if missing else "")
    if profiled == 1:
        return f"this rank, the only profiled member of {where}, had arrived: it waits for {whom}"
    return f"the {profiled} profiled members of {where} had all arrived: they wait together, at the same time, for {whom}"


UNNAMED_GROUPS = frozenset({"", "undefined"})  # torch's group_desc when the group was made without one


def _communicator_text(group: str, member: Membership | None, cluster: ProfileScope) -> str:
    """A communicator in words for the explanations: its name and size where recorded."""
    known = cluster.known.get(group)
    name = f" {known.name}" if known is not None and known.name not in UNNAMED_GROUPS else ""
    # a group known only by the end of its hashed id: say what the fragment is, so it can be found in the files
    hashed = f" (the group whose id ends in {group[1:]})" if not name and known is None and group.startswith("…") else ""
    if member is None:
        return f"the communicator{name} of unrecorded size{hashed}"
    return f"the {member.size}-rank communicator{name}{hashed}"


def _straggler_facts(cluster: ProfileScope) -> list[Fact]:
    """Per communicator seen on 2+ ranks: who the others wait for inside its collectives."""
    breakdowns = cluster.breakdowns
    if len(breakdowns) < 2:
        return []
    profile = cluster.profile
    rows = group_waits(cluster.every, cluster.steps, "collective")
    sources = {file_source(profile.shown, r.meta, "communication", "Communication Time Info: Wait Time(ms)")
               for r in cluster.ranks if r.ops is not None}
    known = cluster.known
    if rows.empty:
        return []
    members = cluster.members
    mean_step = sum(b.step_time_us for b in breakdowns) / len(breakdowns)
    collective = cluster.every.loc[cluster.every["kind"] == "collective"]
    moved = collective.groupby(["rank", "group"])[["elapse_ms", "transit_ms"]].sum()
    by_rank = {r.meta.rank: r for r in cluster.ranks}
    facts: list[Fact] = []
    for row in records(collective_stragglers(rows)):
        transit = _transit_share(moved, row["rank"], row["group"])
        mine = next((r for r in cluster.summaries.get(row["rank"], []) if r["kind"] == "collective"), None)
        notify = _notify_share(cluster, row["rank"], mine)
        group = known.get(row["group"])
        size = members[row["group"]].size if row["group"] in members else None
        in_group = collective.loc[collective["group"] == row["group"]]
        # keyed on the communicator's hash: process-group names (dp, mp, …) repeat across communicators
        facts.append(StragglerFact(
            id=f"straggler:{row['group']}", sources=sorted(sources), group=group.name if group else row["group"],
            group_id=row["group"], communicator=group.communicator if group else None,
            group_ranks=rank_ranges(rows.loc[rows["group"] == row["group"], "rank"].tolist()),
            group_size=size if size and size >= 2 else None, ranks=row["ranks"], rank=row["rank"],
            straggler_wait_us=row["straggler_wait_us"], others_wait_us=row["others_wait_us"], lost_us=row["lost_us"],
            lost_share_of_step=min(row["lost_us"] / mean_step, 1.0) if mean_step > 0 else None,
            max_wait_rank=row["max_wait_rank"], straggler_transit_share=transit,
            straggler_waits=bool(waits_itself(transit, notify)),
            ranges=[r for waiting, stretches in waits_for_straggler(in_group, row["rank"]).items()
                    for r in _collective_ranges("lost_us", [stretches], profile, by_rank[waiting])],
        ))
    return facts


def _transit_share(moved: pd.DataFrame, rank: int, group: str) -> float | None:
    """The share of a rank's time in one group's collectives that moves data (None when they take no time)."""
    if (rank, group) not in moved.index:
        return None
    elapse, transit = moved.loc[(rank, group)]
    return min(float(transit) / float(elapse), 1.0) if elapse > 0 else None


def _link_facts(scope: ProfileScope) -> list[Fact]:
    """Per-link traffic of every rank's communication_matrix.json, with the slow links measured against the median."""
    profile, ranks, hardware = scope.profile, scope.ranks, scope.hardware
    with_links = [r for r in ranks if r.matrix is not None]
    if not with_links:
        return []
    groups = {r.meta.rank: {h: (g.name, g.global_ranks) for h, g in groups_by_hash(r.meta.metadata).items()}
              for r in with_links}
    links = link_summary(stacked({r.meta.rank: r.matrix for r in with_links}), groups)
    if links.empty:
        return []
    sources = {r.meta.rank: f"{profile.shown(r.meta.file('matrix'))}"
                            "[Transport Type,Transit Size(MB),Transit Time(ms)]" for r in with_links}
    links["source"] = links["rank"].map(sources)
    links["median_ratio"] = median_ratios(links["bandwidth_gbps"], links["transport"])
    facts: list[Fact] = []
    for row in records(links):
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


MAX_ENV_VALUE_CHARS = 1 << 20  # no setting is longer; a longer value is cut to this, with a warning


def _environment_facts(scope: ProfileScope) -> list[Fact]:
    """ENV_VARIABLES of the first rank that recorded them (the same set on every rank), then the user's, which win."""
    profile, user = scope.profile, scope.user
    values: dict[str, tuple[str, str]] = {}
    for rank in profile.ranks:
        variables = rank.metadata.get("ENV_VARIABLES")
        if isinstance(variables, dict) and variables:
            source = (metadata_source(profile.shown, rank, "ENV_VARIABLES")
                      or f"{profile.shown(rank.path)}[ENV_VARIABLES]")
            values = {str(k): (str(v), source) for k, v in variables.items() if isinstance(v, (str, int, float))}
            break
    if user is not None:
        values.update(user.env)
    for name, (value, source) in values.items():
        if len(value) > MAX_ENV_VALUE_CHARS:  # the rule engine refuses a fact of tens of MB (its error 314)
            scope.warnings.append(f"{source}: the value of {name} is {len(value):,} characters long; only its first "
                                  f"{MAX_ENV_VALUE_CHARS:,} were kept")
            values[name] = (value[:MAX_ENV_VALUE_CHARS], source)
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


REDUCE_FAMILIES: list[ReduceFamily] = [
    ReduceFamily("lead", _context_facts),
    ReduceFamily("lead", _model_facts),
    ReduceFamily("lead", _layout_facts),
    ReduceFamily("lead", _environment_facts),
    ReduceFamily("rank", _mc2_facts),
    ReduceFamily("rank", _communication_facts),
    ReduceFamily("end", _link_facts),
    ReduceFamily("end", _profile_breakdown),
    ReduceFamily("end", _spread_facts),
    ReduceFamily("end", _straggler_facts),
    ReduceFamily("end", _pipeline_facts),
    ReduceFamily("end", _stage_facts),
    ReduceFamily("end", service_facts),
]


__all__ = ["FactSet", "RankMeta", "group_waits", "reduce_facts", "stacked", "step_counts"]
