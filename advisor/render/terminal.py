"""The terminal report (rich): verdict, per-rank breakdown, findings table, coverage; fits 100 columns.

Input-derived strings go into rich Text objects, which never interpret markup, and control
characters (ANSI escapes) are removed from them.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from advisor.render.common import (
    chain_lines,
    fmt_pct,
    fmt_us,
    fmt_value,
    gain_text,
    labels,
    report_labels,
    strip_control,
    verdict_sentence,
)
from advisor.report import Report

_SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}


def clean(text: object) -> Text:
    """Input-derived text, safe for the terminal."""
    return Text(strip_control(str(text)))


def render_terminal(report: Report, console: Console, explain: bool = False) -> None:
    """Print the report to ``console``; with ``explain``, each finding's conditions and fact values too."""
    words = report_labels(report)
    console.print(Text(words["report_title"], style="bold"), clean(report.input.path))
    details = [
        f"{words['format']}: {report.input.format}",
        f"{words['ranks']}: {', '.join(map(str, report.input.ranks)) or '–'}",
        f"{words['steps']}: {', '.join(map(str, report.input.steps)) or '–'}",
        f"{words['profiler_level']}: {report.input.profiler_level or words['unknown']}",
        f"{words['hardware']}: {report.input.hardware or words['unknown']}",
    ]
    if not report.input.format.startswith("ascend"):
        details.pop(3)  # the profiler level is an Ascend setting
    console.print(clean(" · ".join(details)), style="dim")
    console.print(Text(f"{words['verdict']}: ", style="bold") + clean(verdict_sentence(report, words)))
    if report.status != "complete":
        console.print(Text(words[f"status_{report.status}"], style="bold yellow"))

    if report.summary.per_rank:
        table = Table(title=words["step_breakdown"], title_justify="left", expand=False)
        for header in ("rank", "step_time", "compute", "communication", "free", "bottleneck"):
            table.add_column(words[header], justify="left" if header == "bottleneck" else "right")
        for r in report.summary.per_rank:
            table.add_row(
                str(r.rank),
                fmt_us(r.step_time_us),
                f"{fmt_us(r.compute_us)} {fmt_pct(r.compute_ratio)}",
                f"{fmt_us(r.comm_not_overlapped_us)} {fmt_pct(r.communication_ratio)}",
                f"{fmt_us(r.free_us)} {fmt_pct(r.free_ratio)}",
                words[f"bottleneck_{r.bottleneck}"],
            )
        console.print(table)

    if report.summary.top_operators:
        table = Table(title=words["top_operators"], title_justify="left")
        table.add_column("#", justify="right")
        table.add_column(words["operator"], overflow="fold", max_width=40)
        table.add_column(words["core"])
        table.add_column(words["time_per_step"], justify="right")
        table.add_column(words["share_of_compute"], justify="right")
        for index, op in enumerate(report.summary.top_operators[:5], 1):
            table.add_row(str(index), clean(op.op_type), clean(op.accelerator_core or "–"),
                          fmt_us(op.total_us_per_step), fmt_pct(op.share_of_compute))
        console.print(table)

    if not report.findings:
        console.print(Text(words["findings"], style="bold underline"))
        console.print(words["no_findings_partial" if report.status != "complete" else "no_findings"])
    else:
        table = Table(title=words["findings"], title_justify="left")
        table.add_column("#", justify="right")
        table.add_column(words["severity"])
        table.add_column(words["finding"], overflow="fold", ratio=3)
        table.add_column(words["gain"], justify="right")
        table.add_column(words["ranks"], overflow="fold", max_width=12)
        for index, finding in enumerate(report.findings, 1):
            title = Text(finding.title) + (Text(": ") + clean(finding.key) if finding.key else Text(""))
            table.add_row(str(index), Text(words[f"severity_{finding.severity}"], style=_SEVERITY_STYLE[finding.severity]),
                          title, _short_gain(finding, words), ", ".join(map(str, finding.ranks)) or "–")
        console.print(table)
    for index, finding in enumerate(report.findings, 1):
        print_finding(console, finding, index, words, explain)

    coverage = report.coverage
    if coverage.skipped or coverage.partly_read or coverage.missing or coverage.warnings:
        console.print(Text(words["coverage"], style="bold underline"))
        for skipped in coverage.skipped:
            console.print(Text("✗ ", style="red") + clean(f"{skipped.file}: {skipped.reason}"))
        for partial in coverage.partly_read:
            console.print(Text("½ ", style="yellow") + clean(f"{partial.file} ({words['files_partly_read'].lower()}): {partial.reason}"))
        for missing in coverage.missing:
            console.print(Text("– ", style="dim") + clean(f"{missing} ({words['files_missing'].lower()})"))
        for warning in coverage.warnings:
            console.print(Text("! ", style="yellow") + clean(warning))


def print_finding(console: Console, finding, index: int, words: dict[str, str], explain: bool = False) -> None:
    """One finding: numbered title with severity, gain, explanation, the first action of each prescription."""
    severity = Text(words[f"severity_{finding.severity}"].upper(), style=_SEVERITY_STYLE[finding.severity])
    title = Text(f"{index}. ") + severity + Text(" ") + Text(finding.title, style="bold")
    if finding.key:
        title += Text(": ") + clean(finding.key)
    meta = Text(f"{words['gain']}: {gain_text(finding, words)} · {words['ranks']}: "
                f"{', '.join(map(str, finding.ranks)) or '–'} · {finding.id}", style="dim")
    actions = [clean(f"→ {p.title}: {p.actions[0]}") for p in finding.prescriptions]
    parts = [meta, clean(finding.explanation), *actions]
    if explain:
        parts.append(_why(finding, words))
    console.print(Group(title, Padding(Group(*parts), (0, 0, 1, 3))))


def _short_gain(finding, words: dict[str, str]) -> str:
    if finding.estimated_gain_us is None:
        return words["gain_unknown"]
    share = f" ({fmt_pct(finding.estimated_gain_ratio)})" if finding.estimated_gain_ratio is not None else ""
    return f"{fmt_us(finding.estimated_gain_us)}{share}"


def _why(finding, words: dict[str, str]) -> Group:
    lines = [Text(f"{words['why_fired']}: {finding.trace.rule} ({finding.trace.pack}: {finding.trace.rule_file})", style="bold")]
    for condition in finding.trace.conditions:
        if condition.negated:
            lines.append(clean(f"  ✓ not {condition.family}: no fact matches"))
            continue
        lines.append(clean(f"  {condition.alias} = {condition.fact}  ← {'; '.join(condition.sources)}"))
        for check in condition.checks:
            value = "unknown" if check.actual is None else fmt_value(check.actual)
            lines.append(clean(f"    {'✓' if check.holds else '✗'} {check.test}  ({value})"))
    lines += [clean(f"  {line}") for line in chain_lines(finding)]
    return Group(*lines)
