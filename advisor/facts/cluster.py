"""Cluster facts: how the ranks of one profile differ, and their places in pipelines (pure functions over per-rank
breakdowns, communication ops and links)."""

from __future__ import annotations

from dataclasses import dataclass

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


def waits_for_straggler(ops: pd.DataFrame, straggler: int) -> dict[int, pd.DataFrame]:
    """Where the other members of a group wait for its straggler: per rank, its collectives that the straggler enters
    later, each from the rank's own start to the straggler's (step (NaN where none), start, end, µs).

    ``ops`` holds the group's collective ops of every rank (rank, step, op_name, start_us); an op is matched across
    the ranks by step, name and its repetition in the step. Ops without a start are left out."""
    timed = ops.loc[ops["start_us"].notna()].sort_values("start_us", kind="stable")
    timed = timed.assign(step=timed["step"].astype("float64").fillna(-1.0))
    timed["repeat"] = timed.groupby(["rank", "step", "op_name"], sort=False).cumcount()
    key = ["step", "op_name", "repeat"]
    late = timed.loc[timed["rank"] == straggler, [*key, "start_us"]].rename(columns={"start_us": "late_us"})
    others = timed.loc[timed["rank"] != straggler].merge(late, on=key)
    waiting = others.loc[others["late_us"] > others["start_us"]]
    frame = pd.DataFrame({"step": waiting["step"].where(waiting["step"] >= 0), "start": waiting["start_us"],
                          "end": waiting["late_us"]})
    return {int(rank): part.reset_index(drop=True) for rank, part in frame.groupby(waiting["rank"], sort=True)}


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


# P2P op names (lower case) by direction: Ascend's hcom_* ops, and the NCCL kernels of a GPU trace ("Send#0").
_BOTH = ("hcom_batchsendrecv", "sendrecv#")
_SEND = ("hcom_send", "send#")
_RECEIVE = ("hcom_receive", "recv#")


def p2p_direction(op_name: str) -> str | None:
    """'send', 'receive' or 'both' (batchSendRecv) for a P2P op's name; None for any other op."""
    name = str(op_name).lower()
    if name.startswith(_BOTH):
        return "both"
    if name.startswith(_SEND):
        return "send"
    return "receive" if name.startswith(_RECEIVE) else None


@dataclass(frozen=True)
class P2pActivity:
    """One rank's P2P ops: how many per step by direction (also per communicator), which came first, and their time."""

    sends: float
    receives: float
    batched: float
    first: str | None  # the direction of the step's first P2P op
    per_group: dict[str, tuple[float, float]]  # communicator → (sends, receives) per step
    receive_wait_us: float  # per step, in receives and batchSendRecv
    elapse_us: float  # per step, every P2P op
    fits_schedule: bool = True  # the counts fit a pipeline schedule (``schedule_fit``)
    schedule_note: str = ""  # why they do or do not, in words


def p2p_activity(ops: pd.DataFrame, steps: int) -> P2pActivity | None:
    """What one rank's P2P ops (rows of its communication ops: op_name, group, step, start_us, wait_ms, elapse_ms) show;
    None without any. ``steps`` is the rank's step count."""
    direction = ops["op_name"].map(p2p_direction)
    ops = ops.assign(direction=direction).loc[direction.notna()]
    if ops.empty:
        return None
    steps = max(steps, 1)
    step = pd.to_numeric(ops["step"], errors="coerce")
    first_step = ops.loc[step == step.min()] if step.notna().any() else ops
    first = first_step.sort_values("start_us", kind="stable", na_position="last")["direction"].iloc[0]
    per_group = {str(group): (float((rows["direction"] == "send").sum()) / steps,
                              float((rows["direction"] == "receive").sum()) / steps)
                 for group, rows in ops.groupby("group", sort=True, dropna=False)}
    waiting = ops["direction"] != "send"
    fits, note = schedule_fit(ops)
    return P2pActivity(
        sends=float((ops["direction"] == "send").sum()) / steps,
        receives=float((ops["direction"] == "receive").sum()) / steps,
        batched=float((ops["direction"] == "both").sum()) / steps,
        first=first,
        per_group=per_group,
        receive_wait_us=float(ops.loc[waiting, "wait_ms"].fillna(0.0).sum()) * 1000 / steps,
        elapse_us=float(ops["elapse_ms"].fillna(0.0).sum()) * 1000 / steps,
        fits_schedule=fits,
        schedule_note=note,
    )


