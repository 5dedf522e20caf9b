"""Load rule packs (rules, knowledge, an optional manifest) from disk, validate them, report problems as ``file:line: message``.

A **pack** is a directory holding ``rules/**/*.yaml``, ``knowledge/**/*.yaml`` and optionally
``pack.yaml`` (``name``, ``description``, ``disable: [rule ids]``). The bundled rules are the
``built-in`` pack; packs installed as Python distributions (entry point group ``advisor.rule_packs``)
come next, then the directories given with ``--rules``. A later pack's rule or knowledge entry with an
existing id replaces the earlier one, and its ``disable`` list removes earlier rules.

YAML is read with the safe loader only (no tags that construct objects), and an installed pack is
located without importing its package, so loading a pack never runs its code. A rule's file name must
be its id; ids are unique within a pack; every knowledge id a rule recommends must exist and hold on every
platform (ascend, gpu) the rule runs on, so gating rules by platform also gates the advice.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.engine.spec import CompiledExpressions, RuleProblem, RuleSpec, check_condition, check_rule
from advisor.errors import RuleError
from advisor.ingest.limits import read_bounded
from advisor.ingest.model import FileProblem
from advisor.knowledge import KnowledgeEntry
from advisor.resources import data_dir
from advisor.yamlcache import ParsedYaml, cache_directory

if TYPE_CHECKING:
    from advisor.engine.session import RuleEngine

M = TypeVar("M", bound=BaseModel)
# libyaml's safe loader when PyYAML was built with it (5-10x faster); both construct plain data only.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SAFE_LOADER):  # type: ignore[misc, valid-type]
    """The safe loader, refusing a key given twice in one mapping (YAML loaders otherwise keep the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = getattr(key_node, "value", None)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (also on line {seen[key]})", key_node.start_mark)
            seen.setdefault(key, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep=deep)
_MAX_FILE_BYTES = 1 << 20
BUILTIN_PACK = "built-in"
ENTRY_POINT_GROUP = "advisor.rule_packs"
MANIFEST = "pack.yaml"


@dataclass(frozen=True)
class Rule:
    """A validated rule with its compiled expressions and the file it came from."""

    spec: RuleSpec
    exprs: CompiledExpressions
    path: Path
    shown_path: str
    pack: str = BUILTIN_PACK

    @property
    def id(self) -> str:
        return self.spec.id


class PackManifest(BaseModel):
    """``pack.yaml``: what the pack is called and which earlier rules it switches off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    description: str | None = None
    disable: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class PackInfo:
    """What one loaded pack contributed."""

    name: str
    root: str
    rules: list[str]
    knowledge: list[str]
    overrides: list[str]
    disabled: list[str]


@dataclass(frozen=True)
class SkippedPack:
    root: str
    problems: list[str]


@dataclass
class RuleBook:
    """The rules and knowledge entries of one diagnosis, and where they came from."""

    rules: dict[str, Rule] = field(default_factory=dict)
    knowledge: dict[str, KnowledgeEntry] = field(default_factory=dict)
    packs: list[PackInfo] = field(default_factory=list)
    skipped: list[SkippedPack] = field(default_factory=list)

    def engine(self, rules: Iterable[Rule]) -> RuleEngine:
        """The compiled engine of ``rules`` (some of this book's). One cache per process, keyed by what the rules say,
        not by the book: every book loaded with the same rules (each command of an in-process CLI, each MCP call)
        shares one engine, whose ruleset lives in durable_rules' native memory until it is evicted."""
        from advisor.engine.session import RuleEngine  # durable_rules: only where rules run

        chosen = list(rules)
        key = hashlib.sha256("\n".join(rule.spec.model_dump_json() for rule in chosen).encode()).hexdigest()
        with _ENGINES_LOCK:
            engine = _ENGINES.pop(key, None) or RuleEngine(chosen)
            _ENGINES[key] = engine  # the most recently used last
            while len(_ENGINES) > MAX_ENGINES:
                _ENGINES.popitem(last=False)[1].close()
        return engine


MAX_ENGINES = 8  # compiled rule sets kept per process (a pack set, the comparison rules, ...); the oldest is freed
_ENGINES: OrderedDict[str, RuleEngine] = OrderedDict()
_ENGINES_LOCK = threading.Lock()


@dataclass
class PackContents:
    """One pack as read from disk, with every problem found in it."""

    name: str
    root: Path
    rules: dict[str, Rule] = field(default_factory=dict)
    knowledge: dict[str, KnowledgeEntry] = field(default_factory=dict)
    disable: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def load_rulebook(packs: Sequence[Path] = (), *, installed: bool = True, skip_broken: bool = False) -> RuleBook:
    """The built-in pack, then installed packs (when ``installed``), then ``packs`` in order.

    A problem in the built-in pack always raises RuleError. A problem in another pack raises RuleError
    listing every problem, or with ``skip_broken`` the pack is left out and listed in ``book.skipped``.
    """
    book = RuleBook()
    parsed = ParsedYaml(cache_directory())
    builtin = read_pack(data_dir("rules").parent, book, name=BUILTIN_PACK, parsed=parsed)
    if builtin.problems:
        raise RuleError(_problem_list(builtin.problems))
    apply_pack(book, builtin)
    for root in [*(installed_packs() if installed else []), *packs]:
        contents = read_pack(root, book, parsed=parsed)
        if not contents.problems:
            apply_pack(book, contents)
        elif skip_broken:
            book.skipped.append(SkippedPack(root=str(root), problems=contents.problems))
        else:
            raise RuleError(_problem_list(contents.problems))
    parsed.save()
    return book


def packs_to_blame(book: RuleBook, error: BaseException) -> list[str]:
    """The roots of the packs (never the built-in one) that a failure while rules ran may come from.

    A failure that names a rule (``rule ID derived an invalid … fact``) blames that rule's pack; one that names
    no rule blames every pack but the built-in one. Empty when the built-in pack is the one to blame, or the
    book holds no other pack.
    """
    roots = {pack.name: pack.root for pack in book.packs if pack.name != BUILTIN_PACK}
    text = str(error)
    named = [rule for rule_id, rule in book.rules.items() if rule_id in text]
    if named:
        named.sort(key=lambda rule: -len(rule.id))  # the longest id: team.a.b, not team.a
        return [roots[named[0].pack]] if named[0].pack in roots else []
    return sorted(set(roots.values()))


def without_packs(book: RuleBook, roots: Sequence[str], reason: str) -> RuleBook:
    """``book`` loaded again without the packs at ``roots``, which are listed as skipped for ``reason``."""
    kept = [Path(pack.root) for pack in book.packs if pack.name != BUILTIN_PACK and pack.root not in roots]
    fresh = load_rulebook(kept, installed=False, skip_broken=True)
    fresh.skipped = [*book.skipped, *fresh.skipped, *(SkippedPack(root=root, problems=[reason]) for root in roots)]
    return fresh


def installed_packs() -> list[Path]:
    """Pack directories of installed distributions, found through their entry points without importing them.

    An entry point's value names a package, optionally followed by sub-directories
    (``team_pack`` or ``team_pack.rules_dir``); the directory it resolves to is the pack root.
    """
    roots = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        top, *subdirs = point.value.replace(":", ".").split(".")
        spec = importlib.util.find_spec(top)
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            raise RuleError(f"installed rule pack {point.name!r}: {top!r} is not an installed package directory")
        roots.append(Path(locations[0]).joinpath(*subdirs))
    return roots


def read_pack(root: Path, book: RuleBook, name: str | None = None, parsed: ParsedYaml | None = None) -> PackContents:
    """Read and validate one pack against what ``book`` already holds (knowledge ids, rule ids to disable).

    ``parsed`` caches the parsed YAML between runs (the files are parsed afresh without it).
    """
    parsed = parsed or ParsedYaml(None)
    if not root.is_dir():
        return PackContents(name=name or root.name, root=root, problems=[f"{root}: not a directory"])
    problems: list[str] = []
    manifest = _load_model(root / MANIFEST, PackManifest, problems, parsed) if (root / MANIFEST).is_file() else None
    contents = PackContents(name=name or (manifest and manifest.name) or root.name, root=root, problems=problems)
    contents.disable = list(manifest.disable) if manifest else []
    rules_dir, knowledge_dir = root / "rules", root / "knowledge"
    if not (rules_dir.is_dir() or knowledge_dir.is_dir() or (root / MANIFEST).is_file()):
        contents.problems.append(f"{root}: not a rule pack (no rules/ or knowledge/ directory, no {MANIFEST})")
        return contents
    for path in _yaml_files(knowledge_dir):
        entry = _load_model(path, KnowledgeEntry, contents.problems, parsed)
        if entry is None:
            continue
        if entry.id != path.stem:
            contents.problems.append(f"{path}:1: the file name must be the knowledge id ({entry.id}.yaml)")
        elif entry.id in contents.knowledge:
            contents.problems.append(f"{path}:1: duplicate knowledge id {entry.id!r}")
        else:
            contents.knowledge[entry.id] = entry
        presupposition_problems = _presupposition_problems(entry)
        if presupposition_problems:
            node = _compose(path)
            contents.problems.extend(f"{path}:{_line_of(node, loc)}: {text}" for loc, text in presupposition_problems)
    for path in _yaml_files(rules_dir):
        rule = _load_rule(root, path, contents.name, contents.problems, parsed)
        if rule is None:
            continue
        missing = [k for k in rule.spec.then.recommend if k not in contents.knowledge and k not in book.knowledge]
        narrower = [k for k in rule.spec.then.recommend if k not in missing
                    and set(rule.spec.platforms) - set((contents.knowledge.get(k) or book.knowledge[k]).platforms)]
        if missing:
            contents.problems.append(f"{path}:1: recommends unknown knowledge id(s) {', '.join(missing)}")
        elif narrower:
            contents.problems.append(f"{path}:1: runs on platforms {', '.join(rule.spec.platforms)} but recommends "
                                     f"{', '.join(narrower)}, which does not hold on all of them (its 'platforms')")
        elif rule.id in contents.rules:
            contents.problems.append(f"{path}:1: duplicate rule id {rule.id!r} (also {contents.rules[rule.id].path})")
        else:
            contents.rules[rule.id] = rule
    unknown = [i for i in contents.disable if i not in book.rules]
    if unknown:
        contents.problems.append(f"{root / MANIFEST}:1: disables unknown rule id(s) {', '.join(unknown)}")
    return contents


def apply_pack(book: RuleBook, contents: PackContents) -> None:
    """Add a valid pack to ``book``: its entries replace same-id ones, its ``disable`` list removes rules."""
    overrides = sorted((set(contents.rules) & set(book.rules)) | (set(contents.knowledge) & set(book.knowledge)))
    for rule_id in contents.disable:
        book.rules.pop(rule_id, None)
    book.knowledge.update(contents.knowledge)
    book.rules.update(contents.rules)
    book.packs.append(
        PackInfo(
            name=contents.name,
            root=str(contents.root),
            rules=sorted(contents.rules),
            knowledge=sorted(contents.knowledge),
            overrides=overrides,
            disabled=sorted(contents.disable),
        )
    )


def _presupposition_problems(entry: KnowledgeEntry) -> list[tuple[tuple, str]]:
    """(location, problem) of each presupposition of an entry and of its actions whose condition the catalogue
    rejects."""
    located = [(("presupposes", i), p) for i, p in enumerate(entry.presupposes)]
    located += [(("actions", a, "presupposes", i), p) for a, action in enumerate(entry.actions)
                for i, p in enumerate(action.presupposes)]
    return [((*loc, "contradicted_by"), text) for loc, presupposition in located
            for text in check_condition(presupposition.contradicted_by, f"{'.'.join(map(str, loc))}.contradicted_by")]


def _problem_list(problems: Iterable[str]) -> str:
    return "invalid rule or knowledge files:\n" + "\n".join(f"  {p}" for p in problems)


def _load_rule(root: Path, path: Path, pack: str, problems: list[str], parsed: ParsedYaml) -> Rule | None:
    spec = _load_model(path, RuleSpec, problems, parsed)
    if spec is None:
        return None
    if spec.id != path.stem:
        problems.append(f"{path}:1: the file name must be the rule id ({spec.id}.yaml)")
        return None
    rule_problems, exprs = check_rule(spec)
    if spec.then.assert_ is not None:
        rule_problems += [RuleProblem(f"then.assert.{name}: {value!r} is not a finite number", ("then", "assert", "values", name))
                          for name, value in spec.then.assert_.values.items()
                          if isinstance(value, float) and not math.isfinite(value)]
    node = _compose(path) if rule_problems else None
    for problem in rule_problems:
        problems.append(f"{path}:{_line_of(node, problem.loc)}: {problem.text}")
    if rule_problems or exprs is None:
        return None
    return Rule(spec=spec, exprs=exprs, path=path, shown_path=path.relative_to(root).as_posix(), pack=pack)


def _load_model(path: Path, model: type[M], problems: list[str], parsed: ParsedYaml) -> M | None:
    try:
        text = read_bounded(path, _MAX_FILE_BYTES).decode("utf-8")
    except FileProblem as exc:
        reason = str(exc) if str(exc).startswith("is not a regular file") else "file is larger than 1 MiB"
        problems.append(f"{path}:1: {reason}")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}:1: cannot be read ({exc})")
        return None
    try:
        data = parsed.load(text, _parse)
        try:
            return _validated(data, model)
        except (ValidationError, _NotAMapping):
            reparsed = parsed.reparse(text, _parse)  # a cached document that does not fit: parse the file after all
            if reparsed is not None:
                data = reparsed
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problems.append(f"{path}:{line}: invalid YAML ({getattr(exc, 'problem', None) or exc})")
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


class _NotAMapping(ValueError):
    pass


def _validated(data: Any, model: type[M]) -> M:
    if not isinstance(data, dict):
        raise _NotAMapping
    return model.model_validate(data)


def _parse(text: str) -> Any:
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a safe loader)


def _yaml_files(directory: Path) -> list[Path]:
    """Every YAML file under ``directory`` (none if it does not exist), in a stable order."""
    return sorted(p for p in directory.rglob("*.yaml") if not p.is_dir()) if directory.is_dir() else []


def _compose(path: Path) -> yaml.Node | None:
    try:
        return yaml.compose(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        return None


def section_text(path: Path, key: str) -> str:
    """The top-level ``key:`` section of a YAML file exactly as written (comments included)."""
    node = _compose(path)
    text = path.read_text(encoding="utf-8")
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if getattr(key_node, "value", None) == key:
                return text[key_node.start_mark.index : value_node.end_mark.index].rstrip()
    return ""


def line_in(path: Path, loc: Sequence[Any]) -> int:
    """The 1-based line of the YAML node at ``loc`` (keys and list indexes) in ``path``; 1 when not found."""
    return _line_of(_compose(path), loc)


def _line_of(node: yaml.Node | None, loc: Sequence[Any]) -> int:
    """The 1-based line of the deepest YAML node along a location (a rule problem's, or a pydantic error's)."""
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
