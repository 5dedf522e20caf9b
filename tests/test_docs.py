"""Documentation that states facts about the code is checked against it."""

from __future__ import annotations

import re
from pathlib import Path

from advisor import errors
from advisor.diagnose import default_rulebook

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_exit_codes_in_docs_match_the_code():
    table = dict(re.findall(r"^\| (\d+) \| `(EXIT_\w+)` \|", (DOCS / "errors.md").read_text(), re.M))
    code = {str(getattr(errors, name)): name for name in dir(errors) if name.startswith("EXIT_")}
    assert table == code


def test_every_built_in_rule_is_listed_in_the_rule_format_doc():
    listed = set(re.findall(r"^\| `([a-z0-9_.]+)` \|", (DOCS / "rule-format.md").read_text(), re.M))
    assert listed == set(default_rulebook().rules)


def test_fact_catalogue_doc_is_generated_from_the_models():
    from advisor.facts.catalogue import catalogue_markdown

    assert (DOCS / "facts.md").read_text(encoding="utf-8") == catalogue_markdown(), "run `make docs`"
