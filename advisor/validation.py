"""The schema errors of rule, knowledge and ``pack.yaml`` files in advisor's own words.

pydantic reports a mistake in a rule file as ``when.all.1.FactCondition.where.ops_per_step.ge: Extra inputs are not
permitted``, followed by the errors of every other shape the item could have had (``NotCondition.not: Field
required`` …). Here each error is followed down the models along its location: the union members the data was not
meant as are dropped (the member whose keys the data uses is kept; a value that fits no member of a union of plain
types gives one "expected …" line), and what is left is said with the field, the valid keys, operators or values,
and the closest one to what was written (``unknown operator 'ge' — did you mean 'gte'? (operators: eq, …)``). The
location comes back as keys and list indexes of the YAML document, so the loader can give line and column.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from advisor.engine.spec import COMPARISONS, OPERATOR_SYNONYMS, Predicate, did_you_mean
from advisor.text import Text

# What a member of a union accepts, in words (merged when a value fits none of them).
_KINDS = {"Ref": "{ref: alias.field}", "bool": "true or false", "int": "a number", "float": "a number", "str": "text",
          "FactCondition": "a fact condition ({fact: …, where: …})", "NotCondition": "{not: {fact: …}}",
          "AllGroup": "{all: [fact conditions]}"}
_TYPE_ERRORS = {"string_type": "text", "float_type": "a number", "float_parsing": "a number", "int_type": "a whole number",
                "int_parsing": "a whole number", "int_from_float": "a whole number", "bool_type": "true or false",
                "bool_parsing": "true or false", "list_type": "a list", "dict_type": "a mapping",
                "model_type": "a mapping", "model_attributes_type": "a mapping"}
_BOUNDS = {"greater_than_equal": ("ge", "≥"), "greater_than": ("gt", ">"), "less_than_equal": ("le", "≤"),
           "less_than": ("lt", "<")}


@dataclass(frozen=True)
class SchemaProblem:
    """One mistake: its message, and where it is (keys and list indexes); ``at_key``: at the last key itself (an
    unknown key), not at its value."""

    text: str
    path: tuple[str | int, ...]
    at_key: bool = False


@dataclass
class _Step:
    """An error followed down the models: where in the data it is, the unions it went through, what it ended in."""

    error: dict
    path: list[str | int]
    unions: list[tuple[tuple, str, Any, dict[str, Any]]]  # (data path, member tag, data there, members by tag)
    owner: type[BaseModel] | None  # the model whose key the last location element is
    annotation: Any
    data: Any
    key: Any = None  # the last key looked up in a model
    virtual: bool = False  # that key is no key of the document (a bare value read as {eq: value}, a text as {en: …})


def schema_problems(model: type[BaseModel], data: Any, errors: list[dict]) -> list[SchemaProblem]:
    """``errors`` (``ValidationError.errors()`` of validating ``data`` as ``model``) in advisor's words, the errors
    of union members the data was not meant as left out, each once."""
    steps = [_follow(model, data, error) for error in errors]
    choices = _choices(steps)
    problems: list[SchemaProblem] = []
    for step in steps:
        problem = None
        for point, tag, _, _ in step.unions:
            choice = choices[point]
            if choice is None:  # a value that fits no member of a union of plain types: one line for the union
                problem = _merged(point, steps, data)
                break
            if choice != tag:
                break
        else:
            problem = _problem(step, data)
        if problem is not None and problem not in problems:
            problems.append(problem)
    return problems


def _follow(model: type[BaseModel], data: Any, error: dict) -> _Step:
    step = _Step(error=error, path=[], unions=[], owner=None, annotation=model, data=data)
    for element in error["loc"]:
        annotation = _unwrap(step.annotation)
        members = _members(annotation)
        if members:
            step.unions.append((tuple(step.path), str(element), step.data, members))
            step.annotation = members.get(str(element))
            continue
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            data_here = step.data
            if annotation is Predicate and (not isinstance(data_here, dict) or "ref" in data_here):
                data_here, step.virtual = {"eq": data_here}, True
            elif issubclass(annotation, Text) and isinstance(data_here, str):
                data_here, step.virtual = {"en": data_here}, True
            else:
                step.virtual = False
            step.owner = annotation
            name, info = _field(annotation, element)
            step.key = name
            step.annotation = info.annotation if info is not None else None
            if not step.virtual:
                step.path.append(name)
            step.data = data_here.get(name) if isinstance(data_here, dict) else None
            continue
        step.virtual = False
        origin = get_origin(annotation)
        if origin is list and isinstance(element, int):
            step.annotation = get_args(annotation)[0]
            step.data = step.data[element] if isinstance(step.data, list) and element < len(step.data) else None
        elif origin is dict:
            step.annotation = get_args(annotation)[1]
            step.data = step.data.get(element) if isinstance(step.data, dict) else None
        else:
            step.annotation = None
            step.data = None
        step.path.append(element)
    return step


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return annotation


def _members(annotation: Any) -> dict[str, Any]:
    """The members of a union by the tag pydantic gives them in an error's location ({} for no union)."""
    if get_origin(annotation) not in (Union, types.UnionType):
        return {}
    return {_tag(a): a for a in get_args(annotation) if a is not type(None)}


