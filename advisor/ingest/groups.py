"""Communicator groups: map the group hash in communication files to the group's name and global ranks.

communication*.json key ops by ``<op>@<group hash>``, where the hash is computed from the HCCL
communicator name that ``profiler_metadata.json`` ``parallel_group_info`` lists with its global ranks
(reference §5.1): two 32-bit polynomial string hashes (multipliers 29 and 131), the first as the high
word. With it, links between ranks local to a communicator become links between global ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def group_hash(communicator: str) -> str:
    """The decimal hash communication files use for ``communicator`` (``group_name_0`` → 5862276093215481612)."""
    high = low = 0
    for char in communicator:
        high = (high * 29 + ord(char)) & 0xFFFFFFFF
        low = (low * 131 + ord(char)) & 0xFFFFFFFF
    return str((high << 32) | low)


@dataclass(frozen=True)
class Group:
    communicator: str  # the HCCL name, e.g. group_name_5
    name: str  # the process-group name given by the framework, e.g. dp, tp, pp, default_group
    global_ranks: tuple[int, ...]  # sorted; index = the rank inside the communicator


def groups_by_hash(metadata: dict[str, Any]) -> dict[str, Group]:
    """The communicators of ``parallel_group_info`` keyed by their hash; malformed entries are left out."""
    info = metadata.get("parallel_group_info") if isinstance(metadata, dict) else None
    found: dict[str, Group] = {}
    for communicator, entry in (info.items() if isinstance(info, dict) else []):
        ranks = entry.get("global_ranks") if isinstance(entry, dict) else None
        if not isinstance(ranks, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
            continue
        name = entry.get("group_name")
        found[group_hash(str(communicator))] = Group(str(communicator), str(name) if name else str(communicator),
                                                     tuple(sorted(ranks)))
    return found
