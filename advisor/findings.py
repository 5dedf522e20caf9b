"""Findings: join rule firings with knowledge, estimate gains, merge duplicates across ranks, rank them.

* A firing claims its rule's ``gain_us`` expression over the matched facts (µs per step), from the bucket of the
  step its rule names (``charged_to``, see ``advisor.budget``). Claims are charged to the rank's budget, measured
  ones first, then the most specific bucket, then the largest, so a firing keeps only what earlier ones left of its
  bucket: the gains of a rank never add up to more than its step, nor those of a bucket to more than the bucket.
* Firings of the same rule with the same ``key`` are one finding: ranks are merged, the gain is the mean over
  those ranks, and the evidence is that of the firing with the largest claim. Its share of the step is gain /
  the step time of the ranks it is about (the profile's mean step otherwise).
* Severity is the rule's own, or from the gain share: ≥ 5 % high, ≥ 1 % medium, else low. A gain that is not a
  plain measurement counts half towards high, as it does in the ranking: one from a planning factor
  (``gain_basis: assumed``), and a measured gain charged to host-side idle time (``idle/dispatch``, ``idle/host``, the
  optimizer's loops) in a capture that recorded call stacks or shapes — an upper bound, the profiler's own
  per-operator cost being host time too, so the finding names those settings (``instrumented_by``). Such a gain is
  high from 10 % of the step: what is left of it if half were the factor's optimism or the profiler's cost.
* A finding that matched operator facts states how much of the step's compute time the operator table records
  (``operator_table_coverage``, the lowest ``table_coverage`` of the facts its firings matched): below
  PARTIAL_TABLE its explanation says so, and below THIN_TABLE it is low — the compute the table misses then
  outweighs what it records, so neither a share of compute nor a gain read from it sizes the problem.
* Findings are ordered by severity, then by gain within it — an assumed gain counting half, unknown last — then id:
  an informational finding (a rule's fixed low severity) never precedes a high one whatever its planning factor.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from advisor.budget import Budget, ancestors, holding_children
from advisor.engine.evaluate import explain_firing, facts_by_family
from advisor.engine.expr import resolver
from advisor.engine.session import Firing
from advisor.facts import BottleneckFact, BreakdownFact, CommunicationFact, Fact, FactSet, IdleFact, OperatorFact
from advisor.facts.models import PhaseFact, TimeRange
from advisor.gates import Known, Presumed, check_preconditions, check_presuppositions
from advisor.knowledge import KnowledgeEntry, Presupposition, public_reference
from advisor.report import (
    CodeChange,
    Derivation,
    Finding,
    OperatorSummary,
    PhaseSummary,
    PreconditionCheck,
    Prescription,
    RankSummary,
    Summary,
    Trace,
    TraceCheck,
    TraceCondition,
    WithheldFinding,
)
from advisor.rulebook import Rule, RuleBook
from advisor.text import Lang, Text, collapse
from advisor.vocabulary import SEVERITY_ORDER, Severity, Verdict

HIGH_SHARE = 0.05
MEDIUM_SHARE = 0.01
TOP_OPERATORS = 10
ASSUMED_WEIGHT = 0.5  # an assumed gain ranks above a measured one only when it is more than twice as large
RANGES_PER_FINDING = 6  # the longest time ranges a finding names (each fact names a few per field)
MEASURABLE_US = 0.05  # a gain below this is none: shown as such, not as "0.0 µs"
HOST_IDLE_BUCKETS = ("idle/dispatch", "idle/host", "idle/optimizer", "idle/zero_grad")  # host loops the profiler slows
INSTRUMENTATION = ("with_stack", "record_shapes")  # capture settings that add host time to every operator
PARTIAL_TABLE = 0.8  # below this operator-table coverage an operator finding says how much of the compute it sees
THIN_TABLE = 0.5  # below this, the compute the table misses outweighs what it records: the finding is low
PARTIAL_TABLE_NOTE = Text(
    en="The operator table records only {coverage:.0%} of rank {rank}'s device compute time per step (the step "
       "breakdown's), so its shares of compute are shares of that part.",
    zh="算子表只记录了 rank {rank} 每迭代设备计算时间（迭代拆解中的计算时间）的 {coverage:.0%}，其中的计算占比只是这一部分内的占比。")
THIN_TABLE_NOTE = Text(
    en="With less than half of the compute recorded the finding is at most low: capture again with the whole step in "
       "the operator table to size it.",
    zh="记录的计算时间不足一半，该问题至多为低严重度：请重新采集，使算子表包含完整的迭代后再评估。")

TYPICAL_STEP_NOTE = Text(
    en="These figures are per typical step — the mean of {steps} steps, {step:,.0f} µs, without the outlier steps "
       "{outliers} — so the shares are of that step, not of the mean step in the verdict.",
    zh="以上数据按典型迭代计算——即不含离群迭代 {outliers} 的 {steps} 个迭代的平均值（{step:,.0f} µs），因此占比是相对该迭代而非判定中的平均迭代。")
CONTRADICTED = Text(en="{entry} presupposes: {requirement}; the profile contradicts it ({detail})",
                    zh="{entry} 的前提是{requirement}；性能数据与之矛盾（{detail}）")
WARMUP_NOTE = Text(
    en="Measured in a capture without steady state ({evidence}): at most low until steady-state steps are profiled.",
    zh="测量自没有稳态的采集（{evidence}）：在采集到稳态迭代之前，该问题至多为低严重度。")


@dataclass
class Charge:
    """One firing of a recommending rule: what it claims, from which bucket, and what the budget let it keep."""

    firing: Firing
    rank: int | None  # the rank it is about (shown in the finding)
    budget_rank: int | None  # the rank whose step it is charged to; None: the profile's mean step
    key: str | None
    bucket: str
    basis: str
    claim: float | None
    gain: float | None = None
    shares_with: list[str] = field(default_factory=list)


def charge_firings(firings: list[Firing], facts: list[Fact], book: RuleBook,
                   budget_facts: list[Fact] | None = None) -> list[Charge]:
    """The claims of the recommending rules' firings, charged to the step budgets (``charge_budgets``) sized from
    ``budget_facts`` (default: ``facts``)."""
    charges = []
    for firing in firings:
        rule = book.rules[firing.rule_id]
        if not rule.spec.then.recommend:
            continue
        resolve = resolver(firing.values())
        gain = rule.exprs.gain.evaluate(resolve) if rule.exprs.gain else None
        rank = _rank_of(firing)
        cross_rank = any(type(fact).cross_rank for fact in firing.matched.values())
        charges.append(Charge(
            firing=firing, rank=rank, budget_rank=None if cross_rank else rank,
            key=rule.exprs.key.render(resolve) if rule.exprs.key else None,
            bucket=rule.exprs.charged_to.render(resolve), basis=rule.spec.then.gain_basis,
            claim=None if gain is None else max(float(gain), 0.0)))
    charge_budgets(charges, facts if budget_facts is None else budget_facts)
    return charges


def build_findings(firings: list[Firing], facts: list[Fact], book: RuleBook, lang: Lang,
                  budget_facts: list[Fact] | None = None) -> list[Finding]:
    """Turn the firings of recommending rules into ranked findings, their gains charged to one step budget (sized from
    ``budget_facts``, by default ``facts``). A firing whose every prescription the facts contradict is left out
    (``withheld_findings`` lists it) before any time is charged."""
    step_time = _step_times(facts)
    known = known_about(facts)
    instrumented = instrumentation(facts)
    by_family = facts_by_family(facts)
    derived_by = {fact.id: firing for firing in firings for fact in firing.derived}
    left_out = {id(firing) for _, (members, _) in _withheld(firings, by_family, book, lang).items() for firing in members}
    charges = charge_firings([f for f in firings if id(f) not in left_out], facts, book, budget_facts)
    groups: dict[tuple[str, str | None], list[Charge]] = defaultdict(list)
    for charge in charges:
        groups[(charge.firing.rule_id, charge.key)].append(charge)

    findings = []
    for (rule_id, key), members in groups.items():
        rule = book.rules[rule_id]
        ranks = sorted({m.rank for m in members if m.rank is not None})
        claims = [m.claim for m in members if m.claim is not None]
        shares = sorted({s for m in members for s in m.shares_with} - {_label(rule_id, key)})
        gain = mean_over_ranks(members)
        if gain is not None and gain < MEASURABLE_US and not shares:  # nothing of it in this profile's step
            gain = None
        base = fmean(step_time[r] for r in ranks if r in step_time) if any(r in step_time for r in ranks) else step_time.get(None)
        ratio = min(gain / base, 1.0) if gain is not None and base else None
        basis = rule.spec.then.gain_basis if gain is not None else None
        representative = max(members, key=lambda m: (m.claim if m.claim is not None else -1.0)).firing
        resolve = resolver(representative.values())
        explain = rule.exprs.explain.get(lang) or rule.exprs.explain["en"]
        bucket = members[0].bucket if len({m.bucket for m in members}) == 1 else members[0].bucket.split("/")[0]
        inflated_by = instrumented if basis == "measured" and bucket in HOST_IDLE_BUCKETS else []
        severity = (rule.spec.severity if rule.spec.severity != "auto"
                    else severity_for(ratio, "assumed" if inflated_by else basis))
        coverage = table_coverage(members)
        if coverage is not None and coverage[0] < THIN_TABLE:
            severity = "low"
        warmup = warmup_of(by_family, ranks) if rule.spec.category != "profiling" else None
        behind = (outside_wait_of(by_family, ranks, step_time)
                  if gain is not None and not bucket.startswith("communication") and rule.spec.category != "cluster"
                  else None)
        if warmup is not None:
            severity = "low"
        findings.append(
            Finding(
                id=rule_id,
                key=key,
                category=rule.spec.category,
                severity=severity,
                title=rule.spec.title.get(lang),
                explanation=collapse(" ".join([explain.render(resolve), *coverage_notes(coverage, lang),
                                               *typical_step_notes(members, bucket, lang),
                                               *([WARMUP_NOTE.get(lang).format(evidence=warmup)] if warmup else [])])),
                evidence=_evidence(representative),
                ranks=ranks,
                estimated_gain_us=gain,
                estimated_gain_ratio=ratio,
                gain_basis=basis,
                charged_to=bucket,
                instrumented_by=inflated_by,
                operator_table_coverage=coverage[0] if coverage is not None else None,
                measured_in_warmup=warmup,
                claimed_gain_us=fmean(claims) if claims else None,
                shares_time_with=shares,
                behind_outside_wait_us=behind,
                prescriptions=[prescription(e, lang, known, by_family, ranks)
                               for e in applicable([book.knowledge[k] for k in rule.spec.then.recommend], known)
                               if not _contradicted(e.presupposes, by_family, ranks)],
                trace=Trace(
                    rule=rule_id,
                    rule_file=rule.shown_path,
                    pack=rule.pack,
                    facts=sorted({fact.id for m in members for fact in m.firing.matched.values()}),
                    derived_by=sorted(
                        {derived_by[f.id].rule_id for m in members for f in m.firing.matched.values() if f.id in derived_by}
                    ),
                    conditions=_conditions(rule, representative, facts),
                    chain=_chain(representative, derived_by),
                ),
                ranges=gain_ranges(rule, members),
            )
        )
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], -ranking_score(f), f.id, f.key or ""))
    return findings


def gain_ranges(rule: Rule, members: list[Charge]) -> list[TimeRange]:
    """Where a finding's gain lies: the time ranges of the fact fields its gain expression names, of every firing's
    matched facts, the RANGES_PER_FINDING longest."""
    named = {(ref.alias, ref.field) for ref in rule.exprs.gain.references} if rule.exprs.gain else set()
    found = {r for m in members for alias, fact in m.firing.matched.items() for r in getattr(fact, "ranges", ())
             if (alias, r.field) in named}
    return sorted(found, key=lambda r: (r.start_us - r.end_us, r.rank, r.start_us, r.field))[:RANGES_PER_FINDING]


def contradicted_prescriptions(firing: Firing, by_family: dict[str, list[Fact]], book: RuleBook
                               ) -> tuple[list[tuple[KnowledgeEntry, list[Presumed]]], bool]:
    """The prescriptions of a firing's rule that its rank's facts contradict, each with its contradicted
    presuppositions, and whether that is every one of them (the finding is then withheld)."""
    entries = [book.knowledge[k] for k in book.rules[firing.rule_id].spec.then.recommend]
    rank = _rank_of(firing)
    ranks = [rank] if rank is not None else []
    found = [(entry, [c for c in check_presuppositions(entry.presupposes, by_family, ranks) if c.status == "contradicted"])
             for entry in entries]
    found = [(entry, checks) for entry, checks in found if checks]
    return found, bool(entries) and len(found) == len(entries)


def withheld_findings(firings: list[Firing], facts: list[Fact], book: RuleBook, lang: Lang) -> list[WithheldFinding]:
    """The findings left out: one per rule and key whose firings the facts contradict every prescription of (CUDA-graph
    advice on a trace that replays graphs) — with the ranks, what it would have claimed and why."""
    withheld = []
    for (rule_id, key), (members, because) in _withheld(firings, facts_by_family(facts), book, lang).items():
        rule = book.rules[rule_id]
        claims = [c for c in (_claim(rule, firing) for firing in members) if c is not None]
        withheld.append(WithheldFinding(id=rule_id, key=key, title=rule.spec.title.get(lang),
                                        ranks=sorted({r for firing in members if (r := _rank_of(firing)) is not None}),
                                        claimed_gain_us=fmean(claims) if claims else None, because=because))
    return sorted(withheld, key=lambda w: (w.id, w.key or ""))


def _withheld(firings: list[Firing], by_family: dict[str, list[Fact]], book: RuleBook, lang: Lang
              ) -> dict[tuple[str, str | None], tuple[list[Firing], list[str]]]:
    """(rule, key) → the firings left out and why: each firing whose every prescription is contradicted."""
    found: dict[tuple[str, str | None], tuple[list[Firing], list[str]]] = {}
    by_group: dict[tuple[str, str | None], list[Firing]] = defaultdict(list)
    for firing in firings:
        rule = book.rules[firing.rule_id]
        if rule.spec.then.recommend:
            by_group[(firing.rule_id, rule.exprs.key.render(resolver(firing.values())) if rule.exprs.key else None)].append(firing)
    for group, members in by_group.items():
        contradicted = [(firing, checks) for firing in members
                        for checks, every in [contradicted_prescriptions(firing, by_family, book)] if every]
        if contradicted:
            found[group] = ([firing for firing, _ in contradicted], sorted({
                CONTRADICTED.get(lang).format(entry=entry.id, requirement=check.requirement.get(lang), detail=check.detail)
                for _, checks in contradicted for entry, entry_checks in checks for check in entry_checks}))
    return found


def _claim(rule: Rule, firing: Firing) -> float | None:
    """A firing's claim: its rule's gain expression over the facts it matched (never below 0)."""
    value = rule.exprs.gain.evaluate(resolver(firing.values())) if rule.exprs.gain else None
    return None if value is None else max(float(value), 0.0)


def _contradicted(presuppositions: list[Presupposition], by_family: dict[str, list[Fact]], ranks: list[int]) -> bool:
    return any(c.status == "contradicted" for c in check_presuppositions(presuppositions, by_family, ranks))


def applicable(entries: list[KnowledgeEntry], known: Known) -> list[KnowledgeEntry]:
    """The prescriptions the job's hardware can take: one whose hardware precondition is unmet (BF16 autocast on a
    Volta GPU, where the rule recommends FP16 autocast too) is left out while another remains; an unmet version
    or mode stays, since an upgrade or a switch can meet it."""
    fits = [e for e in entries
            if not any(c.kind == "hardware" and c.status == "unmet" for c in check_preconditions(e.applies_to, known))]
    return fits or entries


def instrumentation(facts: list[Fact]) -> list[str]:
    """The capture settings on in the profile that inflate host time (INSTRUMENTATION), from its context fact."""
    context = next((f for f in facts if f.family == "context"), None)
    return [name for name in INSTRUMENTATION if getattr(context, name, None)]


def mean_over_ranks(members: list[Charge]) -> float | None:
    """A finding's gain: what its firings were charged on each rank (two firings on one rank add up — the second gets
    only what the first left of their bucket), averaged over the ranks; None when none was estimated."""
    per_rank: dict[int | None, float] = defaultdict(float)
    for member in members:
        if member.gain is not None:
            per_rank[member.rank] += member.gain
    return fmean(per_rank.values()) if per_rank else None


def typical_step_notes(members: list[Charge], bucket: str, lang: Lang) -> list[str]:
    """The sentence a finding on a part of the idle time adds when that time is per typical step — the outlier steps
    left out — so that its shares do not read as shares of the verdict's mean step."""
    if not bucket.startswith("idle/"):
        return []
    idle = next((f for m in members for f in m.firing.matched.values() if isinstance(f, IdleFact) and f.outlier_steps), None)
    if idle is None:
        return []
    return [TYPICAL_STEP_NOTE.get(lang).format(steps=idle.steps, step=idle.step_us, outliers=idle.outlier_steps)]


