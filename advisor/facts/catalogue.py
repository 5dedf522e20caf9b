"""The fact catalogue: every family and field, generated from the models (``advisor facts --list``, docs/facts.md)."""

from __future__ import annotations

from advisor.engine.spec import field_bounds, field_kind
from advisor.facts.models import FACT_FAMILIES, Fact

_UNITS = (("_us", "µs"), ("_mb", "MB"), ("_gbps", "GB/s"), ("_mhz", "MHz"), ("_ratio", "0..1"), ("_share", "0..1"))
HIDDEN_FIELDS = ("sources",)


def field_rows(model: type[Fact]) -> list[tuple[str, str, str, str]]:
    """(field, kind, unit or range, description) for every field a rule can use."""
    rows = []
    for name, info in model.model_fields.items():
        if name in HIDDEN_FIELDS:
            continue
        unit = next((u for suffix, u in _UNITS if name.endswith(suffix) or f"{suffix}_" in name), "")
        lo, hi = field_bounds(model, name)
        if not unit and (lo is not None or hi is not None):
            unit = f"{lo if lo is not None else '…'}..{hi if hi is not None else '…'}"
        rows.append((name, field_kind(model, name), unit, info.description or ""))
    return rows


def catalogue_markdown() -> str:
    """docs/facts.md: one section per family."""
    lines = [
        "# Fact catalogue",
        "",
        "Generated from `advisor/facts/models.py` by `make docs` (a test fails when it is out of date).",
        "Rules test these fields; `advisor facts PATH` prints the facts of a profile. Times are per step unless",
        "a field says otherwise; MB for memory is 1024² bytes, for communication 10⁶ bytes.",
        "",
    ]
    for family, model in FACT_FAMILIES.items():
        kind = "derived by rules" if model.derived else "measured"
        lines += [f"## `{family}` ({kind})", "", (model.__doc__ or "").strip().replace("\n    ", "\n"), "",
                  f"Source: {model.source}.", "", "| Field | Type | Unit | Meaning |", "|---|---|---|---|"]
        lines += [f"| `{n}` | {k} | {u} | {d} |" for n, k, u, d in field_rows(model)]
        lines.append("")
    return "\n".join(lines)
