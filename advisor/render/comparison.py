"""Render a Comparison (``advisor compare``): terminal, Markdown, HTML, JSON, CSV (the findings of each side) and an
Excel workbook.

The same escaping as the diagnosis reports: the templates are rendered by the environments of
``render.documents`` (autoescaped HTML, Markdown escaped by its finalize hook), and findings use the same
partial templates as the diagnosis. Every table of durations has one unit, named in its header; the HTML
adds the charts of ``render.charts.comparison_charts``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from markupsafe import Markup
from rich.console import Console
from rich.table import Table
from rich.text import Text

from advisor.jsontext import json_text
from advisor.render.common import TimeUnit, fmt_pct, fmt_us, labels, time_unit
from advisor.render.documents import environment, figure, finding_context
from advisor.render.spreadsheets import render_comparison_csv, render_comparison_xlsx
from advisor.render.terminal import clean, print_finding
from advisor.resources import data_dir

if TYPE_CHECKING:
    from advisor.comparison import Comparison, Row


def render_comparison_json(comparison: Comparison) -> str:
    return json_text(comparison.model_dump(mode="json"))


def render_comparison_markdown(comparison: Comparison) -> str:
    text = environment("md").get_template("compare.md.j2").render(**_context(comparison))
    return "\n".join(line.rstrip() for line in text.splitlines()).replace("\n\n\n", "\n\n").strip() + "\n"


def render_comparison_html(comparison: Comparison) -> str:
    from advisor.render.charts import comparison_charts

    css = (data_dir("reports") / "report.css").read_text(encoding="utf-8")
    context = _context(comparison)
    charts = comparison_charts(comparison, context["L"])
    return environment("html").get_template("compare.html.j2").render(
        css=Markup(css), chart=lambda key: figure(charts.get(key)), **context)


# The document formats by name, as advisor.render.DOCUMENTS for a Report.
COMPARISON_DOCUMENTS: dict[str, Callable[[Comparison], str]] = {
    "markdown": render_comparison_markdown, "html": render_comparison_html, "json": render_comparison_json,
    "csv": render_comparison_csv}
COMPARISON_BINARY_DOCUMENTS: dict[str, Callable[[Comparison], bytes]] = {"xlsx": render_comparison_xlsx}


def render_comparison_document(comparison: Comparison, name: str) -> str | bytes:
    """The document format ``name`` (of COMPARISON_DOCUMENTS or COMPARISON_BINARY_DOCUMENTS) of ``comparison``."""
    binary = COMPARISON_BINARY_DOCUMENTS.get(name)
    return binary(comparison) if binary is not None else COMPARISON_DOCUMENTS[name](comparison)


def rows_unit(rows: list[Row]) -> TimeUnit:
    """The one unit of a table of rows (base, target and their difference), from its largest value."""
    return time_unit([max(abs(r.base), abs(r.target)) for r in rows])


def _context(comparison: Comparison) -> dict:
    words = labels(comparison.lang)
    return {**finding_context(words), "c": comparison, "gain_check": gain_check_sentence(comparison, words),
            "ratio": fmt_ratio, "signed": signed, "mb": fmt_mb, "rows_unit": rows_unit,
            "mb_unit": TimeUnit("MB", 1, 0), "memory_unit": MEMORY_UNIT,
            "gain_unit": time_unit([v for ch in comparison.changes for v in (ch.base_gain_us, ch.target_gain_us)]),
            "lambda_component": lambda row: words.get(f"component_{row.name}", row.name), "lambda_name": lambda row: row.name,
            "lambda_operator": lambda row: row.name + (f" ({row.detail})" if row.detail else ""),
            "serving_times": serving_times(comparison), "lambda_serving": lambda row: words[f"row_{row.name}"]}


def serving_times(comparison: Comparison) -> list[Row]:
    """The serving rows that are times (the TTFT proxy, TPOT): the comparison's table of them."""
    return [row for row in comparison.serving if row.name.endswith("_us")]


def fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def fmt_mb(value: float) -> str:
    return f"{value:,.0f}"


def signed(value: float, unit=fmt_us) -> str:
    """A difference with its sign: +1.2 ms, −300.0 µs, ±0.0 µs (or +1.20, −0.30 in a TimeUnit)."""
    return ("+" if value > 0 else "−" if value < 0 else "±") + unit(abs(value))


def gain_check_sentence(comparison: Comparison, words: dict[str, str]) -> str | None:
    check = comparison.gain_check
    if check is None:
        return None
    key = "gain_check_sentence" if check.step_reduction_us >= 0 else "gain_check_longer"
    text = words[key].format(count=check.resolved, estimate=fmt_us(check.estimated_gain_us),
                             saved=fmt_us(abs(check.step_reduction_us)), ratio=fmt_pct(check.delivered_ratio))
    median = check.median_step_reduction_us
    if median is not None and abs(median - check.step_reduction_us) > 0.05 * check.estimated_gain_us:
        key = "gain_check_median" if median >= 0 else "gain_check_median_longer"
        text += " " + words[key].format(saved=fmt_us(abs(median)), ratio=fmt_pct(check.median_delivered_ratio))
    if check.came_back:
        items = [words["gain_check_new" if c.new else "gain_check_grown"].format(finding=c.title, grown=fmt_us(c.grown_us))
                 for c in check.came_back]
        text += " " + words["gain_check_came_back"].format(items="; ".join(items))
    return text


