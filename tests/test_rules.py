"""Every rule's embedded test cases, and the load-time validation of rule files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from advisor.diagnose import default_rulebook
from advisor.engine.session import RuleEngine
from advisor.errors import RuleError
from advisor.rulebook import load_rulebook
from advisor.ruletests import run_case

BOOK = default_rulebook()
CASES = [(rule, index) for rule in BOOK.rules.values() for index in range(len(rule.spec.tests))]


@pytest.mark.parametrize(("rule", "index"), CASES, ids=[f"{r.id}:{r.spec.tests[i].name}" for r, i in CASES])
def test_embedded_case(rule, index):
    with RuleEngine([rule]) as engine:
        result = run_case(engine, rule, index)
    assert result.passed, f"expected {result.expect}, {result.detail}"


def test_every_rule_has_a_fire_and_a_quiet_case():
    for rule in BOOK.rules.values():
        expects = {case.expect for case in rule.spec.tests}
        assert expects == {"fire", "quiet"}, rule.id


def test_every_recommending_rule_and_knowledge_entry_speaks_both_languages():
    for rule in BOOK.rules.values():
        assert rule.spec.title.zh, rule.id
        if rule.spec.then.recommend:
            assert rule.spec.explain.zh, rule.id
    assert BOOK.knowledge  # BilingualText makes zh mandatory for every knowledge text


def _english_texts(node: object, where: str):
    """(where, text) of every ``en`` text in a rule or knowledge file's YAML."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "en" and isinstance(value, str):
                yield where, value
            else:
                yield from _english_texts(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _english_texts(value, f"{where}[{index}]")


def test_no_english_text_carries_chinese():
    """memory.free_calls' English explanation ended in a Chinese clause (issue 31)."""
    import re

    import yaml

    root = Path(__file__).resolve().parents[1]
    cjk = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
    files = sorted([*root.glob("rules/*/*.yaml"), *root.glob("knowledge/*/*.yaml")])
    assert len(files) > 200
    mixed = [f"{path.relative_to(root)}{where}: {text[:80]!r}" for path in files
             for where, text in _english_texts(yaml.safe_load(path.read_text(encoding="utf-8")), "")
             if cjk.search(text)]
    assert not mixed, mixed


def test_a_case_with_a_wrong_field_fails_instead_of_passing_quietly(tmp_path):
    rule = BOOK.rules["operator.dominant_type"]
    broken = rule.spec.model_copy(
        update={"tests": [rule.spec.tests[1].model_copy(update={"facts": [{"fact": "operator", "share": 0.9}]})]}
    )
    with RuleEngine([rule]) as engine:
        result = run_case(engine, type(rule)(spec=broken, exprs=rule.exprs, path=rule.path, shown_path=""), 0)
    assert not result.passed and "operator has no field 'share'" in result.detail


# ---- load-time validation: each mistake a rule author can make gives file:line and a reason ----

GOOD_WHEN = """
when:
  all:
    - fact: operator
      as: o
      where:
        share_of_compute: {gte: 0.3}
"""


def _write_rule(pack: Path, body: str, rule_id: str = "custom.rule", subdir: str = "") -> Path:
    path = pack / "rules" / subdir / f"{rule_id}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body).lstrip())
    return path


def _load(tmp_path: Path, body: str, rule_id: str = "custom.rule") -> str:
    _write_rule(tmp_path, body, rule_id)
    with pytest.raises(RuleError) as caught:
        load_rulebook([tmp_path], installed=False)
    return str(caught.value)


def _rule(when: str = GOOD_WHEN, then: str = "then:\n  recommend: [operator.dominant_type]\n  gain_us: o.total_us_per_step\n",
          extra: str = 'explain: "{o.op_type}"\n') -> str:
    return f"id: custom.rule\ntitle: t\ncategory: kernel-efficiency\n{textwrap.dedent(when).lstrip()}{then}{extra}"


def test_a_valid_custom_rule_loads(tmp_path):
    _write_rule(tmp_path, _rule())
    book = load_rulebook([tmp_path], installed=False)
    assert "custom.rule" in book.rules and book.rules["custom.rule"].pack == tmp_path.name


@pytest.mark.parametrize(
    ("when", "message"),
    [
        (GOOD_WHEN.replace("fact: operator", "fact: operators"), "unknown fact family 'operators'"),
        (GOOD_WHEN.replace("share_of_compute", "share"), "operator has no field 'share'"),
        (GOOD_WHEN.replace("{gte: 0.3}", "{gte: '0.3'}"), "compares a number field with a text"),
        (GOOD_WHEN.replace("{gte: 0.3}", "{gt: 1}"), "can never be true; the field ranges over [0.0, 1.0]"),
        (GOOD_WHEN.replace("share_of_compute: {gte: 0.3}", "op_type: {gt: 3}"), "gt needs a number field"),
        (GOOD_WHEN.replace("share_of_compute: {gte: 0.3}", "op_type: {matches: '^Index.*'}"), "uses the anchor '^'"),
        (GOOD_WHEN.replace("share_of_compute: {gte: 0.3}", r"op_type: {matches: '\s+'}"), "uses the escape '\\s'"),
        (GOOD_WHEN.replace("share_of_compute: {gte: 0.3}", "type_source: kernel"), "'kernel' is not a possible value"),
        (GOOD_WHEN.replace("share_of_compute: {gte: 0.3}", "rank: {ref: b.rank}"), "'b', which is not an earlier condition"),
        (GOOD_WHEN + "    - not: {fact: bottleneck}\n", "'not' on the derived family 'bottleneck'"),
        (GOOD_WHEN.replace("  all:\n", "  all:\n    - not: {fact: memory}\n"), "cannot start with 'not'"),
    ],
    ids=["family", "field", "type", "impossible", "text-gt", "anchor", "escape", "literal", "join", "negated-derived",
         "leading-not"],
)
def test_condition_mistakes_are_rejected(tmp_path, when, message):
    error = _load(tmp_path, _rule(when=when))
    assert message in error
    assert f"{tmp_path}/rules/custom.rule.yaml:" in error


@pytest.mark.parametrize(
    ("then", "extra", "message"),
    [
        ("then:\n  recommend: [nope.entry]\n  gain_us: 1\n", 'explain: "x"\n', "unknown knowledge id 'nope.entry'"),
        ("then:\n  recommend: [operator.dominant_type]\n  gain_us: __import__('os')\n", 'explain: "x"\n', "is not allowed"),
        ("then:\n  recommend: [operator.dominant_type]\n  gain_us: o.op_type\n", 'explain: "x"\n', "o.op_type is not a number"),
        ("then:\n  recommend: [operator.dominant_type]\n  gain_us: 1\n", 'explain: "{x.rank}"\n', "'x' is not an alias"),
        ("then:\n  recommend: [operator.dominant_type]\n  gain_us: 1\n", 'explain: "{o.rank:.0%%}x{"\n', "stray '{'"),
        ("then:\n  recommend: [operator.dominant_type]\n", 'explain: "x"\n', "must estimate 'gain_us' (or say 'unknown')"),
        ("then:\n  assert: {fact: operator}\n", "", "rules may only assert derived ones"),
    ],
    ids=["knowledge", "code", "text-gain", "alias", "template", "no-gain", "assert-measured"],
)
def test_then_mistakes_are_rejected(tmp_path, then, extra, message):
    assert message in _load(tmp_path, _rule(then=then, extra=extra))


def test_schema_errors_point_at_the_line(tmp_path):
    error = _load(tmp_path, _rule(extra='explain: "x"\nseverity: severe\n'))
    assert "custom.rule.yaml:14:1: severity: 'severe' is not one of auto, high, medium, low" in error


def test_yaml_tags_that_construct_objects_are_refused(tmp_path):
    error = _load(tmp_path, "id: !!python/object/apply:os.system ['echo pwned']\n")
    assert "invalid YAML" in error and "custom.rule.yaml:1" in error


def test_file_name_must_be_the_rule_id(tmp_path):
    assert "the file name must be the rule id" in _load(tmp_path, _rule(), rule_id="other.name")


def test_duplicate_rule_ids_are_rejected(tmp_path):
    _write_rule(tmp_path, _rule(), subdir="a")
    _write_rule(tmp_path, _rule(), subdir="b")
    with pytest.raises(RuleError, match="duplicate rule id 'custom.rule'"):
        load_rulebook([tmp_path], installed=False)