def warmup_of(by_family: dict[str, list[Fact]], ranks: list[int]) -> str | None:
    """What warms up in the captures without steady state among the finding's ranks (every rank's when it names none),
    in words; None when each has steady state or none says."""
    warm = [f for f in by_family.get("capture", []) if not f.steady_state and (not ranks or f.rank in ranks)]
    return "; ".join(f"rank {f.rank}: {f.warmup_evidence}" for f in warm) if warm else None


OUTSIDE_WAIT_SHARE = 0.05  # an outside wait below this share of the step is no longer a gate worth a note


def outside_wait_of(by_family: dict[str, list[Fact]], ranks: list[int], step_time: dict[int | None, float]) -> float | None:
    """The mean wait per step for members outside the capture (collective communication facts' outside_wait_us) over
    ``ranks``, when each of them waits at least OUTSIDE_WAIT_SHARE of its step so; None otherwise (or without ranks)."""
    waits = {f.rank: f.outside_wait_us for f in by_family.get("communication", [])
             if getattr(f, "kind", None) == "collective" and f.rank in ranks}
    if not ranks or any(waits.get(r, 0.0) < OUTSIDE_WAIT_SHARE * step_time.get(r, float("inf")) for r in ranks):
        return None
    return fmean(waits[r] for r in ranks)


