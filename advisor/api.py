"""The Python API's helpers: ``advisor.render`` and ``advisor.compare`` with dicts.

A ``Report`` (advisor/report.py) shows itself in Jupyter through ``_repr_html_`` (the HTML report's body with
its style sheet scoped to it, so it restyles nothing else on the page: ``render/fragment.py``) and
``_repr_markdown_``, and gives its findings, facts, per-rank steps and top operators as pandas DataFrames
(``advisor/frames.py``), its charts as matplotlib figures (``render/charts.py``), and is one line as a repr.
``compare`` returns a ``ComparisonReport``: the ``Comparison`` of ``advisor compare`` with the same methods, and its
changes, sides, collectives and memory as DataFrames. pandas is imported only when a DataFrame is asked for.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.compare import compare as _compare
from advisor.comparison import Comparison, Side
from advisor.diagnose import check_lang
from advisor.errors import InputError
from advisor.frames import changes_frame, facts_frame, findings_count, findings_frame, rows_frame, short_name, sides_frame
from advisor.render.fragment import html_fragment
from advisor.report import Report
from advisor.rulebook import RuleBook
from advisor.runoptions import RunOptions
from advisor.text import Lang
from advisor.usercontext import UserContext, resolve_context

if TYPE_CHECKING:
    import pandas as pd

_ALIASES = {"md": "markdown"}


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

    from advisor.render import DOCUMENTS, render_terminal
    from advisor.render.common import View
    from advisor.render.comparison import COMPARISON_DOCUMENTS, render_comparison_terminal

    comparison = isinstance(report, Comparison)
    if not comparison and not isinstance(report, Report):
        raise TypeError(f"render: expected a Report or a Comparison, got {type(report).__name__}")
    formats = ("terminal", *(COMPARISON_DOCUMENTS if comparison else DOCUMENTS))  # the registered renderers
    chosen = _ALIASES.get(str(format).lower(), str(format).lower())
    if chosen not in formats:
        raise InputError(f"unknown report format {format!r}; one of {', '.join(formats)} (or md)")
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
        return COMPARISON_DOCUMENTS[chosen](report)
    return DOCUMENTS[chosen](report, view)


class ComparisonReport(Comparison):
    """The result of ``advisor.compare``: the Comparison (same fields, same JSON) with Jupyter display and DataFrames."""

    def __repr__(self) -> str:
        """One line: the two profiles, their step times and the diagnosis of the difference, e.g.
        ``<ComparisonReport num_workers_0 → num_workers_4: step 28.89 → 19.12 ms (−33.8%), 2 findings, 3 changes
        (2 resolved, 1 persisting)>``."""
        def step(side: Side) -> str:
            return "–" if side.step_time_us is None else f"{side.step_time_us / 1000:,.2f}"

        text = f"step {step(self.base)} → {step(self.target)} ms"
        if self.base.step_time_us and self.target.step_time_us is not None:
            text += f" ({(self.target.step_time_us - self.base.step_time_us) / self.base.step_time_us:+.1%})".replace("-", "−")
        kinds = Counter(change.change for change in self.changes)
        changes = ", ".join(f"{kinds[k]} {k}" for k in ("resolved", "new", "persisting") if kinds[k])
        text += f", {findings_count(self.findings)}, {len(self.changes)} change{'' if len(self.changes) == 1 else 's'}"
        text += f" ({changes})" if changes else ""
        if not self.comparable:
            text += ", not comparable"
        return f"<{type(self).__name__} {short_name(self.base.path, 40)} → {short_name(self.target.path, 40)}: {text}>"

    __str__ = __repr__

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

    def changes_df(self) -> pd.DataFrame:
        """One row per finding of either side: ``change`` (resolved: BASE only; new: TARGET only; persisting),
        ``id``, ``key``, ``title``, ``base_severity``, ``target_severity``, ``base_gain_us``, ``target_gain_us``
        (µs per step; None on the side where it does not fire)."""
        return changes_frame(self)

    def sides_df(self) -> pd.DataFrame:
        """BASE and TARGET, a row each (indexed by ``side``): path, format, platform, hardware, profiler level,
        status, ranks, steps, step_count, step_time_us (mean) and median_step_us."""
        return sides_frame(self)

    def apis_df(self) -> pd.DataFrame:
        """The framework ops (aten::, npu::) whose host time changed most, µs per step (columns as operators_df;
        ``detail``: the calls per step on each side)."""
        return rows_frame(self.apis)

    def operator_shapes_df(self) -> pd.DataFrame:
        """The compute operators matched by type and input shapes, µs per step (columns as operators_df; ``name``: the
        type, ``detail``: the shapes); empty when a side records no shapes (``operator_shapes_note`` says so)."""
        return rows_frame(self.operator_shapes)

    def operator_memory_df(self) -> pd.DataFrame:
        """Device memory allocated per step by each operator, MB (columns as operators_df; ``detail``: the
        allocations per step on each side)."""
        return rows_frame(self.operator_memory)

    def collectives_df(self) -> pd.DataFrame:
        """The collectives on both sides, µs per step (columns as operators_df)."""
        return rows_frame(self.collectives)

    def memory_df(self) -> pd.DataFrame:
        """Device memory on both sides, MB (columns as operators_df)."""
        return rows_frame(self.memory)

    def figures(self) -> dict[str, Any]:
        """The charts of the HTML comparison as matplotlib figures, by name: ``compare_step_breakdown`` (both sides'
        step split) and ``compare_operators`` (the operators with the most time on either side), where there is
        data for them. Jupyter shows one as a PNG; ``savefig`` writes it."""
        from advisor.render.charts import comparison_figures
        from advisor.render.common import labels

        return {key: drawn.figure for key, drawn in comparison_figures(self, labels(self.lang)).items()}

    def figure(self, name: str) -> Any:
        """One chart of ``figures()`` by name; InputError when the comparison has no such chart."""
        from advisor.render.charts import COMPARISON_CHARTS

        drawn = self.figures()
        if name not in drawn:
            known = ", ".join(COMPARISON_CHARTS)
            raise InputError(f"no chart {name!r} in this comparison; the charts are {known} (those with data: figures())")
        return drawn[name]


def compare(
    base_path: str | Path,
    target_path: str | Path,
    book: RuleBook | None = None,
    *,
    lang: Lang = "en",
    context: UserContext | Mapping[str, object] | str | PathLike[str] | None = None,
    env: Mapping[str, object] | None = None,
    options: RunOptions | None = None,
    base_step: int | None = None,
    target_step: int | None = None,
) -> ComparisonReport:
    """Compare two profiles side by side and diagnose the difference (GPU vs NPU, before vs after).

    ``env`` and ``context`` are as for ``advisor.diagnose`` and apply to both sides; so do ``options``
    (``advisor.RunOptions``: jobs, file-size limit, progress listener; each side is read whole on this machine, so
    its scheduler and deep do not apply). ``base_step`` / ``target_step`` compare one step of a side (N of
    ProfilerStep#N) instead of the mean of every step, as ``--base-step`` / ``--target-step``. Raises InputError when
    either path holds no profile, or a chosen step is not among a side's profiled steps.
    """
    check_lang(lang)
    result = _compare(base_path, target_path, book, lang=lang, context=resolve_context(context, env), options=options,
                      base_step=base_step, target_step=target_step)
    return ComparisonReport.model_validate(dict(result))
