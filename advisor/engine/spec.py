"""Rule files (rules/<pack>/<id>.yaml, design §4.1) as typed models, validated against the fact catalogue.

A rule says *when* (conditions on facts: ``all``/``any`` of fact conditions, ``not`` for absence, joins
through ``{ref: alias.field}``) and *then* (knowledge ids to recommend, a gain expression, and/or a
derived fact to assert for other rules to match). Validation happens once at load time, so a rule that
names an unknown fact field, compares a text field with a number, uses a regex the engine cannot run
or can never be true is rejected with a message instead of silently never firing.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from advisor.budget import ROOT_BUCKET, bucket_problem
from advisor.engine.expr import Expression, ExpressionError, Template, check_format_spec
from advisor.engine.regex import UnsupportedRegex, translate
from advisor.facts.catalogue import field_bounds, field_kind, literal_choices, value_kind
from advisor.facts.models import FACT_FAMILIES, PROVENANCE_FIELDS, Fact
from advisor.text import Text
from advisor.vocabulary import Category, Platform, Severity

Scalar = Union[bool, int, float, str]
_ALIAS = re.compile(r"^[a-z][a-z0-9_]*$")
RULE_ID = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
_RESERVED_FIELDS = {"family", "sid"}
GAIN_UNKNOWN = "unknown"
COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "matches", "imatches", "exists", "in")
# What authors write for an operator, by the operator it stands for (difflib finds the rest: ge → gte, le → lte).
OPERATOR_SYNONYMS = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte", "=": "eq", "==": "eq", "!=": "ne", "neq": "ne",
                     "regex": "matches", "match": "matches", "imatch": "imatches", "one_of": "in"}
_NUMERIC_OPS = {"gt", "gte", "lt", "lte"}
_COMPARISON_TEXT = re.compile(r"^\s*(>=|<=|==|!=|>|<|=)\s*(-?[0-9][0-9_.eE+-]*)\s*$")
_TEXT_OPS = {"matches", "imatches"}


def did_you_mean(word: object, candidates: Iterable[str], synonyms: dict[str, str] | None = None) -> str:
    """`` — did you mean 'X'?`` for the candidate closest to ``word`` (or the one ``synonyms`` maps it to); '' when
    none is close."""
    names = list(candidates)
    if not isinstance(word, str):
        return ""
    if synonyms and synonyms.get(word) in names:
        return f" — did you mean {synonyms[word]!r}?"
    lowered = {name.lower(): name for name in names}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return f" — did you mean {lowered[close[0]]!r}?" if close and lowered[close[0]] != word else ""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Ref(_Model):
    """A join: the value of another matched fact's field, ``{ref: alias.field}``."""

    ref: str

    @field_validator("ref")
    @classmethod
    def _dotted(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("a reference is written alias.field")
        return value

    @property
    def alias(self) -> str:
        return self.ref.split(".", 1)[0]

    @property
    def field(self) -> str:
        return self.ref.split(".", 1)[1]


Operand = Union[Ref, Scalar]
Location = tuple[Union[str, int], ...]  # keys and list indexes from the top of a rule file


class Predicate(_Model):
    """Comparisons on one field, all of which must hold; a bare value in YAML means ``eq``."""

    eq: Operand | None = None
    ne: Operand | None = None
    gt: Operand | None = None
    gte: Operand | None = None
    lt: Operand | None = None
    lte: Operand | None = None
    matches: str | None = None
    imatches: str | None = None
    exists: bool | None = None
    in_: list[Scalar] | None = Field(None, alias="in", min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _bare_value_is_eq(cls, value: object) -> object:
        return {"eq": value} if not isinstance(value, dict) or "ref" in value else value

    @model_validator(mode="after")
    def _not_empty(self) -> "Predicate":
        if not self.comparisons():
            raise ValueError(f"a field condition needs one of: {', '.join(COMPARISONS)}")
        return self

    def comparisons(self) -> list[tuple[str, Any]]:
        return [
            (name, getattr(self, "in_" if name == "in" else name))
            for name in COMPARISONS
            if getattr(self, "in_" if name == "in" else name) is not None
        ]


class FactCondition(_Model):
    """A fact of one family whose fields satisfy ``where``; ``as`` names it for joins and templates."""

    fact: str
    as_: str | None = Field(None, alias="as")
    where: dict[str, Predicate] = Field(default_factory=dict)

    @property
    def alias(self) -> str:
        return self.as_ or self.fact


class NotCondition(_Model):
    """No fact matches the inner condition."""

    not_: FactCondition = Field(alias="not")


class AllGroup(_Model):
    """Inside ``any``: several fact conditions that must hold together."""

    all: list[FactCondition] = Field(min_length=1)


class When(_Model):
    """Exactly one of ``all`` (every item holds) or ``any`` (at least one item holds)."""

    all: list[FactCondition | NotCondition] | None = Field(None, min_length=1)
    any: list[FactCondition | AllGroup] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one_of(self) -> "When":
        if (self.all is None) == (self.any is None):
            raise ValueError("'when' takes exactly one of 'all' or 'any'")
        return self

    def groups(self) -> list[list[FactCondition | NotCondition]]:
        """The alternatives, each a list of conditions that hold together."""
        return [[condition for _, condition in group] for group in self.located_groups()]

    def located_groups(self) -> list[list[tuple[Location, FactCondition | NotCondition]]]:
        """The alternatives, each condition with where the rule file writes it."""
        if self.all is not None:
            return [[(("when", "all", i), condition) for i, condition in enumerate(self.all)]]
        assert self.any is not None
        return [[(("when", "any", i, "all", j), condition) for j, condition in enumerate(item.all)]
                if isinstance(item, AllGroup) else [(("when", "any", i), item)] for i, item in enumerate(self.any)]


class Derivation(_Model):
    """A fact the rule asserts when it fires; values are literals or ``= expression``."""

    fact: str
    values: dict[str, Scalar | None] = Field(default_factory=dict)


GainBasis = Literal["measured", "assumed"]


class Then(_Model):
    recommend: list[str] = Field(default_factory=list)
    gain_us: str | float | None = None
    gain_basis: GainBasis = "assumed"
    charged_to: str = ROOT_BUCKET
    key: str | None = None
    assert_: Derivation | None = Field(None, alias="assert")

    @model_validator(mode="after")
    def _does_something(self) -> "Then":
        if not self.recommend and self.assert_ is None:
            raise ValueError("'then' needs 'recommend' (a finding), 'assert' (a derived fact), or both")
        if self.recommend and self.gain_us is None:
            raise ValueError("a rule that recommends must estimate 'gain_us' (or say 'unknown')")
        return self


class TextCheck(_Model):
    """What a finding's text must hold: ``contains`` a fragment, or ``equals`` the whole text."""

    contains: str | None = Field(None, min_length=1)
    equals: str | None = None

    @model_validator(mode="after")
    def _one(self) -> "TextCheck":
        if (self.contains is None) == (self.equals is None):
            raise ValueError("give exactly one of 'contains' or 'equals'")
        return self

    def failure(self, text: str) -> str | None:
        """Why ``text`` fails the check, or None."""
        if self.contains is not None and self.contains not in text:
            return f"lacks {self.contains!r}"
        if self.equals is not None and text != self.equals:
            return f"is not {self.equals!r}"
        return None


class FindingExpectation(_Model):
    """What the finding of a firing case must say (each item optional): its gain per step — a number of µs within
    ``gain_tolerance`` (relative), or ``unknown`` for none — its severity and key, and its title and explanation in
    each language."""

    gain_us: float | Literal["unknown"] | None = None
    gain_tolerance: float = Field(0.01, ge=0, le=1)
    severity: Severity | None = None
    key: str | None = None
    title: dict[Literal["en", "zh"], TextCheck] = Field(default_factory=dict)
    explanation: dict[Literal["en", "zh"], TextCheck] = Field(default_factory=dict)


class RuleTestCase(_Model):
    """An embedded test case: facts (``fact: family`` plus fields), whether the rule fires, and optionally what its
    finding says."""

    name: str
    facts: list[dict[str, Any]] = Field(min_length=1)
    expect: Literal["fire", "quiet"]
    finding: FindingExpectation | None = None

    @model_validator(mode="after")
    def _finding_needs_a_firing(self) -> "RuleTestCase":
        if self.finding is not None and self.expect != "fire":
            raise ValueError("'finding' checks what a firing says: it needs 'expect: fire'")
        return self


AGGREGATE = "aggregate"  # the family a condition names to match one of its rule's aggregates (``as``: its name)
AGGREGATIONS = ("sum", "min", "max", "mean")


class Aggregate(_Model):
    """``aggregate: {NAME: …}``: over the facts of ``fact`` that match ``where`` (no joins: it is computed before the
    rules run), one fact per rank (``per: rank``, ranks that have facts of that family) or one for the profile: how
    many match (``count``), and the sum, minimum, maximum and mean of the number fields listed (``sum_FIELD``, …).
    A condition matches it as ``fact: aggregate, as: NAME``."""

    fact: str
    where: dict[str, Predicate] = Field(default_factory=dict)
    per: Literal["rank", "profile"] = "rank"
    sum: list[str] = Field(default_factory=list)
    min: list[str] = Field(default_factory=list)
    max: list[str] = Field(default_factory=list)
    mean: list[str] = Field(default_factory=list)


class AggregateFact(Fact):
    """The base of the facts a rule's ``aggregate`` gives (``aggregate_model`` adds the fields it asks for)."""

    family: ClassVar[str] = AGGREGATE
    source: ClassVar[str] = "computed from the facts of the family a rule's aggregate names, before the rules run"

    rank: int | None = Field(None, ge=0, description="The rank (per: rank); absent for per: profile.")
    count: int = Field(ge=0, description="How many facts matched the aggregate's where.")


def aggregate_family(rule_id: str, name: str) -> str:
    """The family of a rule's aggregate ``name``: unique to the rule, so it matches no other rule's."""
    return f"{AGGREGATE}:{rule_id}/{name}"


def aggregate_model(rule_id: str, name: str, spec: Aggregate) -> type[AggregateFact]:
    """The fact model of aggregate ``name`` of rule ``rule_id``: count, rank and the fields ``spec`` asks for."""
    return _aggregate_model(rule_id, name, spec.model_dump_json())


@cache
def _aggregate_model(rule_id: str, name: str, spec_json: str) -> type[AggregateFact]:
    spec = Aggregate.model_validate_json(spec_json)
    fields: dict[str, Any] = {
        f"{kind}_{field}": (float | None, Field(None, description=f"The {kind} of {spec.fact}.{field} over the matching facts "
                                                                  "(sum 0, the others absent, when none matches)."))
        for kind in AGGREGATIONS for field in getattr(spec, kind)}
    model = create_model(f"Aggregate_{rule_id.replace('.', '_')}_{name}", __base__=AggregateFact, **fields)
    model.family = aggregate_family(rule_id, name)
    return model


def _name_aggregates(data: Any) -> Any:
    """A rule file's conditions on ``fact: aggregate`` get the family of the rule's aggregate they name (``as``)."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("when"), dict):
        return data

    def named(item: Any) -> Any:
        if isinstance(item, dict) and item.get("fact") == AGGREGATE and isinstance(item.get("as"), str):
            return {**item, "fact": aggregate_family(data["id"], item["as"])}
        if isinstance(item, dict) and isinstance(item.get("all"), list):
            return {**item, "all": [named(i) for i in item["all"]]}
        if isinstance(item, dict) and isinstance(item.get("not"), dict):
            return {**item, "not": named(item["not"])}
        return item

    when = {key: [named(i) for i in value] if isinstance(value, list) else value for key, value in data["when"].items()}
    return {**data, "when": when}


class RuleSpec(_Model):
    """One rule file."""

    id: str
    title: Text
    category: Category
    severity: Literal["auto", Severity] = "auto"
    severity_reason: str | None = None
    platforms: list[Platform] = Field(default_factory=lambda: ["ascend"], min_length=1)
    description: Text | None = None
    when: When
    then: Then
    explain: Text | None = None
    tests: list[RuleTestCase] = Field(default_factory=list)
    aggregate: dict[str, Aggregate] = Field(default_factory=dict)

    _aggregates = model_validator(mode="before")(classmethod(lambda cls, data: _name_aggregates(data)))

    @field_validator("id")
    @classmethod
    def _dotted_id(cls, value: str) -> str:
        if not RULE_ID.match(value):
            raise ValueError("a rule id is dotted lower-case words, e.g. affinity.index_put_hot")
        return value

    @model_validator(mode="after")
    def _severity_reason(self) -> "RuleSpec":
        if self.severity != "auto" and not self.severity_reason:
            raise ValueError("a fixed severity needs a 'severity_reason'")
        if self.then.recommend and self.explain is None:
            raise ValueError("a rule that recommends needs an 'explain' text")
        return self


# --------------------------------------------------------------------------------------------------
# Semantic checks against the fact catalogue


@dataclass(frozen=True)
class RuleProblem:
    """A problem in a rule: its message, and where in the rule file it is (the keys and list indexes down to it)."""

    text: str
    loc: Location = ()


class CompiledExpressions(BaseModel):
    """The parsed expressions and templates of a rule, ready to evaluate."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    gain: Expression | None
    charged_to: Template
    key: Template | None
    explain: dict[str, Template]
    derived_values: dict[str, Expression | Scalar | None]


def check_rule(spec: RuleSpec) -> tuple[list[RuleProblem], CompiledExpressions | None]:
    """Validate a parsed rule against the fact catalogue; return (problems, compiled expressions)."""
    problems: list[RuleProblem] = []
    aliases: dict[str, type[Fact]] = {}
    negated: list[str] = []
    unknown: set[str] = set()  # aliases of conditions on unknown families
    for group_index, group in enumerate(spec.when.located_groups()):
        if group and isinstance(group[0][1], NotCondition):
            problems.append(RuleProblem("when: a condition list cannot start with 'not' (durable-rules never fires it); "
                                        "put a positive fact condition first", ("when",)))
        defined: dict[str, type[Fact]] = {}
        for loc, condition in group:
            inner = condition.not_ if isinstance(condition, NotCondition) else condition
            loc = (*loc, "not") if isinstance(condition, NotCondition) else loc
            where = f"when: {inner.alias}"
            model = FACT_FAMILIES.get(inner.fact) or _aggregate_of(spec, inner.fact)
            if inner.fact.startswith(f"{AGGREGATE}:") and model is None:
                problems.append(RuleProblem(f"{where}: the rule has no aggregate named {inner.alias!r}"
                                            f"{did_you_mean(inner.alias, spec.aggregate)} (aggregates: "
                                            f"{', '.join(spec.aggregate) or 'none'}); 'as' names the aggregate to match",
                                            (*loc, "as")))
                unknown.update({inner.alias, *spec.aggregate})  # texts naming the aggregate: the 'as' is the problem
                continue
            if model is None:
                problems.append(RuleProblem(f"{where}: unknown fact family {inner.fact!r}{did_you_mean(inner.fact, FACT_FAMILIES)} "
                                            f"(known: {', '.join(FACT_FAMILIES)})", (*loc, "fact")))
                unknown.add(inner.alias)  # its fields are not checked, nor references to them
                continue
            if not _ALIAS.match(inner.alias):
                problems.append(RuleProblem(f"{where}: alias must be lower-case letters, digits and '_'", loc))
            if inner.alias in defined or (inner.alias in aliases and aliases[inner.alias] is not model):
                problems.append(RuleProblem(f"{where}: alias {inner.alias!r} is used twice; give one of them 'as: …'", loc))
            if isinstance(condition, NotCondition) and issubclass(model, AggregateFact):
                problems.append(RuleProblem(f"{where}: 'not' on an aggregate: there is one per rank (or profile) "
                                            "whatever matches; test its count instead, e.g. count: {eq: 0}", loc))
            if isinstance(condition, NotCondition):
                negated.append(inner.fact)
                if any(isinstance(o, Ref) and op != "eq" for p in inner.where.values() for op, o in p.comparisons()):
                    problems.append(RuleProblem(f"{where}: inside 'not', a field can only be compared with another fact by "
                                                "equality (durable-rules cannot evaluate ordered joins there)", loc))
                if model.derived:
                    problems.append(RuleProblem(
                        f"{where}: 'not' on the derived family {inner.fact!r} is unreliable (the engine cannot "
                        "retract an activation when a negated fact arrives later); negate a measured family", loc))
            for field, predicate in inner.where.items():
                problems.extend(RuleProblem(text, (*loc, "where", field))
                                for text in _check_predicate(f"{where}.{field}", model, field, predicate, defined))
            defined[inner.alias] = model
        if group_index == 0 or spec.when.any is not None:
            aliases.update({a: m for a, m in defined.items()})
    problems.extend(_aggregate_problems(spec))
    compiled = _compile_expressions(spec, aliases, problems, unknown)
    return problems, compiled


def _aggregate_of(spec: RuleSpec, family: str) -> type[AggregateFact] | None:
    """The model of the rule's aggregate whose family ``family`` is, or None."""
    name = family.partition("/")[2] if family.startswith(f"{AGGREGATE}:") else None
    return aggregate_model(spec.id, name, spec.aggregate[name]) if name in spec.aggregate else None


def _aggregate_problems(spec: RuleSpec) -> list[RuleProblem]:
    """What is wrong in the rule's aggregates: an unknown or derived family, a field it lacks, a sum of a non-number."""
    problems: list[RuleProblem] = []
    for name, aggregate in spec.aggregate.items():
        loc: Location = ("aggregate", name)
        if not _ALIAS.match(name):
            problems.append(RuleProblem(f"aggregate {name!r}: a name is lower-case letters, digits and '_'", loc))
        model = FACT_FAMILIES.get(aggregate.fact)
        if model is None:
            problems.append(RuleProblem(f"aggregate.{name}: unknown fact family {aggregate.fact!r}"
                                        f"{did_you_mean(aggregate.fact, FACT_FAMILIES)} (known: {', '.join(FACT_FAMILIES)})",
                                        (*loc, "fact")))
            continue
        if model.derived:
            problems.append(RuleProblem(f"aggregate.{name}: {aggregate.fact!r} is derived by rules; aggregates are "
                                        "computed before the rules run, over measured families", (*loc, "fact")))
        for field, predicate in aggregate.where.items():
            problems.extend(RuleProblem(text.replace("which is not an earlier condition",
                                                     "but an aggregate's where cannot refer to other facts"),
                                        (*loc, "where", field))
                            for text in _check_predicate(f"aggregate.{name}.{field}", model, field, predicate, {}))
        for kind in AGGREGATIONS:
            for field in getattr(aggregate, kind):
                if field not in model.model_fields or field in _RESERVED_FIELDS:
                    problems.append(RuleProblem(f"aggregate.{name}.{kind}: {aggregate.fact} has no field {field!r}"
                                                f"{did_you_mean(field, _settable(model))}", (*loc, kind)))
                elif field_kind(model, field) != "number":
                    problems.append(RuleProblem(f"aggregate.{name}.{kind}: {aggregate.fact}.{field} is "
                                                f"{field_kind(model, field)}, not a number", (*loc, kind)))
    return problems


def check_condition(condition: FactCondition, where: str) -> list[str]:
    """The problems of a stand-alone fact condition (no joins: it is evaluated on its own, e.g. a knowledge entry's
    presupposition): an unknown family, a field it lacks, a comparison its field cannot take."""
    model = FACT_FAMILIES.get(condition.fact)
    if model is None:
        return [f"{where}: unknown fact family {condition.fact!r}{did_you_mean(condition.fact, FACT_FAMILIES)} "
                f"(known: {', '.join(FACT_FAMILIES)})"]
    return [text for field, predicate in condition.where.items()
            for text in _check_predicate(f"{where}.{field}", model, field, predicate, {})]


def _check_predicate(
    where: str, model: type[Fact], field: str, predicate: Predicate, defined: dict[str, type[Fact]]
) -> list[str]:
    problems: list[str] = []
    if field in _RESERVED_FIELDS or field not in model.model_fields:
        fields = [f for f in model.model_fields if f not in PROVENANCE_FIELDS]
        return [f"{where}: {model.family} has no field {field!r}{did_you_mean(field, fields)} (fields: {', '.join(fields)})"]
    kind = field_kind(model, field)
    if kind == "list":
        return [f"{where}: list fields cannot be compared"]
    bounds = field_bounds(model, field)
    choices = literal_choices(model, field)
    for op, operand in predicate.comparisons():
        if isinstance(operand, Ref):
            ref_model = defined.get(operand.alias)
            if ref_model is None:
                problems.append(f"{where}: {op} refers to {operand.alias!r}, which is not an earlier condition")
            elif operand.field not in ref_model.model_fields:
                problems.append(f"{where}: {op} refers to {operand.ref!r}, but {ref_model.family} has no such field"
                                f"{did_you_mean(operand.field, _settable(ref_model))}")
            elif field_kind(ref_model, operand.field) != kind:
                problems.append(f"{where}: {op} compares a {kind} field with the {field_kind(ref_model, operand.field)} {operand.ref!r}")
            continue
        if op == "exists":
            continue
        values = operand if op == "in" else [operand]
        if op in _TEXT_OPS:
            if kind != "text":
                problems.append(f"{where}: {op} works on text fields; {field!r} is {kind}")
                continue
            try:
                translate(operand)
            except UnsupportedRegex as exc:
                problems.append(f"{where}: regex {operand!r} {exc}")
            continue
        if op in _NUMERIC_OPS and kind != "number":
            problems.append(f"{where}: {op} needs a number field; {field!r} is {kind}")
            continue
        for value in values:
            written = _COMPARISON_TEXT.match(value) if isinstance(value, str) and kind == "number" else None
            if written:  # ">= 0.1" written as the value: say how a comparison is written
                name = {">=": "gte", ">": "gt", "<=": "lte", "<": "lt", "==": "eq", "!=": "ne", "=": "eq"}[written[1]]
                problems.append(f"{where}: {value!r} is text, not a comparison; write {{{name}: {written[2]}}}")
            elif value_kind(value) != kind:
                problems.append(f"{where}: {op} {value!r} compares a {kind} field with a {value_kind(value)}")
            elif choices is not None and op in ("eq", "ne", "in") and value not in choices:
                problems.append(f"{where}: {value!r} is not a possible value (one of {', '.join(map(repr, choices))})")
            elif kind == "number" and _never_true(op, float(value), bounds):
                lo, hi = bounds
                problems.append(f"{where}: {op} {value!r} can never be true; the field ranges over [{lo}, {hi}]")
    return problems


def _compile_expressions(
    spec: RuleSpec, aliases: dict[str, type[Fact]], problems: list[RuleProblem], unknown: set[str] | None = None
) -> CompiledExpressions | None:
    def check_refs(what: str, loc: Location, refs) -> None:
        for ref in refs:
            model = aliases.get(ref.alias)
            if model is None and ref.alias in (unknown or ()):
                continue  # the condition's unknown family is the problem, said once
            if model is None:
                problems.append(RuleProblem(f"{what}: {ref.alias!r} is not an alias of this rule ({', '.join(aliases) or 'none'})", loc))
            elif ref.field not in model.model_fields or ref.field in _RESERVED_FIELDS:
                problems.append(RuleProblem(f"{what}: {model.family} has no field {ref.field!r}"
                                            f"{did_you_mean(ref.field, _settable(model))}", loc))

    at: Location = ("then", "gain_us")  # what is being compiled, for an ExpressionError
    try:
        gain = None
        if spec.then.gain_us is not None and spec.then.gain_us != GAIN_UNKNOWN:
            gain = Expression(str(spec.then.gain_us))
            check_refs("then.gain_us", at, gain.references)
            for ref in gain.references:
                model = aliases.get(ref.alias)
                if model and ref.field in model.model_fields and field_kind(model, ref.field) != "number":
                    problems.append(RuleProblem(f"then.gain_us: {ref.alias}.{ref.field} is not a number", at))
        at = ("then", "charged_to")
        charged_to = Template(spec.then.charged_to)
        problem = bucket_problem(spec.then.charged_to)
        if problem:
            problems.append(RuleProblem(f"then.charged_to: {problem}", at))
        at = ("then", "key")
        key = Template(spec.then.key) if spec.then.key else None
        explain: dict[str, Template] = {}
        if spec.explain is not None:
            at = ("explain", "en")
            explain = {"en": Template(spec.explain.en)}
            if spec.explain.zh:
                at = ("explain", "zh")
                explain["zh"] = Template(spec.explain.zh)
        for at, template in [(("then", "key"), key), (("then", "charged_to"), charged_to),
                             *[(("explain", k), t) for k, t in explain.items()]]:
            if template is None:
                continue
            check_refs(".".join(map(str, at)), at, [ref for ref, _ in template.references])
            for ref, fmt in template.references:
                model = aliases.get(ref.alias)
                if fmt and model and ref.field in model.model_fields:
                    check_format_spec(fmt, 0.5 if field_kind(model, ref.field) == "number" else "x")
        at = ("then", "assert")
        derived_values = _derived_values(spec, aliases, problems, check_refs)
    except ExpressionError as exc:
        problems.append(RuleProblem(str(exc), at))
        return None
    return CompiledExpressions(gain=gain, charged_to=charged_to, key=key, explain=explain, derived_values=derived_values)


def _derived_values(spec: RuleSpec, aliases, problems: list[RuleProblem], check_refs) -> dict[str, Any]:
    derivation = spec.then.assert_
    if derivation is None:
        return {}
    model = FACT_FAMILIES.get(derivation.fact)
    if model is None:
        problems.append(RuleProblem(f"then.assert: unknown fact family {derivation.fact!r}"
                                    f"{did_you_mean(derivation.fact, FACT_FAMILIES)}", ("then", "assert", "fact")))
        return {}
    if not model.derived:
        problems.append(RuleProblem(f"then.assert: {derivation.fact!r} is a measured family; rules may only assert derived ones",
                                    ("then", "assert", "fact")))
    values: dict[str, Any] = {}
    for field, value in derivation.values.items():
        loc = ("then", "assert", "values", field)
        if field not in model.model_fields or field in ("id", *PROVENANCE_FIELDS):
            problems.append(RuleProblem(f"then.assert.{field}: {derivation.fact} has no settable field {field!r}"
                                        f"{did_you_mean(field, [f for f in _settable(model) if f != 'id'])}", loc))
            continue
        if isinstance(value, str) and value.startswith("="):
            expression = Expression(value[1:])
            check_refs(f"then.assert.{field}", loc, expression.references)
            values[field] = expression
        else:
            values[field] = value
    return values


def _settable(model: type[Fact]) -> list[str]:
    """The fields of a fact family a rule can name."""
    return [f for f in model.model_fields if f not in _RESERVED_FIELDS and f not in PROVENANCE_FIELDS]


def _never_true(op: str, value: float, bounds: tuple[float | None, float | None]) -> bool:
    lo, hi = bounds
    return (
        (op == "gt" and hi is not None and value >= hi)
        or (op == "gte" and hi is not None and value > hi)
        or (op == "lt" and lo is not None and value <= lo)
        or (op == "lte" and lo is not None and value < lo)
        or (op == "eq" and ((hi is not None and value > hi) or (lo is not None and value < lo)))
    )


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
        if info is None or name in ("id", *PROVENANCE_FIELDS):
            raise ValueError(f"{family} has no field {name!r}{did_you_mean(name, [f for f in _settable(model) if f != 'id'])}")
        adapter = TypeAdapter(Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation)
        try:
            checked[name] = adapter.validate_python(value)
        except ValidationError as exc:
            raise ValueError(f"{family}.{name}: {exc.errors()[0]['msg']}") from exc
        if isinstance(checked[name], float) and not math.isfinite(checked[name]):
            raise ValueError(f"{family}.{name}: {value!r} is not a finite number (facts never hold NaN or infinity)")
    return model.model_construct(id=values.get("id", fact_id), sources=["rule test case"], **checked)
