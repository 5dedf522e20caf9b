"""advisor.jsontext writes what json.dumps(indent=2, ensure_ascii=False) writes, byte for byte."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.jsontext import json_text

GOLDEN = Path(__file__).parent / "golden"


def standard(value: object, **options: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, **options) + "\n"


@pytest.mark.parametrize("name", ["ascend-level1-2ranks.zh.json", "compare-gpu-ascend.json"])
def test_a_report_is_written_as_the_standard_library_writes_it(name):
    document = json.loads((GOLDEN / name).read_text(encoding="utf-8"))
    assert json_text(document, allow_nan=False) == standard(document)


def test_numbers_keep_pythons_spelling_and_strings_their_escapes():
    value = {"small": [8e-05, 1.5e-07, 1e16, -0.0, 10**30], "text": 'é "q" \\ \n\t\x01\u2028<b>',
             "empty": [[], {}, [{}]], "flags": [True, False, None]}
    text = json_text(value)
    assert text == standard(value)
    assert "8e-05" in text and "1e+16" in text


def test_not_a_number_takes_the_standard_path_or_is_refused():
    assert json_text({"x": math.nan, "y": [math.inf]}) == standard({"x": math.nan, "y": [math.inf]})
    with pytest.raises(ValueError):
        json_text({"x": math.nan}, allow_nan=False)


def test_default_serialises_what_json_cannot():
    value = {"path": Path("a/b"), "set": {3}}
    assert json_text(value, default=str) == standard(value, default=str)


leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
documents = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                         max_leaves=30)


@given(documents)
def test_any_document(value):
    assert json_text(value) == standard(value)
