"""Run the test cases embedded in rule files (``tests:``): facts in, does the rule fire?

A case lists facts as ``{fact: family, field: value, …}``. Only the fields a case gives are set, and
each is validated against the fact catalogue (type and documented range), so a case cannot test a
fact that the extractors could never produce. Each rule runs alone in its own engine, so a case shows
exactly what that rule does with those facts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError

from advisor.engine.evaluate import why_not
from advisor.engine.session import RuleEngine
from advisor.errors import EngineError
from advisor.facts.models import FACT_FAMILIES, Fact
from advisor.rulebook import Rule, RuleBook


@dataclass(frozen=True)
class CaseResult:
    rule_id: str
    name: str
    expect: str
    fired: bool | None
    detail: str

    @property
    def passed(self) -> bool:
        return self.fired is not None and self.fired == (self.expect == "fire")


def run_rule_tests(book: RuleBook, select: str | None = None, packs: set[str] | None = None) -> list[CaseResult]:
    """Run the embedded cases of every rule (of ``packs`` only, when given), optionally only those whose rule id or name contains ``select``."""
    results = []
    for rule in book.rules.values():
        if packs is not None and rule.pack not in packs:
            continue
        selected = [
            index
            for index, case in enumerate(rule.spec.tests)
            if select is None or select in rule.id or select in case.name
        ]
        if selected:
            with RuleEngine([rule]) as engine:
                results.extend(run_case(engine, rule, index) for index in selected)
    return results


def run_case(engine: RuleEngine, rule: Rule, index: int) -> CaseResult:
    case = rule.spec.tests[index]
    try:
        facts = [case_fact(raw, f"case{index}-{n}") for n, raw in enumerate(case.facts)]
    except ValueError as exc:
        return CaseResult(rule.id, case.name, case.expect, None, f"invalid test facts: {exc}")
    try:
        firings = engine.run(facts)
    except (EngineError, ArithmeticError, ValueError) as exc:
        return CaseResult(rule.id, case.name, case.expect, None, f"the rule failed while it ran: {exc}")
    fired = any(f.rule_id == rule.id for f in firings)
    matched = [", ".join(f"{a}={fact.id}" for a, fact in f.matched.items()) for f in firings]
    detail = f"fired {len(firings)} time(s): " + "; ".join(matched) if firings else f"did not fire: {why_not(rule.spec, facts)}"
    return CaseResult(rule.id, case.name, case.expect, fired, detail)


def case_fact(raw: dict[str, Any], fact_id: str) -> Fact:
    """A fact with only the given fields set, each validated against the catalogue."""
    values = dict(raw)
    family = values.pop("fact", None)
    model = FACT_FAMILIES.get(family) if isinstance(family, str) else None
    if model is None:
        raise ValueError(f"each fact needs 'fact: <family>' with a known family ({', '.join(FACT_FAMILIES)})")
    checked: dict[str, Any] = {}
    for name, value in values.items():
        info = model.model_fields.get(name)
        if info is None or name in ("id", "sources"):
            raise ValueError(f"{family} has no field {name!r}")
        adapter = TypeAdapter(Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation)
        try:
            checked[name] = adapter.validate_python(value)
        except ValidationError as exc:
            raise ValueError(f"{family}.{name}: {exc.errors()[0]['msg']}") from exc
        if isinstance(checked[name], float) and not math.isfinite(checked[name]):
            raise ValueError(f"{family}.{name}: {value!r} is not a finite number (facts never hold NaN or infinity)")
    return model.model_construct(id=values.get("id", fact_id), sources=["rule test case"], **checked)
