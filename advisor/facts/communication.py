"""Communication: pure functions over the tables of communication.json, and the tables a rank hands to the
cross-rank communication facts (``facts.reduce``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

import re

from advisor.facts.models import Fact
from advisor.facts.platforms import traits
from advisor.facts.scope import RankScope
from advisor.ingest.columns import Columns
from advisor.facts.windows import inside, window_of
from advisor.ingest.lanes import lane_windows
from advisor.ingest.gpu import nccl_collectives
from advisor.ingest.groups import groups_by_hash

# Ops moving less than this over a transport are "small" (msprof-analyze's packet check: SDMA 16 MB, RDMA 1 MB).
SMALL_OP_MB = {"RDMA": 1.0}
SMALL_OP_MB_DEFAULT = 16.0
_LINK_SPLIT = ("HCCS", "PCIE", "SIO")


def communication_summary(ops: pd.DataFrame, steps: pd.Series) -> pd.DataFrame:
    """Per rank and kind (collective, p2p): op count and CANN times per step in µs, and their shares of elapse.

    ``ops`` holds the ops of every rank (column ``rank``), ``steps`` each rank's step count: one grouping serves every
    rank, with per group the same compensated sums as for that rank alone."""
    columns = ["elapse_ms", "transit_ms", "wait_ms", "synchronization_ms", "idle_ms"]
    frame = ops[columns].assign(transit_from_bandwidth=ops["transit_from_bandwidth"].astype(bool)
                                if "transit_from_bandwidth" in ops else False)
    grouped = frame.groupby([ops["rank"], ops["kind"]], sort=True)
    summary = grouped.sum()  # one pass over every column (the same compensated sums as one aggregation each)
    summary.insert(0, "ops", grouped.size())
    summary = summary.reset_index()
    per_step = _per_step(summary["rank"], steps)
    summary["transit_from_bandwidth_per_step"] = summary["transit_from_bandwidth"].astype(float) / per_step
    summary["ops_per_step"] = summary["ops"] / per_step
    for name in ("elapse", "transit", "wait", "synchronization", "idle"):
        summary[f"{name}_us"] = summary[f"{name}_ms"] * 1000 / per_step
    elapse = summary["elapse_us"].where(summary["elapse_us"] > 0)
    for name in ("transit", "wait", "idle"):
        summary[f"{name}_share"] = (summary[f"{name}_us"] / elapse).clip(0, 1).fillna(0.0)
    waited = summary["wait_us"] + summary["transit_us"]
    summary["wait_ratio"] = (summary["wait_us"] / waited.where(waited > 0)).clip(0, 1).fillna(0.0)
    return summary


def _per_step(ranks: pd.Series, steps: pd.Series) -> np.ndarray:
    """Each row's step count (that of its rank in ``steps``), at least 1."""
    return np.maximum(ranks.map(steps).to_numpy("int64"), 1)


def transport_summary(traffic: pd.DataFrame, steps: pd.Series) -> pd.DataFrame:
    """Per rank and transport: MB and µs per step, bandwidth, and the share of ops that move little data.

    ``traffic`` holds the traffic of every rank (column ``rank``), ``steps`` each rank's step count. SDMA is the sum
    of HCCS, PCIE and SIO, so it is dropped for a rank whose traffic has the split.
    """
    rows = traffic.loc[traffic["size_mb"] > 0]
    split = rows["transport"].isin(_LINK_SPLIT)
    if split.any():
        rows = rows.loc[~(split.groupby(rows["rank"]).transform("any") & (rows["transport"] == "SDMA"))]
    threshold = rows["transport"].map(SMALL_OP_MB).fillna(SMALL_OP_MB_DEFAULT)
    grouped = pd.DataFrame({"size_mb": rows["size_mb"], "time_ms": rows["time_ms"],
                            "small": (rows["size_mb"] < threshold).astype(float)}
                           ).groupby([rows["rank"], rows["transport"]], sort=True)
    summary = grouped.sum()
    summary["small"] = summary["small"] / grouped.size()  # the share of small ops: a count over a count
    summary.insert(0, "ops", grouped.size())
    summary = summary.reset_index()
    per_step = _per_step(summary["rank"], steps)
    summary["size_mb_per_step"] = summary["size_mb"] / per_step
    summary["time_us_per_step"] = summary["time_ms"] * 1000 / per_step
    summary["bandwidth_gbps"] = (summary["size_mb"] / summary["time_ms"].where(summary["time_ms"] > 0)).fillna(0.0)
    summary["ops_per_step"] = summary["ops"] / per_step
    summary["small_op_share"] = summary["small"].astype(float)
    return summary