def _tag(annotation: Any) -> str:
    annotation = _unwrap(annotation)
    if get_origin(annotation) is Literal:
        return "literal[" + ",".join(repr(a) for a in get_args(annotation)) + "]"
    return getattr(annotation, "__name__", str(annotation))


def _field(model: type[BaseModel], element: Any) -> tuple[Any, Any]:
    """The key a location element names in the document (a field's alias, as YAML writes it) and the field."""
    for name, info in model.model_fields.items():
        if element in (name, info.alias):
            return info.alias or name, info
    return element, None


def _keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _choices(steps: list[_Step]) -> dict[tuple, str | None]:
    """For each union the errors went through: the member the data was meant as (the model whose keys it uses most,
    then the one validation got furthest in), or None when the data is no mapping a model member could take."""
    reached: dict[tuple, dict[str, list[_Step]]] = {}
    at: dict[tuple, tuple[Any, dict[str, Any]]] = {}
    for step in steps:
        for point, tag, data, members in step.unions:
            reached.setdefault(point, {}).setdefault(tag, []).append(step)
            at[point] = (data, members)
    choices: dict[tuple, str | None] = {}
    for point, by_tag in reached.items():
        data, members = at[point]
        models = [tag for tag in by_tag if _is_model(members.get(tag))]
        if isinstance(data, dict) and models:
            choices[point] = max(models, key=lambda tag: (len(set(data) & set(_keys(members[tag]))),
                                                          max(len(s.error["loc"]) for s in by_tag[tag]),
                                                          -len(by_tag[tag])))
        else:
            choices[point] = None
    return choices


def _merged(point: tuple, steps: list[_Step], document: Any) -> SchemaProblem:
    data, members = next((d, m) for step in steps for p, _, d, m in step.unions if p == point)
    kinds = list(dict.fromkeys(_KINDS.get(tag, "a mapping" if _is_model(member) else tag) for tag, member in members.items()))
    where = _where(point, document)
    text = f"expected {', '.join(kinds[:-1])} or {kinds[-1]}" if len(kinds) > 1 else f"expected {kinds[0]}"
    text += f", got {_describe(data)}"
    if isinstance(data, list) and "Ref" in members:  # a comparison's operand
        text += " (for one of several values: {in: [a, b]})"
    return SchemaProblem(f"{where}: {text}" if where else text, point)


