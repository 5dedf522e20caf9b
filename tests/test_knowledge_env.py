"""Issue 15: a finding never prints two `export` lines for one variable (PYTORCH_NPU_ALLOC_CONF takes one value)."""

from __future__ import annotations

import re
from collections import Counter

from builders import RankSpec, build_rank

import advisor
from advisor.render import render_markdown


def test_no_rule_recommends_two_values_for_one_variable(rulebook):
    clashes = []
    for rule_id, rule in sorted(rulebook.rules.items()):
        variables = Counter(var for k in rule.spec.then.recommend for var in rulebook.knowledge[k].env)
        clashes += [(rule_id, var) for var, count in variables.items() if count > 1]
    assert clashes == []


def test_the_fragmentation_finding_exports_the_allocator_options_once(tmp_path):
    # 4 GB allocated of 6 GB reserved at the peak: memory.reserved_unused, whose prescriptions are expandable
    # segments and (as its alternative) max_split_size_mb
    build_rank(tmp_path, RankSpec())
    report = advisor.diagnose(tmp_path)
    finding = next(f for f in report.findings if f.id == "memory.reserved_unused")
    assert [p.id for p in finding.prescriptions] == ["memory.max_split_size", "memory.expandable_segments"]
    assert [p.env for p in finding.prescriptions] == [{}, {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}]
    section = render_markdown(report).split("memory.reserved_unused", 1)[1].split("\n### ", 1)[0]
    assert len(re.findall(r"^export PYTORCH_NPU_ALLOC_CONF=", section, re.M)) == 1
