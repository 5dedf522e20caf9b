"""``advisor rules lint``: every problem in a rule pack, as ``file:line:column: message``.

Lint reports what loading would refuse (schema errors, unknown fact families and fields, regexes the
engine cannot run, conditions that can never be true, unknown knowledge ids, duplicate ids, unknown
ids in ``disable``) and, beyond that, what makes a pack hard to trust: a rule without a ``fire`` or a
``quiet`` test case, test facts the extractors could never produce, ``api`` names the readers of one of the
rule's platforms never keep (``ingest.kept``), rule texts without a Chinese version, and text still marked TODO (as
left by ``advisor rules new``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from advisor.engine.spec import NotCondition
from advisor.errors import InputError
from advisor.ingest.kept import API_OPS, kept_api
from advisor.knowledge import KnowledgeEntry
from advisor.resources import data_dir
from advisor.rulebook import (
    BUILTIN_PACK,
    PackContents,
    Rule,
    RuleBook,
    apply_pack,
    position_in,
    read_pack,
)
from advisor.engine.spec import case_fact
from advisor.text import Text

TODO = "TODO"


@dataclass
class LintResult:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rules: int = 0
    knowledge: int = 0


def lint(paths: Sequence[Path] = ()) -> LintResult:
    """Lint the packs at ``paths`` (pack directories, or files inside one) on top of the built-in pack; by default the built-in pack itself."""
    builtin_root = data_dir("rules").parent
    base = RuleBook()
    result = LintResult()
    if not paths:
        _lint_pack(read_pack(builtin_root, base, name=BUILTIN_PACK), base, result, only=None)
        return result
    apply_pack(base, read_pack(builtin_root, RuleBook(), name=BUILTIN_PACK))
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file or directory")
        root, only = (path, None) if path.is_dir() else (_pack_root(path), path)
        under = RuleBook() if root.resolve() == builtin_root.resolve() else base  # the built-in pack replaces nothing
        _lint_pack(read_pack(root, under), under, result, only)
    return result


def _pack_root(file: Path) -> Path:
    for parent in file.resolve().parents:
        if parent.name in ("rules", "knowledge"):
            return parent.parent
    raise InputError(f"{file}: not inside a rule pack (expected …/rules/… or …/knowledge/…)")


def _lint_pack(contents: PackContents, base: RuleBook, result: LintResult, only: Path | None) -> None:
    problems = list(contents.problems)
    for rule in contents.rules.values():
        problems.extend(_rule_problems(rule))
        if rule.id in base.rules and (only is None or rule.path.resolve() == only.resolve()):
            result.notes.append(f"{rule.path}: replaces the {base.rules[rule.id].pack} rule {rule.id}")
    for entry_id, entry in contents.knowledge.items():
        problems.extend(_knowledge_problems(contents.root, entry_id, entry))
    if only is not None:
        problems = [p for p in problems if p.startswith((f"{only}:", f"{only.resolve()}:"))]
    result.problems.extend(problems)
    result.rules += len(contents.rules)
    result.knowledge += len(contents.knowledge)


def _rule_problems(rule: Rule) -> list[str]:
    spec, path = rule.spec, rule.path
    problems = []
    expects = {case.expect for case in spec.tests}
    for expect in ("fire", "quiet"):
        if expect not in expects:
            problems.append(f"{path}:{position_in(path, ['tests'])}: no test case with 'expect: {expect}'")
    for index, case in enumerate(spec.tests):
        for number, raw in enumerate(case.facts):
            try:
                case_fact(raw, "lint")
            except ValueError as exc:
                problems.append(f"{path}:{position_in(path, ['tests', index, 'facts', number])}: test {case.name!r}: {exc}")
    problems.extend(_unkept_api_names(rule))
    texts: list[tuple[str, Text | None]] = [("title", spec.title), ("description", spec.description)]
    if spec.then.recommend:
        texts.append(("explain", spec.explain))
    for name, text in texts:
        if text is None:
            continue
        if not text.zh:
            problems.append(f"{path}:{position_in(path, [name])}: {name} has no Chinese text (give {{en: …, zh: …}})")
        problems.extend(_todo(path, [name], text))
    return problems


def _unkept_api_names(rule: Rule) -> list[str]:
    """An ``api`` condition naming an op the readers of one of the rule's platforms never keep (``ingest.kept``):
    on that platform the condition can never hold."""
    problems = []
    for group in rule.spec.when.located_groups():
        for location, condition in group:
            if isinstance(condition, NotCondition) or condition.fact != "api" or "name" not in condition.where:
                continue
            names = [value for test, value in condition.where["name"].comparisons() if test == "eq"]
            names += [value for test, values in condition.where["name"].comparisons() if test == "in" for value in values]
            for platform in rule.spec.platforms:
                for name in (n for n in names if isinstance(n, str) and not kept_api(platform, n)):
                    problems.append(f"{rule.path}:{position_in(rule.path, [*location, 'where', 'name'])}: api name {name!r} "
                                    f"is never kept by the {platform} readers, so this condition never holds there "
                                    f"(they keep {API_OPS[platform].pattern})")
    return problems


def _knowledge_problems(root: Path, entry_id: str, entry: KnowledgeEntry) -> list[str]:
    path = next((p for p in (root / "knowledge").rglob(f"{entry_id}.yaml")), root)
    problems = []
    for name in ("title", "problem"):
        problems.extend(_todo(path, [name], getattr(entry, name)))
    for index, action in enumerate(entry.actions):
        problems.extend(_todo(path, ["actions", index], action))
    problems.extend(_todo(path, ["gain", "model"], entry.gain.model))
    for index, reference in enumerate(entry.references):
        problems.extend(_todo(path, ["references", index, "title"], Text(en=reference.title)))
    return problems


def _todo(path: Path, loc: list, text: Text) -> list[str]:
    if any(TODO in (value or "") for value in (text.en, text.zh)):
        return [f"{path}:{position_in(path, loc)}: {'.'.join(map(str, loc))} is unfinished (still says {TODO})"]
    return []
