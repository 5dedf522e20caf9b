"""JSON encoding that durable-rules' own parser accepts without silently losing anything.

Its parser rejects exponent floats without a dot (``1e-05``, which Python's ``json.dumps`` writes) —
inside a batch that drops the fact and every later one while reporting success — and it rejects
``Infinity``. So numbers are written in positional notation here, and non-finite numbers are refused.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring  # what json.dumps(ensure_ascii=False) writes a str with, minus its overhead
from decimal import Decimal
from typing import Any

_POSITIONAL = (1e-4, 1e16)  # repr() writes a float in positional notation when 0 or its size is in [1e-4, 1e16)


class NotEncodable(ValueError):
    """A value the engine cannot take (NaN, infinity, an unsupported type)."""


def encode(value: Any) -> str:
    """Encode dicts, lists, strings, bools, ints, finite floats and None as engine-safe JSON."""
    if type(value) is dict and all(type(key) is str for key in value) and all(map(_plain, value.values())):
        # a fact: json.dumps writes it the same, in C
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return encode_number(value)
    if isinstance(value, str):
        return encode_basestring(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{encode(str(k))}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(encode(v) for v in value) + "]"
    raise NotEncodable(f"cannot pass a {type(value).__name__} to the rule engine")


def _plain(value: Any) -> bool:
    """Whether json.dumps writes ``value`` as encode would: None, text, a bool, an int, or a float that repr() writes
    in positional notation (never a non-finite one)."""
    kind = type(value)
    if kind is float:
        return value == 0 or _POSITIONAL[0] <= abs(value) < _POSITIONAL[1]
    return value is None or kind is str or kind is int or kind is bool


def encode_number(value: float) -> str:
    """A finite float in positional notation (``0.00001``, never ``1e-05``)."""
    if not math.isfinite(value):
        raise NotEncodable(f"the rule engine cannot take the non-finite number {value!r}")
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    return text