def schedule_fit(ops: pd.DataFrame) -> tuple[bool, str]:
    """Whether one rank's P2P ops (with their ``direction``, ``group`` and ``step``) fit a pipeline schedule, and why in
    words. In a training pipeline (1F1B, GPipe, interleaved) each micro-batch crosses every stage boundary forward
    (activations) and back (gradients): in every step a stage sends to and receives from each P2P communicator as
    often — or exchanges both in batchSendRecv, which does not say its direction. One send and no receive fits no
    schedule (a forward-only pipeline, or P2P traffic that is no pipeline's): then neither the micro-batches nor the
    bubble can be told from the ops."""
    step = ops["step"].astype(object).where(ops["step"].notna(), "")
    counts = ops.groupby([step, ops["group"].astype(object).where(ops["group"].notna(), "")], sort=True)[
        "direction"].value_counts().unstack(fill_value=0)
    for name in ("send", "receive", "both"):
        if name not in counts:
            counts[name] = 0
    uneven = counts.loc[(counts["both"] == 0) & (counts["send"] != counts["receive"])]
    if uneven.empty:
        return True, ("in every step it sends to and receives from each P2P communicator as often (activations "
                      "forward, gradients back), as a pipeline schedule does")
    (at_step, group), row = next(iter(uneven.iterrows()))
    where = f"step {at_step}" if at_step != "" else "the capture"
    return False, (f"in {where} it sends {int(row['send'])} and receives {int(row['receive'])} P2P op(s) in communicator "
                   f"{group}: a pipeline stage sends and receives as often with each neighbour (activations forward, "
                   "gradients back), so these ops fit no pipeline schedule and its micro-batches and bubble cannot be "
                   "told from them")


def stage_position(activity: P2pActivity, before: int, after: int) -> str:
    """first, middle, last or unknown, from the P2P ops and the neighbours numbered below (``before``) and above
    (``after``) the rank in their communicators (Megatron numbers stages in rank order).

    Neighbours on both sides, or P2P ops in two communicators (one per neighbour, as torch_npu opens them), make a
    middle stage. Otherwise a stage that only sends, or starts its step by sending, has no stage before it (the first);
    one that only receives, or starts by receiving and has one neighbour, is the last. batchSendRecv does not say its
    direction: the neighbour's number tells.
    """
    if (before and after) or (not before and not after and len(activity.per_group) >= 2):
        return "middle"
    if activity.sends and not activity.receives and not activity.batched:
        return "first"
    if activity.receives and not activity.sends and not activity.batched:
        return "last"
    if activity.first == "send":
        return "first"
    if activity.first == "receive" and before + after == 1:
        return "last"
    if activity.first == "both" and before + after == 1:
        return "first" if after else "last"
    return "unknown"


def micro_batches(activity: P2pActivity | None, position: str) -> float | None:
    """Micro-batches per step: sends or receives per step to one neighbour, the larger (each micro-batch crosses a
    stage boundary forward and, in training, back). A middle stage whose ops share one communicator counts both
    neighbours' there. None without sends and receives (batchSendRecv alone), where the position is unknown, or where
    the ops fit no pipeline schedule (``schedule_fit``)."""
    if activity is None or position == "unknown" or not activity.fits_schedule:
        return None
    if not (activity.sends or activity.receives):
        return None
    most = max(max(pair) for pair in activity.per_group.values())
    directional = [pair for pair in activity.per_group.values() if any(pair)]
    return most / 2 if position == "middle" and len(directional) == 1 else most


