"""A report, or a comparison, as spreadsheets: CSV (one row per finding, or per finding change) and an Excel
workbook (findings, steps, operators and a summary; for a comparison the changes, the breakdown, the operators).

Numbers stay numbers (µs, counts; shares as fractions shown as percentages in the workbook, as percentages in the
CSV), headers are in the report's language, and every text cell is neutralised against formula injection: an
operator name, path or rule text quoting them that starts with ``=``, ``+``, ``-``, ``@`` or a tab gets a leading
``'`` (OWASP's advice for CSV), so Excel and LibreOffice show it as text and never evaluate it. Sheet names are
English in every language, for scripts that read them (``pandas.read_excel(path, "Findings")``).
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.render.common import (
    FULL,
    View,
    fmt_ranks,
    labels,
    profile_line,
    report_labels,
    selected_findings,
    strip_control,
    verdict_sentence,
)

if TYPE_CHECKING:
    from advisor.comparison import Comparison, Row
    from advisor.report import Finding, Report

_FORMULA_STARTS = ("=", "+", "-", "@", "\t")  # a carriage return, the other one OWASP names, strip_control removes
_WIDEST_COLUMN = 60  # characters; longer text wraps
_NUMBER_FORMAT, _PERCENT_FORMAT = "#,##0.0#", "0.0%"


class Share(float):
    """A fraction of a whole (0.25): a percentage in the workbook (25.0%) and in the CSV (25.0)."""


Cell = str | int | float | None


@dataclass(frozen=True)
class Sheet:
    """One table: a workbook sheet, or the CSV."""

    name: str
    header: list[str]
    rows: list[list[Cell]]


def cell_text(value: str) -> str:
    """Text for a cell: control characters removed, and a leading ``'`` where a spreadsheet would read a formula."""
    text = strip_control(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def render_csv(report: Report, view: View = FULL) -> str:
    """The findings ``view`` keeps as CSV, one row each in the report's order, under a header row."""
    return _csv(findings_sheet(selected_findings(report.findings, view), report_labels(report)))


def render_xlsx(report: Report, view: View = FULL) -> bytes:
    """The report as an Excel workbook: sheets Findings (those ``view`` keeps), Steps (per rank and step), Operators
    (the top operator types) and Summary (profile, verdict, step breakdown)."""
    words = report_labels(report)
    return _workbook([findings_sheet(selected_findings(report.findings, view), words), steps_sheet(report, words),
                      operators_sheet(report, words), summary_sheet(report, words)])


def render_comparison_csv(comparison: Comparison) -> str:
    """The findings of each side of a comparison (resolved, new, persisting) as CSV, with their gains."""
    return _csv(changes_sheet(comparison, labels(comparison.lang)))


def render_comparison_xlsx(comparison: Comparison) -> bytes:
    """A comparison as an Excel workbook: sheets Changes, Findings (of the difference), Breakdown, Operators, Operator
    shapes, Framework ops, Operator memory (MB per step) and Summary (the two profiles, the steps compared and the
    headline)."""
    words = labels(comparison.lang)
    summary = Sheet("Summary", [words["field"], words["value"]], [
        [words["base"], comparison.base.path], [words["target"], comparison.target.path],
        *([f"{words[name]}: {words['compared_step']}", side.chosen_step if side.chosen_step is not None else words["all_steps_mean"]]
          for name, side in (("base", comparison.base), ("target", comparison.target))
          if comparison.base.chosen_step is not None or comparison.target.chosen_step is not None),
        [words["summary"], comparison.headline]])
    return _workbook([changes_sheet(comparison, words), findings_sheet(comparison.findings, words),
                      rows_sheet("Breakdown", comparison.breakdown, words["component"], words,
                                 lambda row: words.get(f"component_{row.name}", row.name)),
                      rows_sheet("Operators", comparison.operators, words["operator"], words,
                                 lambda row: row.name + (f" ({row.detail})" if row.detail else "")),
                      rows_sheet("Operator shapes", comparison.operator_shapes, words["operator_shapes_op"], words,
                                 lambda row: row.name + (f" ({row.detail})" if row.detail else "")),
                      rows_sheet("Framework ops", comparison.apis, words["framework_op"], words,
                                 lambda row: f"{row.name} ({row.detail})"),
                      rows_sheet("Operator memory", comparison.operator_memory, words["operator_memory_op"], words,
                                 lambda row: f"{row.name} ({row.detail})", unit="MB"), summary])


def _us(label: str, words: dict[str, str]) -> str:
    return words["with_unit"].format(label=label, unit="µs")


def _percent(label: str, words: dict[str, str]) -> str:
    return words["with_unit"].format(label=label, unit="%")


def findings_sheet(findings: Sequence[Finding], words: dict[str, str]) -> Sheet:
    """One row per finding: position, rule, subject, severity, title, gain (µs and share of step, its basis and the
    bucket charged), ranks, the first prescription's first action, and why."""
    header = ["#", words["rule"], words["key"], words["severity"], words["finding"], _us(words["gain"], words),
              _percent(words["gain"], words), words["gain_basis"], words["charged_to"], words["ranks"],
              words["prescription"], words["explanation"]]
    rows: list[list[Cell]] = []
    for position, f in enumerate(findings, 1):
        basis = words[f"gain_{f.gain_basis}"] if f.gain_basis else words["gain_unknown"]
        share = None if f.estimated_gain_ratio is None else Share(f.estimated_gain_ratio)
        action = None
        if f.prescriptions:
            first = f.prescriptions[0]
            action = f"{first.title}: {first.actions[0]}" if first.actions else first.title
        rows.append([position, f.id, f.key, words[f"severity_{f.severity}"], f.title, f.estimated_gain_us, share, basis,
                     f.charged_to, fmt_ranks(f.ranks), action, f.explanation])
    return Sheet("Findings", header, rows)


def steps_sheet(report: Report, words: dict[str, str]) -> Sheet:
    """One row per rank and profiled step (the step facts): step time and its compute / exposed communication /
    idle split, in µs and as shares of the step."""
    parts = [words["compute"], words["communication"], words["free"]]
    header = [words["rank"], words["step"], _us(words["step_time"], words), *(_us(p, words) for p in parts),
              *(_percent(p, words) for p in parts)]
    steps = sorted((f for f in report.facts if f["type"] == "step"),
                   key=lambda f: (f["rank"], f["step"] is None, f["step"] or 0))
    rows: list[list[Cell]] = [
        [f["rank"], f["step"], f["step_time_us"], f["compute_us"], f["comm_not_overlapped_us"], f["free_us"],
         Share(f["compute_ratio"]), Share(f["communication_ratio"]), Share(f["free_ratio"])]
        for f in steps
    ]
    return Sheet("Steps", header, rows)


def operators_sheet(report: Report, words: dict[str, str]) -> Sheet:
    """The top operator types (mean over the ranks that run them), per step."""
    header = [words["operator"], words["core"], words["ranks"], words["count_per_step"],
              _us(words["time_per_step"], words), _percent(words["share_of_compute"], words)]
    rows: list[list[Cell]] = [
        [op.op_type, op.accelerator_core, fmt_ranks(op.ranks), op.count_per_step, op.total_us_per_step,
         Share(op.share_of_compute)]
        for op in report.summary.top_operators
    ]
    return Sheet("Operators", header, rows)


def summary_sheet(report: Report, words: dict[str, str]) -> Sheet:
    """Field and value: the profile, the verdict, the mean step and its split (the same figures as the verdict)."""
    summary = report.summary
    shares = (summary.compute_ratio, summary.communication_ratio, summary.free_ratio)
    rows: list[list[Cell]] = [
        [words["path"], report.input.path],
        [words["profile"], profile_line(report, words)],
        [words["verdict"], verdict_sentence(report, words)],
        [words["bottleneck"], words[f"bottleneck_{summary.bottleneck}"]],
        [_us(words["step_time"], words), summary.step_time_us],
        *([_percent(p, words), None if s is None else Share(s)]
          for p, s in zip((words["compute"], words["communication"], words["free"]), shares, strict=True)),
        [words["generated_by"], report.tool.version],
    ]
    return Sheet("Summary", [words["field"], words["value"]], rows)


def changes_sheet(comparison: Comparison, words: dict[str, str]) -> Sheet:
    """One row per finding of either side: whether TARGET resolved it, brought it or kept it, and its gain on each."""
    header = [words["rule"], words["key"], words["finding"], words["change"],
              *(_us(f"{words[side]}: {words['gain']}", words) for side in ("base", "target"))]
    rows: list[list[Cell]] = [[c.id, c.key, c.title, words[f"change_{c.change}"], c.base_gain_us, c.target_gain_us]
                              for c in comparison.changes]
    return Sheet("Changes", header, rows)


def rows_sheet(name: str, rows: Sequence[Row], first: str, words: dict[str, str], label: Callable[[Row], str],
               unit: str = "µs") -> Sheet:
    """Rows of a comparison (µs per step on each side, or ``unit``; their difference and ratio), named by ``label``."""
    header = [first, *(words["with_unit"].format(label=words[column], unit=unit) for column in ("base", "target", "difference")),
              words["ratio"]]
    return Sheet(name, header, [[label(row), row.base, row.target, row.diff, row.ratio] for row in rows])


def _csv_value(value: Cell) -> Cell:
    if isinstance(value, Share):
        return round(value * 100, 3)
    if isinstance(value, float):
        return round(value, 3)  # to the nanosecond: the profilers' own precision
    return cell_text(value) if isinstance(value, str) else value


def _csv(sheet: Sheet) -> str:
    """The sheet as CSV. It starts with a byte order mark: Excel reads a CSV without one in the system's ANSI code
    page (GBK on a Chinese Windows, cp1252 elsewhere) and garbles every non-ASCII character (µs, 中文); with it,
    Excel, LibreOffice, pandas (``encoding="utf-8-sig"``) and Python's csv module all read UTF-8."""
    buffer = io.StringIO()
    buffer.write("\ufeff")
    writer = csv.writer(buffer, lineterminator="\n")  # the file is written in text mode: "\r\n" on Windows
    writer.writerow([cell_text(h) for h in sheet.header])
    writer.writerows([_csv_value(v) for v in row] for row in sheet.rows)
    return buffer.getvalue()


def _display_width(value: Cell) -> int:
    """Columns a value takes in a spreadsheet: its longest line, wide (CJK) characters counting twice."""
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        return len(f"{value:,.1f}")
    return max((sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line) for line in value.splitlines()),
               default=0)


