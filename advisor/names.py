"""Tests and lookups over a column of names, each distinct name once: a trace repeats a few hundred kernel and
operator names over millions of rows, and a regular expression or a parser run per row costs minutes where one run per
name costs milliseconds (CUTLASS and hipBLASLt kernel names run to hundreds of characters)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pandas as pd


def matching(names: pd.Series, pattern: re.Pattern[str], search: bool = False) -> pd.Series:
    """``names.str.match(pattern)`` (``str.contains`` with ``search``) as a boolean Series; not a string: False."""
    if names.empty:
        return pd.Series(False, index=names.index, dtype=bool)
    test = pattern.search if search else pattern.match
    hits = [name for name in names.unique() if isinstance(name, str) and test(name)]
    return names.isin(hits)


def per_name(names: pd.Series, function: Callable[[str], Any]) -> pd.Series:
    """``names.map(function)``, ``function`` called once per distinct string (other values map to NaN)."""
    return names.map({name: function(name) for name in names.unique() if isinstance(name, str)})
