"""Cluster facts: how the ranks of one profile differ (pure functions over per-rank breakdowns)."""

from __future__ import annotations

import numpy as np
import pandas as pd

DIMENSIONS = {"compute": "compute_us", "communication": "comm_not_overlapped_us", "free": "free_us"}
TIE_SHARE = 0.01  # ranks within 1 % of the mean step of the slow rank's value are as slow as it
UNEVEN_SHARE = 0.05  # the spread cluster.uneven_ranks reports (msprof-analyze's slow-rank threshold)


def rank_spreads(breakdowns: pd.DataFrame) -> pd.DataFrame:
    """Per dimension: the ranks with the most and least time, the gap, and the gap over the mean step.

    ``breakdowns`` has one row per rank with ``rank``, ``step_time_us`` and the dimension columns.
    """
    mean_step = breakdowns["step_time_us"].mean()
    rows = []
    for dimension, column in DIMENSIONS.items():
        ordered = breakdowns.sort_values([column, "rank"], kind="stable")
        low, high = ordered.iloc[0], ordered.iloc[-1]
        spread = float(high[column] - low[column])
        slow = low if dimension == "communication" else high
        # every rank as slow as the one named: when ranks 2 and 3 are alike, blaming rank 3 alone is wrong
        alike = (breakdowns[column] - slow[column]).abs() <= TIE_SHARE * mean_step
        rows.append(
            {
                "dimension": dimension,
                "max_rank": int(high["rank"]),
                "min_rank": int(low["rank"]),
                "max_us": float(high[column]),
                "min_us": float(low[column]),
                "spread_us": spread,
                "spread_ratio": min(spread / mean_step, 1.0) if mean_step > 0 else 0.0,
                "rank": int(slow["rank"]),
                "slow_ranks": ", ".join(str(int(r)) for r in sorted(breakdowns.loc[alike, "rank"])),
                "ranks": len(breakdowns),
            }
        )
    return pd.DataFrame(rows)


def pipeline_groups(metadata_by_rank: dict[int, dict]) -> list[tuple[str, list[int]]]:
    """The pipeline-parallel groups named in profiler_metadata parallel_group_info ('pp'), each once, stage order."""
    groups: dict[tuple[int, ...], str] = {}
    for metadata in metadata_by_rank.values():
        info = metadata.get("parallel_group_info") if isinstance(metadata, dict) else None
        if not isinstance(info, dict):
            continue
        for comm_name, group in info.items():
            if not isinstance(group, dict) or str(group.get("group_name", "")).lower() != "pp":
                continue
            ranks = group.get("global_ranks")
            if isinstance(ranks, list) and len(ranks) >= 2 and all(isinstance(r, int) for r in ranks):
                groups.setdefault(tuple(ranks), str(comm_name))
    return sorted(((name, list(ranks)) for ranks, name in groups.items()), key=lambda g: g[1])


def pipelines_from_distributed_args(metadata_by_rank: dict[int, dict]) -> list[tuple[str, list[int]]]:
    """Pipelines from MindSpeed/Megatron ``distributed_args`` (world_size, pipeline_model_parallel_size).

    Megatron numbers ranks with the pipeline stage outermost, so stage s of pipeline p is rank
    p + s × (world_size / pp): each pipeline is every (world_size / pp)-th rank.
    """
    for metadata in metadata_by_rank.values():
        args = metadata.get("distributed_args") if isinstance(metadata, dict) else None
        if not isinstance(args, dict):
            continue
        world, stages = args.get("world_size"), args.get("pipeline_model_parallel_size")
        if isinstance(world, int) and isinstance(stages, int) and stages >= 2 and world % stages == 0:
            stride = world // stages
            return [(f"pp{first}", [first + stage * stride for stage in range(stages)]) for first in range(stride)]
    return []


def pipelines_from_p2p(p2p_groups: dict[int, set[str]]) -> list[tuple[str, list[int]]]:
    """Pipelines inferred from send/receive traffic: ranks sharing a P2P communicator are neighbouring stages.

    ``p2p_groups`` maps each rank to the group hashes of its hcom_send/receive ops. A hash seen on exactly
    two ranks links them; each chain of links is one pipeline, ordered from its lower-numbered end (the
    usual placement of stage 0; the imbalance measures do not depend on the direction).
    """
    members: dict[str, list[int]] = {}
    for rank, groups in p2p_groups.items():
        for group in groups:
            members.setdefault(group, []).append(rank)
    neighbours: dict[int, set[int]] = {}
    for ranks in members.values():
        if len(ranks) == 2:
            a, b = ranks
            neighbours.setdefault(a, set()).add(b)
            neighbours.setdefault(b, set()).add(a)
    chains, seen = [], set()
    for start in sorted(r for r, n in neighbours.items() if len(n) == 1):
        if start in seen:
            continue
        chain, previous = [start], None
        while True:
            following = [n for n in neighbours[chain[-1]] if n != previous and n not in chain]
            if len(following) != 1 or len(neighbours[chain[-1]]) > 2:
                break
            previous = chain[-1]
            chain.append(following[0])
        if len(neighbours[chain[-1]]) == 1:  # a clean path, not a ring or a tree
            seen.update(chain)
            chains.append((f"p2p:{chain[0]}-{chain[-1]}", chain))
    return chains