def _problem(step: _Step, document: Any) -> SchemaProblem:
    error, path, kind = step.error, tuple(step.path), step.error["type"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden" and path:
        key, where = path[-1], _where(path[:-1], document)
        if step.owner is Predicate:
            text = (f"unknown operator {key!r}{did_you_mean(key, COMPARISONS, OPERATOR_SYNONYMS)} "
                    f"(operators: {', '.join(COMPARISONS)})")
        else:
            keys = _keys(step.owner) if step.owner is not None else []
            text = f"unknown key {key!r}{did_you_mean(key, keys)} (keys: {', '.join(keys)})"
        return SchemaProblem(f"{where}: {text}" if where else text, path, at_key=True)
    if kind == "missing" and step.key is not None:
        parent = path if step.virtual else path[:-1]
        key, where = step.key, _where(parent, document)
        text = f"{key!r} is required"
        if step.owner is not None and issubclass(step.owner, Text) and key == "zh":
            text += " (every text here is given in English and Chinese: {en: …, zh: …})"
        return SchemaProblem(f"{where}: {text}" if where else text, parent)
    where = _where(path, document)
    if kind == "literal_error":
        values = _literal_values(step.annotation)
        text = f"{step.data!r} is not one of {', '.join(map(str, values))}{did_you_mean(step.data, map(str, values))}"
        if path[:1] == ("platforms",):
            text += " (a rule or entry for both platforms lists both: platforms: [ascend, gpu])"
    elif kind in _TYPE_ERRORS:
        text = f"expected {_TYPE_ERRORS[kind]}, got {_describe(step.data)}"
    elif kind in ("too_short", "string_too_short"):
        text = "must not be empty" if ctx.get("min_length") == 1 else f"needs at least {ctx.get('min_length')} items"
    elif kind in _BOUNDS:
        bound, sign = _BOUNDS[kind]
        text = f"must be {sign} {ctx.get(bound)}, not {step.data!r}"
    elif kind == "value_error":
        text = error["msg"].removeprefix("Value error, ")
    else:
        message = error["msg"]
        text = message[:1].lower() + message[1:]
    return SchemaProblem(f"{where}: {text}" if where else text, path)


def _literal_values(annotation: Any) -> list[Any]:
    annotation = _unwrap(annotation)
    if get_origin(annotation) is not Literal:
        return []
    values: list[Any] = []
    for value in get_args(annotation):
        values += _literal_values(value) if get_origin(value) is Literal else [value]
    return values


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, list):
        return f"a list ({_short(value)})"
    if isinstance(value, dict):
        return f"a mapping ({_short(value)})"
    return type(value).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _where(path: tuple, document: Any) -> str:
    """A location in words: ``when: ALIAS.FIELD`` inside a rule's conditions (as the catalogue checks say it),
    else keys joined by dots and list indexes in brackets (``then.charged_to``, ``platforms[0]``)."""
    condition, rest = _condition(path, document)
    if condition is not None:
        alias = condition.get("as") or condition.get("fact")
        if isinstance(alias, str):
            if rest[:1] == ("where",) and len(rest) >= 2:
                return f"when: {alias}.{rest[1]}" + _dotted(rest[2:], leading=True)
            return f"when: {alias}" + _dotted(rest, leading=True)
    return _dotted(path)


def _condition(path: tuple, document: Any) -> tuple[dict | None, tuple]:
    """The fact condition a location inside ``when`` is in, and the rest of the location below it."""
    if len(path) < 3 or path[0] != "when" or path[1] not in ("all", "any") or not isinstance(path[2], int):
        return None, path
    end = 5 if path[1] == "any" and len(path) >= 5 and path[3] == "all" and isinstance(path[4], int) else 3
    node: Any = document
    for key in path[:end]:
        node = node.get(key) if isinstance(node, dict) else node[key] if isinstance(node, list) and isinstance(key, int) \
            and key < len(node) else None
    if isinstance(node, dict) and path[end:end + 1] == ("not",) and isinstance(node.get("not"), dict):
        node, end = node["not"], end + 1
    return (node, path[end:]) if isinstance(node, dict) else (None, path)


def _dotted(path: tuple, leading: bool = False) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else f".{key}"
    return text if leading else text.lstrip(".")