def table_coverage(members: list[Charge]) -> tuple[float, int] | None:
    """The lowest known ``table_coverage`` of the operator facts the firings matched, with its rank; None when they
    matched none, or none with a known coverage."""
    known = [(fact.table_coverage, fact.rank) for member in members for fact in member.firing.matched.values()
             if isinstance(fact, OperatorFact) and fact.table_coverage is not None]
    return min(known) if known else None


def coverage_notes(coverage: tuple[float, int] | None, lang: Lang) -> list[str]:
    """The sentences an operator finding adds to its explanation when the operator table records only part of the
    compute (below PARTIAL_TABLE), and says it is at most low (below THIN_TABLE)."""
    if coverage is None or coverage[0] >= PARTIAL_TABLE:
        return []
    share, rank = coverage
    note = PARTIAL_TABLE_NOTE.get(lang).format(coverage=share, rank=rank)
    return [note, THIN_TABLE_NOTE.get(lang)] if share < THIN_TABLE else [note]


def ranking_score(finding: Finding) -> float:
    """What findings are ordered by: the gain, an assumed one weighted by ASSUMED_WEIGHT; unknown last."""
    if finding.estimated_gain_us is None:
        return -1.0
    return finding.estimated_gain_us * (ASSUMED_WEIGHT if finding.gain_basis == "assumed" else 1.0)