def p2p_waits(receive_waits: pd.DataFrame, ranks: list[int]) -> dict:
    """Who waits on whom in the P2P traffic of one pipeline.

    ``receive_waits`` has one row per (rank, group, peer) with the rank's ``wait_us`` per step in receives
    of that group and the ``peer`` rank on the other side (None when unknown).
    """
    rows = receive_waits.loc[receive_waits["rank"].isin(ranks)]
    if rows.empty:
        return {"max_p2p_wait_rank": None, "max_p2p_wait_us": None, "waits_on_rank": None}
    per_rank = rows.groupby("rank", sort=True)["wait_us"].sum()
    worst = int(per_rank.idxmax())
    mine = rows.loc[rows["rank"] == worst].sort_values("wait_us", ascending=False, kind="stable")
    peer = mine.iloc[0]["peer"]
    return {"max_p2p_wait_rank": worst, "max_p2p_wait_us": float(per_rank.max()),
            "waits_on_rank": None if peer is None or pd.isna(peer) else int(peer)}


def stage_spread(ranks: list[int], compute_us: dict[int, float]) -> dict | None:
    """Compute time per pipeline stage and how unevenly it is spread; None when a stage has no breakdown."""
    times = [compute_us.get(rank) for rank in ranks]
    if any(t is None for t in times):
        return None
    mean = sum(times) / len(times)
    slowest = max(range(len(times)), key=lambda i: times[i])
    fastest = min(range(len(times)), key=lambda i: times[i])
    return {
        "stages": len(times),
        "slowest_stage": slowest,
        "slowest_rank": ranks[slowest],
        "fastest_stage": fastest,
        "max_compute_us": times[slowest],
        "mean_compute_us": mean,
        "min_compute_us": times[fastest],
        "compute_spread_ratio": (times[slowest] - times[fastest]) / mean if mean > 0 else 0.0,
    }


def collective_stragglers(waits: pd.DataFrame) -> pd.DataFrame:
    """Per communicator group seen on 2+ ranks: the straggler and the time the others lose waiting for it.

    ``waits`` has one row per (rank, group) with ``wait_us`` per step inside that group's collectives. In a
    synchronous collective everybody waits for the last rank to arrive, which itself waits least: the rank
    with the smallest wait is the straggler, and the others' mean wait beyond its own is time lost to it.
    """
    ordered = waits.loc[waits["group"].notna()].sort_values(["group", "wait_us", "rank"], kind="stable")
    groups, ranks = ordered["group"].to_numpy(object), ordered["rank"].to_numpy()
    wait = ordered["wait_us"].to_numpy(float)
    bounds = [0, *(np.flatnonzero(groups[1:] != groups[:-1]) + 1), len(groups)]
    rows = []
    for start, end in zip(bounds[:-1], bounds[1:]):  # each group's members, the least waiting first
        if end - start < 2:
            continue
        others = wait[start + 1:end]
        missing = np.isnan(others)  # a mean as pandas takes it: NaN left out, the sum over the rest in place
        mean = float(np.where(missing, 0.0, others).sum() / (len(others) - missing.sum())) if not missing.all() else np.nan
        rows.append({
            "group": groups[start], "ranks": end - start, "rank": int(ranks[start]), "straggler_wait_us": float(wait[start]),
            "others_wait_us": mean, "lost_us": max(mean - float(wait[start]), 0.0), "max_wait_rank": int(ranks[end - 1]),
        })
    return pd.DataFrame(rows, columns=["group", "ranks", "rank", "straggler_wait_us", "others_wait_us", "lost_us",
                                       "max_wait_rank"])


def stage_layout(pipelines: list[list[int]], breakdowns: pd.DataFrame) -> dict:
    """How the ranks of all pipelines line up by stage, and whether the stages explain how the ranks differ.

    ``pipelines`` are the ranks of each pipeline in stage order; ``breakdowns`` one row per rank with ``rank``,
    ``step_time_us`` and the dimension columns. The stages explain the ranks' spread when every rank is in a
    pipeline and, for compute, exposed communication and free time alike, the ranks holding the same stage differ
    by less than the uneven-ranks threshold (5 % of the mean step): what differs is the stage, not the rank.
    """
    by_stage: dict[int, list[int]] = {}
    for ranks in pipelines:
        for stage, rank in enumerate(ranks):
            by_stage.setdefault(stage, []).append(rank)
    table = breakdowns.set_index("rank")
    mean_step = float(breakdowns["step_time_us"].mean()) if not breakdowns.empty else 0.0
    covered = set(table.index) <= {r for ranks in pipelines for r in ranks}
    within = 0.0
    for ranks in by_stage.values():
        present = [r for r in ranks if r in table.index]
        for column in DIMENSIONS.values():
            if len(present) >= 2:
                values = table.loc[present, column]
                within = max(within, float(values.max() - values.min()))
    return {
        "stage_ranks": "; ".join(f"stage {stage}: {', '.join(map(str, sorted(ranks)))}" for stage, ranks in sorted(by_stage.items())),
        "by_stage": by_stage,
        "explains_rank_spread": bool(covered and mean_step > 0 and within < UNEVEN_SHARE * mean_step),
    }
