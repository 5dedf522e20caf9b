"""The time-budget invariants every diagnosis must keep (issue #15): checked on every profile the tests build or ship."""

from __future__ import annotations

from collections import defaultdict

from advisor.budget import ancestors
from advisor.diagnose import Analysis
from advisor.findings import HIGH_SHARE, charge_firings, step_budgets
from advisor.rulebook import RuleBook

SLACK_US = 1e-6


def assert_budget_holds(analysis: Analysis, book: RuleBook) -> None:
    """Per rank: the gains never add up to more than its step, nor those charged to a bucket (or below it) to more
    than the bucket; for the profile: its findings plus the mean of the ranks' never exceed the mean step."""
    charges = [c for c in charge_firings(analysis.firings, analysis.all_facts, book) if c.gain is not None]
    sizes = step_budgets(analysis.all_facts)
    ranked = [r for r in sizes if r is not None]
    per_bucket: dict[tuple[int | None, str], float] = defaultdict(float)
    for charge in charges:
        assert 0.0 <= charge.gain <= charge.claim + SLACK_US, (charge.firing.rule_id, charge.gain, charge.claim)
        rank = charge.budget_rank if charge.budget_rank in sizes else None
        for path in ancestors(charge.bucket):
            per_bucket[(rank, path)] += charge.gain
            if rank is not None:
                per_bucket[(None, path)] += charge.gain / max(len(ranked), 1)
    for (rank, path), total in per_bucket.items():
        size = sizes[rank].size.get(path)
        if size is not None:
            assert total <= size * (1 + 1e-9) + SLACK_US, f"rank {rank}: {total:.1f} µs charged to {path}, of {size:.1f}"


def assert_ranking_is_honest(report) -> None:
    """An assumed gain makes a finding high only from twice the high share (it counts half), and never ranks above a
    measured one of similar size."""
    for finding in report.findings:
        if finding.gain_basis == "assumed" and finding.severity == "high" and finding.trace.rule not in _FIXED_HIGH:
            assert (finding.estimated_gain_ratio or 0) >= 2 * HIGH_SHARE, f"{finding.id} is high on a small assumed gain"
    measured = [f for f in report.findings if f.gain_basis == "measured" and f.estimated_gain_us]
    for position, finding in enumerate(report.findings):
        if finding.gain_basis != "assumed" or not finding.estimated_gain_us:
            continue
        for later in measured:
            if report.findings.index(later) > position:
                assert finding.estimated_gain_us >= 2 * later.estimated_gain_us, (finding.id, later.id)


def assert_json_budget_holds(report: dict) -> None:
    """The same invariant as seen in a JSON report: each finding weighs by the share of the ranks it is about."""
    ranks = max(len(report["input"]["ranks"]), 1)
    step = report["summary"]["step_time_us"]
    if not step:
        return
    total = sum((f["estimated_gain_us"] or 0.0) * (len(f["ranks"]) / ranks if f["ranks"] else 1.0)
                for f in report["findings"])
    assert total <= step * (1 + 1e-9) + SLACK_US, f"{total:.1f} µs of gains in a {step:.1f} µs step"


# Rules whose severity is fixed high with a stated reason (not from a gain): e.g. ASCEND_LAUNCH_BLOCKING=1 serialises
# every launch whatever the profile shows.
_FIXED_HIGH = {"environment.launch_blocking", "memory.near_capacity", "parallel.tp_across_nodes"}
