"""Run the test cases embedded in rule files (``tests:``): facts in, does the rule fire — and what does it say?

A case lists facts as ``{fact: family, field: value, …}``. Only the fields a case gives are set, and
each is validated against the fact catalogue (type and documented range), so a case cannot test a
fact that the extractors could never produce. Each rule runs alone in its own engine, so a case shows
exactly what that rule does with those facts. A firing case may give ``finding:`` — the gain, severity, key,
title and explanation its finding must have — checked against the finding the report would show, in English and
Chinese.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.diagnose import default_rulebook
import yaml

from advisor.engine.aggregate import aggregate_facts
from advisor.engine.evaluate import explain_rule, satisfies, why_not
from advisor.engine.session import Firing, RuleEngine
from advisor.engine.spec import AggregateFact, FactCondition, FindingExpectation, case_fact
from advisor.errors import EngineError
from advisor.facts.models import PROVENANCE_FIELDS, Fact
from advisor.findings import build_findings
from advisor.rulebook import Rule, RuleBook


@dataclass(frozen=True)
class CaseResult:
    rule_id: str
    name: str
    expect: str
    fired: bool | None
    detail: str
    mismatches: tuple[str, ...] = ()  # what the finding says that the case's ``finding:`` does not expect

    @property
    def passed(self) -> bool:
        return self.fired is not None and self.fired == (self.expect == "fire") and not self.mismatches


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
                results.extend(run_case(engine, rule, index, book) for index in selected)
    return results


def run_case(engine: RuleEngine, rule: Rule, index: int, book: RuleBook | None = None) -> CaseResult:
    """Run case ``index`` of ``rule`` (its ``finding:`` checked against ``book``'s knowledge, the built-in rules'
    when not given)."""
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
    detail = (f"fired {len(firings)} time(s): " + "; ".join(matched) if firings else
              f"did not fire: {why_not(rule.spec, [*facts, *aggregate_facts([rule], facts)])}")
    mismatches = _finding_mismatches(case.finding, rule, firings, facts, book) if fired and case.finding else ()
    if mismatches:
        detail += "; the finding " + "; ".join(mismatches)
    return CaseResult(rule.id, case.name, case.expect, fired, detail, mismatches)


def _finding_mismatches(expected: FindingExpectation, rule: Rule, firings: list[Firing], facts: list[Fact],
                        book: RuleBook | None) -> tuple[str, ...]:
    """How the finding the report would show for these firings differs from the case's ``finding:``."""
    book = book if book is not None and rule.id in book.rules else default_rulebook()
    if rule.id not in book.rules:
        return (f"cannot be built: rule {rule.id} is not in the rule book",)
    shown = {}
    for lang in ("en", "zh"):
        try:
            findings = [f for f in build_findings(firings, facts, book, lang) if f.id == rule.id]
        except AttributeError:  # a case gives only some fields; sizing the gain reads others
            missing = {f"{fact.family}: {', '.join(names)}" for fact in facts
                       if (names := [n for n, info in type(fact).model_fields.items()
                                     if info.is_required() and n not in fact.__dict__])}
            return ("cannot be built from the case's facts: sizing a finding reads every field a real profile's fact "
                    "has, so give " + "; ".join(sorted(missing)),)
        if not findings:
            return ("was not shown: every prescription it recommends is contradicted by the case's facts",)
        shown[lang] = findings[0]
    finding, problems = shown["en"], []
    if expected.gain_us == "unknown":
        if finding.estimated_gain_us is not None:
            problems.append(f"has a gain of {finding.estimated_gain_us:,.1f} µs, not 'unknown'")
    elif expected.gain_us is not None:
        gain = finding.estimated_gain_us
        if gain is None or abs(gain - expected.gain_us) > expected.gain_tolerance * abs(expected.gain_us):
            shown_gain = "no gain" if gain is None else f"a gain of {gain:,.1f} µs"
            problems.append(f"has {shown_gain}, not {expected.gain_us:,.1f} µs (± {expected.gain_tolerance:.0%})")
    if expected.severity is not None and finding.severity != expected.severity:
        problems.append(f"has severity {finding.severity!r}, not {expected.severity!r}")
    if expected.key is not None and finding.key != expected.key:
        problems.append(f"has key {finding.key!r}, not {expected.key!r}")
    for part, checks in (("title", expected.title), ("explanation", expected.explanation)):
        for lang, check in checks.items():
            text = getattr(shown[lang], part)
            if (why := check.failure(text)) is not None:
                problems.append(f"{part} ({lang}) {why}: {text!r}")
    return tuple(problems)


def case_from_profile(rule: Rule, firings: list[Firing], facts: list[Fact], name: str) -> str:
    """A test case for ``rule`` (YAML, to paste under its ``tests:``) made of a real profile's facts: those of its first
    firing (expect fire), or else those the nearest binding of each condition saw, the blocking fact of a ``not``
    included (expect quiet). The case is run before it is returned; a line says when it does not reproduce."""
    mine = next((f for f in firings if f.rule_id == rule.id), None)
    if mine is not None:
        chosen, expect = list(mine.matched.values()), "fire"
    else:
        seen = [result.fact for group in explain_rule(rule.spec, facts)[:1] for result in group.conditions]
        chosen, expect = list({id(f): f for f in seen if f is not None}.values()), "quiet"
    chosen = _measured(rule, chosen, facts)
    rows = [{"fact": fact.family, **{k: _short(v) for k, v in fact.model_dump(mode="json", exclude={"id", *PROVENANCE_FIELDS}).items()
                                     if v is not None and v != []}} for fact in chosen]
    case = {"name": name, "facts": rows, "expect": expect}
    with RuleEngine([rule]) as engine:
        replayed = run_case_facts(engine, rule, rows)
    text = yaml.safe_dump([case], allow_unicode=True, sort_keys=False, width=120, default_flow_style=None)
    if replayed != (expect == "fire"):
        text = f"# note: run alone on these facts the rule {'fires' if replayed else 'stays quiet'}, not as on the profile\n" + text
    return text


def _measured(rule: Rule, chosen: list[Fact], facts: list[Fact]) -> list[Fact]:
    """``chosen`` with each aggregate fact replaced by the measured facts it was computed from (a case gives those:
    the aggregate is computed from them again)."""
    out: list[Fact] = []
    for fact in chosen:
        name = fact.family.partition("/")[2] if isinstance(fact, AggregateFact) else None
        spec = rule.spec.aggregate.get(name) if name else None
        if spec is None:
            out.append(fact)
            continue
        condition = FactCondition(fact=spec.fact, where=spec.where)
        rank = getattr(fact, "rank", None)
        out.extend(f for f in facts if f.family == spec.fact and satisfies(condition, f)
                   and (rank is None or getattr(f, "rank", None) == rank) and f not in out)
    return out


def _short(value: object) -> object:
    """A float to six significant digits (a case is read by people; it is replayed to show it still behaves)."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return [_short(v) for v in value] if isinstance(value, list) else value


def run_case_facts(engine: RuleEngine, rule: Rule, rows: list[dict]) -> bool:
    """Whether ``rule`` fires on the case facts ``rows``."""
    facts = [case_fact(raw, f"case-{n}") for n, raw in enumerate(rows)]
    return any(f.rule_id == rule.id for f in engine.run(facts))
