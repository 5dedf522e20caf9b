"""The terminal report (rich), fitting 100 columns: brief (verdict, per-rank breakdown, top actions with their gains, how
to get the full report) or full (also the top operators, every finding with its first actions, coverage).

Input-derived strings go into rich Text objects, which never interpret markup, and control
characters (ANSI escapes) are removed from them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from advisor.render.common import (
    FULL,
    TimeUnit,
    View,
    brief_summary,
    chain_lines,
    filtered_report,
    fmt_pct,
    fmt_ranks,
    fmt_value,
    gain_text,
    profile_line,
    rank_table,
    report_labels,
    severity_counts,
    strip_control,
    time_unit,
    verdict_sentence,
)
from advisor.render.messages import localised
from advisor.vocabulary import SEVERITIES

if TYPE_CHECKING:
    from advisor.report import Report

_SEVERITY_STYLE = dict(zip(SEVERITIES, ("bold red", "yellow", "dim")))  # high, medium, low


def clean(text: object) -> Text:
    """Input-derived text, safe for the terminal."""
    return Text(strip_control(str(text)))


def render_terminal(report: Report, console: Console, explain: bool = False, view: View = FULL) -> None:
    """Print the report to ``console`` at ``view``'s detail; with ``explain``, each finding's conditions and fact
    values too (in full detail)."""
    words = report_labels(report)
    console.print(Text(words["report_title"], style="bold"), clean(report.input.path))
    console.print(clean(profile_line(report, words)), style="dim")
    console.print(Text(f"{words['verdict']}: ", style="bold") + clean(verdict_sentence(report, words)))
    if report.status != "complete":
        console.print(Text(words[f"status_{report.status}"], style="bold yellow"))
    if view.detail == "brief" and not explain:
        _brief(report, console, words, view)
        return
    total = len(report.findings)
    report = filtered_report(report, view)
    _phase_table(report, console, words)
    _rank_table(report, console, words, "full")

    if report.summary.top_operators:
        operators = report.summary.top_operators[:5]
        unit = time_unit([op.total_us_per_step for op in operators])
        table = Table(title=words["top_operators"], title_justify="left")
        table.add_column("#", justify="right")
        table.add_column(words["operator"], overflow="fold", max_width=40)
        table.add_column(words["core"])
        table.add_column(words["with_unit"].format(label=words["time_per_step"], unit=unit.label), justify="right")
        table.add_column(words["share_of_compute"], justify="right")
        for index, op in enumerate(operators, 1):
            table.add_row(str(index), clean(op.op_type), clean(op.accelerator_core or "–"),
                          unit(op.total_us_per_step), fmt_pct(op.share_of_compute))
        console.print(table)
    if len(report.findings) < total:
        console.print(words["findings_filtered"].format(shown=len(report.findings), total=total,
                                                        counts=severity_counts(report.findings, words)))

    if not report.findings:
        console.print(Text(words["findings"], style="bold underline"))
        console.print(words["no_findings_partial" if report.status != "complete" else "no_findings"])
    else:
        gain_unit = time_unit([f.estimated_gain_us for f in report.findings])
        table = Table(title=words["findings"], title_justify="left")
        table.add_column("#", justify="right")
        table.add_column(words["severity"])
        table.add_column(words["finding"], overflow="fold", ratio=3)
        table.add_column(words["with_unit"].format(label=words["gain"], unit=gain_unit.label), justify="right")
        table.add_column(words["ranks"], overflow="fold", max_width=12)
        for index, finding in enumerate(report.findings, 1):
            title = Text(finding.title) + (Text(": ") + clean(finding.key) if finding.key else Text(""))
            table.add_row(str(index), Text(words[f"severity_{finding.severity}"], style=_SEVERITY_STYLE[finding.severity]),
                          title, _short_gain(finding, words, gain_unit), fmt_ranks(finding.ranks))
        console.print(table)
    for index, finding in enumerate(report.findings, 1):
        print_finding(console, finding, index, words, explain)

    coverage = report.coverage
    if coverage.skipped or coverage.partly_read or coverage.missing or coverage.warnings:
        console.print(Text(words["coverage"], style="bold underline"))
        for skipped in coverage.skipped:
            console.print(Text("✗ ", style="red") + clean(f"{skipped.file}{words['colon_sep']}{localised(skipped.reason, report.lang)}"))
        for partial in coverage.partly_read:
            console.print(Text("½ ", style="yellow") + clean(f"{partial.file} ({words['files_partly_read'].lower()}){words['colon_sep']}{localised(partial.reason, report.lang)}"))
        for missing in coverage.missing:
            console.print(Text("– ", style="dim") + clean(f"{missing} ({words['files_missing'].lower()})"))
        for warning in coverage.warnings:
            console.print(Text("! ", style="yellow") + clean(localised(warning, report.lang)))


def print_finding(console: Console, finding, index: int, words: dict[str, str], explain: bool = False) -> None:
    """One finding: numbered title with severity, gain, explanation, the first action of each prescription. A command
    the text gives to run (`export X=…`, `advisor …`) is printed on a line of its own, never wrapped (see _COMMAND)."""
    severity = Text(words[f"severity_{finding.severity}"].upper(), style=_SEVERITY_STYLE[finding.severity])
    title = Text(f"{index}. ") + severity + Text(" ") + Text(finding.title, style="bold")
    if finding.key:
        title += Text(": ") + clean(finding.key)
    meta = Text(f"{words['gain']}: {gain_text(finding, words)} · {words['ranks']}: "
                f"{fmt_ranks(finding.ranks)} · {finding.id}", style="dim")
    texts = [finding.explanation, *(f"→ {p.title}: {p.actions[0]}" for p in finding.prescriptions)]
    if not any(_COMMAND.search(text) for text in texts):
        parts = [meta, *(clean(text) for text in texts)]
        if explain:
            parts.append(_why(finding, words))
        console.print(Group(title, Padding(Group(*parts), (0, 0, 1, 3))))
        return
    console.print(title)
    prose: list = [meta]
    for text in texts:
        for piece, is_command in _split_commands(text):
            if not is_command:
                prose.append(clean(piece))
                continue
            if prose:
                console.print(Padding(Group(*prose), (0, 0, 0, 3)))
                prose = []
            print_command(console, piece, indent=5)
    if explain:
        prose.append(_why(finding, words))
    console.print(Padding(Group(*prose), (0, 0, 1, 3)))


# A command the user is meant to copy, as knowledge and rules write it in `inline code`: an environment setting or a
# program run in a shell.
_COMMAND = re.compile(r"`((?:export|unset|advisor|npu-smi|nvidia-smi|pip|python3?|torchrun|msprof|numactl|taskset|"
                      r"ulimit|sysctl) [^`\n]+)`")


def _split_commands(text: str) -> list[tuple[str, bool]]:
    """``text`` cut around its commands: (prose, False) and (command, True) in order, empty prose left out (a
    sentence's end after a command, like '.' or ',', stays with the prose after it)."""
    pieces: list[tuple[str, bool]] = []
    start = 0
    for found in _COMMAND.finditer(text):
        before = text[start:found.start()].rstrip()
        if before:
            pieces.append((before, False))
        pieces.append((found.group(1), True))
        start = found.end()
    rest = text[start:].strip()
    if rest:
        pieces.append((rest, False))
    return pieces


def print_command(console: Console, command: str, indent: int = 2) -> None:
    """A command to copy, on a line of its own and never wrapped or cut by rich (soft wrap: a narrow terminal folds
    the line on screen, and copying it gives the whole command)."""
    console.print(Text(" " * indent) + clean(command), soft_wrap=True)


def _brief(report: Report, console: Console, words: dict[str, str], view: View) -> None:
    """The per-rank table, the top actions (severity, title, gain, what to do) and how to get the full report."""
    _phase_table(report, console, words)
    _rank_table(report, console, words, "brief")
    brief = brief_summary(report, view, words)
    if brief.shown:
        console.print(Text(words["top_actions"], style="bold underline"))
    elif not report.findings:
        console.print(words["no_findings_partial" if report.status != "complete" else "no_findings"])
    for index, finding in enumerate(brief.shown, 1):
        severity = Text(words[f"severity_{finding.severity}"].upper(), style=_SEVERITY_STYLE[finding.severity])
        title = Text(f"{index}. ") + severity + Text(" ") + Text(finding.title, style="bold")
        if finding.key:
            title += Text(": ") + clean(finding.key)
        lines = [Text(gain_text(finding, words), style="dim")]
        lines += [clean(f"→ {p.title}") for p in finding.prescriptions[:1]]
        console.print(Group(title, Padding(Group(*lines), (0, 0, 0, 3))))
    if brief.shown:  # one line: the full legend is in the Markdown and HTML reports
        console.print(Text(words["ranking_note_short"], style="dim"), soft_wrap=True)
    console.print(Text("\n") + clean(brief.pointer))
    # The command and the -o hint on lines of their own, so a long input path never splits "-o report.html"; the
    # command is never wrapped, whatever the path's length.
    print_command(console, brief.command)
    console.print(Padding(clean(_plain(words["brief_or_html"])), (0, 0, 0, 2)))


def _plain(text: str) -> str:
    """A label's `inline code` as plain text (the terminal shows it as written)."""
    return text.replace("`", "")


def _rank_table(report: Report, console: Console, words: dict[str, str], detail: str) -> None:
    """The step breakdown per rank, every duration in one unit (its header says which)."""
    ranks = rank_table(report, words, detail)  # type: ignore[arg-type]
    if not ranks.rows:
        return
    unit = ranks.unit
    # the verdict line already gives the bottleneck when every rank has the profile's
    verdicts = any(r.bottleneck != report.summary.bottleneck for r in report.summary.per_rank)
    title = words["with_unit"].format(label=words["step_breakdown"], unit=unit.label)
    table = Table(title=title, title_justify="left", expand=False, box=box.SIMPLE_HEAD, pad_edge=False)
    headers = ("rank", "step_time", "compute", "communication", "free", *(("bottleneck",) if verdicts else ()))
    for header in headers:
        table.add_column(words[header], justify="left" if header == "bottleneck" else "right", no_wrap=header != "communication")
    for r in ranks.rows:
        table.add_row(
            str(r.rank),
            unit(r.step_time_us),
            f"{unit(r.compute_us)} {fmt_pct(r.compute_ratio)}",
            f"{unit(r.comm_not_overlapped_us)} {fmt_pct(r.communication_ratio)}",
            f"{unit(r.free_us)} {fmt_pct(r.free_ratio)}",
            *((words[f"bottleneck_{r.bottleneck}"],) if verdicts else ()),
        )
    console.print(table)
    if ranks.note:
        console.print(clean(ranks.note), style="dim")
    if detail == "full" and report.input.steps:
        console.print(Text(words["step_note"], style="dim"))


def _phase_table(report: Report, console: Console, words: dict[str, str]) -> None:
    """A serving run's phases side by side: iterations, their median duration and spacing, tokens, busy share."""
    if not report.summary.phases:
        return
    per_iteration = [p.start_to_start_us if p.start_to_start_us is not None else p.duration_us
                     for p in report.summary.phases]
    unit = time_unit(per_iteration)  # one unit for the column, named in its header
    table = Table(title=words["phases"], title_justify="left", expand=False, box=box.SIMPLE_HEAD, pad_edge=False)
    for index, header in enumerate(words["phase_short_columns"].split("|")):
        if index == 2:
            header = words["with_unit"].format(label=header, unit=unit.label)
        table.add_column(header, justify="left" if index in (0, 6) else "right", no_wrap=index != 6)
    for p, duration in zip(report.summary.phases, per_iteration):
        table.add_row(words[f"phase_{p.phase}"], str(p.iterations), unit(duration),
                      f"{p.tokens_per_iteration:g}" if p.tokens_per_iteration is not None else "–",
                      f"{p.tokens_per_s:,.0f}" if p.tokens_per_s is not None else "–", fmt_pct(p.busy_share), p.graph_mode)
    console.print(table)


def _short_gain(finding, words: dict[str, str], unit: TimeUnit) -> str:
    """The gain in the findings table's unit (its header names it), with its share of the step."""
    if finding.estimated_gain_us is None:
        return words["gain_capture_short" if finding.category == "profiling" else "gain_unknown"]
    share = f" ({fmt_pct(finding.estimated_gain_ratio)})" if finding.estimated_gain_ratio is not None else ""
    return f"{unit(finding.estimated_gain_us)}{share}"


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