def charge_budgets(charges: list[Charge], facts: list[Fact]) -> None:
    """Charge each firing's claim to its rank's step budget (and the profile's mean step): measured claims first, then
    the most specific bucket (a cause before the umbrella that holds it: communication/wait before communication),
    then the largest; firings about the whole profile (no rank, or a fact about several ranks: a spread, a straggler,
    a pipeline) are charged to the profile's budget."""
    budgets = step_budgets(facts)
    profile = budgets[None]
    ranked = sorted((r for r in budgets if r is not None))
    count = max(len(ranked), 1)
    claims: dict[tuple[int | None, str], float] = defaultdict(float)
    for charge in charges:
        if charge.claim is not None:
            where = (charge.budget_rank if charge.budget_rank in budgets else None, charge.bucket)
            claims[where] = max(claims[where], charge.claim)
    measured = {rank: set(budget.size) for rank, budget in budgets.items()}
    for (rank, bucket), largest in claims.items():  # a bucket the profile does not size is its largest claim
        budgets[rank].size.setdefault(bucket, largest)
        if rank is not None:
            profile.size.setdefault(bucket, largest)
    for rank, budget in budgets.items():  # and holds the buckets under it
        budget.size = holding_children(budget.size, measured.get(rank, set()))
    charged_by: dict[tuple[int | None, str], list[str]] = defaultdict(list)
    order = sorted((c for c in charges if c.claim is not None),
                   key=lambda c: (c.basis != "measured", -len(ancestors(c.bucket)), -c.claim, c.firing.rule_id,
                                  c.key or "", c.budget_rank if c.budget_rank is not None else -1))
    for charge in order:
        rank = charge.budget_rank if charge.budget_rank in budgets else None
        label = _label(charge.firing.rule_id, charge.key)
        if rank is None:
            charge.gain = profile.charge(charge.bucket, charge.claim)
        else:
            room = profile.remaining(charge.bucket)
            charge.gain = budgets[rank].charge(charge.bucket, charge.claim, None if room is None else room * count)
            profile.charge(charge.bucket, charge.gain / count)
        if charge.gain < charge.claim:  # those charged before it on its rank, and those about the whole profile
            charge.shares_with = sorted({other for where in {rank, None} for path in _related(charge.bucket, charged_by, where)
                                         for other in charged_by[(where, path)]} - {label})
        if charge.gain > 0:
            charged_by[(rank, charge.bucket)].append(label)


