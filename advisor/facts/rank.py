"""One rank's facts: everything that needs only the rank's own tables, computed where the rank is read.

``RANK_FAMILIES`` lists the fact families of one rank, in the order their facts appear in the report. Each is an
extractor in the module that owns its family (``facts.steps``, ``facts.operators`` …) taking the rank's RankScope
(``facts.scope``): it returns its facts and may leave there what a later family or the cross-rank step
(``facts.reduce``) needs (the breakdown, the MC2 pairs, the communication tables). ``rank_facts`` runs them in that
order and returns the rank's RankFacts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from advisor.facts.capture import capture_facts
from advisor.facts.communication import communication_tables
from advisor.facts.host import host_facts
from advisor.facts.idle import idle_facts
from advisor.facts.memory import memory_facts
from advisor.facts.models import Fact
from advisor.facts.operators import operator_facts
from advisor.facts.phases import phase_facts
from advisor.facts.scope import RankFacts, RankMeta, RankScope, Shown
from advisor.facts.sequences import sequence_facts
from advisor.facts.steps import breakdown_facts, step_facts
from advisor.ingest.model import RankData
from advisor.usercontext import UserContext


@dataclass(frozen=True)
class RankFamily:
    """A fact family computed from one rank's tables: its extractor, and whether its facts come before the rank's
    cross-rank facts (MC2 candidates, communication: ``head``) or after them (``tail``)."""

    extract: Callable[[RankScope], list[Fact]]
    place: Literal["head", "tail"] = "head"


RANK_FAMILIES: list[RankFamily] = [
    RankFamily(step_facts),
    RankFamily(breakdown_facts),
    RankFamily(operator_facts),
    RankFamily(sequence_facts),
    RankFamily(memory_facts, "tail"),
    RankFamily(host_facts, "tail"),
    RankFamily(idle_facts, "tail"),
    RankFamily(capture_facts, "tail"),
    RankFamily(phase_facts, "tail"),
    RankFamily(communication_tables, "tail"),
]


def rank_facts(rank: RankData, show: Shown, user: UserContext | None, *, deep: bool = True) -> RankFacts:
    """The facts of one rank and what the cross-rank step needs from it (``deep`` False: the rank was read only for
    its cluster-level files)."""
    out = RankFacts(meta=RankMeta.of(rank), deep=deep)
    scope = RankScope(rank, show, user, out)
    for family in RANK_FAMILIES:
        getattr(out, family.place).extend(family.extract(scope))
    if rank.kineto is not None:
        out.recorded_rank = rank.kineto.rank
        out.truncation = rank.kineto.truncation
    return out
