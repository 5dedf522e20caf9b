"""What reading the profile said — warnings, why a file was skipped or partly read — in the report's language.

The messages are written in English where they arise (ingest); reports/messages.yaml rewrites them for other
languages, one regular expression at a time. A message no rewrite matches is shown as written.
"""

from __future__ import annotations

import functools
import re

import yaml

from advisor.resources import data_dir


@functools.cache
def _rewrites(lang: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The compiled rewrites of ``lang`` (none for English)."""
    table = yaml.safe_load((data_dir("reports") / "messages.yaml").read_text(encoding="utf-8")) or {}
    return tuple((re.compile(entry["en"]), entry["text"]) for entry in table.get(lang, []))


def localised(message: str, lang: str) -> str:
    """``message`` in ``lang``, as far as the rewrites of reports/messages.yaml reach."""
    for pattern, text in _rewrites(lang):
        message = pattern.sub(lambda match: text.format(**match.groupdict()), message)
    return message