def link_summary(matrix: pd.DataFrame, groups: dict[int, dict[str, tuple[str, tuple[int, ...]]]]) -> pd.DataFrame:
    """Per rank, group, src → dst and transport: MB and µs per step and bandwidth, ranks made global where the
    rank's groups know the group.

    ``matrix`` holds the communication_matrix rows of every rank (column ``rank``); ``groups`` maps a rank to its
    groups: hash → (name, sorted global ranks). LOCAL (on-chip) copies are dropped.
    """
    rows = matrix.loc[(matrix["transport"] != "LOCAL") & (matrix["src"] != matrix["dst"])]
    steps = matrix.groupby("rank", sort=False)["step"].nunique(dropna=False)
    summary = rows.groupby(["rank", "group", "src", "dst", "transport"], sort=True).agg(
        size_mb=("size_mb", "sum"), time_ms=("time_ms", "sum")).reset_index()
    if summary.empty:
        return summary
    per_step = _per_step(summary["rank"], steps)
    keys = list(zip(summary["rank"].tolist(), summary["group"].tolist()))  # tolist: iterating text cells is slow
    local_src, local_dst = summary["src"].tolist(), summary["dst"].tolist()

    def global_rank(rank: int, group: str, local: int) -> int | None:
        known = groups.get(rank, {}).get(group)
        return known[1][local] if known is not None and 0 <= local < len(known[1]) else None

    src = [global_rank(r, g, s) for (r, g), s in zip(keys, local_src)]
    dst = [global_rank(r, g, d) for (r, g), d in zip(keys, local_dst)]
    mapped = [s is not None and d is not None for s, d in zip(src, dst)]
    summary["ranks_are_global"] = mapped
    summary["src_rank"] = [s if m else int(local) for s, m, local in zip(src, mapped, local_src)]
    summary["dst_rank"] = [d if m else int(local) for d, m, local in zip(dst, mapped, local_dst)]
    summary["group_name"] = [groups.get(r, {}).get(g, (g,))[0] for r, g in keys]
    summary["size_mb_per_step"] = summary["size_mb"] / per_step
    summary["time_us_per_step"] = summary["time_ms"] * 1000 / per_step
    summary["bandwidth_gbps"] = (summary["size_mb"] / summary["time_ms"].where(summary["time_ms"] > 0)).fillna(0.0)
    return summary


def median_ratios(bandwidth: pd.Series, transport: pd.Series) -> pd.Series:
    """Each link's bandwidth over the median of its transport's links (None with fewer than 3 links)."""
    counts = transport.map(transport.value_counts())
    medians = bandwidth.groupby(transport).transform("median")
    return (bandwidth / medians.where(medians > 0)).where(counts >= 3)


_OP_KEY = ["step", "kind", "op_name", "group"]


def _split_ops(traffic: pd.DataFrame) -> pd.Series:
    """Per row: whether its op's traffic is split into HCCS/PCIE/SIO (then its SDMA row is their sum)."""
    split = traffic["transport"].isin(_LINK_SPLIT)
    if traffic.empty or not split.any():
        return split
    return split.groupby([traffic[k] for k in _OP_KEY], dropna=False).transform("any").astype(bool)


