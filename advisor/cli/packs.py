"""The rule book a command runs with: the built-in and installed packs, and those given with --rules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from advisor import errors

T = TypeVar("T")


def load_book(packs: list[Path] | None, skip_broken: bool = False):
    """The built-in and installed rules (broken installed packs skipped), plus ``packs`` (broken ones skipped, or an
    error). Loaded here rather than through advisor.diagnose, so the rules commands need no pandas."""
    from advisor.rulebook import load_rulebook

    return load_rulebook(packs, skip_broken=skip_broken) if packs else load_rulebook(skip_broken=True)


def without_failing_packs(book, run: Callable[[object], T]) -> T:
    """``run(book)``; when a rule of a pack other than the built-in one fails while it runs, the run is done
    again without that pack (or, when the failure names no rule, without every such pack), which the report
    lists as skipped (exit 3). A failure of the built-in rules stays an internal error."""
    from advisor.rulebook import packs_to_blame, without_packs

    while True:
        try:
            return run(book)
        except Exception as exc:
            if isinstance(exc, errors.AdvisorError) and not isinstance(exc, errors.EngineError):
                raise
            culprits = packs_to_blame(book, exc)
            if not culprits:
                raise
            book = without_packs(book, culprits, f"a rule failed while the diagnosis ran ({type(exc).__name__}: {exc}); "
                                                 "the diagnosis was made without this pack")


def find_rule(book, rule_id: str):
    import difflib

    rule = book.rules.get(rule_id)
    if rule is None:
        close = difflib.get_close_matches(rule_id, list(book.rules), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `advisor rules list` shows them"
        raise errors.InputError(f"no rule {rule_id!r}{hint}")
    return rule
