"""Regexes of rule files cannot backtrack without bound: nested repetitions are refused, long values are not
matched with Python's re, and the built-in patterns stay linear on long values."""

from __future__ import annotations

import re

import pytest

from advisor.engine import evaluate
from advisor.engine.regex import UnsupportedRegex, translate


@pytest.mark.parametrize("pattern", ["(a+)+b", "(a*)*", "(a|b+)*c", "(x{1,5})+y", "((ab+)c)*d", "(a(b*))+", "(a+){2,3}"])
def test_nested_repetitions_are_refused(pattern):
    with pytest.raises(UnsupportedRegex, match="nests a repetition inside a repeated group"):
        translate(pattern)


@pytest.mark.parametrize("pattern", ["(ab)+c", "a+b*", "(a+)?b", "(a+)(b)+", ".*x.*", "(Swish|Silu|SiLU)", "[a-z]+(_v[0-9])?"])
def test_repetitions_that_do_not_nest_are_kept(pattern):
    translate(pattern)


def test_a_value_longer_than_the_limit_is_not_handed_to_re(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("re.fullmatch ran on a value over the limit")

    monkeypatch.setattr(evaluate.re, "fullmatch", refuse)
    assert evaluate.holds("matches", "a" * (evaluate.MAX_MATCH_CHARS + 1), ".*a.*b.*") is False


def test_a_value_within_the_limit_is_matched():
    assert evaluate.holds("imatches", "x" * 100 + "Expandable_Segments:True", ".*expandable_segments:true.*")


def _builtin_patterns() -> list[tuple[str, str]]:
    from advisor.diagnose import default_rulebook

    found = []
    for rule in default_rulebook().rules.values():
        if rule.pack != "built-in":
            continue
        for group in rule.spec.when.groups():
            for condition in group:
                inner = getattr(condition, "not_", condition)
                for predicate in inner.where.values():
                    for op, operand in predicate.comparisons():
                        if op in ("matches", "imatches"):
                            found.append((rule.id, operand))
    return found


def test_builtin_patterns_have_at_most_two_unbounded_repetitions():
    """``.*A.*B.*`` backtracks quadratically when A repeats and B is absent (memory.alloc_conf_conflict did, on a
    long PYTORCH_NPU_ALLOC_CONF); ``.*A.*`` is linear."""
    patterns = _builtin_patterns()
    assert patterns
    heavy = [(rule, p) for rule, p in patterns if len(re.findall(r"(?<!\\)[.\]][*+]", p)) > 2]
    assert not heavy, heavy
