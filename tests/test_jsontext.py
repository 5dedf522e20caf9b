"""advisor.jsontext writes what json.dumps(indent=2, ensure_ascii=False) writes, but for the spelling of floats below
1e-4, and of NaN and infinity."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from advisor.jsontext import json_text

GOLDEN = Path(__file__).parent / "golden"


def standard(value: object, **options: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, **options) + "\n"


def test_a_golden_report_reads_back_as_written():
    text = (GOLDEN / "ascend-level1-2ranks.zh.json").read_text(encoding="utf-8")
    assert json_text(json.loads(text)) == text


def test_text_keeps_its_escapes_and_containers_their_layout():
    value = {"text": 'é "q" \\ \n\t\x01\x7f\u2028<b>', "empty": [[], {}, [{}]], "flags": [True, False, None],
             "ints": [0, -3, 2**63], 7: "a key that is not text"}
    assert json_text(value) == standard(value)


def test_floats_below_1e_4_are_spelled_as_orjson_does_and_read_back_equal():
    value = [8e-05, 1.5e-07, 1e16, 1.5e22, -2.5e-05, 0.0001, 0.1, 123456789.0, 1e15, -0.0]
    text = json_text(value)
    assert "0.00008" in text and "1.5e-7" in text and "1e+16" in text and "8e-05" not in text
    assert json.loads(text) == value


def test_not_a_number_is_null():
    assert json.loads(json_text({"x": math.nan, "y": [math.inf, -math.inf]})) == {"x": None, "y": [None, None]}


def test_what_orjson_refuses_is_written_the_standard_way():
    assert json_text({"big": 2**70}) == standard({"big": 2**70})
    assert json_text("\ud800") == standard("\ud800")


@dataclass
class _Plan:
    name: str
    size: int


def test_default_and_dataclasses():
    value = {"path": Path("a/b"), "plan": _Plan("x", 3)}
    assert json_text(value, default=str) == standard({"path": "a/b", "plan": {"name": "x", "size": 3}})


positional = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x == 0 or abs(x) >= 1e-4)
leaves = st.none() | st.booleans() | st.integers(min_value=-2**63, max_value=2**64 - 1) | positional | st.text()
documents = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                         max_leaves=30)


@given(documents)
def test_any_document_with_positional_floats_is_what_json_dumps_writes(value):
    assert json_text(value) == standard(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_reads_back_equal(number):
    assert json.loads(json_text([number])) == [number]