def step_budgets(facts: list[Fact]) -> dict[int | None, Budget]:
    """A budget per rank (and the profile's mean step under None) sized from the measured breakdowns: step, compute,
    exposed communication and idle; each operator type's device time; communication wait and transfer; and the
    parts of the idle time an idle attribution measured. A bucket the profile's breakdown does not size is the mean
    of the ranks' (0 for a rank without it)."""
    budgets: dict[int | None, Budget] = defaultdict(lambda: Budget({}))
    for fact in facts:
        if isinstance(fact, BreakdownFact):
            budgets[fact.rank if fact.scope == "rank" else None].size.update(
                {"step": fact.step_time_us, "compute": fact.compute_us, "communication": fact.comm_not_overlapped_us,
                 "idle": fact.free_us})
    for fact in facts:
        rank = getattr(fact, "rank", None)
        if rank not in budgets or rank is None:
            continue
        size = budgets[rank].size
        if isinstance(fact, OperatorFact):
            path = f"compute/operator:{fact.op_type}"
            size[path] = size.get(path, 0.0) + fact.total_us_per_step
        elif isinstance(fact, CommunicationFact):
            size["communication/wait"] = size.get("communication/wait", 0.0) + fact.elapse_us - fact.transit_us
            size["communication/transfer"] = size.get("communication/transfer", 0.0) + fact.transit_us
        elif isinstance(fact, IdleFact):
            size.update({f"idle/{part}": fact.part_us(part) for part in IdleFact.PARTS})
    ranks = [budget for rank, budget in budgets.items() if rank is not None]
    profile = budgets[None]  # exists even without a profile breakdown
    for bucket in {path for budget in ranks for path in budget.size}:  # the mean step's part: the ranks' mean
        profile.size.setdefault(bucket, sum(budget.size.get(bucket, 0.0) for budget in ranks) / len(ranks))
    return budgets


