"""Markdown and HTML reports from the Jinja2 templates in reports/.

Everything that came from the input (paths, operator names, explanations that quote them) is escaped:
HTML through Jinja2's autoescaping, Markdown through a ``finalize`` hook that escapes every expression
unless a filter marked it safe. Knowledge text (ours, or a trusted rule pack's) may use `inline code`
but never raw HTML.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from advisor.render.common import (
    BRIEF_FINDINGS,
    FULL,
    View,
    brief_summary,
    chain_lines,
    condition_rows,
    filtered_report,
    fmt_pct,
    fmt_ranks,
    fmt_steps,
    fmt_us,
    fmt_value,
    gain_text,
    md_knowledge,
    md_text,
    profile_line,
    rank_table,
    report_labels,
    severity_counts,
    strip_control,
    time_unit,
    verdict_sentence,
    version_text,
)
from advisor.render.messages import localised
from advisor.resources import data_dir

if TYPE_CHECKING:
    from advisor.facts.models import TimeRange
    from advisor.render.charts import Chart
    from advisor.report import Report

_INLINE_CODE = re.compile(r"`([^`]+)`")


def render_markdown(report: Report, view: View = FULL) -> str:
    """The report as Markdown for issue trackers (GitHub, GitLab, Gitee, Jira with Markdown): everything, or with
    ``View(detail="brief")`` the ticket-sized summary (verdict, top actions, per-rank table, how to get the rest)."""
    if view.detail == "brief":
        words = report_labels(report)
        context = {**_context(report), "brief": brief_summary(report, view, words),
                   "ranks": rank_table(report, words, "brief"), "profile_line": profile_line(report, words)}
        text = environment("md").get_template("report-brief.md.j2").render(**context)
    else:
        text = environment("md").get_template("report.md.j2").render(**_context(report, view))
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def render_html(report: Report, view: View = FULL) -> str:
    """The report as one self-contained HTML file (inline CSS, no scripts, no network); always in full detail,
    with the findings ``view`` keeps."""
    from advisor.render.charts import report_charts

    template = environment("html").get_template("report.html.j2")
    css = (data_dir("reports") / "report.css").read_text(encoding="utf-8")
    context = _context(report, view)
    charts = report_charts(context["report"], context["L"])
    return template.render(css=Markup(css), charts=charts, chart=lambda key: figure(charts.get(key)), **context)


def figure(chart: Chart | None) -> Markup:
    """A chart as inline SVG (no network; its ids prefixed with its key, so charts never share one), its description
    the accessible name and each bar, marker and line a hover title (``Chart.inline``)."""
    if chart is None:
        return Markup("")
    return Markup('<figure class="chart" data-chart="{key}">\n{svg}<figcaption>{title}</figcaption></figure>').format(
        key=chart.key, svg=Markup(chart.inline()), title=chart.title)


_REFERENCE = re.compile(r"^(?P<text>.*?)\s*<(?P<url>[^<>\s]+)>$", re.S)


def reference_html(reference: str) -> Markup:
    """A prescription's reference (``title — document <url>``, ``knowledge.public_reference``) in HTML: a link to
    its address when that is an http(s) URL, the text escaped either way; any other address stays text."""
    reference = strip_control(reference)
    match = _REFERENCE.match(reference)
    if match is None or not re.match(r"https?://[^\s\"'<>]+$", match["url"], re.I):
        return Markup("{}").format(reference)
    return Markup('<a href="{url}" rel="noopener noreferrer">{text}</a>').format(url=match["url"],
                                                                              text=match["text"] or match["url"])


def md_escape(text: str) -> str:
    """Escape Markdown control characters and HTML, break automatic links, and keep the text on one line."""
    return md_text(text)


def _context(report: Report, view: View = FULL) -> dict:
    """What the full templates use: the report with the findings ``view`` keeps, and a sentence when it left some out."""
    words = report_labels(report)
    shown = filtered_report(report, view)
    note = None
    if len(shown.findings) < len(report.findings):
        note = words["findings_filtered"].format(shown=len(shown.findings), total=len(report.findings),
                                                 counts=severity_counts(report.findings, words))
    return {**finding_context(words), "report": shown, "verdict": verdict_sentence(report, words),
            "ranks": rank_table(report, words, "full"), "versions": version_text(report), "filter_note": note,
            "top_actions": BRIEF_FINDINGS,  # as many as the brief reports and the terminal list
            "op_unit": time_unit([op.total_us_per_step for op in report.summary.top_operators]),
            "message": lambda text: localised(text, report.lang)}


def finding_context(words: dict[str, str]) -> dict:
    """What the finding partials (finding.md.j2, finding.html.j2) use: labels and formatters."""
    return {
        "L": words,
        "us": fmt_us,
        "pct": fmt_pct,
        "rank_list": fmt_ranks,
        "step_list": fmt_steps,
        "col": lambda label, unit: words["with_unit"].format(label=label, unit=unit),
        "val": fmt_value,
        "gain": lambda finding: gain_text(finding, words),
        "conditions": condition_rows,
        "mark": lambda status: {"met": "✓", "unmet": "✗", "unknown": "?"}[status],
        "chain": chain_lines,
        "time_range": lambda time_range: range_text(time_range, words),
        "time_range_title": lambda time_range: range_title(time_range, words),
    }


def range_text(time_range: TimeRange, words: dict[str, str]) -> str:
    """Where a finding's time lies, in words: rank, step, start–end, length, field and file — start and end in ms
    from the step's start where it is known, else µs on the trace's clock."""
    r = time_range
    length = fmt_us(r.end_us - r.start_us)
    if r.step is not None and r.step_start_us is not None:
        label = "time_range_in_step" if r.step_start_from == "ProfilerStep" else "time_range_after_first_collective"
        return words[label].format(rank=r.rank, step=r.step, field=r.field, length=length, file=r.file,
                                                  start=f"{(r.start_us - r.step_start_us) / 1000:,.2f}",
                                                  end=f"{(r.end_us - r.step_start_us) / 1000:,.2f}")
    step = words["time_range_step"].format(step=r.step) if r.step is not None else ""
    return words["time_range"].format(rank=r.rank, step=step, field=r.field, length=length, file=r.file,
                                      start=f"{r.start_us:,.1f}", end=f"{r.end_us:,.1f}")


def range_title(time_range: TimeRange, words: dict[str, str]) -> str:
    """A range's start and end on the trace's clock (its events' ts, µs): the HTML's hover title of a range."""
    return words["time_range_title"].format(start=f"{time_range.start_us:,.1f}", end=f"{time_range.end_us:,.1f}")


@lru_cache(maxsize=2)
def environment(kind: str) -> Environment:
    """The Jinja2 environment of the templates in reports/: 'html' (autoescaped) or 'md' (Markdown-escaped)."""
    html = kind == "html"
    env = Environment(
        loader=FileSystemLoader(str(data_dir("reports"))),
        autoescape=html,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize_html if html else _finalize_markdown,
    )
    if html:
        env.filters["trusted"] = _html_trusted
        env.filters["reference"] = reference_html
        return env
    env.filters["trusted"] = lambda text: Markup(md_knowledge(text))  # no links, images or HTML from packs
    env.filters["code"] = lambda text: Markup(str(text).replace("`", "'"))
    env.filters["code_span"] = code_span
    env.filters["fence"] = _fence
    env.globals["env_block"] = lambda env_vars: _fence("\n".join(f"export {k}={v}" for k, v in env_vars.items()), "bash")
    return env


def _finalize_html(value: object) -> object:
    """Before autoescaping: drop control characters from input-derived text."""
    return strip_control(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def _finalize_markdown(value: object) -> object:
    """Every expression is escaped for Markdown unless a filter marked it safe."""
    return value if isinstance(value, Markup) else md_escape("" if value is None else str(value))


def code_span(text: object) -> Markup:
    """Input-derived text as one Markdown code span: controls removed, on one line, delimited by a backtick run
    longer than any inside it (a code span shows its text literally: no emphasis, link or HTML)."""
    content = " ".join(strip_control(str(text)).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", content)), default=0) + 1)
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return Markup(f"{fence}{pad}{content}{pad}{fence}")


def _fence(code: str, language: str = "") -> Markup:
    """A fenced code block whose fence is longer than any backtick run inside the code."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    language = re.sub(r"[^A-Za-z0-9_+-]", "", language)
    return Markup(f"{fence}{language}\n{code.rstrip()}\n{fence}")


def _html_trusted(text: str) -> Markup:
    """Knowledge text in HTML: escaped, with `inline code` shown as <code>."""
    return Markup(_INLINE_CODE.sub(lambda m: f"<code>{m.group(1)}</code>", str(escape(text))))