def _workbook(sheets: list[Sheet]) -> bytes:
    """The sheets as one .xlsx: header row bold and frozen, with a filter; numbers as numbers (µs with one decimal
    shown, shares as percentages); each column as wide as its content, text longer than _WIDEST_COLUMN wrapped."""
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font
    from openpyxl.utils import get_column_letter

    book = Workbook()
    book.remove(book.active)
    bold, wrap = Font(bold=True), Alignment(wrap_text=True, vertical="top")
    for sheet in sheets:
        table = book.create_sheet(sheet.name)
        table.append([cell_text(h) for h in sheet.header])
        for cell in table[1]:
            cell.font = bold
        widths = [min(max(_display_width(v) for v in [header, *(row[index] for row in sheet.rows)]) + 2, _WIDEST_COLUMN)
                  for index, header in enumerate(sheet.header)]
        for index, width in enumerate(widths, 1):
            table.column_dimensions[get_column_letter(index)].width = width
        for number, row in enumerate(sheet.rows, 2):
            for index, value in enumerate(row, 1):
                cell = table.cell(number, index, cell_text(value) if isinstance(value, str) else value)
                if isinstance(value, float):
                    cell.number_format = _PERCENT_FORMAT if isinstance(value, Share) else _NUMBER_FORMAT
                elif widths[index - 1] == _WIDEST_COLUMN:
                    cell.alignment = wrap
        table.freeze_panes = "A2"
        table.auto_filter.ref = table.dimensions
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()