def _related(bucket: str, charged_by: dict, rank: int | None) -> list[str]:
    """Buckets whose charges took time from ``bucket``: itself, those above it, and those below it."""
    above = set(ancestors(bucket))
    return [path for (r, path) in charged_by if r == rank and (path in above or bucket in ancestors(path))]


def _label(rule_id: str, key: str | None) -> str:
    return f"{rule_id} [{key}]" if key else rule_id


def severity_for(ratio: float | None, basis: str | None = "measured") -> Severity:
    """high ≥ 5 % of the step, medium ≥ 1 %, else low (also when the gain is unknown); an assumed gain (or an upper
    bound) counts half: high from 10 %, medium from 2 %."""
    if ratio is None:
        return "low"
    weight = 0.5 if basis == "assumed" else 1.0
    return "high" if ratio * weight >= HIGH_SHARE else "medium" if ratio * weight >= MEDIUM_SHARE else "low"


def prescription(entry: KnowledgeEntry, lang: Lang, known: Known | None = None,
                 by_family: dict[str, list[Fact]] | None = None, ranks: list[int] | None = None) -> Prescription:
    """A knowledge entry in one language, its preconditions checked against what is ``known`` about the job and its
    presuppositions against the facts of ``ranks`` (``by_family``); an action whose presupposition they contradict is
    left out (unless that would leave none)."""
    by_family, ranks = by_family or {}, ranks or []
    actions = [a for a in entry.actions if not _contradicted(a.presupposes, by_family, ranks)] or entry.actions
    presumed = check_presuppositions(entry.presupposes, by_family, ranks)
    return Prescription(
        id=entry.id,
        title=entry.title.get(lang),
        problem=collapse(entry.problem.get(lang)),
        preconditions=[
            PreconditionCheck(requirement=c.requirement, status=c.status, detail=c.detail)
            for c in check_preconditions(entry.applies_to, known or Known())
        ] + [PreconditionCheck(requirement=collapse(c.requirement.get(lang)), status=c.status, detail=c.detail)
             for c in presumed if c.status != "contradicted"],
        actions=[collapse(a.get(lang)) for a in actions],
        env=dict(entry.env),
        code=(CodeChange(**entry.code.model_dump(exclude={"presupposes"}))
              if entry.code and not _contradicted(entry.code.presupposes, by_family, ranks) else None),
        gain_model=collapse(entry.gain.model.get(lang)),
        stated_gain=collapse(entry.gain.stated.get(lang)) if entry.gain.stated else None,
        caveats=[collapse(c.get(lang)) for c in entry.caveats],
        references=[public_reference(r) for r in entry.references],
    )