def transit_from_bandwidth(ops: Columns, traffic: Columns) -> Columns:
    """``ops`` with each op's transit checked against its Bandwidth Info, and ``transit_from_bandwidth`` marking the fixed.

    Some captures write 0 (or nothing) as an op's Transit Time in Time Info while its Bandwidth Info moved hundreds of
    MB. For those the transit is the Bandwidth Info time of the op's busiest transport (SDMA only when the file does
    not split it into HCCS/PCIE/SIO) — that time sums the transport's links, so it is capped at elapse − wait — and
    idle is recomputed as elapse − transit − wait. The other ops keep their values (and their columns their dtype).
    """
    fixed = np.zeros(len(ops["transit_ms"]), dtype=bool)
    transit = _floats(ops["transit_ms"])
    missing = ~(transit > 0)  # 0, negative or missing
    if missing.any() and len(traffic["transport"]):
        busiest = _busiest_transport_ms(traffic)
        bandwidth = np.array([busiest.get(key, np.nan) for key in _op_keys(ops)], dtype="float64")
        fixed = missing & (bandwidth > 0)
    if not fixed.any():
        return {**ops, "transit_from_bandwidth": fixed}
    elapse, wait = _floats(ops["elapse_ms"]), _floats(ops["wait_ms"])
    wait = np.where(np.isnan(wait), 0.0, wait)
    room = _at_least_zero(elapse - wait)
    capped = np.where((bandwidth <= room) | np.isnan(room), bandwidth, room)  # as pandas clips at a missing bound
    transit, idle = ops["transit_ms"].copy(), ops["idle_ms"].copy()
    transit[fixed] = capped[fixed]
    idle[fixed] = _at_least_zero(elapse - capped - wait)[fixed]
    return {**ops, "transit_ms": transit, "idle_ms": idle, "transit_from_bandwidth": fixed}


def _busiest_transport_ms(traffic: Columns) -> dict[tuple, float]:
    """Per op (``_op_keys``) that moved data: the Bandwidth Info time of its busiest transport, SDMA left out where
    the op's traffic splits it into HCCS/PCIE/SIO (it is their sum)."""
    moved: dict[tuple, list[tuple[str, float]]] = {}
    rows = zip(_op_keys(traffic), traffic["transport"], traffic["size_mb"], traffic["time_ms"])
    for key, transport, size, time in rows:
        if size > 0 and time > 0:
            moved.setdefault(key, []).append((transport, time))
    busiest = {}
    for key, times in moved.items():
        split = any(transport in _LINK_SPLIT for transport, _ in times)
        busiest[key] = max(time for transport, time in times if not (split and transport == "SDMA"))
    return busiest


def _op_keys(table: Columns) -> list[tuple]:
    """Each row's op: (step as a number, None when missing; kind, op_name, group)."""
    steps = pd.to_numeric(table["step"], errors="coerce").astype("float64")
    return [(None if np.isnan(step) else float(step), kind, name, group)
            for step, kind, name, group in zip(steps, table["kind"], table["op_name"], table["group"])]


def _floats(values: np.ndarray) -> np.ndarray:
    """A column as float64, missing values NaN."""
    return np.asarray(values, dtype="float64")


def _at_least_zero(values: np.ndarray) -> np.ndarray:
    """Negative values 0, missing ones kept (as pandas' clip(lower=0))."""
    return np.where(np.isnan(values) | (values >= 0), values, 0.0)


@dataclass(frozen=True)
class OutsideWaits:
    """One communicator's wait for members outside the profile, per profiled member (rank): the ms over the capture
    (``ms``) and where it lies (``stretches``: each op that waits, from the last profiled member's arrival to the op's
    end on that rank — ``step`` (NaN where none), ``start``, ``end``, µs on the clock of the ops' ``start_us``)."""

    ms: dict[int, float]
    stretches: dict[int, pd.DataFrame]


def waiting_stretches(ops: pd.DataFrame, waiting: pd.Series) -> dict[int, pd.DataFrame]:
    """Per rank, the ops of ``ops`` (``rank``, ``step`` (-1: none), ``last_arrival_us``, ``end_us``) whose wait for
    members outside the profile (``waiting``, µs) is positive, as the stretches from the last profiled arrival to the
    op's end (step, start, end)."""
    rows = ops.loc[waiting > 0]
    frame = pd.DataFrame({"step": rows["step"].where(rows["step"] >= 0), "start": rows["last_arrival_us"],
                          "end": rows["end_us"]})
    return {int(rank): part.reset_index(drop=True) for rank, part in frame.groupby(rows["rank"], sort=True)}


