"""Load rule packs (rules, knowledge, an optional manifest) from disk, validate them, report problems as ``file:line: message``.

A **pack** is a directory holding ``rules/**/*.yaml``, ``knowledge/**/*.yaml`` and optionally
``pack.yaml`` (``name``, ``description``, ``version``, ``requires_advisor``, ``disable: [rule ids]``). The bundled
rules are the ``built-in`` pack; packs installed as Python distributions (entry point group ``advisor.rule_packs``)
come next, then the directories given with ``--rules``. A later pack's rule or knowledge entry with an
existing id replaces the earlier one, and its ``disable`` list removes earlier rules.

A problem is reported as ``file:line:column: message``. A broken rule or knowledge file is one problem of its pack:
loading with ``skip_broken`` leaves that file out (``book.skipped_files``) and keeps the pack's other files; a problem
of the pack as a whole (its ``pack.yaml``, an advisor older than it ``requires_advisor``) leaves the pack out.

YAML is read with the safe loader only (no tags that construct objects), and an installed pack is
located without importing its package, so loading a pack never runs its code. A rule's file name must
be its id; ids are unique within a pack; every knowledge id a rule recommends must exist and hold on every
platform (ascend, gpu) the rule runs on, so gating rules by platform also gates the advice.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from advisor.engine.spec import CompiledExpressions, RuleProblem, RuleSpec, check_condition, check_rule, did_you_mean
from advisor.errors import RuleError
from advisor.ingest.limits import read_bounded
from advisor.ingest.model import FileProblem
from advisor.knowledge import KnowledgeEntry
from advisor.resources import data_dir
from advisor.validation import schema_problems
from advisor.version import VERSION
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


# A pack's version: numbers and dots, optionally a pre-release (a, b, rc), .postN and .devN (a subset of PEP 440, so
# `advisor rules package` can make a wheel of it).
_VERSION = re.compile(r"(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?")
_REQUIREMENT = re.compile(r"\s*(>=|<=|==|!=|>|<)\s*(\S+?)\s*")
_COMPARE = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
            ">": lambda a, b: a > b, "<": lambda a, b: a < b}


def version_key(text: str) -> tuple:
    """An orderable key of a version ``_VERSION`` matches: 1.2 == 1.2.0, 1.3.0rc1 < 1.3.0 < 1.3.0.post1."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a version")
    release, pre, pre_n, post, dev = match.groups()
    numbers = [int(n) for n in release.split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    stage = {"a": 0, "b": 1, "rc": 2, None: 3}[pre] if pre or post or dev is None else -1  # 1.0.dev1 < 1.0a1
    return (tuple(numbers), stage, int(pre_n or 0), int(post) if post is not None else -1,
            int(dev) if dev is not None else 1 << 62)


def requirement_clauses(text: str) -> list[tuple[str, str]]:
    """``>=0.1, <0.3`` as (operator, version) pairs; ValueError when it is no such list."""
    clauses = []
    for part in text.split(","):
        match = _REQUIREMENT.fullmatch(part)
        if match is None or _VERSION.fullmatch(match.group(2)) is None:
            raise ValueError(f"{text!r} is not a version requirement: write one or more of >=, >, <=, <, ==, != and a "
                             "version, separated by commas (e.g. '>=0.1' or '>=0.1, <0.3')")
        clauses.append((match.group(1), match.group(2)))
    return clauses


def satisfies(version: str, requirement: str) -> bool:
    """Whether ``version`` meets every clause of ``requirement``."""
    return all(_COMPARE[op](version_key(version), version_key(bound)) for op, bound in requirement_clauses(requirement))


class PackManifest(BaseModel):
    """``pack.yaml``: what the pack is called, its version, the advisor it needs and which earlier rules it switches
    off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    description: str | None = None
    version: str | None = None
    requires_advisor: str | None = None
    disable: list[str] = Field(default_factory=list)

    @field_validator("version", mode="before")
    @classmethod
    def _a_version(cls, value: object) -> object:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"write the version as text in quotes (version: \"{value}\"): YAML reads {value} as a "
                             "number, and 1.10 as 1.1")
        if isinstance(value, str) and _VERSION.fullmatch(value) is None:
            raise ValueError(f"{value!r} is not a version: numbers and dots, e.g. 1.2.0 (also 1.3.0rc1, 1.2.0.post1)")
        return value

    @field_validator("requires_advisor", mode="before")
    @classmethod
    def _a_requirement(cls, value: object) -> object:
        if isinstance(value, str):
            requirement_clauses(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"write the requirement as text in quotes (requires_advisor: \">={value}\")")
        return value


@dataclass(frozen=True)
class PackInfo:
    """What one loaded pack contributed."""

    name: str
    root: str
    rules: list[str]
    knowledge: list[str]
    overrides: list[str]
    disabled: list[str]
    version: str | None = None


@dataclass(frozen=True)
class SkippedPack:
    """A pack left out of a diagnosis, and why."""

    root: str
    problems: list[str]


@dataclass(frozen=True)
class SkippedFile:
    """A rule or knowledge file left out of a pack that was loaded without it, and why."""

    pack: str
    file: str
    problems: list[str]


@dataclass
class RuleBook:
    """The rules and knowledge entries of one diagnosis, and where they came from."""

    rules: dict[str, Rule] = field(default_factory=dict)
    knowledge: dict[str, KnowledgeEntry] = field(default_factory=dict)
    packs: list[PackInfo] = field(default_factory=list)
    skipped: list[SkippedPack] = field(default_factory=list)
    skipped_files: list[SkippedFile] = field(default_factory=list)

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
    problems: list[str] = field(default_factory=list)  # every problem: the pack's own and its files'
    pack_problems: list[str] = field(default_factory=list)  # those of the pack as a whole: it cannot be loaded
    broken_files: dict[Path, list[str]] = field(default_factory=dict)  # files left out, with their problems
    manifest: PackManifest | None = None

    @property
    def version(self) -> str | None:
        return self.manifest.version if self.manifest is not None else None


def load_rulebook(packs: Sequence[Path] = (), *, installed: bool = True, skip_broken: bool = False) -> RuleBook:
    """The built-in pack, then installed packs (when ``installed``), then ``packs`` in order.

    A problem in the built-in pack always raises RuleError. A problem in another pack raises RuleError
    listing every problem; with ``skip_broken`` a broken rule or knowledge file is left out of its pack (listed in
    ``book.skipped_files``) and the rest of the pack loads, and a pack with a problem of its own (its ``pack.yaml``)
    is left out and listed in ``book.skipped``.
    """
    book = RuleBook()
    parsed = ParsedYaml(cache_directory())
    builtin = read_pack(data_dir("rules").parent, book, name=BUILTIN_PACK, parsed=parsed)
    if builtin.problems:
        raise RuleError(_problem_list(builtin.problems))
    apply_pack(book, builtin)
    for root in [*(installed_packs() if installed else []), *packs]:
        contents = read_pack(root, book, parsed=parsed)
        if contents.problems and not skip_broken:
            raise RuleError(_problem_list(contents.problems))
        if contents.pack_problems:
            book.skipped.append(SkippedPack(root=str(root), problems=contents.problems))
            continue
        apply_pack(book, contents)
        book.skipped_files += [SkippedFile(pack=contents.name, file=str(path), problems=problems)
                               for path, problems in contents.broken_files.items()]
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

    A file with a problem is not in ``rules``/``knowledge`` and its problems are in ``broken_files``; a problem of the
    pack as a whole is in ``pack_problems``; ``problems`` holds both. ``parsed`` caches the parsed YAML between runs
    (the files are parsed afresh without it).
    """
    parsed = parsed or ParsedYaml(None)
    if not root.is_dir():
        problem = f"{root}: not a directory"
        return PackContents(name=name or root.name, root=root, problems=[problem], pack_problems=[problem])
    pack_problems: list[str] = []
    manifest_path = root / MANIFEST
    manifest = _load_model(manifest_path, PackManifest, pack_problems, parsed) if manifest_path.is_file() else None
    contents = PackContents(name=name or (manifest and manifest.name) or root.name, root=root,
                            pack_problems=pack_problems, manifest=manifest)
    contents.disable = list(manifest.disable) if manifest else []
    rules_dir, knowledge_dir = root / "rules", root / "knowledge"
    if not (rules_dir.is_dir() or knowledge_dir.is_dir() or manifest_path.is_file()):
        pack_problems.append(f"{root}: not a rule pack (no rules/ or knowledge/ directory, no {MANIFEST})")
    if manifest is not None and manifest.requires_advisor and not satisfies(VERSION, manifest.requires_advisor):
        shown = f"{contents.name!r}" + (f" {manifest.version}" if manifest.version else "")
        pack_problems.append(f"{manifest_path}:{_at(_compose(manifest_path), ['requires_advisor'])}: rule pack {shown} "
                             f"requires advisor {manifest.requires_advisor}, but this is advisor {VERSION}: upgrade "
                             f"advisor, or use a version of the pack made for advisor {VERSION}")
    if pack_problems:
        contents.problems = list(pack_problems)
        return contents
    broken_knowledge: set[str] = set()
    for path in _yaml_files(knowledge_dir):
        problems: list[str] = []
        entry = _load_model(path, KnowledgeEntry, problems, parsed)
        if entry is not None:
            if entry.id != path.stem:
                problems.append(f"{path}:{_at(_compose(path), ['id'])}: the file name must be the knowledge id "
                                f"({entry.id}.yaml)")
            elif entry.id in contents.knowledge:
                problems.append(f"{path}:{_at(_compose(path), ['id'])}: duplicate knowledge id {entry.id!r} (also "
                                f"{_knowledge_file(knowledge_dir, entry.id)})")
            presupposition_problems = _presupposition_problems(entry)
            if presupposition_problems:
                node = _compose(path)
                problems.extend(f"{path}:{_at(node, loc)}: {text}" for loc, text in presupposition_problems)
            if not problems:
                contents.knowledge[entry.id] = entry
        if problems:
            contents.broken_files[path] = problems
            broken_knowledge.add(path.stem)
    for path in _yaml_files(rules_dir):
        problems = []
        rule = _load_rule(root, path, contents.name, problems, parsed)
        if rule is not None:
            problems += _recommend_problems(rule, contents, book, broken_knowledge)
            if rule.id in contents.rules:
                problems.append(f"{path}:{_at(_compose(path), ['id'])}: duplicate rule id {rule.id!r} (also "
                                f"{contents.rules[rule.id].path})")
            if not problems:
                contents.rules[rule.id] = rule
        if problems:
            contents.broken_files[path] = problems
    unknown = [i for i in contents.disable if i not in book.rules]
    if unknown:
        hints = "".join(did_you_mean(i, book.rules) for i in unknown[:1]) if len(unknown) == 1 else ""
        pack_problems.append(f"{manifest_path}:{_at(_compose(manifest_path), ['disable'])}: disables unknown rule id(s) "
                             f"{', '.join(unknown)}{hints}")
    contents.problems = [*pack_problems, *(p for problems in contents.broken_files.values() for p in problems)]
    return contents


def _recommend_problems(rule: Rule, contents: PackContents, book: RuleBook, broken: set[str]) -> list[str]:
    """A rule's recommendations that name no knowledge entry (a did-you-mean, or the entry's own file is broken), or
    one that does not hold on every platform the rule runs on."""
    path, node = rule.path, None
    problems = []
    for index, knowledge_id in enumerate(rule.spec.then.recommend):
        entry = contents.knowledge.get(knowledge_id) or book.knowledge.get(knowledge_id)
        if entry is not None and not set(rule.spec.platforms) - set(entry.platforms):
            continue
        node = node or _compose(path)
        at = _at(node, ["then", "recommend", index])
        if entry is None:
            why = (" (its file in this pack has problems of its own, so it was not loaded)" if knowledge_id in broken
                   else did_you_mean(knowledge_id, [*contents.knowledge, *book.knowledge]))
            problems.append(f"{path}:{at}: then.recommend: unknown knowledge id {knowledge_id!r}{why}")
        else:
            problems.append(f"{path}:{at}: runs on platforms {', '.join(rule.spec.platforms)} but recommends "
                            f"{knowledge_id}, which does not hold on all of them (its 'platforms')")
    return problems


def _knowledge_file(knowledge_dir: Path, entry_id: str) -> Path:
    return next(iter(sorted(knowledge_dir.rglob(f"{entry_id}.yaml"))), knowledge_dir)


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
            version=contents.version,
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
        problems.append(f"{path}:{_at(_compose(path), ['id'])}: the file name must be the rule id ({spec.id}.yaml)")
        return None
    rule_problems, exprs = check_rule(spec)
    if spec.then.assert_ is not None:
        rule_problems += [RuleProblem(f"then.assert.{name}: {value!r} is not a finite number", ("then", "assert", "values", name))
                          for name, value in spec.then.assert_.values.items()
                          if isinstance(value, float) and not math.isfinite(value)]
    node = _compose(path) if rule_problems else None
    for problem in rule_problems:
        problems.append(f"{path}:{_at(node, problem.loc)}: {problem.text}")
    if rule_problems or exprs is None:
        return None
    return Rule(spec=spec, exprs=exprs, path=path, shown_path=path.relative_to(root).as_posix(), pack=pack)


def _load_model(path: Path, model: type[M], problems: list[str], parsed: ParsedYaml) -> M | None:
    try:
        text = read_bounded(path, _MAX_FILE_BYTES).decode("utf-8")
    except FileProblem as exc:
        reason = str(exc) if str(exc).startswith("is not a regular file") else "file is larger than 1 MiB"
        problems.append(f"{path}:1:1: {reason}")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}:1:1: cannot be read ({exc})")
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
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
        problems.append(f"{path}:{where}: invalid YAML ({getattr(exc, 'problem', None) or exc})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path}:1:1: expected a mapping at the top level")
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        node = _compose(path)
        for problem in schema_problems(model, data, exc.errors()):
            problems.append(f"{path}:{_at(node, problem.path)}: {problem.text}")
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


def position_in(path: Path, loc: Sequence[Any]) -> str:
    """``LINE:COLUMN`` (1-based) of the YAML value at ``loc`` (keys and list indexes) in ``path``: where its text
    starts (the deepest node found when the rest of ``loc`` is not in the file; 1:1 when none is)."""
    node = _compose(path)
    mark = node.start_mark if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
            if child is None:
                continue
            node = child
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            continue
        mark = node.start_mark
    return f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"


def _at(node: yaml.Node | None, loc: Sequence[Any]) -> str:
    """``LINE:COLUMN`` (1-based) of what ``loc`` (keys and list indexes) leads to in a composed YAML document: a
    mapping's key where the last step is a key, the item where it is a list index; the deepest node found when the
    rest of ``loc`` is not in the document (pydantic's union member names in it are skipped)."""
    mark = node.start_mark if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == key), None)
            if pair is None:
                continue
            mark, node = pair[0].start_mark, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            mark = node.start_mark
    return f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