def summarize(facts: FactSet, firings: list[Firing]) -> Summary:
    """The headline numbers: profile mean step, verdicts, per-rank breakdowns and top operators."""
    verdicts: dict[int | None, Verdict] = {}
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
        phases=phase_summaries(facts.of(PhaseFact)),
    )


def phase_summaries(phases: list[PhaseFact]) -> list[PhaseSummary]:
    """A serving run's phases in order (prefill, mixed, decode), each the mean over the ranks that run it."""
    groups: dict[str, list[PhaseFact]] = defaultdict(list)
    for fact in phases:
        groups[fact.phase].append(fact)

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return fmean(known) if known else None

    return [
        PhaseSummary(
            phase=phase, ranks=sorted(f.rank for f in facts), iterations=facts[0].iterations,
            covered_by_breakdown=facts[0].covered_by_breakdown, duration_us=fmean(f.duration_us for f in facts),
            first_duration_us=fmean(f.first_duration_us for f in facts),
            start_to_start_us=mean([f.start_to_start_us for f in facts]),
            tokens_per_iteration=mean([f.tokens_per_iteration for f in facts]),
            tokens_per_s=mean([f.tokens_per_s for f in facts]), busy_share=fmean(f.busy_share for f in facts),
            graph_mode=facts[0].graph_mode,
            weight_read_share_of_peak=mean([f.weight_read_share_of_peak for f in facts]),
        )
        for phase in ("prefill", "mixed", "decode") if (facts := groups.get(phase))
    ]


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
        for name, value in fact.model_dump(exclude={"id", "sources"}).items():
            if isinstance(value, (bool, int, float, str)):  # lists stay in the report's facts
                evidence[f"{alias}.{name}"] = value
    return evidence


def known_about(facts: list[Fact]) -> Known:
    """What the context and model facts say about the job, for the precondition checks."""
    context = next((f for f in facts if f.family == "context"), None)
    model = next((f for f in facts if f.family == "model"), None)
    chip, chip_source = getattr(model, "chip", None), "--context chip"
    if getattr(context, "chip", None):  # what the profile records wins over what --context says
        chip, chip_source = context.chip, f"profile: NPU_INFO {context.npu_name}"
    return Known(
        chip=chip, chip_source=chip_source,
        hardware=getattr(context, "hardware", None),
        format=getattr(context, "format", None),
        versions={"cann": getattr(context, "cann_version", None), "torch_npu": getattr(context, "torch_npu_version", None)},
        compute_capability=getattr(context, "compute_capability", None),
        execution_mode=getattr(model, "execution_mode", None),
    )
