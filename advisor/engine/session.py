"""Run facts through the rules with durable-rules' C engine, owning its sharp edges.

* The ruleset is created once per rule set; each diagnosis is its own session (``sid``), deleted
  afterwards, so nothing leaks from one diagnosis into the next.
* The C extension is driven directly (no ``durable.lang`` Host): no timer threads, and an exception in
  our action code is raised here instead of being stored in the session state.
* Facts are encoded by ``encode`` (no exponent floats, no NaN/inf), carry a unique ``id`` (identical
  facts are otherwise deduplicated), and are asserted one by one — except those of a family no rule
  names in a condition, positive or negated: every test starts with the family, so they can match
  nothing and cancel nothing, and leaving them out changes no firing.
* Facts are asserted family by family in an order where every family used under ``not`` comes before
  the families its rule matches positively: the engine does not cancel an activation when a negated
  fact arrives after the fact that triggered it. Rules whose negations contradict each other's order
  are refused.
* durable-rules does not count the fact that triggered a firing, nor a fact of the same family asserted after it,
  against the rule's ``not`` on that family: a rule that matches ``host`` and negates ``host`` too would fire against
  its own negation. Every firing of a rule with a ``not`` is checked again over all the session's facts
  (``evaluate.negations_hold``), so a negation means "no such fact exists", whichever facts the engine compared.
* Derived facts asserted by a rule's ``then.assert`` are validated against their model and fed back,
  so rules chain.
* Every session first asserts a sentinel fact that an internal rule matches, and runs that action to
  completion. durable-rules 2.0.28 leaves a session's action context uninitialised until an action has
  run, and ``delete_state`` frees it regardless: deleting a session in which no rule ever fired frees a
  garbage pointer (an intermittent segfault). After the sentinel the context is a valid NULL.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import durable_rules_engine as dre
from pydantic import ValidationError

from advisor.engine.aggregate import aggregate_facts
from advisor.engine.compile import FAMILY_KEY, compile_rule, deferred_joins
from advisor.engine.encode import NotEncodable, encode
from advisor.engine.evaluate import facts_by_family, holds, negations_hold
from advisor.engine.expr import Expression, resolver
from advisor.engine.spec import NotCondition
from advisor.errors import EngineError, RuleError
from advisor.facts.models import FACT_FAMILIES, Fact

_LOCK = threading.Lock()
_RULESET_NAMES = itertools.count()
_SESSIONS = itertools.count()
_MAX_FIRINGS = 100_000
_NOT_HANDLED = 1
_SENTINEL_RULE = "session_opened"
_SENTINEL_FAMILY = "__session__"


@dataclass
class Firing:
    """One activation of a rule: the facts matched under each alias, and the facts it derived."""

    rule_id: str
    matched: dict[str, Fact]
    derived: list[Fact] = field(default_factory=list)

    def values(self) -> dict[str, dict[str, Any]]:
        """alias → field values of the matched facts (what expressions and templates resolve against)."""
        return {alias: fact.model_dump() for alias, fact in self.matched.items()}


class RuleEngine:
    """A compiled set of rules, ready to run any number of isolated diagnoses."""

    def __init__(self, rules: Sequence[Any]) -> None:
        """``rules`` are rulebook Rules (spec + compiled expressions)."""
        self._rules = {f"r{i}": rule for i, rule in enumerate(rules)}
        self._joins = {name: deferred_joins(rule.spec) for name, rule in self._rules.items()}
        self._negating = {name for name, rule in self._rules.items()
                          if any(isinstance(c, NotCondition) for group in rule.spec.when.groups() for c in group)}
        self._family_order = assertion_order(rules)
        self._handle: int | None = None
        self._definition = ""
        if not self._rules:
            return
        definition = {name: compile_rule(rule.spec) for name, rule in self._rules.items()}
        definition[_SENTINEL_RULE] = {"all": [{"m": {FAMILY_KEY: _SENTINEL_FAMILY}}]}
        self._definition = encode(definition)
        with _LOCK:
            self._handle = self._create()

    def _create(self) -> int:
        """A new ruleset of the compiled rules in durable_rules (called holding _LOCK)."""
        try:
            return dre.create_ruleset(f"advisor{next(_RULESET_NAMES)}", self._definition)
        except dre.error as exc:
            raise EngineError(f"the rule engine rejected the ruleset ({exc})") from exc

    def close(self) -> None:
        """Free the engine's ruleset. A run after it still works: it makes a ruleset for itself and frees it again
        (an engine the process-wide cache evicted while another thread was about to run it stays correct)."""
        with _LOCK:
            if self._handle is not None:
                dre.delete_ruleset(self._handle)
                self._handle = None

    def __enter__(self) -> "RuleEngine":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def run(self, facts: Sequence[Fact]) -> list[Firing]:
        """Assert ``facts`` in a fresh session and return every firing in order."""
        if not self._rules:
            return []
        facts = [*facts, *aggregate_facts(self._rules.values(), facts)]
        ids = [f.id for f in facts]
        if len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
            raise EngineError(f"two facts share the id {duplicate!r}; the engine would drop one of them")
        order = self._family_order  # every family a rule names (see the module docstring)
        ordered = sorted((f for f in facts if f.family in order), key=lambda f: order[f.family])
        with _LOCK:
            closed = self._handle is None
            if closed:
                self._handle = self._create()
            session = _Session(self, f"s{next(_SESSIONS)}", {f.id: f for f in facts})
            session.open()
            try:
                for fact in ordered:
                    session.assert_fact(fact)
                return session.drain()
            finally:
                try:
                    session.close()
                finally:
                    if closed:
                        dre.delete_ruleset(self._handle)
                        self._handle = None


def assertion_order(rules: Sequence[Any]) -> dict[str, int]:
    """Family → position, negated families before the positive families of the same rule (a topological order);
    every family a rule names, positively or negated, has one."""
    before: dict[str, set[str]] = {}  # family -> families that must be asserted before it
    owners: dict[tuple[str, str], str] = {}
    for rule in rules:
        for group in rule.spec.when.groups():
            negated = {c.not_.fact for c in group if isinstance(c, NotCondition)}
            positive = {c.fact for c in group if not isinstance(c, NotCondition)}
            for family in positive:
                before.setdefault(family, set()).update(negated - {family})
                owners.update({(family, n): rule.id for n in negated})
            for family in negated:
                before.setdefault(family, set())
    order: dict[str, int] = {}
    pending = dict(before)
    while pending:
        ready = sorted(f for f, needs in pending.items() if needs <= order.keys())
        if not ready:
            cycle = sorted(f"{owners.get((f, n), '?')} ({f} after {n})" for f, needs in pending.items() for n in needs - order.keys())
            raise RuleError("rules negate families in contradictory orders: " + "; ".join(cycle))
        for family in ready:
            order[family] = len(order)
            del pending[family]
    return order


class _Session:
    def __init__(self, engine: RuleEngine, sid: str, facts: dict[str, Fact]) -> None:
        self.engine = engine
        self.handle = engine._handle
        self.sid = sid
        self.facts = facts
        self.state: int | None = None
        self.firings: list[Firing] = []
        self.derived_count = itertools.count()
        self._by_family: dict[str, list[Fact]] | None = None  # for checking negations; None after a fact is derived

    def open(self) -> None:
        """Create the session and run the sentinel action once (see the module docstring)."""
        self._assert({FAMILY_KEY: _SENTINEL_FAMILY, "id": _SENTINEL_FAMILY, "sid": self.sid}, _SENTINEL_FAMILY)
        if self.state is None:
            raise EngineError("the rule engine did not open a session")
        self.drain()

    def assert_fact(self, fact: Fact) -> None:
        self._assert({FAMILY_KEY: fact.family, "sid": self.sid, **_engine_fields(fact)}, fact.id)

    def _assert(self, payload: dict[str, Any], fact_id: str) -> None:
        try:
            result = dre.assert_fact(self.handle, encode(payload))
        except NotEncodable as exc:
            raise EngineError(f"fact {fact_id}: {exc}") from exc
        except dre.error as exc:
            raise EngineError(f"the rule engine rejected fact {fact_id} ({exc})") from exc
        code, state = result
        if code not in (0, _NOT_HANDLED):
            raise EngineError(f"the rule engine refused fact {fact_id} (code {code}; a duplicate?)")
        if code == 0:
            self.state = state

    def drain(self) -> list[Firing]:
        """Run pending activations until none is left, handling each firing in our own code."""
        if self.state is None:
            return self.firings
        pending = dre.start_action_for_state(self.handle, self.state)
        message = pending[1] if pending else None
        while message:
            if len(self.firings) >= _MAX_FIRINGS:
                dre.abandon_action(self.handle, self.state)
                raise EngineError(f"more than {_MAX_FIRINGS} rule firings; do derived facts trigger each other?")
            try:
                self._fire(json.loads(message))
            except Exception:
                dre.abandon_action(self.handle, self.state)
                raise
            message = dre.complete_and_start_action(self.handle, self.state)
            if not message:
                pending = dre.start_action_for_state(self.handle, self.state)
                message = pending[1] if pending else None
        return self.firings

    def _fire(self, message: dict[str, Any]) -> None:
        ((name, bindings),) = message.items()
        if name == _SENTINEL_RULE:
            return
        rule = self.engine._rules[name]
        matched = {alias: self.facts[payload["id"]] for alias, payload in bindings.items()}
        if not _joins_hold(self.engine._joins[name], matched):
            return
        if name in self.engine._negating:  # the engine's 'not' misses facts of a family the rule also matches
            if self._by_family is None:
                self._by_family = facts_by_family(list(self.facts.values()))
            if not negations_hold(rule.spec, matched, self._by_family):
                return
        firing = Firing(rule_id=rule.id, matched=matched)
        self.firings.append(firing)
        derivation = rule.spec.then.assert_
        if derivation is not None:
            fact = self._derive(rule, derivation.fact, firing)
            firing.derived.append(fact)
            self.facts[fact.id] = fact
            self._by_family = None
            self.assert_fact(fact)

    def _derive(self, rule: Any, family: str, firing: Firing) -> Fact:
        resolve = resolver(firing.values())
        values: dict[str, Any] = {}
        for field_name, value in rule.exprs.derived_values.items():
            values[field_name] = value.evaluate(resolve) if isinstance(value, Expression) else value
        values = {k: v for k, v in values.items() if v is not None}
        sources = sorted({s for fact in firing.matched.values() for s in fact.sources})
        try:
            return FACT_FAMILIES[family](
                id=f"{family}:{rule.id}:{next(self.derived_count)}", sources=sources, **values
            )
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise EngineError(f"rule {rule.id} derived an invalid {family} fact ({problems})") from exc

    def close(self) -> None:
        if self.state is not None:
            dre.delete_state(self.handle, self.sid)


def _joins_hold(joins, matched: dict[str, Fact]) -> bool:
    """The deferred ordered/'ne' comparisons between the matched facts (see compile.deferred_joins)."""
    for alias, field_name, op, ref in joins:
        if alias not in matched or ref.alias not in matched:
            continue  # a join of another 'any' alternative
        if not holds(op, getattr(matched[alias], field_name, None), getattr(matched[ref.alias], ref.field, None)):
            return False
    return True


def _engine_fields(fact: Fact) -> dict[str, Any]:
    """The scalar fields of a fact (None dropped: a missing field fails every comparison, as intended), read from the
    model's own dict: a scalar field's value is what model_dump would give, at a fraction of the cost."""
    return {
        key: value
        for key, value in fact.__dict__.items()
        if value is not None and isinstance(value, (str, int, float, bool)) and key != FAMILY_KEY
    }
