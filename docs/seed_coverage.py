"""Write docs/seed-coverage.md from docs/seed-coverage.yaml and the rule book: what implements each item of the seeds.

The mapping (which rules, prescriptions, planners and tests implement each seed item) is written by hand in the YAML;
everything shown about a rule or a prescription — its title — is read from its file through the project's loader, so
the table follows the rule book. Run by ``make docs``; tests/test_seed_coverage.py checks the mapping against the rule
book and the tests, and that the Markdown is current.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from advisor.rulebook import RuleBook, load_rulebook

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "docs" / "seed-coverage.yaml"
TARGET = ROOT / "docs" / "seed-coverage.md"
Status = Literal["covered", "partial", "not_detectable", "uncovered"]
STATUS_NAMES = {"covered": "covered", "partial": "partial", "not_detectable": "not detectable from a profile",
                "uncovered": "not covered"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Seed(_Model):
    file: str
    title: str


class Item(_Model):
    """One tip, table row, formula or environment variable of a seed, and what implements it."""

    seed: str
    section: str = Field(description="The section as the seed names it.")
    item: str = Field(description="A short name of the item, in English.")
    status: Status
    rules: list[str] = Field(default_factory=list)
    knowledge: list[str] = Field(default_factory=list)
    planners: list[str] = Field(default_factory=list, description="`advisor plan NAME` subcommands.")
    commands: list[str] = Field(default_factory=list, description="Other commands that implement it, e.g. `compare`.")
    tests: list[str] = Field(default_factory=list,
                             description="tests/FILE.py::test_name or rules/DIR/ID.yaml#test name.")
    evidence: list[str] = Field(default_factory=list, description="Words found in the listed prescriptions' text.")
    missing: str | None = None
    reason: str | None = None
    mentioned_in: list[str] = Field(default_factory=list, description="Knowledge ids that tell the user about it.")
    note: str | None = None

    @model_validator(mode="after")
    def _what_the_status_needs(self) -> Item:
        implemented = self.rules or self.planners or self.commands
        if self.status == "covered" and not (implemented and self.tests):
            raise ValueError(f"{self.item}: a covered item names the rules, planners or commands that implement it, "
                             "and tests")
        if self.status in ("partial", "uncovered") and not self.missing:
            raise ValueError(f"{self.item}: a {self.status} item says what is missing")
        if self.status == "not_detectable" and not (self.reason and self.mentioned_in):
            raise ValueError(f"{self.item}: a not_detectable item gives a reason and where advisor mentions it")
        if self.status == "uncovered" and (implemented or self.knowledge):
            raise ValueError(f"{self.item}: an uncovered item lists nothing that implements it")
        return self


class Citation(_Model):
    """A knowledge entry citing a seed for something that is no item."""

    knowledge: str
    seed: str
    note: str


class Excluded(_Model):
    seed: str
    what: str


class Coverage(_Model):
    seeds: dict[str, Seed]
    items: list[Item]
    citations: list[Citation] = Field(default_factory=list)
    excluded: list[Excluded] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_seeds(self) -> Coverage:
        unknown = {entry.seed for entry in [*self.items, *self.citations, *self.excluded]} - set(self.seeds)
        if unknown:
            raise ValueError(f"unknown seed ids: {sorted(unknown)}")
        return self

    def numbered(self) -> list[tuple[str, Item]]:
        """Each item with its number, the seed id and its place in the seed (000-01 …)."""
        counts: Counter[str] = Counter()
        result = []
        for item in self.items:
            counts[item.seed] += 1
            result.append((f"{item.seed}-{counts[item.seed]:02d}", item))
        return result


def load_coverage(path: Path = SOURCE) -> Coverage:
    return Coverage.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _rule(book: RuleBook, rule_id: str) -> str:
    return f"[`{rule_id}`](rules/rules/{rule_id}.md) {_cell(book.rules[rule_id].spec.title.en)}"


def _knowledge(book: RuleBook, knowledge_id: str) -> str:
    return f"[`{knowledge_id}`](rules/knowledge/{knowledge_id}.md) {_cell(book.knowledge[knowledge_id].title.en)}"


def _test(reference: str) -> str:
    if "::" in reference:
        path, name = reference.split("::", 1)
        return f"`{name}` ({Path(path).name})"
    path, name = reference.split("#", 1)
    return f"{Path(path).stem}: “{_cell(name)}”"


def _notes(item: Item, book: RuleBook) -> str:
    parts = []
    if item.missing:
        parts.append(f"**Missing:** {_cell(item.missing)}")
    if item.reason:
        parts.append(f"**Why not:** {_cell(item.reason)}")
    if item.mentioned_in:
        parts.append("**Mentioned in:** " + "; ".join(_knowledge(book, k) for k in item.mentioned_in))
    if item.note:
        parts.append(_cell(item.note))
    return "<br>".join(parts)


def summary(coverage: Coverage) -> str:
    counts = Counter(item.status for item in coverage.items)
    parts = ", ".join(f"{counts[status]} {name}" for status, name in STATUS_NAMES.items())
    return f"{len(coverage.items)} items: {parts}."


def coverage_markdown(book: RuleBook | None = None, coverage: Coverage | None = None) -> str:
    """docs/seed-coverage.md as today's mapping and rule book give it."""
    book = book or load_rulebook(installed=False)
    coverage = coverage or load_coverage()
    lines = [
        "# Seed coverage",
        "",
        "Generated by `make docs` (docs/seed_coverage.py) from [seed-coverage.yaml](seed-coverage.yaml) and the titles",
        "of the rules and prescriptions; do not edit by hand. `tests/test_seed_coverage.py` checks that every rule,",
        "prescription, planner and test named here exists and that every prescription citing a seed is listed.",
        "",
        "The knowledge base was written from four documents (the seeds). Each of their tips, table rows, formulas and",
        "environment variables is an item below, with what implements it: the rules that find it in a profile, the",
        "prescriptions (knowledge entries) that carry the advice, the `advisor plan` planners that compute it, and the",
        "tests that show it.",
        "",
        "- **covered**: a rule finds it in a profile, or a planner computes it, and a test shows it;",
        "- **partial**: only part of it is done, or a rule reaches it only with `--context` / `--env` (what is",
        "  missing is said);",
        "- **not detectable from a profile**: a profile cannot show it; the prescriptions named tell the user about",
        "  it;",
        "- **not covered**: nothing implements it.",
        "",
        f"**{summary(coverage)}**",
        "",
        "| Seed | Document | Items | Covered | Partial | Not detectable | Not covered |",
        "|---|---|---|---|---|---|---|",
    ]
    for seed_id, seed in coverage.seeds.items():
        counts = Counter(item.status for item in coverage.items if item.seed == seed_id)
        lines.append(f"| {seed_id} | {_cell(seed.title)} | {sum(counts.values())} | "
                     + " | ".join(str(counts[status]) for status in STATUS_NAMES) + " |")
    numbered = coverage.numbered()
    for seed_id, seed in coverage.seeds.items():
        lines += ["", f"## {seed_id}: {seed.title}", "", f"`{seed.file}`", "",
                  "| # | Section | Item | Status | Rules and planners | Prescriptions | Tests | Notes |",
                  "|---|---|---|---|---|---|---|---|"]
        for number, item in numbered:
            if item.seed != seed_id:
                continue
            found = ([_rule(book, r) for r in item.rules] + [f"`advisor plan {p}`" for p in item.planners]
                     + [f"`advisor {c}`" for c in item.commands])
            lines.append(" | ".join([
                f"| {number}", _cell(item.section), _cell(item.item), STATUS_NAMES[item.status],
                "<br>".join(found), "<br>".join(_knowledge(book, k) for k in item.knowledge),
                "<br>".join(_test(t) for t in item.tests), _notes(item, book)]) + " |")
    if coverage.citations:
        lines += ["", "## Prescriptions citing a seed for no item", "",
                  "| Prescription | Seed | Note |", "|---|---|---|"]
        lines += [f"| {_knowledge(book, c.knowledge)} | {c.seed} | {_cell(c.note)} |" for c in coverage.citations]
    if coverage.excluded:
        lines += ["", "## Not listed", "", "Parts of the seeds that are no tip about performance:", ""]
        lines += [f"- {e.seed}: {_cell(e.what)}" for e in coverage.excluded]
    return "\n".join(lines) + "\n"


def main() -> None:
    TARGET.write_text(coverage_markdown(), encoding="utf-8")


if __name__ == "__main__":
    main()
