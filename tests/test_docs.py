"""Documentation that states facts about the code is checked against it."""

from __future__ import annotations

import re
from pathlib import Path

from advisor import errors

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_exit_codes_in_docs_match_the_code():
    table = dict(re.findall(r"^\| (\d+) \| `(EXIT_\w+)` \|", (DOCS / "errors.md").read_text(), re.M))
    code = {str(getattr(errors, name)): name for name in dir(errors) if name.startswith("EXIT_")}
    assert table == code


def test_fact_catalogue_doc_is_generated_from_the_models():
    from advisor.facts.catalogue import catalogue_markdown

    assert (DOCS / "facts.md").read_text(encoding="utf-8") == catalogue_markdown(), "run `make docs`"
