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


def test_readme_markdown_excerpt_matches_todays_report():
    import advisor
    from advisor.render import render_markdown

    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    quoted = "\n".join(line[2:] if line.startswith("> ") else "" for line in readme.splitlines() if line.startswith(">"))
    blocks = [" ".join(block.split()) for block in quoted.split("\n\n") if block.strip()]
    assert len(blocks) >= 5
    report = render_markdown(advisor.diagnose(DOCS.parent / "examples" / "ascend-level1-2ranks"))
    flat = " ".join(report.split())
    for block in blocks:
        assert block in flat, f"README excerpt is out of date: {block[:80]}…"


def test_readme_counts_of_rules_and_prescriptions_are_current():
    from advisor.rulebook import load_rulebook

    book = load_rulebook(installed=False)
    readme = " ".join((DOCS.parent / "README.md").read_text(encoding="utf-8").split())
    match = re.search(r"has (\d+) prescriptions .*? at least one of (\d+) rules", readme)
    assert match and (int(match.group(1)), int(match.group(2))) == (len(book.knowledge), len(book.rules))