def analysed(ops: pd.DataFrame) -> pd.Series:
    """Whether CANN split each op's time: an op whose transit, wait and synchronisation are all 0 (its whole elapse
    Idle Time — as communication.json writes for some ops of an 8-rank server's communicators, whose traffic the
    Bandwidth Info still shows) says nothing about what its time was spent on."""
    split = [ops[column].fillna(0.0) > 0 for column in ("transit_ms", "wait_ms", "synchronization_ms") if column in ops]
    if not split:
        return pd.Series(True, index=ops.index)
    return pd.concat(split, axis=1).any(axis=1)


def outside_waits_of_members(group: str, ops_by_rank: dict[int, pd.DataFrame], size: int | None) -> OutsideWaits | None:
    """How long, and where, each profiled member of one group waits for members outside the profile (ms over the
    capture). ``ops_by_rank`` holds the op tables of the ranks with ops in ``group`` (columns of ``communication.json``
    with ``start_us``); None when the group's size is unknown or every member is profiled. An op is matched across the
    profiled members by step and name; once the last profiled member has arrived, the time a rank still spends in the
    op without moving data (its end − that arrival − its transit) can only be waiting for members that were not
    profiled. Ops not found on every profiled member, or whose time CANN did not split (``analysed``), are left out."""
    members = {r: ops.loc[(ops["kind"] == "collective") & (ops["group"] == group) & ops["start_us"].notna()
                          & analysed(ops)]
               for r, ops in ops_by_rank.items()}
    members = {r: ops for r, ops in members.items() if not ops.empty}
    if not members or size is None or size <= len(members):
        return None
    every = pd.concat([ops.assign(rank=r) for r, ops in members.items()], ignore_index=True)
    every["step"] = every["step"].fillna(-1)
    per_op = every.groupby(["step", "op_name"], sort=False)
    complete = per_op["rank"].transform("nunique") == len(members)
    every["last_arrival_us"] = per_op["start_us"].transform("max")
    own = every.loc[complete].assign(end_us=lambda frame: frame["start_us"] + frame["elapse_ms"] * 1000)
    moving_us = own["transit_ms"].fillna(0.0) * 1000
    after = (own["end_us"] - own["last_arrival_us"] - moving_us).clip(lower=0.0)
    after = after.clip(upper=(own["elapse_ms"] * 1000 - moving_us).clip(lower=0.0))
    # each rank's rows in their own order, summed as a Series (the same sum as for that rank alone)
    order = own["rank"].to_numpy().argsort(kind="stable")
    ranks_sorted = own["rank"].to_numpy()[order]
    after_sorted = after.iloc[order]
    found = {}
    for rank in members:
        first, last = ranks_sorted.searchsorted(rank, "left"), ranks_sorted.searchsorted(rank, "right")
        found[rank] = float(after_sorted.iloc[first:last].sum()) / 1000
    return OutsideWaits(found, waiting_stretches(own, after))


def peer_waits(notify: pd.DataFrame, steps: int) -> dict[int, float]:
    """µs per step of HCCL Notify_Wait per group-local peer (``notify``: ts, dur, peer, already inside the steps)."""
    sums = notify.groupby("peer")["dur"].sum() / max(steps, 1)
    return {int(peer): float(us) for peer, us in sums.items()}


def waited_peer(waits: dict[int, float] | None) -> dict[str, object]:
    """The CommunicationFact fields naming the peer waited for longest (ties: the lower rank)."""
    if not waits or sum(waits.values()) <= 0:
        return {}
    peer = min(waits, key=lambda p: (-waits[p], p))
    share = waits[peer] / sum(waits.values())
    return {"waited_peer": peer, "waited_peer_us": waits[peer], "waited_peer_share": share,
            "straggler_hint": f" This rank's HCCL Notify_Wait tasks wait longest for local rank {peer} ({waits[peer]:,.0f} µs "
                              f"per step, {share:.0%} of the Notify_Wait time): profile the whole communicator, "
                              "starting with that rank, to see what delays it."}


