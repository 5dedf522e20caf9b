"""The rule engine: durable-rules' sharp edges, pinned, and how the adapter owns each of them.

The ``test_durable_*`` tests call the C extension directly and pin the library's behaviour; if an
upgrade changes one, the adapter's workaround may become unnecessary or wrong. The others check the
adapter: encoding, ids, isolation between diagnoses, chaining, joins, negation and error surfacing.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import durable_rules_engine as dre
import pytest
from hypothesis import given
from hypothesis import strategies as st
import yaml

from advisor.engine.encode import NotEncodable, encode, encode_number
from advisor.engine.regex import UnsupportedRegex, translate
from advisor.engine.session import RuleEngine
from advisor.engine.spec import RuleSpec, check_rule
from advisor.errors import EngineError, RuleError
from advisor.facts.models import BottleneckFact, BreakdownFact, ContextFact, HostFact, OperatorFact
from advisor.rulebook import Rule

_NAMES = itertools.count()


def _raw_ruleset(condition: dict) -> int:
    return dre.create_ruleset(f"pin{next(_NAMES)}", json.dumps({"r": {"all": [{"m": condition}]}}))


def _raw_drain(handle: int, state: int) -> list[str]:
    """Run every pending action to completion and list the ids fired.

    The raw tests never call ``delete_state``: in durable-rules 2.0.28 it frees a session's action context,
    which is uninitialised until an action has run (the adapter's sentinel rule exists for this); deleting
    the whole ruleset afterwards is safe.
    """
    fired = []
    message = dre.start_action_for_state(handle, state)
    message = message[1] if message else None
    while message:
        fired.append(next(iter(json.loads(message).values()))["m"].get("id", ""))
        message = dre.complete_and_start_action(handle, state)
        if not message:
            pending = dre.start_action_for_state(handle, state)
            message = pending[1] if pending else None
    return fired


def _raw_fires(handle: int, fact_json: str) -> bool:
    code, state = dre.assert_fact(handle, fact_json)
    return bool(_raw_drain(handle, state)) if code == 0 else False


# ---- durable-rules as it is (pinned) ----


def test_durable_compares_a_string_with_a_number_as_text():
    handle = _raw_ruleset({"$and": [{"k": "x"}, {"$gt": {"v": 5}}]})
    assert _raw_fires(handle, '{"id":"1","sid":"a","k":"x","v":"abc"}')  # "abc" > 5 matches
    assert not _raw_fires(handle, '{"id":"1","sid":"b","k":"x","v":"10"}')  # "10" > 5 does not
    dre.delete_ruleset(handle)


def test_durable_silently_drops_facts_after_an_exponent_float_in_a_batch():
    handle = _raw_ruleset({"k": "x"})
    batch = '[{"id":"1","sid":"s","k":"x"},{"id":"2","sid":"s","k":"x","v":1e-05},{"id":"3","sid":"s","k":"x"}]'
    code, state = dre.assert_facts(handle, batch)
    assert code == 0  # reported as success …
    assert _raw_drain(handle, state) == ["1"]  # … but facts 2 and 3 are gone
    with pytest.raises(dre.error, match="204"):
        dre.assert_fact(handle, '{"id":"9","sid":"t","k":"x","v":1e-05}')
    dre.delete_ruleset(handle)


def test_durable_rejects_infinity_and_never_matches_nan():
    handle = _raw_ruleset({"$and": [{"k": "x"}, {"$gt": {"v": 0.3}}]})
    with pytest.raises(dre.error, match="202"):
        dre.assert_fact(handle, '{"id":"1","sid":"s","k":"x","v":Infinity}')
    assert not _raw_fires(handle, '{"id":"2","sid":"s","k":"x","v":NaN}')
    dre.delete_ruleset(handle)


def test_durable_deduplicates_identical_facts_without_ids():
    handle = _raw_ruleset({"k": "x"})
    code, state = dre.assert_fact(handle, '{"sid":"s","k":"x","v":1}')
    assert code == 0
    assert dre.assert_fact(handle, '{"sid":"s","k":"x","v":1}')[0] == 2  # observed before: dropped
    _raw_drain(handle, state)
    dre.delete_ruleset(handle)


@pytest.mark.parametrize(("pattern", "value", "matches"), [(r"\d+", "123", False), ("%d+", "123", True), ("^ab", "ab", False), ("ab", "xab", False)])
def test_durable_regex_dialect(pattern, value, matches):
    handle = _raw_ruleset({"$and": [{"k": "x"}, {"$mt": {"v": pattern}}]})
    assert _raw_fires(handle, json.dumps({"id": "1", "sid": "s", "k": "x", "v": value})) is matches
    dre.delete_ruleset(handle)


def test_durable_negation_does_not_cancel_an_activation_when_the_negated_fact_comes_later():
    handle = dre.create_ruleset(f"pin{next(_NAMES)}", json.dumps({"r": {"all": [{"a": {"k": "b"}}, {"c$not": {"k": "c"}}]}}))
    _, state = dre.assert_fact(handle, '{"id":"1","sid":"s","k":"b"}')
    dre.assert_fact(handle, '{"id":"2","sid":"s","k":"c"}')
    message = dre.start_action_for_state(handle, state)
    assert message  # still fires although a 'c' fact exists
    dre.complete_and_start_action(handle, state)
    dre.delete_ruleset(handle)


# ---- the adapter ----


def test_numbers_are_encoded_without_exponents():
    assert encode_number(1e-05) == "0.00001"
    assert encode_number(1.5e20) == "150000000000000000000"
    assert encode({"a": [0.1, 2, True, None, "x\"y"]}) == '{"a":[0.1,2,true,null,"x\\"y"]}'
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(NotEncodable):
            encode_number(bad)


scalars = st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False, allow_infinity=False) | \
    st.sampled_from([1e-4, 9.999999e-5, -1e-4, 1e16, 9.999999999999998e15, -0.0, 5e-324, 1.7976931348623157e308])


@given(st.dictionaries(st.text() | st.integers() | st.booleans(), scalars, max_size=8))
def test_a_fact_is_encoded_as_value_by_value(payload):
    """The flat dict of a fact goes through json.dumps; it must write what encoding each value does."""
    assert encode(payload) == "{" + ",".join(f"{encode(str(k))}:{encode(v)}" for k, v in payload.items()) + "}"
    assert "e" not in "".join(encode(v) for v in payload.values() if isinstance(v, float))


def test_facts_refuse_nan_and_text_where_numbers_belong():
    with pytest.raises(ValueError):
        _operator(share_of_compute=float("nan"))
    with pytest.raises(ValueError):
        _operator(share_of_compute="abc")


def _rule(text: str) -> Rule:
    spec = RuleSpec.model_validate(yaml.safe_load(text))
    problems, exprs = check_rule(spec)
    assert not problems, problems
    return Rule(spec=spec, exprs=exprs, path=Path(f"{spec.id}.yaml"), shown_path=f"rules/{spec.id}.yaml")


def _operator(**fields) -> OperatorFact:
    values = dict(id="operator:r0:1", rank=0, op_type="MatMulV2", accelerator_core="AI_CORE", type_source="type",
                  count_per_step=1.0, total_us_per_step=100.0, mean_us=100.0, max_us=100.0, share_of_compute=0.5,
                  position=1)
    values.update(fields)
    return OperatorFact(**values)


def _breakdown(rank: int | None = 0, **fields) -> BreakdownFact:
    values = dict(id=f"breakdown:r{rank}", scope="rank" if rank is not None else "profile", rank=rank, steps=1,
                  step_time_us=1000.0, compute_us=300.0, comm_not_overlapped_us=600.0, free_us=100.0,
                  compute_ratio=0.3, communication_ratio=0.6, free_ratio=0.1, dominant_overhead="communication")
    values.update(fields)
    return BreakdownFact(**values)


HOT = _rule("""
id: test.hot
title: hot
category: kernel-efficiency
when: {all: [{fact: operator, as: o, where: {share_of_compute: {gte: 0.3}}}]}
then: {recommend: [x], gain_us: o.total_us_per_step}
explain: "{o.op_type}"
""")

TINY = _rule("""
id: test.tiny
title: tiny
category: kernel-efficiency
when: {all: [{fact: operator, as: o, where: {share_of_compute: {lt: 0.0001}}}]}
then: {recommend: [x], gain_us: 0}
explain: "{o.op_type}"
""")

CLASSIFY = _rule("""
id: test.classify
title: classify
category: communication
when: {all: [{fact: breakdown, as: b, where: {communication_ratio: {gte: 0.2}, dominant_overhead: communication}}]}
then: {assert: {fact: bottleneck, values: {scope: "=b.scope", rank: "=b.rank", kind: communication, ratio: "=b.communication_ratio"}}}
""")

EXPOSED = _rule("""
id: test.exposed
title: exposed
category: communication
when:
  all:
    - {fact: bottleneck, as: v, where: {kind: communication, scope: rank}}
    - {fact: breakdown, as: b, where: {scope: rank, rank: {ref: v.rank}}}
then: {recommend: [x], gain_us: b.comm_not_overlapped_us}
explain: "{b.rank}"
""")


def test_tiny_floats_reach_the_engine_intact():
    with RuleEngine([TINY]) as engine:
        firings = engine.run([_operator(share_of_compute=1e-05), _operator(id="operator:r0:2", share_of_compute=0.2)])
    assert [f.matched["o"].id for f in firings] == ["operator:r0:1"]


def test_identical_facts_with_distinct_ids_all_fire():
    with RuleEngine([HOT]) as engine:
        firings = engine.run([_operator(), _operator(id="operator:r1:1")])
    assert sorted(f.matched["o"].id for f in firings) == ["operator:r0:1", "operator:r1:1"]


def test_duplicate_ids_are_an_error_not_a_silent_drop():
    with RuleEngine([HOT]) as engine, pytest.raises(EngineError, match="share the id 'operator:r0:1'"):
        engine.run([_operator(), _operator(share_of_compute=0.9)])


def test_derived_facts_chain_into_joined_rules():
    with RuleEngine([CLASSIFY, EXPOSED]) as engine:
        firings = engine.run([_breakdown(0), _breakdown(1, communication_ratio=0.1), _breakdown(None)])
    classify = [f for f in firings if f.rule_id == "test.classify"]
    exposed = [f for f in firings if f.rule_id == "test.exposed"]
    assert sorted(str(f.derived[0].rank) for f in classify) == ["0", "None"]
    assert [(f.matched["v"].rank, f.matched["b"].id) for f in exposed] == [(0, "breakdown:r0")]
    assert isinstance(exposed[0].matched["v"], BottleneckFact)


def test_state_does_not_leak_between_diagnoses():
    with RuleEngine([CLASSIFY, EXPOSED]) as engine:
        first = engine.run([_breakdown(0)])
        assert len(first) == 2
        assert engine.run([]) == []
        assert engine.run([_breakdown(1, communication_ratio=0.1)]) == []
        results = {len(engine.run([_breakdown(0)] if i % 2 else [])) for i in range(200)}
    assert results == {0, 2}


def test_an_error_inside_a_firing_surfaces():
    broken = _rule("""
id: test.broken
title: broken
category: communication
when: {all: [{fact: breakdown, as: b}]}
then: {assert: {fact: bottleneck, values: {scope: "=b.scope", kind: network, ratio: 0.5}}}
""")
    with RuleEngine([broken]) as engine:
        with pytest.raises(EngineError, match="rule test.broken derived an invalid bottleneck fact"):
            engine.run([_breakdown(0)])
        assert engine.run([]) == []  # the engine is still usable afterwards


def test_negation_holds_whatever_order_the_facts_come_in():
    rule = _rule("""
id: test.absent
title: absent
category: profiling
when: {all: [{fact: context, as: c}, {not: {fact: breakdown}}]}
then: {recommend: [x], gain_us: 0}
explain: "{c.rank_count}"
""")
    context = ContextFact(id="context", format="ascend-pytorch", rank_count=1, step_count=1, has_step_info=True)
    with RuleEngine([rule]) as engine:
        assert engine.run([context, _breakdown(0)]) == []
        assert engine.run([_breakdown(0), context]) == []
        assert len(engine.run([context])) == 1


def test_negations_of_several_families_are_ordered_across_rules():
    absent_breakdown = _rule("""
id: test.no_breakdown
title: no breakdown
category: profiling
when: {all: [{fact: context, as: c}, {not: {fact: breakdown}}]}
then: {recommend: [x], gain_us: 0}
explain: "x"
""")
    no_hot_operator = _rule("""
id: test.no_hot_operator
title: breakdown without a hot operator on its rank
category: kernel-efficiency
when:
  all:
    - {fact: breakdown, as: b, where: {scope: rank}}
    - {not: {fact: operator, where: {rank: {ref: b.rank}, share_of_compute: {gte: 0.3}}}}
then: {recommend: [x], gain_us: 0}
explain: "x"
""")
    context = ContextFact(id="context", format="ascend-pytorch", rank_count=2, step_count=1, has_step_info=True)
    facts = [context, _breakdown(0), _breakdown(1), _operator(rank=0, share_of_compute=0.9)]
    with RuleEngine([absent_breakdown, no_hot_operator]) as engine:
        for ordering in (facts, facts[::-1], facts[1:] + facts[:1]):
            fired = [(f.rule_id, f.matched["b"].rank) for f in engine.run(ordering)]
            assert fired == [("test.no_hot_operator", 1)]


def test_contradictory_negation_orders_are_refused():
    a = _rule("""
id: test.a
title: a
category: profiling
when: {all: [{fact: context, as: c}, {not: {fact: breakdown}}]}
then: {recommend: [x], gain_us: 0}
explain: "x"
""")
    b = _rule("""
id: test.b
title: b
category: profiling
when: {all: [{fact: breakdown, as: b}, {not: {fact: context}}]}
then: {recommend: [x], gain_us: 0}
explain: "x"
""")
    with pytest.raises(RuleError, match="contradictory orders: test.a .context after breakdown.; test.b .breakdown after context."):
        RuleEngine([a, b])


def test_any_of_alternatives_and_in_and_exists():
    rule = _rule("""
id: test.any
title: any
category: kernel-efficiency
when:
  any:
    - {fact: operator, as: o, where: {op_type: {in: [IndexPutV2, NonZero]}}}
    - all:
        - {fact: operator, as: m, where: {op_type: {matches: "MatMul(V2|V3)"}, share_of_step: {exists: false}}}
then: {recommend: [x], gain_us: 0}
explain: "x"
""")
    with RuleEngine([rule]) as engine:
        assert len(engine.run([_operator(op_type="NonZero")])) == 1
        assert len(engine.run([_operator(op_type="MatMulV3")])) == 1
        assert engine.run([_operator(op_type="MatMulV3", share_of_step=0.1)]) == []
        assert engine.run([_operator(op_type="Add")]) == []


def test_a_missing_field_fails_every_comparison():
    rule = _rule("""
id: test.ne
title: ne
category: kernel-efficiency
when: {all: [{fact: operator, as: o, where: {accelerator_core: {ne: AI_CORE}}}]}
then: {recommend: [x], gain_us: 0}
explain: "x"
""")
    with RuleEngine([rule]) as engine:
        assert engine.run([_operator(accelerator_core=None)]) == []  # unknown is not "not AI_CORE"
        assert len(engine.run([_operator(accelerator_core="AI_CPU")])) == 1


# ---- regex: what authors write is what the engine runs ----

PATTERNS = [r"abc", r"ab.*", r"a|b", r"(ab)+", r"a{2}", r"a{2,3}", r"[0-9]+", r"\d+", r"\w+", r"a\.b", r"a\*b", r"100%",
            r"[^a]b", r"(a|b)c", r"hcom_.*", r"MatMul(V2|V3)", r"[a-]+", r"[-a]+", r"a\-b", r"[\d.]+", r"a\$b", r"a\\b",
            r"[\]]", r"x\(y\)", r"Index(Put)?(V2)?", r".*Grad", r"[A-Z][a-z]+V[0-9]", r"(ConcatD|Concat.*)",
            r"(Add|AddV2|Muls|Mul|MaskedFill)", r"(SoftmaxV2|Softmax.*)", r".*(e|z).*", r"(Swish|Silu|SiLU)"]
VALUES = ["abc", "abcd", "a", "b", "abab", "aa", "aaa", "123", "ab_1", "a.b", "a*b", "100%", "cb", "bc",
          "hcom_allReduce_", "MatMulV3", "a-a", "-a", "a-b", "1.5", "a$b", "a\\b", "]", "x(y)", "IndexPutV2", "ConvGrad",
          "TransData", "MatmulV2", "", "ConcatD", "ConcatV2", "Concat", "AddV2", "Muls", "MaskedFill", "SoftmaxV2",
          "zebra", "Silu", "expandable_segments:True"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_translated_regex_matches_exactly_like_python_fullmatch(pattern):
    handle = _raw_ruleset({"$and": [{"k": "x"}, {"$mt": {"v": translate(pattern)}}]})
    for n, value in enumerate(VALUES):
        fired = _raw_fires(handle, json.dumps({"id": str(n), "sid": f"s{n}", "k": "x", "v": value}))
        assert fired == (re.fullmatch(pattern, value) is not None), (pattern, value)
    dre.delete_ruleset(handle)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [("^abc", "anchor"), ("abc$", "anchor"), ("(?i)abc", "(?…)"), (r"a\b", r"escape '\b'"), (r"\s+", r"escape '\s'"),
     ("a*?", "lazy"), ("a{2,}", "open repetition"), ("[", "not a valid regular expression"), (r"(a)\1", r"escape '\1'"),
     (".*(ex|zz).*", "alternation of multi-character branches after a repetition")],
)
def test_unsupported_regex_is_rejected_with_advice(pattern, message):
    with pytest.raises(UnsupportedRegex, match=re.escape(message)):
        translate(pattern)


STRESS = """
import sys
sys.path.insert(0, {tests!r})
from test_engine import HOT, _operator
from advisor.engine.session import RuleEngine
junk = []
with RuleEngine([HOT]) as engine:
    for n in range(3000):
        junk.append(bytearray(b"\\xff" * (64 + n % 512)))  # recycle memory with non-zero bytes
        if len(junk) > 50:
            junk.clear()
        assert engine.run([_operator(share_of_compute=0.1)]) == []  # nothing fires
        if n % 7 == 0:
            assert len(engine.run([_operator(share_of_compute=0.9)])) == 1
print("ok")
"""


def test_many_sessions_where_nothing_fires_do_not_corrupt_memory():
    import subprocess
    import sys

    code = STRESS.format(tests=str(Path(__file__).parent))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


ORDERED_JOIN = """
id: test.ordered_join
title: ordered join
category: kernel-efficiency
when:
  all:
    - {fact: operator, as: a, where: {op_type: MatMulV2}}
    - {fact: operator, as: b, where: {op_type: Add, total_us_per_step: {gt: {ref: a.total_us_per_step}}}}
then: {recommend: [x], gain_us: 0}
explain: "x"
"""

ORDERED_STRESS = """
import sys
sys.path.insert(0, {tests!r})
from test_engine import ORDERED_JOIN, _rule, _operator
from advisor.engine.session import RuleEngine
with RuleEngine([_rule(ORDERED_JOIN)]) as engine:
    for n in range(400):
        a = _operator(id="a", op_type="MatMulV2", total_us_per_step=100.0)
        quiet = engine.run([a, _operator(id="b", op_type="Add", total_us_per_step=100.0)])
        fired = engine.run([a, _operator(id="b", op_type="Add", total_us_per_step=101.0)])
        assert quiet == [] and len(fired) == 1, (quiet, fired)
print("ok")
"""


def test_ordered_joins_between_facts_are_exact_and_do_not_crash_the_engine():
    """durable-rules 2.0.28 segfaults when an ordered join is false; such joins are checked after the match."""
    import subprocess
    import sys

    code = ORDERED_STRESS.format(tests=str(Path(__file__).parent))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (result.returncode, result.stderr[-2000:])


def test_ordered_joins_inside_not_are_refused():
    negated = ORDERED_JOIN.replace("    - {fact: operator, as: b,", "    - not: {fact: operator,")
    spec = RuleSpec.model_validate(yaml.safe_load(negated))
    problems, _ = check_rule(spec)
    assert any("inside 'not'" in p.text for p in problems), problems


def test_books_with_the_same_rules_share_one_compiled_engine():
    """Each command of an in-process CLI (the corpus, the MCP server) loads its own rule book: its rules compile once
    per process, not once per book — a ruleset lives in durable_rules' native memory (~30 MB for the built-in rules)."""
    from advisor.rulebook import load_rulebook

    first, second = load_rulebook(), load_rulebook()
    assert first is not second
    rules = list(first.rules.values())
    assert first.engine(rules) is second.engine(list(second.rules.values()))
    assert first.engine(rules[:3]) is not first.engine(rules)  # another set of rules, another engine


def test_an_engine_evicted_from_the_cache_still_runs_for_whoever_holds_it():
    """A thread that took an engine from the process-wide cache may run it after another thread's books evicted
    (and closed) it: the run still fires the same rules, and leaves the engine closed again."""
    from conftest import SAMPLE_SINGLE

    from advisor.facts import extract_facts
    from advisor.ingest import load_profile
    from advisor.rulebook import MAX_ENGINES, load_rulebook

    book = load_rulebook()
    rules = [r for r in book.rules.values() if "ascend" in r.spec.platforms]
    held = book.engine(rules)
    facts = extract_facts(load_profile(SAMPLE_SINGLE)).facts
    expected = [f.rule_id for f in held.run(facts)]
    assert expected  # the sample fires rules
    for count in range(1, MAX_ENGINES + 1):  # other rule sets push it out of the cache
        book.engine(rules[:count])
    assert held._handle is None  # evicted and freed
    assert [f.rule_id for f in held.run(facts)] == expected
    assert held._handle is None


SELF_NEGATING = """
id: team.unfused_optimizer
title: unfused optimizer
category: fused-optimizer
when:
  all:
    - {fact: host, as: h, where: {optimizer_kernels_per_step: {gt: 50}}}
    - not: {fact: host, where: {optimizer_foreach_kernels_per_step: {gt: 0}%s}}
then: {recommend: [x], gain_us: 0}
explain: "x"
"""


def _host(rank: int, kernels: float, foreach: float) -> HostFact:
    return HostFact(id=f"host:r{rank}", rank=rank, steps=1, compile_calls_per_step=0, compile_us_per_step=0,
                    sync_calls_per_step=0, sync_us_per_step=0, launch_calls_per_step=0, gc_calls_per_step=0,
                    gc_us_per_step=0, optimizer_us_per_step=0, sync_batch_norm_calls_per_step=0,
                    optimizer_kernels_per_step=kernels, optimizer_foreach_kernels_per_step=foreach)


@pytest.mark.parametrize(("hosts", "fired"), [
    ([(0, 58, 4)], []),  # the matched fact itself meets the negation: durable-rules fired anyway
    ([(0, 58, 0)], [0]),
    ([(0, 58, 0), (1, 84, 4)], []),  # another rank's fact meets it, whichever order they are asserted in
    ([(0, 58, 0), (1, 84, 0)], [0, 1]),
])
def test_a_negation_of_the_family_the_rule_matches_means_no_such_fact_exists(hosts, fired):
    facts = [_host(*host) for host in hosts]
    with RuleEngine([_rule(SELF_NEGATING % "")]) as engine:
        for ordering in (facts, facts[::-1]):
            assert sorted(f.matched["h"].rank for f in engine.run(ordering)) == fired


def test_a_negation_of_the_same_family_on_the_same_rank_is_checked_per_rank():
    facts = [_host(0, 58, 0), _host(1, 84, 4)]
    with RuleEngine([_rule(SELF_NEGATING % ", rank: {ref: h.rank}")]) as engine:
        for ordering in (facts, facts[::-1]):
            assert [f.matched["h"].rank for f in engine.run(ordering)] == [0]
