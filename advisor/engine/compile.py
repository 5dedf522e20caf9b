"""Compile validated rule specs into a durable-rules ruleset definition (a plain dict)."""

from __future__ import annotations

from typing import Any

from advisor.engine.regex import translate
from advisor.engine.spec import AllGroup, FactCondition, NotCondition, Predicate, Ref, RuleSpec

FAMILY_KEY = "family"

_OPERATORS = {"ne": "$neq", "gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte"}


def compile_rule(spec: RuleSpec) -> dict[str, Any]:
    """The durable-rules definition of one rule: ``{"all"|"any": [...]}``."""
    if spec.when.all is not None:
        return {"all": [_condition(c) for c in spec.when.all]}
    assert spec.when.any is not None
    alternatives: list[dict[str, Any]] = []
    for index, item in enumerate(spec.when.any):
        if isinstance(item, AllGroup):
            alternatives.append({f"g{index}$all": [_condition(c) for c in item.all]})
        else:
            alternatives.append(_condition(item))
    return {"any": alternatives}


def _condition(condition: FactCondition | NotCondition) -> dict[str, Any]:
    if isinstance(condition, NotCondition):
        inner = condition.not_
        return {f"{inner.alias}$not": _fact_test(inner)}
    return {condition.alias: _fact_test(condition)}


def _fact_test(condition: FactCondition) -> dict[str, Any]:
    """Every test starts with the family, so no test can match the engine's own session object."""
    tests: list[dict[str, Any]] = [{FAMILY_KEY: condition.fact}]
    for field, predicate in condition.where.items():
        tests.extend(_predicate(field, predicate))
    return {"$and": tests}


def deferred_joins(spec: RuleSpec) -> list[tuple[str, str, str, Ref]]:
    """(alias, field, op, ref) of every ordered or 'ne' comparison with another fact: checked after the match.

    durable-rules 2.0.28 crashes (a segfault inside assert_fact) when such a join evaluates to false, so
    these comparisons are left out of the engine's tests and applied to each activation instead; the
    engine then matches a superset, which the check narrows to exactly the rule's matches.
    """
    joins = []
    for group in spec.when.groups():
        for condition in group:
            if isinstance(condition, FactCondition):
                for field, predicate in condition.where.items():
                    joins.extend((condition.alias, field, op, operand) for op, operand in predicate.comparisons()
                                 if isinstance(operand, Ref) and op != "eq")
    return joins


def _predicate(field: str, predicate: Predicate) -> list[dict[str, Any]]:
    tests: list[dict[str, Any]] = []
    for op, operand in predicate.comparisons():
        if isinstance(operand, Ref) and op != "eq":
            continue  # see deferred_joins
        value = {operand.alias: operand.field} if isinstance(operand, Ref) else operand
        if op == "eq":
            tests.append({field: value})
        elif op in _OPERATORS:
            tests.append({_OPERATORS[op]: {field: value}})
        elif op == "matches":
            tests.append({"$mt": {field: translate(operand)}})
        elif op == "imatches":
            tests.append({"$imt": {field: translate(operand)}})
        elif op == "exists":
            tests.append({"$ex" if operand else "$nex": {field: 1}})
        elif op == "in":
            tests.append({"$or": [{field: v} for v in operand]})
    return tests
