"""The facts of the rules' aggregates (``aggregate:`` in a rule file), computed from the measured facts before the
rules run: per rank (or for the profile) the count of the facts of a family that match a condition, and the sum,
minimum, maximum and mean of the fields the rule names. Each rule's aggregates have a family of their own
(``spec.aggregate_family``), so a condition on one matches no other rule's."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from advisor.engine.evaluate import satisfies
from advisor.engine.spec import AGGREGATIONS, Aggregate, FactCondition, aggregate_model
from advisor.facts.models import Fact

MAX_SOURCES = 10  # an aggregate names at most this many of its facts' sources


def aggregate_facts(rules: Iterable[Any], facts: Sequence[Fact]) -> list[Fact]:
    """The aggregate facts of ``rules`` (rulebook Rules) over ``facts``."""
    out: list[Fact] = []
    for rule in rules:
        for name, spec in rule.spec.aggregate.items():
            out.extend(_aggregate(rule.spec.id, name, spec, [f for f in facts if f.family == spec.fact]))
    return out


def _aggregate(rule_id: str, name: str, spec: Aggregate, family: list[Fact]) -> list[Fact]:
    model = aggregate_model(rule_id, name, spec)
    condition = FactCondition(fact=spec.fact, where=spec.where)
    matching = [f for f in family if satisfies(condition, f)]
    if spec.per == "profile":
        groups: dict[int | None, list[Fact]] = {None: matching}
        scopes = {None: family}
    else:
        ranks = sorted({r for f in family if (r := getattr(f, "rank", None)) is not None})
        groups = {r: [f for f in matching if getattr(f, "rank", None) == r] for r in ranks}
        scopes = {r: [f for f in family if getattr(f, "rank", None) == r] for r in ranks}
    return [model(id=f"{model.family}:{'profile' if rank is None else f'r{rank}'}",
                  sources=sorted({s for f in (members or scopes[rank]) for s in f.sources})[:MAX_SOURCES],
                  rank=rank, count=len(members), **_values(spec, members))
            for rank, members in groups.items()]


def _values(spec: Aggregate, members: list[Fact]) -> dict[str, float | None]:
    """sum_F, min_F, max_F and mean_F of the members (exact sums, the same in any order; absent but the sum for none)."""
    values: dict[str, float | None] = {}
    for kind in AGGREGATIONS:
        for field in getattr(spec, kind):
            numbers = [float(v) for f in members if (v := getattr(f, field, None)) is not None]
            if kind == "sum":
                values[f"sum_{field}"] = math.fsum(numbers)
            elif numbers:
                values[f"{kind}_{field}"] = (min(numbers) if kind == "min" else max(numbers) if kind == "max"
                                             else math.fsum(numbers) / len(numbers))
    return values
