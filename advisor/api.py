"""The Python API's helpers: ``advisor.render``, ``advisor.compare`` with dicts, Jupyter display and DataFrames.

A ``Report`` (advisor/report.py) shows itself in Jupyter through ``_repr_html_`` (the HTML report's body with
its style sheet scoped to it, so it restyles nothing else on the page) and ``_repr_markdown_``, and gives its
findings, facts, per-rank steps and top operators as pandas DataFrames. ``compare`` returns a
``ComparisonReport``: the ``Comparison`` of ``advisor compare`` with the same methods. pandas is imported
only when a DataFrame is asked for.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.compare import Comparison
from advisor.compare import compare as _compare
from advisor.diagnose import check_lang
from advisor.errors import InputError
from advisor.report import Finding, Report
from advisor.rulebook import RuleBook
from advisor.text import Lang
from advisor.usercontext import UserContext, resolve_context

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("terminal", "markdown", "html", "json")
_ALIASES = {"md": "markdown"}
SCOPE_CLASS = "advisor-report"

FINDING_COLUMNS = (
    "id", "key", "category", "severity", "title", "estimated_gain_us", "estimated_gain_ratio", "gain_basis",
    "charged_to", "claimed_gain_us", "shares_time_with", "ranks", "prescriptions", "explanation",
)
STEP_COLUMNS = (
    "rank", "steps", "step_time_us", "compute_us", "comm_not_overlapped_us", "free_us", "compute_ratio",
    "communication_ratio", "free_ratio", "bottleneck",
)
ROW_COLUMNS = ("name", "detail", "base", "target", "diff", "ratio")


def render(report: Report | Comparison, format: str = "terminal", *, width: int = 100, explain: bool = False,  # noqa: A002
           detail: str = "full", max_findings: int | None = None, min_severity: str | None = None) -> str:
    """The report (or comparison) as text: ``format`` is "terminal", "markdown" (or "md"), "html" or "json".

    The same documents ``advisor diagnose``/``advisor compare`` write: "terminal" is the terminal report
    without colours, ``width`` characters wide (with ``explain``, each finding's conditions and values);
    "json" is the JSON contract, byte for byte what ``-f json`` prints. For a Report, ``detail`` is "full"
    (the default here) or "brief" (the command line's default for the terminal and Markdown: verdict, top
    actions, per-rank table); ``max_findings`` and ``min_severity`` keep only some findings, in every format
    (as ``--max-findings`` and ``--min-severity``). A comparison is always rendered whole.
    """
    from rich.console import Console

    from advisor.render import render_html, render_json, render_markdown, render_terminal
    from advisor.render.common import View
    from advisor.render.comparison import (
        render_comparison_html,
        render_comparison_json,
        render_comparison_markdown,
        render_comparison_terminal,
    )

    chosen = _ALIASES.get(str(format).lower(), str(format).lower())
    if chosen not in FORMATS:
        raise InputError(f"unknown report format {format!r}; one of {', '.join(FORMATS)} (or md)")
    comparison = isinstance(report, Comparison)
    if not comparison and not isinstance(report, Report):
        raise TypeError(f"render: expected a Report or a Comparison, got {type(report).__name__}")
    try:
        view = View(detail, max_findings, min_severity)  # type: ignore[arg-type]
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if chosen == "terminal":
        buffer = io.StringIO()
        console = Console(file=buffer, width=width, no_color=True, color_system=None, force_terminal=False)
        if comparison:
            render_comparison_terminal(report, console)
        else:
            render_terminal(report, console, explain, view)
        return buffer.getvalue()
    if comparison:
        return {"markdown": render_comparison_markdown, "html": render_comparison_html,
                "json": render_comparison_json}[chosen](report)
    return {"markdown": render_markdown, "html": render_html, "json": render_json}[chosen](report, view)


class ComparisonReport(Comparison):
    """The result of ``advisor.compare``: the Comparison (same fields, same JSON) with Jupyter display and DataFrames."""

    def _repr_html_(self) -> str:
        return html_fragment(render(self, "html"))

    def _repr_markdown_(self) -> str:
        return render(self, "markdown")

    def findings_df(self) -> pd.DataFrame:
        """The diagnosis of the difference, one row per finding (see Report.findings_df)."""
        return findings_frame(self.findings)

    def facts_df(self, family: str | None = None) -> pd.DataFrame:
        """The delta facts (step_delta, operator_delta, collective_delta, memory_delta), optionally one family."""
        return facts_frame(self.facts, family)

    def breakdown_df(self) -> pd.DataFrame:
        """The step breakdown on both sides, per step and averaged over ranks, µs."""
        return rows_frame(self.breakdown)

    def operators_df(self) -> pd.DataFrame:
        """The compute operators matched on both sides (by type, or by class across vendors), µs per step."""
        return rows_frame(self.operators)


def compare(
    base_path: str | Path,
    target_path: str | Path,
    book: RuleBook | None = None,
    *,
    lang: Lang = "en",
    context: UserContext | Mapping[str, object] | str | PathLike[str] | None = None,
    env: Mapping[str, object] | None = None,
) -> ComparisonReport:
    """Compare two profiles side by side and diagnose the difference (GPU vs NPU, before vs after).

    ``env`` and ``context`` are as for ``advisor.diagnose`` and apply to both sides. Raises InputError when
    either path holds no profile.
    """
    check_lang(lang)
    result = _compare(base_path, target_path, book, lang=lang, context=resolve_context(context, env))
    return ComparisonReport.model_validate(dict(result))


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """One row per finding, in the report's order (severity, then gain)."""
    import pandas as pd

    rows = [
        {
            "id": f.id, "key": f.key, "category": f.category, "severity": f.severity, "title": f.title,
            "estimated_gain_us": f.estimated_gain_us, "estimated_gain_ratio": f.estimated_gain_ratio,
            "gain_basis": f.gain_basis, "charged_to": f.charged_to, "claimed_gain_us": f.claimed_gain_us,
            "shares_time_with": list(f.shares_time_with), "ranks": list(f.ranks),
            "prescriptions": [p.id for p in f.prescriptions], "explanation": f.explanation,
        }
        for f in findings
    ]
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))


