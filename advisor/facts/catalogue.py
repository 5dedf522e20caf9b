"""The fact catalogue: every family and field, generated from the models (``advisor facts --list``, docs/facts.md)."""

from __future__ import annotations

import json
import types
import typing
from functools import cache
from importlib import resources
from typing import Annotated, Any, Literal, Union

from advisor.facts.models import FACT_FAMILIES, PROVENANCE_FIELDS, Fact

_UNITS = (("_us", "µs"), ("_ms", "ms"), ("_mb", "MB"), ("_gbps", "GB/s"), ("_mhz", "MHz"), ("_ratio", "0..1"),
          ("_share", "0..1"))
HIDDEN_FIELDS = PROVENANCE_FIELDS


def field_rows(model: type[Fact]) -> list[tuple[str, str, str, str, str]]:
    """(field, kind, unit or range, description, values seen in the real profiles) for every field a rule can use."""
    rows = []
    for name, info in model.model_fields.items():
        if name in HIDDEN_FIELDS:
            continue
        unit = next((u for suffix, u in _UNITS if name.endswith(suffix) or f"{suffix}_" in name), "")
        lo, hi = field_bounds(model, name)
        if not unit and (lo is not None or hi is not None):
            unit = f"{lo if lo is not None else '…'}..{hi if hi is not None else '…'}"
        rows.append((name, field_kind(model, name), unit, info.description or "", seen_text(model.family, name)))
    return rows


@cache
def _examples() -> dict[str, dict[str, dict[str, Any]]]:
    """advisor/facts/examples.json: the values each field takes on the bundled real profiles (docs/fact_examples.py)."""
    return json.loads(resources.files("advisor.facts").joinpath("examples.json").read_text(encoding="utf-8"))


def seen_text(family: str, name: str) -> str:
    """The values a field takes on the bundled real profiles, in words: all of a text or yes/no field's ('one of'),
    else the first few ('e.g.'); '' where none has it."""
    entry = _examples().get(family, {}).get(name)
    if not entry:
        return ""
    shown = ", ".join(f"'{v}'" if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else f"{v:,}"
                      for v in entry["values"])
    closed = all(isinstance(v, (str, bool)) for v in entry["values"]) and not entry["more"]
    return f"one of {shown}" if closed and len(entry["values"]) > 1 else f"e.g. {shown}" + (", …" if entry["more"] else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def catalogue_markdown() -> str:
    """docs/facts.md: one section per family."""
    lines = [
        "# Fact catalogue",
        "",
        "Generated from `advisor/facts/models.py` by `make docs` (a test fails when it is out of date).",
        "Rules test these fields; `advisor facts PATH` prints the facts of a profile. Times are per step unless",
        "a field says otherwise; MB for memory is 1024² bytes, for communication 10⁶ bytes. The last column shows",
        "the values each field takes on the 16 bundled real profiles (advisor/facts/examples.json, written by",
        "`make fact-examples`): 'one of' lists every value they give a text field, 'e.g.' the first few.",
        "",
    ]
    for family, model in FACT_FAMILIES.items():
        kind = "derived by rules" if model.derived else "measured"
        lines += [f"## `{family}` ({kind})", "", (model.__doc__ or "").strip().replace("\n    ", "\n"), "",
                  f"Source: {model.source}.", "", "| Field | Type | Unit | Meaning | On the real profiles |",
                  "|---|---|---|---|---|"]
        lines += [f"| `{n}` | {k} | {u} | {d} | {_cell(seen)} |" for n, k, u, d, seen in field_rows(model)]
        lines.append("")
    return "\n".join(lines)



def field_kind(model: type[Fact], field: str) -> str:
    """'number', 'text', 'bool' or 'list' for a fact field."""
    annotation = _strip_optional(model.model_fields[field].annotation)
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return value_kind(typing.get_args(annotation)[0])
    if origin in (list, tuple):
        return "list"
    if annotation is bool:
        return "bool"
    if annotation in (int, float):
        return "number"
    return "text"


def literal_choices(model: type[Fact], field: str) -> tuple[Any, ...] | None:
    annotation = _strip_optional(model.model_fields[field].annotation)
    return typing.get_args(annotation) if typing.get_origin(annotation) is Literal else None


def field_bounds(model: type[Fact], field: str) -> tuple[float | None, float | None]:
    """The documented [ge, le] range of a numeric field (None where open)."""
    info = model.model_fields[field]
    metadata = list(info.metadata) + _nested_metadata(info.annotation)
    lo = next((m.ge for m in metadata if getattr(m, "ge", None) is not None), None)
    hi = next((m.le for m in metadata if getattr(m, "le", None) is not None), None)
    return lo, hi


def _nested_metadata(annotation: Any) -> list[Any]:
    """Constraints inside ``Optional[Annotated[float, Field(ge=…)]]``."""
    found: list[Any] = []
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is Annotated:
            for extra in typing.get_args(arg)[1:]:
                found.extend(getattr(extra, "metadata", [extra]))
        elif typing.get_args(arg):
            found.extend(_nested_metadata(arg))
    return found


def _strip_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _strip_optional(args[0])
    if typing.get_origin(annotation) is Annotated:
        return _strip_optional(typing.get_args(annotation)[0])
    return annotation


def value_kind(value: Any) -> str:
    """'number', 'text' or 'bool' for a value a rule compares a field with."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "text"