def rank_ranges(ranks: list[int]) -> str:
    """'2–7' for consecutive ranks, '0, 2, 4' otherwise (runs of three or more collapse)."""
    ranks = sorted(set(ranks))
    parts, start = [], 0
    for i in range(1, len(ranks) + 1):
        if i == len(ranks) or ranks[i] != ranks[i - 1] + 1:
            run = ranks[start:i]
            parts.append(f"{run[0]}–{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)))
            start = i
    return ", ".join(parts)


@dataclass(frozen=True)
class Membership:
    """What the profile tells about one communicator's members."""

    size: int  # members: parallel_group_info, else at least the local ranks its matrix links reach
    global_ranks: tuple[int, ...] | None  # sorted, when parallel_group_info lists the group
    local_of: dict[int, int]  # profiled rank → its local rank in the communicator, where the matrix shows it

    def missing(self, profiled: set[int]) -> str | None:
        """The members not profiled, as text: global ranks when known, else local ranks of the communicator."""
        if self.global_ranks is not None:
            absent = [r for r in self.global_ranks if r not in profiled]
            return f"rank{'s' if len(absent) > 1 else ''} {rank_ranges(absent)}" if absent else None
        known = {self.local_of[r] for r in profiled if r in self.local_of}
        if len(known) < len(profiled):
            return None
        absent = [r for r in range(self.size) if r not in known]
        return f"local rank{'s' if len(absent) > 1 else ''} {rank_ranges(absent)}" if absent else None


def matrix_members(matrix: Columns) -> dict[str, tuple[frozenset[int], int | None]]:
    """What one rank's communication_matrix links tell about each group they are in, in order of appearance: the local
    ranks they reach, and the rank's own local rank (the most frequent source of its links; ties: the first seen)."""
    reached: dict[object, set[int]] = {}
    sources: dict[object, Counter[int]] = {}
    for group, src, dst in zip(matrix["group"], matrix["src"], matrix["dst"]):
        if not pd.isna(group):
            reached.setdefault(group, set()).update((int(src), int(dst)))
            sources.setdefault(group, Counter())[int(src)] += 1
    return {str(group): (frozenset(seen), sources[group].most_common(1)[0][0]) for group, seen in reached.items()}


def memberships_of(groups: dict[str, tuple[int, ...]],
                   evidence: dict[int, dict[str, tuple[frozenset[int], int | None]]]) -> dict[str, Membership]:
    """Per group hash: its size and members, from parallel_group_info (``groups``: hash → global ranks) and else
    from each profiled rank's ``matrix_members`` (local ranks src → dst; a rank's own local rank is the source of its
    links)."""
    locals_seen: dict[str, set[int]] = {}
    local_of: dict[str, dict[int, int]] = {}
    for rank, found in evidence.items():
        for group, (seen, source) in found.items():
            locals_seen.setdefault(group, set()).update(seen)
            if source is not None:
                local_of.setdefault(group, {})[rank] = source
    found_groups = {}
    for group in set(groups) | set(locals_seen):
        ranks = groups.get(group)
        seen = locals_seen.get(group, set())
        size = len(ranks) if ranks else (max(seen) + 1 if seen else 0)
        if size >= 1:
            found_groups[group] = Membership(size, tuple(sorted(ranks)) if ranks else None, local_of.get(group, {}))
    return found_groups


COLLECTIVES = {"allreduce": "all_reduce", "reducescatter": "reduce_scatter", "allgather": "all_gather",
               "alltoall": "all_to_all"}


def collective_of(op_type: str) -> str | None:
    """all_reduce, reduce_scatter, all_gather or all_to_all from an op's type or name (hcom_allReduce__586_2_1), or None."""
    key = re.sub(r"[^a-z]", "", op_type.lower())
    return next((value for word, value in COLLECTIVES.items() if word in key), None)


def tensor_mb(collective: str, transit_mb: float, ranks: int | None) -> tuple[float, float]:
    """The range of the tensor a collective carries (MB) given the data one rank sent: a ring or mesh AllReduce over
    n ranks sends 2(n − 1)/n of it; ReduceScatter, AllGather and AllToAll (n − 1)/n of the full tensor (their input,
    output and input); unknown n spans n = 2 … ∞."""
    if ranks is not None and ranks >= 2:
        full = transit_mb * ranks / (ranks - 1)
        value = full / 2 if collective == "all_reduce" else full
        return value, value
    return (transit_mb / 2, transit_mb) if collective == "all_reduce" else (transit_mb, 2 * transit_mb)


def largest_tensor(ops: pd.DataFrame, traffic: pd.DataFrame, sizes: dict[str, tuple[int, bool]]) -> dict[str, object] | None:
    """One rank's collective op carrying the largest tensor — what HCCL must stage in its HCCL_BUFFSIZE buffer — as
    ``op`` (name), ``collective``, ``sent_mb`` (what it sent, communication.json Bandwidth Info) and the least and
    the most its tensor can be, ``low_mb`` and ``high_mb``, from its communicator's size in ``sizes`` (group → (size,
    exact)): one value where exact (parallel_group_info), else n from that size (the least the links show) to ∞.
    None without a collective of a known kind that sent data."""
    sent = op_traffic(ops, traffic)
    sent = sent.assign(collective=sent["op_name"].astype(str).map(collective_of)).dropna(subset=["collective"])
    sent = sent.loc[sent["transit_mb"] > 0]
    if sent.empty:
        return None
    ranges = []
    for kind, transit, group in zip(sent["collective"], sent["transit_mb"], sent["group"]):
        size, exact = sizes.get(str(group), (None, False))
        least = tensor_mb(kind, transit, size if exact else None)[0]
        ranges.append((least, tensor_mb(kind, transit, size)[1]))
    best = int(np.argmax([low for low, _ in ranges]))
    row = sent.iloc[best]
    return {"op": str(row["op_name"]), "collective": str(row["collective"]), "sent_mb": float(row["transit_mb"]),
            "low_mb": float(ranges[best][0]), "high_mb": float(max(ranges[best]))}


def op_traffic(ops: pd.DataFrame, traffic: pd.DataFrame) -> pd.DataFrame:
    """Per collective op (step, op_name, group): the MB it sent over the links (transit_mb), SDMA left out where the
    file splits it into HCCS/PCIE/SIO (it is their sum), and 0 for an op without Bandwidth Info."""
    collective = ops.loc[ops["kind"] == "collective", ["step", "op_name", "group"]].drop_duplicates()
    collective = collective.assign(step=pd.to_numeric(collective["step"], errors="coerce").astype("float64"))
    moved = traffic.loc[(traffic["kind"] == "collective") & (traffic["size_mb"] > 0)]
    moved = moved.assign(step=pd.to_numeric(moved["step"], errors="coerce").astype("float64"))
    moved = moved.loc[~(_split_ops(moved) & (moved["transport"] == "SDMA"))]
    sent = moved.groupby(["step", "op_name", "group"], dropna=False)["size_mb"].sum().rename("transit_mb").reset_index()
    out = collective.merge(sent, on=["step", "op_name", "group"], how="left")
    out["transit_mb"] = out["transit_mb"].fillna(0.0)
    return out.reset_index(drop=True)


def communication_tables(scope: RankScope) -> list[Fact]:
    """No facts of its own: the small tables the reduce computes the communication facts from — a GPU rank's NCCL
    kernels, the HCCL Notify_Wait time per peer, the ops and their traffic (without communication.json, the
    collectives' spans on the trace's HCCL lane: ``span_ops``), the matrix's links and communicators."""
    rank, out = scope.rank, scope.out
    if rank.kineto is not None and rank.kernels is not None:
        out.nccl = nccl_collectives(rank.kineto, rank.kernels.frame["step"])
    if rank.trace is not None and not rank.trace.notify.empty:
        windows = scope.host_windows
        out.peer_waits = peer_waits(inside(rank.trace.notify, windows), max(len(windows), 1))
    if traits(rank.platform).collectives_carry_traffic and rank.communication is not None:
        out.traffic = rank.communication.traffic_columns
        out.ops = transit_from_bandwidth(rank.communication.op_columns, out.traffic)
    elif traits(rank.platform).collectives_carry_traffic and rank.trace is not None and not rank.trace.collectives.empty:
        # the step windows reach the device work launched in them: a step's last collective may start after its host end
        out.ops = span_ops(rank.trace.collectives, lane_windows(rank.trace), groups_by_hash(rank.metadata))
    if rank.matrix is not None and len(rank.matrix["step"]):
        out.matrix = rank.matrix
        out.matrix_groups = matrix_members(out.matrix)
    return []


# --- the collectives' spans on the trace (a capture without communication.json: Level0) -----------------------------

SPANS = "spans"  # the ``times_from`` of ops made of the trace's collective spans (ops of communication.json: None)
_OP_NAME = re.compile(r"^hcom_([A-Za-z]+)__(\d+)_(\d+)_\d+$")  # type, last digits of the group hash, op index
_P2P_TYPES = ("send", "receive", "batchsendrecv")
# bytes per element of the HCCL data types a collective's args name
DTYPE_BYTES = {"INT8": 1, "UINT8": 1, "HIF8": 1, "FP8E4M3": 1, "FP8E5M2": 1, "INT16": 2, "UINT16": 2, "FP16": 2,
               "BFP16": 2, "BF16": 2, "INT32": 4, "UINT32": 4, "FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8}
SPAN_END_TOLERANCE_US = 100.0  # profiled members leave a collective together: their ends this close (or 5 % of it)
SPAN_WAIT_FACTOR = 2.0  # after every profiled member arrived, an op must last this many times its transfer bound


def span_group(op_name: str, known: dict[str, object]) -> str | None:
    """The communicator of a collective op named ``hcom_<type>__<digits>_<index>_<n>``: the hash of a group of
    parallel_group_info (``known``, by hash) that is the only one ending in those digits, else '…<digits>'."""
    match = _OP_NAME.match(op_name)
    if match is None:
        return None
    digits = match.group(2)
    candidates = [group for group in known if group.endswith(digits)]
    return candidates[0] if len(candidates) == 1 else f"…{digits}"


def span_ops(collectives: pd.DataFrame, windows: pd.DataFrame, known: dict[str, object]) -> Columns:
    """A rank's collective ops from the spans of its trace's HCCL lane, in the columns of communication.json's ops:
    step (the ProfilerStep window its start falls in, ``ingest.lanes.lane_windows``; ops outside every window are left
    out), kind, op_name, group
    (``span_group``), elapse_ms, start_us, the payload in MB (count × data type; NaN where the args do not say), and
    ``times_from`` 'spans'. Transit, wait, synchronization and idle are NaN: the capture does not split them, and
    ``span_times`` estimates them from every profiled rank's spans. P2P ops are left out (a pipeline's, not told here)."""
    names = collectives["name"].astype(str)
    types = names.str.extract(_OP_NAME, expand=False)[0].str.lower()
    ops = collectives.loc[types.notna() & ~types.isin(_P2P_TYPES)]
    step = window_of(ops, windows) if not windows.empty else pd.Series(np.nan, index=ops.index)
    if not windows.empty:
        ops, step = ops.loc[step.notna()], step.loc[step.notna()]
    ops = ops.assign(step=step.astype("float64")).sort_values("ts", kind="stable")
    size = ops["data_type"].map(lambda t: DTYPE_BYTES.get(str(t).upper()) if t is not None else None).astype("float64")
    nan = np.full(len(ops), np.nan)
    return {"step": ops["step"].to_numpy("float64"), "kind": np.full(len(ops), "collective", dtype=object),
            "op_name": ops["name"].astype(str).to_numpy(object),
            "group": np.array([span_group(n, known) for n in ops["name"].astype(str)], dtype=object),
            "elapse_ms": ops["dur"].to_numpy("float64") / 1000, "transit_ms": nan, "wait_ms": nan.copy(),
            "synchronization_ms": nan.copy(), "idle_ms": nan.copy(), "start_us": ops["ts"].to_numpy("float64"),
            "transit_from_bandwidth": np.zeros(len(ops), dtype=bool),
            "payload_mb": (pd.to_numeric(ops["count"], errors="coerce").astype("float64") * size).to_numpy() / 1e6,
            "times_from": np.full(len(ops), SPANS, dtype=object)}


def span_times(every: pd.DataFrame, sizes: dict[str, int]) -> tuple[pd.DataFrame, dict[str, OutsideWaits]]:
    """The ops made of trace spans (``span_ops``) of every rank (``every``, stacked with a ``rank`` column) with their
    time split, and per communicator how long and where each profiled member waits for members outside the profile.

    In each communicator the ops of a step are matched across the profiled ranks by their order (a step whose ranks
    hold different numbers of them is left unmatched). Before the last profiled member arrives an op waits for the
    profiled peers (its synchronization). After it, it moves the data and may wait for members not profiled. The
    transfer takes at most the op's payload at the fastest rate any op of the communicator reached after its last
    arrival in the capture, plus the communicator's shortest such time (latency): its ``transit``, an upper bound.
    When every profiled member leaves the op together (their ends within SPAN_END_TOLERANCE_US or 5 %) and it lasts
    after the last arrival at least SPAN_WAIT_FACTOR times that bound, the rest is waiting for members outside the
    profile — unless ``sizes`` (members per communicator, where recorded) says every member was profiled. Wait is
    the elapse without the transit; idle 0. An op that is not matched, or whose payload is unknown, counts all of
    its time after the last arrival as transit. The times are per rank, in ms; the waits outside over the capture."""
    if "times_from" not in every or not (every["times_from"] == SPANS).any():
        return every, {}
    every = every.copy()
    spans = every.loc[(every["times_from"] == SPANS) & (every["kind"] == "collective")]
    outside: dict[str, OutsideWaits] = {}
    columns = {"transit_ms": [], "wait_ms": [], "synchronization_ms": [], "idle_ms": []}
    index = []
    for group, rows in spans.groupby("group", sort=True):
        split, waits = _split_group(rows, sizes.get(str(group)))
        index.extend(split.index)
        for name in columns:
            columns[name].extend(split[name])
        outside[str(group)] = waits
    for name, values in columns.items():
        every.loc[index, name] = values
    return every, outside


def _split_group(rows: pd.DataFrame, size: int | None) -> tuple[pd.DataFrame, OutsideWaits]:
    """``span_times`` for the ops of one communicator."""
    rows = rows.assign(step=rows["step"].astype("float64").fillna(-1.0), end_us=rows["start_us"] + rows["elapse_ms"] * 1000)
    rows = rows.sort_values(["rank", "step", "start_us"], kind="stable")
    rows["position"] = rows.groupby(["rank", "step"], sort=False).cumcount()
    ranks = rows["rank"].unique()
    per_step = rows.groupby(["step", "rank"]).size().unstack("rank")
    even = per_step.index[(per_step.notna().all(axis=1)) & (per_step.nunique(axis=1) == 1)]
    matched = rows["step"].isin(even)
    op = rows.loc[matched].groupby(["step", "position"], sort=False)
    last_arrival = op["start_us"].transform("max").reindex(rows.index)
    spread = (op["end_us"].transform("max") - op["end_us"].transform("min")).reindex(rows.index)
    after = (rows["end_us"] - last_arrival).clip(lower=0.0)
    after = after.where(matched, rows["elapse_ms"] * 1000)  # unmatched: every moment of it could be moving data
    before = (rows["elapse_ms"] * 1000 - after).clip(lower=0.0)
    common = op["end_us"].transform("max").reindex(rows.index) - last_arrival  # the op's time after the last arrival
    payload = rows["payload_mb"].astype("float64")
    rates = (payload / common).where(matched & (common > 0) & (payload > 0))
    fastest = float(rates.max()) if rates.notna().any() else np.nan  # MB per µs
    latency = float(common.where(matched).min()) if matched.any() else np.nan
    bound = latency + payload / fastest
    together = spread <= np.maximum(SPAN_END_TOLERANCE_US, 0.05 * common)
    complete = size is not None and size <= len(ranks)
    waiting = matched & together & (after >= SPAN_WAIT_FACTOR * bound) & bound.notna() & (not complete)
    transit = after.where(~waiting, np.minimum(bound, after))
    outside_us = np.minimum(after, rows["elapse_ms"] * 1000).sub(transit).where(waiting, 0.0)
    split = pd.DataFrame({"transit_ms": transit / 1000, "wait_ms": (rows["elapse_ms"] * 1000 - transit).clip(lower=0.0) / 1000,
                          "synchronization_ms": before / 1000, "idle_ms": 0.0}, index=rows.index)
    waits = {int(rank): float(outside_us.loc[rows["rank"] == rank].sum()) / 1000 for rank in ranks}
    return split, OutsideWaits(waits, waiting_stretches(rows.assign(last_arrival_us=last_arrival), outside_us))
