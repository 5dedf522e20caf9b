"""The seed coverage table (docs/seed-coverage.yaml → docs/seed-coverage.md) names only what exists, lists every
prescription that cites a seed, and is current."""

from __future__ import annotations

import ast
import importlib.util
import sys
from functools import cache
from pathlib import Path

import pytest

from advisor.rulebook import RuleBook, load_rulebook

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("seed_coverage", ROOT / "docs" / "seed_coverage.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


@pytest.fixture(scope="module")
def book() -> RuleBook:
    return load_rulebook(installed=False)


@pytest.fixture(scope="module")
def coverage():
    return GENERATOR.load_coverage()


@cache
def _test_names(path: Path) -> frozenset[str]:
    """``name`` of every test function and ``Class::name`` of every test method in a test file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(f"{node.name}::{child.name}" for child in node.body
                         if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and child.name.startswith("test"))
    return frozenset(names)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def test_every_rule_prescription_and_planner_named_exists(book, coverage):
    from advisor.cli.plan import plan_app

    planners = {command.name for command in plan_app.registered_commands}
    unknown = []
    for number, item in coverage.numbered():
        unknown += [f"{number}: rule {r}" for r in item.rules if r not in book.rules]
        unknown += [f"{number}: knowledge {k}" for k in [*item.knowledge, *item.mentioned_in]
                    if k not in book.knowledge]
        unknown += [f"{number}: advisor plan {p}" for p in item.planners if p not in planners]
    unknown += [f"citation: knowledge {c.knowledge}" for c in coverage.citations if c.knowledge not in book.knowledge]
    assert not unknown, "\n".join(unknown)


def test_every_test_named_exists(book, coverage):
    """``tests/FILE.py::test_name``: the function is in that file; ``rules/DIR/ID.yaml#name``: that rule file holds an
    embedded test case of that name."""
    rules_by_path = {rule.shown_path: rule for rule in book.rules.values()}
    missing = []
    for number, item in coverage.numbered():
        for reference in item.tests:
            if "::" in reference:
                path, name = reference.split("::", 1)
                if not (ROOT / path).is_file() or name not in _test_names(ROOT / path):
                    missing.append(f"{number}: {reference}")
            elif "#" in reference:
                path, name = reference.split("#", 1)
                rule = rules_by_path.get(path)
                if rule is None or name not in {case.name for case in rule.spec.tests}:
                    missing.append(f"{number}: {reference}")
            else:
                missing.append(f"{number}: {reference} (neither FILE.py::test nor RULE.yaml#name)")
    assert not missing, "tests not found:\n" + "\n".join(missing)


def test_every_prescription_citing_a_seed_is_listed_under_that_seed(book, coverage):
    """A new knowledge entry whose references cite a seed cannot go unlisted: it implements an item of that seed, or
    is listed among the citations with a note."""
    by_file = {seed.file: seed_id for seed_id, seed in coverage.seeds.items()}
    listed = {(item.seed, k) for item in coverage.items for k in [*item.knowledge, *item.mentioned_in]}
    listed |= {(c.seed, c.knowledge) for c in coverage.citations}
    cited = {(by_file.get(ref.seed, ref.seed), entry.id) for entry in book.knowledge.values()
             for ref in entry.references if ref.seed}
    unlisted = sorted(cited - listed)
    assert not unlisted, f"knowledge entries citing a seed but not in docs/seed-coverage.yaml: {unlisted}"
    stale = {(seed, k) for seed, k in {(c.seed, c.knowledge) for c in coverage.citations} if (seed, k) not in cited}
    assert not stale, f"citations listed that the entries no longer make: {sorted(stale)}"
    assert set(by_file) <= {ref.seed for entry in book.knowledge.values() for ref in entry.references}


def test_each_status_says_what_it_needs(coverage):
    for number, item in coverage.numbered():
        if item.status == "covered":
            assert (item.rules or item.planners or item.commands) and item.tests, number
        if item.status in ("partial", "uncovered"):
            assert item.missing, number
        if item.status == "not_detectable":
            assert item.reason and item.mentioned_in and item.evidence, number
    assert {item.seed for item in coverage.items} == set(coverage.seeds)


def test_the_commands_listed_exist(coverage):
    from typer.testing import CliRunner

    from advisor.cli import app

    commands = {c for _number, item in coverage.numbered() for c in item.commands}
    assert commands
    for command in commands:
        assert CliRunner().invoke(app, [command, "--help"]).exit_code == 0, command


def test_the_rules_listed_recommend_the_prescriptions_listed(book, coverage):
    for number, item in coverage.numbered():
        if item.rules and item.knowledge:
            recommended = {k for r in item.rules for k in book.rules[r].spec.then.recommend}
            assert set(item.knowledge) <= recommended, f"{number}: {sorted(set(item.knowledge) - recommended)}"


def test_the_prescriptions_say_what_the_items_claim(book, coverage):
    """Each evidence word is in the text of one of the item's prescriptions (or of those it is mentioned in)."""
    absent = []
    for number, item in coverage.numbered():
        text = "\n".join(s for k in [*item.knowledge, *item.mentioned_in]
                         for s in _strings(book.knowledge[k].model_dump()))
        absent += [f"{number}: {word!r}" for word in item.evidence if word not in text]
    assert not absent, "\n".join(absent)


def test_the_seed_coverage_doc_is_generated_from_the_mapping_and_the_rule_book(book, coverage):
    text = (ROOT / "docs" / "seed-coverage.md").read_text(encoding="utf-8")
    assert text == GENERATOR.coverage_markdown(book, coverage), "run `make docs` (docs/seed_coverage.py)"
    assert GENERATOR.summary(coverage) in text
