"""Load rule and knowledge files from disk, validate them, and report problems as ``file:line: message``.

YAML is read with the safe loader only (no tags that construct objects). A rule's file name must be
its id; ids are unique; every knowledge id a rule recommends must exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from advisor.engine.spec import CompiledExpressions, RuleSpec, check_rule
from advisor.errors import RuleError
from advisor.knowledge import KnowledgeEntry
from advisor.resources import data_dir

M = TypeVar("M", bound=BaseModel)
# libyaml's safe loader when PyYAML was built with it (5-10x faster); both construct plain data only.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class Rule:
    """A validated rule with its compiled expressions and the file it came from."""

    spec: RuleSpec
    exprs: CompiledExpressions
    path: Path
    shown_path: str

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass
class RuleBook:
    """The rules and knowledge entries of one diagnosis."""

    rules: dict[str, Rule] = field(default_factory=dict)
    knowledge: dict[str, KnowledgeEntry] = field(default_factory=dict)


def load_rulebook(rule_dirs: Sequence[Path] | None = None, knowledge_dirs: Sequence[Path] | None = None) -> RuleBook:
    """Load rules and knowledge (the bundled ones by default); raise RuleError listing every problem."""
    problems: list[str] = []
    book = RuleBook()
    for _root, path in _yaml_files(knowledge_dirs or [data_dir("knowledge")]):
        entry = _load_model(path, KnowledgeEntry, problems)
        if entry is None:
            continue
        if entry.id != path.stem:
            problems.append(f"{path}:1: the file name must be the knowledge id ({entry.id}.yaml)")
        elif entry.id in book.knowledge:
            problems.append(f"{path}:1: duplicate knowledge id {entry.id!r}")
        else:
            book.knowledge[entry.id] = entry
    for root, path in _yaml_files(rule_dirs or [data_dir("rules")]):
        rule = _load_rule(root, path, problems)
        if rule is None:
            continue
        missing = [k for k in rule.spec.then.recommend if k not in book.knowledge]
        if missing:
            problems.append(f"{path}:1: recommends unknown knowledge id(s) {', '.join(missing)}")
        elif rule.id in book.rules:
            problems.append(f"{path}:1: duplicate rule id {rule.id!r} (also {book.rules[rule.id].path})")
        else:
            book.rules[rule.id] = rule
    if problems:
        raise RuleError("invalid rule or knowledge files:\n" + "\n".join(f"  {p}" for p in problems))
    return book


def _load_rule(root: Path, path: Path, problems: list[str]) -> Rule | None:
    spec = _load_model(path, RuleSpec, problems)
    if spec is None:
        return None
    if spec.id != path.stem:
        problems.append(f"{path}:1: the file name must be the rule id ({spec.id}.yaml)")
        return None
    rule_problems, exprs = check_rule(spec)
    node = _compose(path) if rule_problems else None
    for problem in rule_problems:
        problems.append(f"{path}:{_line_for_problem(node, problem)}: {problem}")
    if rule_problems or exprs is None:
        return None
    return Rule(spec=spec, exprs=exprs, path=path, shown_path=f"{root.name}/{path.relative_to(root).as_posix()}")


def _load_model(path: Path, model: type[M], problems: list[str]) -> M | None:
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            problems.append(f"{path}:1: file is larger than 1 MiB")
            return None
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problems.append(f"{path}:{line}: invalid YAML ({getattr(exc, 'problem', None) or exc})")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}:1: cannot be read ({exc})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path}:1: expected a mapping at the top level")
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        node = _compose(path)
        for error in exc.errors():
            location = ".".join(str(p) for p in error["loc"])
            problems.append(f"{path}:{_line_of(node, error['loc'])}: {location}: {error['msg']}")
        return None


def _yaml_files(dirs: Iterable[Path]) -> list[tuple[Path, Path]]:
    """(root, file) for every YAML file under each directory, in a stable order."""
    files: list[tuple[Path, Path]] = []
    for directory in dirs:
        if not directory.is_dir():
            raise RuleError(f"{directory}: not a directory of rule or knowledge files")
        files.extend((directory, p) for p in sorted(directory.rglob("*.yaml")) if p.is_file())
    return files


def _compose(path: Path) -> yaml.Node | None:
    try:
        return yaml.compose(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        return None


def _line_of(node: yaml.Node | None, loc: Sequence[Any]) -> int:
    """The 1-based line of the deepest YAML node along a pydantic error location."""
    line = node.start_mark.line + 1 if node is not None else 1
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
            if child is None:
                continue  # pydantic inserts union member names into locations; skip them
            node = child
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            continue
        line = node.start_mark.line + 1
    return line


def _line_for_problem(node: yaml.Node | None, problem: str) -> int:
    """Best line for a semantic problem: the section its prefix names (``when``, ``then.gain_us`` …)."""
    prefix = problem.split(":", 1)[0].split(" ", 1)[0]
    return _line_of(node, [part for part in prefix.split(".") if part])