TERMINAL_OPERATOR_ROWS = 15
MEMORY_UNIT = TimeUnit("MB", 1, 2)  # the operator memory table: an allocation is often well under 1 MB


def _largest(rows: list, count: int) -> list:
    """The ``count`` rows that changed most either way (improvements too), in their given order."""
    kept = {id(row) for row in sorted(rows, key=lambda r: -abs(r.diff))[:count]}
    return [row for row in rows if id(row) in kept]


def render_comparison_terminal(comparison: Comparison, console: Console) -> None:
    words = labels(comparison.lang)
    console.print(Text(words["compare_title"], style="bold"))
    for side, name in ((comparison.base, words["base"]), (comparison.target, words["target"])):
        level = f" · {side.profiler_level}" if side.profiler_level else ""
        chosen = f" · {words['compared_step']}: {side.chosen_step}" if side.chosen_step is not None else ""
        console.print(Text(f"{name}: ", style="bold") + clean(f"{side.path} · {side.format}{level} · {words['ranks']}: "
                                                              f"{', '.join(map(str, side.ranks)) or '–'} · {side.hardware or words['unknown']}"
                                                              f"{chosen}"))
    console.print(clean(comparison.headline))
    by = words["operators_by_" + comparison.operators_matched_by]
    for title, rows, label in ((words["compare_breakdown"], comparison.breakdown, lambda r: words.get(f"component_{r.name}", r.name)),
                               (by, _largest(comparison.operators, TERMINAL_OPERATOR_ROWS), lambda r: r.name),
                               (words["compare_shapes"], _largest(comparison.operator_shapes, TERMINAL_OPERATOR_ROWS),
                                lambda r: r.name + (f" ({_shortened(r.detail)})" if r.detail else "")),
                               (words["collectives"], comparison.collectives, lambda r: r.name),
                               (words["compare_apis"], _largest(comparison.apis, TERMINAL_OPERATOR_ROWS),
                                lambda r: f"{r.name} ({r.detail})"),
                               (words["serving_compare"], serving_times(comparison), lambda r: words[f"row_{r.name}"])):
        if rows:
            console.print(_table(title, rows, label, words))
        elif title == words["compare_shapes"] and comparison.operator_shapes_note:
            console.print(Text(title, style="italic") + Text(": ") + clean(comparison.operator_shapes_note))
    if comparison.memory:
        console.print(_table(words["memory_peak"], comparison.memory, lambda r: "peak", words, unit=TimeUnit("MB", 1, 0)))
    if comparison.operator_memory:
        console.print(_table(words["compare_operator_memory"], _largest(comparison.operator_memory, TERMINAL_OPERATOR_ROWS),
                             lambda r: f"{r.name} ({r.detail})", words, unit=MEMORY_UNIT))
    console.print(Text(words["gap_diagnosis"], style="bold underline"))
    if not comparison.findings:
        console.print(words["no_gap_findings" if comparison.comparable else "no_gap_not_comparable"])
    for index, finding in enumerate(comparison.findings, 1):
        print_finding(console, finding, index, words)
    if comparison.changes:
        unit = time_unit([v for ch in comparison.changes for v in (ch.base_gain_us, ch.target_gain_us)])
        table = Table(title=words["with_unit"].format(label=words["finding_changes"], unit=unit.label), title_justify="left")
        for header in ("finding", "base", "target"):
            table.add_column(words[header], overflow="fold", justify="left" if header == "finding" else "right")
        for change in comparison.changes:
            table.add_row(clean(change.title + (f": {change.key}" if change.key else "")) + Text(f" ({words['change_' + change.change]})", style="dim"),
                          unit(change.base_gain_us), unit(change.target_gain_us))
        console.print(table)
    sentence = gain_check_sentence(comparison, words)
    if sentence:
        console.print(Text(f"{words['gain_check']} ", style="bold") + Text(sentence))
    for warning in comparison.warnings:
        console.print(Text("! ", style="yellow") + clean(warning))


TERMINAL_SHAPES_CHARS = 60


def _shortened(text: str) -> str:
    """Input shapes as the terminal shows them: at most TERMINAL_SHAPES_CHARS characters (the other formats show all)."""
    return text if len(text) <= TERMINAL_SHAPES_CHARS else text[:TERMINAL_SHAPES_CHARS - 1] + "…"


def _table(title: str, rows: list[Row], label, words: dict[str, str], unit: TimeUnit | None = None) -> Table:
    unit = unit or rows_unit(rows)
    table = Table(title=title if unit.label == "MB" else words["with_unit"].format(label=title, unit=unit.label), title_justify="left")
    table.add_column("", overflow="fold", max_width=48)
    for header in ("base", "target", "difference", "ratio"):
        table.add_column(words[header], justify="right")
    for row in rows:
        table.add_row(clean(label(row)), unit(row.base), unit(row.target), signed(row.diff, unit), fmt_ratio(row.ratio))
    return table
