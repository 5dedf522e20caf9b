"""Facts: compute the fact families from a Profile (design §3).

``facts.rank`` computes what one rank's tables give, ``facts.reduce`` what needs several ranks; ``advisor.cluster``
runs the first as one task per rank (read, then facts) and the second on what the tasks return.
"""

from __future__ import annotations

from advisor.facts.models import (
    FACT_FAMILIES,
    AllocationFact,
    BottleneckFact,
    BreakdownFact,
    CommunicationFact,
    ContextFact,
    DataLoaderFact,
    EnvironmentFact,
    Fact,
    HostFact,
    IdleFact,
    MemoryFact,
    ModelFact,
    OperatorFact,
    SpreadFact,
    StepFact,
    TransportFact,
)
from advisor.facts.rank import rank_facts
from advisor.facts.reduce import FactSet, reduce_facts
from advisor.facts.scope import RankFacts, RankMeta
from advisor.facts.steps import MAX_STEP_FACTS, listed_steps
from advisor.ingest import Profile
from advisor.parallel import fork_map
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
    "MAX_STEP_FACTS",
    "RankFacts",
    "RankMeta",
    "extract_facts",
    "listed_steps",
    "rank_facts",
    "reduce_facts",
]

def extract_facts(profile: Profile, user: UserContext | None = None) -> FactSet:
    """Compute every fact family this version knows from a profile read whole (``ingest.load_profile``) and what
    the user told: each rank's facts (on several cores when there are several), then the cross-rank ones.

    ``advisor.cluster`` does the same without ever holding more than one rank's tables in this process."""
    ranks = fork_map(lambda rank: rank_facts(rank, profile.shown, user), profile.ranks)
    metas = Profile(root=profile.root, base=profile.base, format=profile.format, ranks=[r.meta for r in ranks],
                    coverage=profile.coverage)
    metas._shown = profile._shown
    return reduce_facts(metas, ranks, user)