def schedule_bubble(stages: int, micro: float | None) -> float | None:
    """The share of a step a 1F1B (or GPipe) stage idles: (p − 1) / (m + p − 1) (Huang et al. 2019, GPipe §2.3;
    Narayanan et al. 2021 §2.2.1 give (p − 1) / m of the ideal time, the same share of the step)."""
    if not micro or micro <= 0:
        return None
    return (stages - 1) / (micro + stages - 1)


def oriented(chain: list[int], first: dict[int, str | None]) -> list[int]:
    """A P2P chain in stage order: reversed when its ends' first P2P ops say so (the first stage starts by sending,
    the others by receiving); as given (lower-numbered end first) when they do not tell."""
    votes = ((first.get(chain[-1]) == "send") + (first.get(chain[0]) == "receive")
             - (first.get(chain[0]) == "send") - (first.get(chain[-1]) == "receive"))
    return chain[::-1] if votes > 0 else chain


def open_ends(chain: list[int], p2p_groups: dict[int, set[str]]) -> tuple[bool, bool]:
    """Whether a P2P chain (in stage order) goes on beyond its first and its last rank: that end has a P2P
    communicator no other profiled rank has, so its neighbour on that side was not profiled."""
    seen: dict[str, int] = {}
    for groups in p2p_groups.values():
        for group in groups:
            seen[group] = seen.get(group, 0) + 1
    return tuple(any(seen[g] == 1 for g in p2p_groups.get(end, ())) for end in (chain[0], chain[-1]))


def matrix_peers(matrix: pd.DataFrame, own: int | None) -> tuple[set[int], set[int]]:
    """The communicator-local ranks one rank's P2P links (communication_matrix.json rows of one communicator: src,
    dst, transport) send to and receive from, ``own`` being its own local rank there; on-chip copies left out."""
    if own is None:
        return set(), set()
    links = matrix.loc[(matrix["transport"] != "LOCAL") & (matrix["src"] != matrix["dst"])]
    sends_to = {int(d) for s, d in zip(links["src"], links["dst"]) if int(s) == own}
    receives_from = {int(s) for s, d in zip(links["src"], links["dst"]) if int(d) == own}
    return sends_to, receives_from


def neighbour_text(prev_rank: int | None, next_rank: int | None, local: bool) -> str:
    """'rank 0 before it, rank 2 after it' (``local``: ranks inside their communicator); 'neighbours not recorded'."""
    word = "communicator-local rank" if local else "rank"
    parts = ([f"{word} {prev_rank} before it"] if prev_rank is not None else []) + \
            ([f"{word} {next_rank} after it"] if next_rank is not None else [])
    return ", ".join(parts) if parts else "its neighbours not recorded (no P2P link in communication_matrix.json)"


def waits_itself(transit_share: float | None, notify_share: float | None) -> bool | None:
    """Whether a rank is itself mostly waiting in its collectives: they move data less than half their time, or its
    HCCL Notify_Wait fills half of them; None when neither is known."""
    if transit_share is None and notify_share is None:
        return None
    return (transit_share is not None and transit_share < 0.5) or (notify_share or 0.0) >= 0.5


def waiting_note(transit_share: float | None, notify_share: float | None, exposed_us: float,
                 step_us: float) -> tuple[bool | None, str]:
    """Whether the rank that waits least in the collectives is itself waiting (``waits_itself``; unknown without its
    communication.json, ``transit_share`` None), and that in words."""
    if transit_share is None:
        share = exposed_us / step_us if step_us > 0 else 0.0
        return None, (f"yet it spends {exposed_us:,.0f} µs per step ({share:.0%} of its step) in exposed "
                      "communication itself; without communication.json (Level0 records no wait time) that cannot be "
                      "split into waiting and moving data, so it is not shown to be the rank the others wait for")
    if waits_itself(transit_share, notify_share):
        return True, (f"but its own collectives move data only {transit_share:.0%} of their time and wait the rest: it "
                      "waits for others too, so it is not the rank the others wait for")
    return False, (f"and its collectives mostly move data ({transit_share:.0%} of their time): it is the late one; "
                   "find what delays it before the collectives")
