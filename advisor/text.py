"""Bilingual text as it appears in rule and knowledge files: a plain string or ``{en: …, zh: …}``."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")


class Text(BaseModel):
    """A text in English and, optionally, Chinese; a plain string in YAML means English only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    en: str
    zh: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_plain_string(cls, value: object) -> object:
        return {"en": value} if isinstance(value, str) else value

    def get(self, lang: Lang) -> str:
        """The text in ``lang``, falling back to English."""
        return self.zh if lang == "zh" and self.zh else self.en


class BilingualText(Text):
    """A text that must be given in both languages (knowledge entries)."""

    zh: str


_CJK = r"\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_CJK_GAP = re.compile(f"(?<=[{_CJK}])\\s+(?=[{_CJK}])")


def collapse(text: str) -> str:
    """Join the lines of a folded YAML text: one space between words, none between two CJK characters."""
    return _CJK_GAP.sub("", " ".join(text.split()))


def collapse_repeats(messages: list[str]) -> list[str]:
    """``messages`` in first-seen order, each once; one that came N > 1 times ends with ``(N times)``."""
    counts: dict[str, int] = {}
    for message in messages:
        counts[message] = counts.get(message, 0) + 1
    return [message if count == 1 else f"{message} ({count} times)" for message, count in counts.items()]
