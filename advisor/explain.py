"""``advisor explain ID PATH``: why a rule fired on a profile, or which condition stopped it, with the values; and
``advisor rules try ID PATH``: that, and the finding the report would show, in English and Chinese."""

from __future__ import annotations

from collections.abc import Sequence

from advisor.engine.evaluate import ConditionResult, explain_firing, explain_rule
from advisor.engine.session import Firing
from advisor.facts.models import EnvironmentFact, Fact
from advisor.findings import build_findings
from advisor.render.common import fmt_value, strip_control
from advisor.rulebook import Rule, RuleBook
from advisor.vocabulary import Platform

_MAX_FIRINGS_SHOWN = 5


def explain_lines(rule: Rule, firings: Sequence[Firing], facts: Sequence[Fact], platform: Platform = "ascend") -> list[str]:
    """The explanation as lines of plain text (input-derived text has control characters removed)."""
    mine = [f for f in firings if f.rule_id == rule.id]
    lines = [f"{rule.id} ({rule.pack}: {rule.shown_path}): {rule.spec.title.en}"]
    if platform not in rule.spec.platforms:
        lines.append(f"NOT RUN: the rule runs on {', '.join(rule.spec.platforms)} profiles; this one is a {platform} profile")
        return lines
    if mine:
        lines.append(f"FIRED {len(mine)} time(s)" + (f"; the first {_MAX_FIRINGS_SHOWN}:" if len(mine) > _MAX_FIRINGS_SHOWN else ":"))
        derived_by = {fact.id: firing for firing in firings for fact in firing.derived}
        for number, firing in enumerate(mine[:_MAX_FIRINGS_SHOWN], 1):
            lines.append(f"  firing {number}:")
            lines += [f"    {line}" for result in explain_firing(rule.spec, firing.matched, facts) for line in _condition_lines(result)]
            for fact in firing.matched.values():
                if fact.id in derived_by:
                    lines.append(f"    {fact.id} was derived by {derived_by[fact.id].rule_id} from "
                                 f"{', '.join(f.id for f in derived_by[fact.id].matched.values())}")
        return lines
    lines.append("DID NOT FIRE")
    groups = explain_rule(rule.spec, facts)
    variables = frozenset(f.name for f in facts if isinstance(f, EnvironmentFact))
    for index, group in enumerate(groups, 1):
        if len(groups) > 1:
            lines.append(f"  alternative {index}:")
        for result in group.conditions:
            lines += [f"    {line}" for line in _condition_lines(result, variables)]
    return lines


def _condition_lines(result: ConditionResult, variables: frozenset[str] = frozenset()) -> list[str]:
    mark = "✓" if result.holds else "✗"
    if result.negated:
        return [f"{mark} not {result.family}: {result.summary()}"]
    if result.fact is None:
        return [f"{mark} {result.alias} ({result.family}): {result.summary()}"]
    variable = _absent_variable(result)
    if variable is not None and variable not in variables:  # shown against another variable: this one is not there
        return [strip_control(f"✗ {result.alias} (environment): no variable {variable} in this profile — the profiler "
                              f"records only a few (profiler_metadata.json ENV_VARIABLES); pass --env {variable}=VALUE")]
    lines = [f"{mark} {result.alias} = {result.fact.id}  [{'; '.join(result.fact.sources)}]"]
    for check in result.checks:
        actual = "unknown" if check.actual is None else fmt_value(check.actual)
        lines.append(f"    {'✓' if check.holds else '✗'} {check.describe()}  (value: {actual})")
    if not result.checks:
        lines.append(f"    ✓ any {result.family} fact")
    return [strip_control(line) for line in lines]


def try_lines(rule: Rule, book: RuleBook, firings: list[Firing], facts: list[Fact], platform: Platform = "ascend") -> list[str]:
    """``explain_lines``, then — where the rule fired — the finding the report would show for it: severity, key, gain
    (with what else shares its time) and, in English and Chinese, title and explanation."""
    lines = explain_lines(rule, firings, facts, platform)
    if not any(f.rule_id == rule.id for f in firings):
        return lines
    shown = {lang: [f for f in build_findings(firings, list(facts), book, lang) if f.id == rule.id] for lang in ("en", "zh")}
    if not shown["en"]:
        return [*lines, "NOT SHOWN: the profile's facts contradict every prescription the rule recommends "
                        "(advisor diagnose lists it under 'not shown')"]
    for number, (finding, chinese) in enumerate(zip(shown["en"], shown["zh"]), 1):  # one per key
        gain = ("not estimated" if finding.estimated_gain_us is None else
                f"{finding.estimated_gain_us:,.1f} µs per step ({finding.gain_basis})")
        if finding.shares_time_with:
            gain += f"; claimed {finding.claimed_gain_us or 0:,.1f} µs, shared with {', '.join(finding.shares_time_with)}"
        lines += [f"FINDING {number} of {len(shown['en'])}" if len(shown["en"]) > 1 else "FINDING",
                  f"  severity: {finding.severity}", f"  key: {finding.key or '(none)'}", f"  gain: {gain}",
                  f"  ranks: {', '.join(map(str, finding.ranks)) or '(none)'}"]
        lines += [f"  {part} ({lang}): {strip_control(getattr(shown_finding, part))}"
                  for lang, shown_finding in (("en", finding), ("zh", chinese)) for part in ("title", "explanation")]
    return lines


def _absent_variable(result: ConditionResult) -> str | None:
    """The variable an environment condition names (``name eq 'X'``) when the fact it was shown against is another
    variable; else None."""
    if result.family != "environment" or result.holds:
        return None
    named = next((c for c in result.checks if c.field == "name" and c.op == "eq" and not c.holds), None)
    return named.expected.strip("'\"") if named is not None else None
