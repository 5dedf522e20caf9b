"""Evaluate a rule's conditions in Python, to explain a firing or say why a rule did not fire.

The rule engine (durable-rules) decides what fires; this module only re-reads the conditions against
the same facts to show each comparison with the value it saw. Semantics follow the engine's: a field
whose value is unknown fails every comparison but ``exists: false``; ``matches``/``imatches`` match the
whole value; ``not`` holds when no fact of its family passes its tests.

Regexes are matched with Python's ``re``, which backtracks: rule packs cannot nest repetitions (see
engine/regex.py), and a value longer than MAX_MATCH_CHARS is not matched at all (shown as failing), so that a
pattern like ``.*a.*b.*`` costs at most a bounded time on a hostile value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from advisor.engine.spec import FactCondition, NotCondition, Ref, RuleSpec
from advisor.facts.models import Fact

_MAX_STEPS = 200_000
MAX_MATCH_CHARS = 16_384


@dataclass(frozen=True)
class Check:
    """One comparison of one field: ``field op expected`` and the value the fact had."""

    field: str
    op: str
    expected: str
    actual: Any
    holds: bool

    def describe(self) -> str:
        return f"{self.field} {self.op} {self.expected}"


@dataclass(frozen=True)
class ConditionResult:
    """A condition against one fact (or, for ``not``, against the fact that blocked it, if any)."""

    alias: str
    family: str
    negated: bool
    holds: bool
    fact: Fact | None
    checks: list[Check]
    candidates: int

    def summary(self) -> str:
        """'holds'/'fails' with the failing comparisons and their actual values."""
        if self.negated:
            if self.holds:
                return f"no {self.family} fact matches, as required"
            return f"{self.fact.id if self.fact else '?'} matches, but the rule requires that none does"
        if self.fact is None:
            return f"no {self.family} fact in the profile" if not self.candidates else f"none of {self.candidates} {self.family} facts"
        failing = [c for c in self.checks if not c.holds]
        if not failing:
            return "holds"
        return "; ".join(f"{c.describe()} is false ({c.field} = {_shown(c.actual)})" for c in failing)


@dataclass
class GroupResult:
    """One alternative of a rule (``all`` has one; ``any`` has one per item), evaluated as far as it goes."""

    conditions: list[ConditionResult] = field(default_factory=list)
    holds: bool = False


def explain_firing(spec: RuleSpec, matched: dict[str, Fact], facts: Sequence[Fact]) -> list[ConditionResult]:
    """Each condition of the alternative that fired, with the comparisons against the matched facts."""
    for group in spec.when.groups():
        positive = [c for c in group if isinstance(c, FactCondition)]
        if {c.alias for c in positive} <= matched.keys():
            negated = any(isinstance(c, NotCondition) for c in group)
            by_family = facts_by_family(facts) if negated else {}  # only a negation searches the facts
            results = []
            for condition in group:
                if isinstance(condition, NotCondition):
                    results.append(_negation(condition.not_, matched, by_family))
                else:
                    fact = matched[condition.alias]
                    checks = _checks(condition, fact, matched)
                    results.append(
                        ConditionResult(condition.alias, condition.fact, False, all(c.holds for c in checks), fact, checks, 1)
                    )
            return results
    return []


def negations_hold(spec: RuleSpec, matched: dict[str, Fact], by_family: dict[str, list[Fact]]) -> bool:
    """Whether no fact blocks a firing of ``spec`` on ``matched`` under the rule's ``not`` conditions, searched over
    every fact in ``by_family`` — the matched facts included. durable-rules does not count the fact that triggered a
    firing, nor one of the same family asserted after it, against a ``not`` on that family, so a rule that matches a
    family and negates it too would fire against its own negation; the session checks each firing here."""
    verdicts = [all(_negation(c.not_, matched, by_family).holds for c in group if isinstance(c, NotCondition))
                for group in spec.when.groups()
                if {c.alias for c in group if isinstance(c, FactCondition)} == matched.keys()
                and all(all(check.holds for check in _checks(c, matched[c.alias], matched))
                        for c in group if isinstance(c, FactCondition))]
    return any(verdicts) if verdicts else True


def explain_rule(spec: RuleSpec, facts: Sequence[Fact]) -> list[GroupResult]:
    """For each alternative: the binding that satisfies the most conditions, and the first condition that fails."""
    by_family = facts_by_family(facts)
    return [_best_binding(group, by_family) for group in spec.when.groups()]


def why_not(spec: RuleSpec, facts: Sequence[Fact]) -> str:
    """One line per alternative: the first condition that fails, with the values it saw."""
    groups = explain_rule(spec, facts)
    reasons = []
    for index, group in enumerate(groups):
        failing = next((c for c in group.conditions if not c.holds), None)
        if failing is not None:
            prefix = f"alternative {index + 1}: " if len(groups) > 1 else ""
            reasons.append(f"{prefix}{'not ' if failing.negated else ''}{failing.alias} ({failing.family}): {failing.summary()}")
    return "; ".join(reasons)


def _best_binding(group: list[FactCondition | NotCondition], by_family: dict[str, list[Fact]]) -> GroupResult:
    best = GroupResult()
    steps = 0

    def search(index: int, bound: dict[str, Fact], done: list[ConditionResult]) -> bool:
        nonlocal best, steps
        if index == len(group):
            best = GroupResult(conditions=list(done), holds=True)
            return True
        condition = group[index]
        if isinstance(condition, NotCondition):
            result = _negation(condition.not_, bound, by_family)
            if result.holds:
                return search(index + 1, bound, [*done, result])
            _keep_deepest(GroupResult(conditions=[*done, result]))
            return False
        candidates = by_family.get(condition.fact, [])
        closest: ConditionResult | None = None
        for fact in candidates:
            steps += 1
            if steps > _MAX_STEPS:
                break
            checks = _checks(condition, fact, bound)
            result = ConditionResult(condition.alias, condition.fact, False, all(c.holds for c in checks), fact, checks, len(candidates))
            if result.holds:
                if search(index + 1, {**bound, condition.alias: fact}, [*done, result]):
                    return True
            elif closest is None or _failures(result) < _failures(closest):
                closest = result
        if closest is None:
            closest = ConditionResult(condition.alias, condition.fact, False, False, None, [], len(candidates))
        _keep_deepest(GroupResult(conditions=[*done, closest]))
        return False

    def _keep_deepest(candidate: GroupResult) -> None:
        nonlocal best
        if not best.holds and len(candidate.conditions) > len(best.conditions):
            best = candidate

    search(0, {}, [])
    return best


def _negation(condition: FactCondition, bound: dict[str, Fact], by_family: dict[str, list[Fact]]) -> ConditionResult:
    candidates = by_family.get(condition.fact, [])
    for fact in candidates:
        checks = _checks(condition, fact, bound)
        if all(c.holds for c in checks):
            return ConditionResult(condition.alias, condition.fact, True, False, fact, checks, len(candidates))
    return ConditionResult(condition.alias, condition.fact, True, True, None, [], len(candidates))


def satisfies(condition: FactCondition, fact: Fact) -> bool:
    """Whether ``fact`` meets every comparison of a condition without joins (an aggregate's ``where``)."""
    return all(check.holds for check in _checks(condition, fact, {}))


def _checks(condition: FactCondition, fact: Fact, bound: dict[str, Fact]) -> list[Check]:
    checks = []
    for name, predicate in condition.where.items():
        actual = getattr(fact, name, None)
        for op, operand in predicate.comparisons():
            expected = getattr(bound[operand.alias], operand.field, None) if isinstance(operand, Ref) and operand.alias in bound else operand
            shown = f"{operand.ref} ({_shown(expected)})" if isinstance(operand, Ref) else _shown(operand)
            checks.append(Check(name, op, shown, actual, holds(op, actual, expected)))
    return checks


def holds(op: str, actual: Any, expected: Any) -> bool:
    """Whether ``actual op expected`` holds, with the engine's semantics for unknown values."""
    if op == "exists":
        return (actual is not None) == bool(expected)
    if actual is None or expected is None or isinstance(expected, Ref):
        return False
    if op == "eq":
        return actual == expected
    if op == "ne":
        return actual != expected
    if op == "in":
        return actual in expected
    if op in ("matches", "imatches"):
        if not isinstance(actual, str) or len(actual) > MAX_MATCH_CHARS:
            return False
        return re.fullmatch(expected, actual, re.I if op == "imatches" else 0) is not None
    try:
        return {"gt": actual > expected, "gte": actual >= expected, "lt": actual < expected, "lte": actual <= expected}[op]
    except TypeError:
        return False


def _failures(result: ConditionResult) -> int:
    return sum(not c.holds for c in result.checks)


def facts_by_family(facts: Sequence[Fact]) -> dict[str, list[Fact]]:
    """The facts grouped by family, in order."""
    grouped: dict[str, list[Fact]] = {}
    for fact in facts:
        grouped.setdefault(fact.family, []).append(fact)
    return grouped


def _shown(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)
