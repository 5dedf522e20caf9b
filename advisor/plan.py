"""Plan: join rule firings with knowledge, estimate gains, merge duplicates across ranks, rank them.

* A firing's gain is its rule's ``gain_us`` expression over the matched facts (µs per step). Its share
  of the step is gain / the step time of the rank it is about (the profile's mean step otherwise).
* Firings of the same rule with the same ``key`` are one finding: ranks are merged, the gain is the
  mean over those ranks, and the evidence is that of the firing with the largest gain.
* Severity is the rule's own, or from the gain share: ≥ 5 % high, ≥ 1 % medium, else low.
* Findings are ordered by gain (largest first, unknown last), then severity, then id.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean
from typing import Any

from advisor.engine.evaluate import explain_firing
from advisor.engine.expr import resolver
from advisor.engine.session import Firing
from advisor.facts import BottleneckFact, BreakdownFact, Fact, FactSet, OperatorFact
from advisor.gates import Known, check_preconditions
from advisor.knowledge import KnowledgeEntry
from advisor.report import (
    CodeChange,
    Derivation,
    Finding,
    OperatorSummary,
    PreconditionCheck,
    Prescription,
    RankSummary,
    Summary,
    Trace,
    TraceCheck,
    TraceCondition,
)
from advisor.rulebook import Rule, RuleBook
from advisor.text import Lang, collapse

HIGH_SHARE = 0.05
MEDIUM_SHARE = 0.01
TOP_OPERATORS = 10
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def plan_findings(firings: list[Firing], facts: list[Fact], book: RuleBook, lang: Lang) -> list[Finding]:
    """Turn the firings of recommending rules into ranked findings."""
    step_time = _step_times(facts)
    known = known_about(facts)
    derived_by = {fact.id: firing for firing in firings for fact in firing.derived}
    groups: dict[tuple[str, str | None], list[tuple[Firing, float | None]]] = defaultdict(list)
    for firing in firings:
        rule = book.rules[firing.rule_id]
        if not rule.spec.then.recommend:
            continue
        resolve = resolver(firing.values())
        gain = rule.exprs.gain.evaluate(resolve) if rule.exprs.gain else None
        key = rule.exprs.key.render(resolve) if rule.exprs.key else None
        groups[(firing.rule_id, key)].append((firing, None if gain is None else max(float(gain), 0.0)))

    findings = []
    for (rule_id, key), members in groups.items():
        rule = book.rules[rule_id]
        ranks = sorted({r for firing, _ in members if (r := _rank_of(firing)) is not None})
        gains = [g for _, g in members if g is not None]
        gain = fmean(gains) if gains else None
        base = fmean(step_time[r] for r in ranks if r in step_time) if any(r in step_time for r in ranks) else step_time.get(None)
        ratio = min(gain / base, 1.0) if gain is not None and base else None
        representative = max(members, key=lambda m: (m[1] if m[1] is not None else -1.0))[0]
        resolve = resolver(representative.values())
        explain = rule.exprs.explain.get(lang) or rule.exprs.explain["en"]
        findings.append(
            Finding(
                id=rule_id,
                key=key,
                category=rule.spec.category,
                severity=rule.spec.severity if rule.spec.severity != "auto" else severity_for(ratio),
                title=rule.spec.title.get(lang),
                explanation=collapse(explain.render(resolve)),
                evidence=_evidence(representative),
                ranks=ranks,
                estimated_gain_us=gain,
                estimated_gain_ratio=ratio,
                prescriptions=[prescription(book.knowledge[k], lang, known) for k in rule.spec.then.recommend],
                trace=Trace(
                    rule=rule_id,
                    rule_file=rule.shown_path,
                    pack=rule.pack,
                    facts=sorted({fact.id for firing, _ in members for fact in firing.matched.values()}),
                    derived_by=sorted(
                        {derived_by[f.id].rule_id for firing, _ in members for f in firing.matched.values() if f.id in derived_by}
                    ),
                    conditions=_conditions(rule, representative, facts),
                    chain=_chain(representative, derived_by),
                ),
            )
        )
    findings.sort(
        key=lambda f: (
            -(f.estimated_gain_us if f.estimated_gain_us is not None else -1.0),
            _SEVERITY_ORDER[f.severity],
            f.id,
            f.key or "",
        )
    )
    return findings


def severity_for(ratio: float | None) -> str:
    """high ≥ 5 % of the step, medium ≥ 1 %, else low (also when the gain is unknown)."""
    if ratio is None:
        return "low"
    return "high" if ratio >= HIGH_SHARE else "medium" if ratio >= MEDIUM_SHARE else "low"


def prescription(entry: KnowledgeEntry, lang: Lang, known: Known | None = None) -> Prescription:
    """A knowledge entry in one language, its preconditions checked against what is ``known`` about the job."""
    return Prescription(
        id=entry.id,
        title=entry.title.get(lang),
        problem=collapse(entry.problem.get(lang)),
        preconditions=[
            PreconditionCheck(requirement=c.requirement, status=c.status, detail=c.detail)
            for c in check_preconditions(entry.applies_to, known or Known())
        ],
        actions=[collapse(a.get(lang)) for a in entry.actions],
        env=dict(entry.env),
        code=CodeChange(**entry.code.model_dump()) if entry.code else None,
        gain_model=collapse(entry.gain.model.get(lang)),
        stated_gain=collapse(entry.gain.stated.get(lang)) if entry.gain.stated else None,
        caveats=[collapse(c.get(lang)) for c in entry.caveats],
        references=[_reference(r) for r in entry.references],
    )


def summarize(facts: FactSet, firings: list[Firing]) -> Summary:
    """The headline numbers: profile mean step, verdicts, per-rank breakdowns and top operators."""
    verdicts: dict[int | None, str] = {}
    for firing in firings:
        for fact in firing.derived:
            if isinstance(fact, BottleneckFact):
                verdicts[fact.rank if fact.scope == "rank" else None] = fact.kind
    breakdowns = facts.of(BreakdownFact)
    profile = next((b for b in breakdowns if b.scope == "profile"), None)
    per_rank = [
        RankSummary(
            rank=b.rank,
            steps=b.steps,
            step_time_us=b.step_time_us,
            compute_us=b.compute_us,
            comm_not_overlapped_us=b.comm_not_overlapped_us,
            free_us=b.free_us,
            compute_ratio=b.compute_ratio,
            communication_ratio=b.communication_ratio,
            free_ratio=b.free_ratio,
            bottleneck=verdicts.get(b.rank, "unknown"),
        )
        for b in sorted((b for b in breakdowns if b.scope == "rank"), key=lambda b: b.rank)
    ]
    return Summary(
        step_time_us=profile.step_time_us if profile else None,
        compute_ratio=profile.compute_ratio if profile else None,
        communication_ratio=profile.communication_ratio if profile else None,
        free_ratio=profile.free_ratio if profile else None,
        bottleneck=verdicts.get(None, "unknown"),
        per_rank=per_rank,
        top_operators=top_operators(facts.of(OperatorFact)),
    )


def top_operators(operators: list[OperatorFact], limit: int = TOP_OPERATORS) -> list[OperatorSummary]:
    """Operator types by mean time per step over the ranks that run them."""
    groups: dict[tuple[str, str | None], list[OperatorFact]] = defaultdict(list)
    for op in operators:
        groups[(op.op_type, op.accelerator_core)].append(op)
    summaries = [
        OperatorSummary(
            op_type=op_type,
            accelerator_core=core,
            ranks=sorted({o.rank for o in ops}),
            count_per_step=fmean(o.count_per_step for o in ops),
            total_us_per_step=fmean(o.total_us_per_step for o in ops),
            share_of_compute=fmean(o.share_of_compute for o in ops),
        )
        for (op_type, core), ops in groups.items()
    ]
    summaries.sort(key=lambda s: (-s.total_us_per_step, s.op_type))
    return summaries[:limit]


def _step_times(facts: list[Fact]) -> dict[int | None, float]:
    return {
        (b.rank if b.scope == "rank" else None): b.step_time_us
        for b in facts
        if isinstance(b, BreakdownFact) and b.step_time_us > 0
    }


def _rank_of(firing: Firing) -> int | None:
    return next((r for f in firing.matched.values() if (r := getattr(f, "rank", None)) is not None), None)


def _conditions(rule: Rule, firing: Firing, facts: list[Fact]) -> list[TraceCondition]:
    return [
        TraceCondition(
            alias=result.alias,
            family=result.family,
            negated=result.negated,
            fact=None if result.negated else result.fact.id if result.fact else None,
            checks=[TraceCheck(test=c.describe(), actual=_scalar(c.actual), holds=c.holds) for c in result.checks],
            sources=list(result.fact.sources) if result.fact and not result.negated else [],
        )
        for result in explain_firing(rule.spec, firing.matched, facts)
    ]


def _chain(firing: Firing, derived_by: dict[str, Firing]) -> list[Derivation]:
    """The derived facts a firing depends on, breadth first, each once."""
    chain: list[Derivation] = []
    pending = [f.id for f in firing.matched.values()]
    seen: set[str] = set()
    while pending:
        fact_id = pending.pop(0)
        source = derived_by.get(fact_id)
        if source is None or fact_id in seen:
            continue
        seen.add(fact_id)
        parents = [f.id for f in source.matched.values()]
        chain.append(Derivation(fact=fact_id, rule=source.rule_id, from_facts=parents))
        pending.extend(parents)
    return chain


def _scalar(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _evidence(firing: Firing) -> dict[str, Any]:
    evidence: dict[str, Any] = {}
    for alias, fact in firing.matched.items():
        for field, value in fact.model_dump(exclude={"id", "sources"}).items():
            if isinstance(value, (bool, int, float, str)):  # lists stay in the report's facts
                evidence[f"{alias}.{field}"] = value
    return evidence


def known_about(facts: list[Fact]) -> Known:
    """What the context and model facts say about the job, for the precondition checks."""
    context = next((f for f in facts if f.family == "context"), None)
    model = next((f for f in facts if f.family == "model"), None)
    return Known(
        chip=getattr(model, "chip", None),
        hardware=getattr(context, "hardware", None),
        format=getattr(context, "format", None),
        versions={"cann": getattr(context, "cann_version", None), "torch_npu": getattr(context, "torch_npu_version", None)},
        execution_mode=getattr(model, "execution_mode", None),
    )


def _reference(reference) -> str:
    if reference.url:
        return f"{reference.title} <{reference.url}>"
    if reference.seed:
        return f"{reference.title} (seed {reference.seed})"
    return reference.title
