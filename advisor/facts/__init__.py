"""Facts: compute the fact families from a Profile (design §3).

``facts.rank`` computes what one rank's tables give, ``facts.reduce`` what needs several ranks; ``advisor.cluster``
runs the first as one task per rank (read, then facts) and the second on what the tasks return.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

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
from advisor.ingest.model import Profile
from advisor.usercontext import UserContext

if TYPE_CHECKING:
    from advisor.facts.reduce import FactSet

# Imported when first used (PEP 562): the rule checker needs the models, not the extractors and pandas.
_LAZY = {"FactSet": "advisor.facts.reduce", "reduce_facts": "advisor.facts.reduce", "rank_facts": "advisor.facts.rank",
         "RankFacts": "advisor.facts.scope", "RankMeta": "advisor.facts.scope", "MAX_STEP_FACTS": "advisor.facts.steps",
         "listed_steps": "advisor.facts.steps"}

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

def extract_facts(profile: Profile, user: UserContext | None = None, *, jobs: int | None = None) -> FactSet:
    """Compute every fact family this version knows from a profile read whole (``ingest.load_profile``) and what
    the user told: each rank's facts (on several cores when there are several: ``jobs``, the run's
    ``RunOptions.jobs``), then the cross-rank ones.

    ``advisor.cluster`` does the same without ever holding more than one rank's tables in this process."""
    from advisor.facts.rank import rank_facts
    from advisor.facts.reduce import reduce_facts
    from advisor.parallel import fork_map

    ranks = fork_map(lambda rank: rank_facts(rank, profile.shown, user), profile.ranks, jobs=jobs)
    metas = Profile(root=profile.root, base=profile.base, format=profile.format, ranks=[r.meta for r in ranks],
                    coverage=profile.coverage, service=profile.service)
    metas._shown = profile._shown
    return reduce_facts(metas, ranks, user)


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
