"""Aggregates in rules (issue 32, item 4): sums, counts, minimum, maximum and mean over the facts of a family that
match a condition, per rank or per profile, usable in conditions, gains and texts — run by the real engine on real
profiles."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, REAL
from test_cli import advisor as cli

import advisor
from advisor.facts import OperatorFact, extract_facts
from advisor.ingest import load_profile

SERVER = FIXTURES / "ascend-more" / "server-rank0"

RULE = """\
id: team.ai_cpu_total
title: {{en: AI CPU operators together take much of the compute, zh: AI CPU 算子合计占用大量计算时间}}
category: affinity-operator
aggregate:
  cpu:
    fact: operator
    where: {{accelerator_core: AI_CPU}}
    per: {per}
    sum: [share_of_compute, total_us_per_step]
    min: [mean_us]
    max: [max_us]
    mean: [mean_us]
when:
  all:
    - fact: aggregate
      as: cpu
      where: {{count: {{gte: 1}}, sum_share_of_compute: {{gte: {threshold}}}}}
then:
  recommend: [affinity.ai_cpu_operators]
  gain_us: cpu.sum_total_us_per_step * 0.5
  gain_basis: assumed
  charged_to: compute
explain:
  en: "{{cpu.count}} AI CPU operator type(s) take {{cpu.sum_share_of_compute:.2%}} of compute together ({{cpu.sum_total_us_per_step:,.0f}} µs per step; the longest kernel {{cpu.max_max_us:,.0f}} µs)."
  zh: "{{cpu.count}} 类 AI CPU 算子合计占计算时间的 {{cpu.sum_share_of_compute:.2%}}。"
tests:
  - name: fires on three small AI CPU types that add up to 6 %
    facts:
      - {{fact: operator, rank: 0, op_type: NonZero, accelerator_core: AI_CPU, type_source: type, count_per_step: 2.0, total_us_per_step: 800.0, mean_us: 400.0, max_us: 500.0, share_of_compute: 0.02, position: 5}}
      - {{fact: operator, rank: 0, op_type: ArgMin, accelerator_core: AI_CPU, type_source: type, count_per_step: 2.0, total_us_per_step: 800.0, mean_us: 400.0, max_us: 450.0, share_of_compute: 0.02, position: 6}}
      - {{fact: operator, rank: 0, op_type: Unique, accelerator_core: AI_CPU, type_source: type, count_per_step: 2.0, total_us_per_step: 800.0, mean_us: 400.0, max_us: 420.0, share_of_compute: 0.02, position: 7}}
      - {{fact: operator, rank: 0, op_type: MatMul, accelerator_core: AI_CORE, type_source: type, count_per_step: 20.0, total_us_per_step: 37600.0, mean_us: 1880.0, max_us: 2000.0, share_of_compute: 0.94, position: 1}}
    expect: {expect}
    {finding}
  - name: quiet with AI Core operators only
    facts:
      - {{fact: operator, rank: 0, op_type: MatMul, accelerator_core: AI_CORE, type_source: type, count_per_step: 20.0, total_us_per_step: 37600.0, mean_us: 1880.0, max_us: 2000.0, share_of_compute: 1.0, position: 1}}
    expect: quiet