def facts_frame(facts: Sequence[Mapping[str, Any]], family: str | None = None) -> pd.DataFrame:
    """The facts as rows (``type`` = the family, then its fields); one family's fields only when given."""
    import pandas as pd

    from advisor.facts import FACT_FAMILIES

    if family is not None and family not in FACT_FAMILIES:
        raise InputError(f"unknown fact family {family!r}; known: {', '.join(FACT_FAMILIES)}")
    rows = [{k: list(v) if isinstance(v, list) else v for k, v in f.items()} for f in facts if family in (None, f.get("type"))]
    if family is not None:
        columns = ["type", *FACT_FAMILIES[family].model_fields]
    else:
        columns = list(dict.fromkeys(itertools.chain(["type", "id"], *(row.keys() for row in rows))))
    return pd.DataFrame(rows, columns=columns)


def steps_frame(report: Report) -> pd.DataFrame:
    """The per-rank step table of the report: step time and its compute / exposed communication / idle split."""
    import pandas as pd

    rows = [r.model_dump() for r in report.summary.per_rank]
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS)).set_index("rank")


def operators_frame(report: Report) -> pd.DataFrame:
    """The top operator types of the report (mean over the ranks that run them), µs per step."""
    import pandas as pd

    columns = ["op_type", "accelerator_core", "ranks", "count_per_step", "total_us_per_step", "share_of_compute"]
    return pd.DataFrame([o.model_dump() for o in report.summary.top_operators], columns=columns)


def rows_frame(rows: Sequence[Any]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame([r.model_dump() for r in rows], columns=list(ROW_COLUMNS))


# --- the HTML report as a fragment of a page (Jupyter) ---

_STYLE = re.compile(r"<style[^>]*>(.*?)</style>", re.S | re.I)
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.S | re.I)
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_PAGE_SELECTOR = re.compile(r"^(?::root|html|body)(?![\w-])")
_FRAGMENT_IDS = itertools.count(1)


def html_fragment(document: str, scope: str = SCOPE_CLASS) -> str:
    """A self-contained HTML document as one ``<div>`` to put inside another page.

    Its style sheet is kept, with every rule confined to the div (``body`` and ``:root`` become the div
    itself), and its element ids get a prefix of their own, so two reports on one page link each to its own
    findings and neither restyles the page around it.
    """
    body = _BODY.search(document)
    if body is None:
        raise ValueError("not an HTML document: no <body>")
    # notebooks style tables themselves (JupyterLab: a fixed layout): the report's tables size to their content
    css = "\n".join([f".{scope} table {{table-layout: auto;}}",
                     *(scope_css(block, f".{scope}") for block in _STYLE.findall(document))])
    prefix = f"{scope}-{next(_FRAGMENT_IDS)}-"
    content = re.sub(r'(\sid=")([^"]+")', rf"\1{prefix}\2", body.group(1))
    content = re.sub(r'(\shref="#)([^"]+")', rf"\1{prefix}\2", content)
    return f'<div class="{scope}">\n<style>\n{css}\n</style>\n{content.strip()}\n</div>\n'


def scope_css(css: str, scope: str) -> str:
    """Every rule of ``css`` confined to the elements inside ``scope`` (a selector), @media blocks included."""
    css = _COMMENT.sub("", css)
    rules = []
    position = 0
    while True:
        start = css.find("{", position)
        if start < 0:
            break
        prelude = css[position:start].strip()
        end, depth = start + 1, 1
        while depth and end < len(css):
            depth += {"{": 1, "}": -1}.get(css[end], 0)
            end += 1
        block = css[start + 1 : end - 1]
        if prelude.startswith(("@media", "@supports", "@container")):
            rules.append(f"{prelude} {{\n{scope_css(block, scope)}\n}}")
        elif prelude.startswith("@"):  # @font-face, @keyframes, @page: not about elements of the page
            rules.append(f"{prelude} {{{block}}}")
        else:
            rules.append(f"{', '.join(_scoped(s, scope) for s in _selectors(prelude))} {{{block.strip()}}}")
        position = end
    return "\n".join(rules)


def _selectors(prelude: str) -> list[str]:
    """The selectors of a rule's prelude, split at commas outside parentheses (``:is(a, b)`` stays whole)."""
    parts, depth, current = [], 0, []
    for char in prelude:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _scoped(selector: str, scope: str) -> str:
    if selector == "*":
        return f"{scope}, {scope} *"
    page = _PAGE_SELECTOR.match(selector)
    if page:  # the page itself is the fragment's container
        return scope + selector[page.end():]
    return f"{scope} {selector}"