"""
FINDING = ('finding: {gain_us: 1200, explanation: {en: {contains: "3 AI CPU operator type(s) take 6.00% of compute '
           'together (2,400 µs per step; the longest kernel 500 µs)"}, zh: {contains: "合计占计算时间的 6.00%"}}}')


def _pack(tmp_path, threshold=0.02, per="rank", expect="fire", finding=FINDING, text=None):
    pack = tmp_path / "pack"
    (pack / "rules" / "affinity-operator").mkdir(parents=True, exist_ok=True)
    (pack / "pack.yaml").write_text("name: team\n")
    rule = text or RULE.format(per=per, threshold=threshold, expect=expect, finding=finding if expect == "fire" else "")
    (pack / "rules" / "affinity-operator" / "team.ai_cpu_total.yaml").write_text(rule, encoding="utf-8")
    return pack


def test_an_aggregate_rule_lints_and_its_cases_pass_with_the_finding_they_expect(tmp_path):
    pack = _pack(tmp_path)
    assert "0 problem(s) in 1 rule(s)" in cli("rules", "lint", str(pack)).stdout
    done = cli("rules", "test", str(pack))
    assert "2 passed, 0 failed" in done.stdout, done.stdout + done.stderr
    assert "count gte 1 is false (count = 0)" in done.stdout  # the quiet case says why, on the aggregate's fields


def test_per_rank_aggregates_of_a_real_profile_are_the_sums_of_its_operator_facts(tmp_path):
    ai_cpu = [f for f in extract_facts(load_profile(SERVER)).of(OperatorFact) if f.accelerator_core == "AI_CPU"]
    assert ai_cpu, "the server capture runs operators on the AI CPU"
    share, time = sum(f.share_of_compute for f in ai_cpu), sum(f.total_us_per_step for f in ai_cpu)
    report = advisor.diagnose(SERVER, rulebook=_book(_pack(tmp_path, threshold=0.005)))
    (aggregate,) = [f for f in report.facts if f["type"] == "aggregate:team.ai_cpu_total/cpu"]
    assert (aggregate["rank"], aggregate["count"]) == (0, len(ai_cpu))
    assert aggregate["sum_share_of_compute"] == pytest.approx(share)
    assert aggregate["max_max_us"] == pytest.approx(max(f.max_us for f in ai_cpu))
    assert aggregate["min_mean_us"] == pytest.approx(min(f.mean_us for f in ai_cpu))
    assert aggregate["mean_mean_us"] == pytest.approx(sum(f.mean_us for f in ai_cpu) / len(ai_cpu))
    (finding,) = [f for f in report.findings if f.id == "team.ai_cpu_total"]
    assert finding.claimed_gain_us == pytest.approx(time * 0.5) and finding.gain_basis == "assumed"
    assert f"{len(ai_cpu)} AI CPU operator type(s) take {share:.2%} of compute together" in finding.explanation
    quiet = advisor.diagnose(SERVER, rulebook=_book(_pack(tmp_path / "q", threshold=0.02, expect="quiet")))
    assert "team.ai_cpu_total" not in {f.id for f in quiet.findings}


def test_a_profile_aggregate_spans_every_rank(tmp_path):
    operators = [f for f in extract_facts(load_profile(REAL)).of(OperatorFact) if f.accelerator_core == "AI_CPU"]
    report = advisor.diagnose(REAL, rulebook=_book(_pack(tmp_path, per="profile", threshold=0.0, expect="quiet")))
    (aggregate,) = [f for f in report.facts if f["type"] == "aggregate:team.ai_cpu_total/cpu"]
    assert aggregate.get("rank") is None and aggregate["count"] == len(operators)
    assert aggregate["sum_total_us_per_step"] == pytest.approx(sum(f.total_us_per_step for f in operators))


@pytest.mark.parametrize(("change", "message"), [
    (("as: cpu", "as: cpus"), "the rule has no aggregate named 'cpus' — did you mean 'cpu'?"),
    (("sum: [share_of_compute, total_us_per_step]", "sum: [share_of_compute, op_type]"),
     "aggregate.cpu.sum: operator.op_type is text, not a number"),
    (("fact: operator\n", "fact: bottleneck\n"), "'bottleneck' is derived by rules; aggregates are computed before the rules run"),
    (("where: {accelerator_core: AI_CPU}", "where: {accelerator_core: {ref: x.accelerator_core}}"),
     "an aggregate's where cannot refer to other facts"),
    (("    - fact: aggregate\n      as: cpu\n      where: {count: {gte: 1}, sum_share_of_compute: {gte: 0.02}}\n",
      "    - fact: operator\n      as: o\n    - not: {fact: aggregate, as: cpu, where: {count: {gte: 1}}}\n"),
     "'not' on an aggregate"),
])
def test_aggregate_mistakes_are_named_by_lint(tmp_path, change, message):
    text = RULE.format(per="rank", threshold=0.02, expect="fire", finding=FINDING)
    assert change[0] in text
    pack = _pack(tmp_path, text=text.replace(change[0], change[1]))
    done = cli("rules", "lint", str(pack))
    assert done.returncode != 0 and message in done.stdout + done.stderr, done.stdout + done.stderr
    if change[1] == "as: cpus":  # said once: the texts that name the aggregate follow from the 'as'
        assert "1 problem(s)" in done.stdout, done.stdout


def test_a_comparison_written_as_text_is_shown_how_to_write(tmp_path):
    """A rule author wrote sum_share_of_compute: ">= 0.02" and was told only that it compares a number with a text."""
    text = RULE.format(per="rank", threshold=0.02, expect="fire", finding=FINDING)
    pack = _pack(tmp_path, text=text.replace("sum_share_of_compute: {gte: 0.02}", 'sum_share_of_compute: ">= 0.02"'))
    done = cli("rules", "lint", str(pack))
    assert "when: cpu.sum_share_of_compute: '>= 0.02' is text, not a comparison; write {gte: 0.02}" in done.stdout


def _book(pack):
    from advisor.rulebook import load_rulebook

    return load_rulebook([pack])


def test_rules_try_shows_each_finding_and_as_test_case_gives_the_measured_facts(tmp_path):
    """A rule author's trial: on the 2-rank capture an aggregate rule keyed per rank gives two findings, and rules try
    showed one; facts --as-test-case wrote the aggregate itself as a case fact and crashed replaying it."""
    import yaml

    text = RULE.format(per="rank", threshold=0.0, expect="fire", finding="").replace(
        "  charged_to: compute\n", "  charged_to: compute\n  key: \"rank {cpu.rank}\"\n").replace(
        "where: {accelerator_core: AI_CPU}", "where: {accelerator_core: AI_VECTOR_CORE}")  # the capture has no AI CPU
    pack = _pack(tmp_path, text=text)
    done = cli("rules", "try", "team.ai_cpu_total", str(REAL), "--rules", str(pack))
    assert done.returncode == 0, done.stderr
    assert "FINDING 1 of 2" in done.stdout and "FINDING 2 of 2" in done.stdout
    assert "  key: rank 0" in done.stdout and "  key: rank 1" in done.stdout
    done = cli("facts", str(REAL), "--as-test-case", "team.ai_cpu_total", "--rules", str(pack))
    assert done.returncode == 0, done.stderr
    (case,) = yaml.safe_load(done.stdout)
    assert case["expect"] == "fire" and {f["fact"] for f in case["facts"]} == {"operator"}
    assert all(f["accelerator_core"] == "AI_VECTOR_CORE" and f["rank"] == case["facts"][0]["rank"] for f in case["facts"])
    rule = yaml.safe_load(text)
    rule["tests"] = [case]
    (pack / "rules" / "affinity-operator" / "team.ai_cpu_total.yaml").write_text(yaml.safe_dump(rule, allow_unicode=True))
    assert "1 passed, 0 failed" in cli("rules", "test", str(pack)).stdout
