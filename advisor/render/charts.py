"""Charts for the HTML report, drawn with matplotlib into self-contained SVG (no pyplot, no global state).

Each chart is a small function of the Report: the step-time breakdown per rank, the top operators as a
Pareto chart (from MIN_PARETO operator types: with fewer the table says it all), the bandwidth of each link
against its nominal, and device memory over time with the allocator's reorganisations marked; and for
``advisor compare`` the step breakdown and the operators of both sides. A chart whose data the profile lacks
is left out. Names from the input (operators, kernels) are drawn whole, wrapped over several lines, never cut;
they are plain text: mathtext parsing is off, and the SVG writer escapes XML. Output is deterministic (fixed
hash salt, no date), so the same report gives the same bytes.
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.render.common import strip_control

if TYPE_CHECKING:
    from advisor.report import Report

# The report's palette (reports/report.css); distinguishable with the common colour-vision deficiencies.
COLOURS = {"compute": "#0969da", "communication": "#bc4c00", "free": "#8c959f", "mark": "#cf222e", "nominal": "#1f2328"}
_RC = {
    "svg.fonttype": "none",  # text stays text: small, searchable, any script the viewer's fonts cover
    "svg.hashsalt": "advisor",
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10,
}
_MAX_BARS = 32
_MAX_MEMORY_RANKS = 8
_LABEL_CHARS = 44  # a name longer than this is wrapped onto further lines
MIN_PARETO = 4
_MAX_COMPARED_OPERATORS = 15


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    description: str
    svg: str

    @property
    def data_uri(self) -> str:
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg.encode("utf-8")).decode("ascii")


def report_charts(report: Report, words: dict[str, str]) -> dict[str, Chart]:
    """Every chart the report's data supports, by key."""
    import matplotlib

    builders: list[Callable[[Report, dict[str, str]], Chart | None]] = [
        _step_breakdown,
        _top_operators,
        _bandwidth,
        _memory,
    ]
    charts = {}
    # Text is measured with matplotlib's bundled font, which lacks CJK glyphs; the SVG keeps the text and
    # the viewer's fonts draw it, so the missing-glyph warnings of a Chinese report are noise.
    with matplotlib.rc_context(_RC), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        for build in builders:
            chart = build(report, words)
            if chart is not None:
                charts[chart.key] = chart
    return charts


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(figure) -> str:
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    buffer = io.StringIO()
    FigureCanvasSVG(figure).print_svg(buffer, metadata={"Date": None})
    return buffer.getvalue()


def wrapped(text: str, width: int = _LABEL_CHARS) -> str:
    """The whole name on lines of at most ``width`` characters, broken after separators where it can be
    (``_``, ``::``, ``<``, ``,``, space), else anywhere: a long kernel name stays readable and complete."""
    text = strip_control(text)
    lines, rest = [], text
    while len(rest) > width:
        cut = max((rest.rfind(mark, 0, width) + len(mark) for mark in ("_", "::", "<", ",", " ", "/", ".")), default=0)
        if cut < width // 2:
            cut = width
        lines.append(rest[:cut])
        rest = rest[cut:]
    lines.append(rest)
    return "\n".join(lines)


def _step_breakdown(report: Report, words: dict[str, str]) -> Chart | None:
    ranks = report.summary.per_rank
    if not ranks:
        return None
    figure = _figure(7.5, min(1.2 + 0.32 * len(ranks), 12))
    axes = figure.add_subplot()
    labels = [f"{words['rank']} {r.rank}" for r in ranks]
    left = [0.0] * len(ranks)
    for part, attribute in (("compute", "compute_us"), ("communication", "comm_not_overlapped_us"), ("free", "free_us")):
        values = [getattr(r, attribute) / 1000 for r in ranks]
        axes.barh(labels, values, left=left, color=COLOURS[part], label=words[part], height=0.6)
        left = [a + b for a, b in zip(left, values)]
    axes.invert_yaxis()
    axes.set_xlabel(words["chart_ms_per_step"])
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, frameon=False)
    slowest = max(ranks, key=lambda r: r.step_time_us)
    description = words["chart_step_breakdown_alt"].format(ranks=len(ranks), rank=slowest.rank, ms=slowest.step_time_us / 1000)
    return Chart("step_breakdown", words["step_breakdown"], description, _svg(figure))


def _top_operators(report: Report, words: dict[str, str]) -> Chart | None:
    """Horizontal bars of time per step, largest first, each with its share and the running (cumulative) share
    of compute: a Pareto chart whose operator names are read whole down the side."""
    operators = report.summary.top_operators
    if len(operators) < MIN_PARETO:
        return None
    names = [wrapped(op.op_type) for op in operators]
    lines = sum(name.count("\n") + 1 for name in names)
    figure = _figure(7.5, min(1.0 + 0.22 * lines + 0.12 * len(names), 16))
    axes = figure.add_subplot()
    positions = list(range(len(operators)))
    values = [op.total_us_per_step / 1000 for op in operators]
    axes.barh(positions, values, color=COLOURS["compute"], height=0.6)
    axes.set_yticks(positions, names, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel(words["chart_ms_per_step"])
    running, shares = 0.0, []
    for position, (op, value) in enumerate(zip(operators, values)):
        running += op.share_of_compute
        shares.append(min(running, 1.0) * 100)
        axes.annotate(f" {op.share_of_compute:.0%} · Σ {shares[-1]:.0f}%", (value, position), va="center", fontsize=7,
                      color=COLOURS["nominal"])
    axes.set_xlim(0, max(values) * 1.3 if max(values) > 0 else 1)
    axes.set_title(words["chart_cumulative_share"], loc="left", fontsize=8, color=COLOURS["free"])
    description = words["chart_top_operators_alt"].format(count=len(operators), share=shares[-1])
    return Chart("top_operators", words["top_operators"], description, _svg(figure))


def _bandwidth(report: Report, words: dict[str, str]) -> Chart | None:
    links = [f for f in report.facts if f["type"] == "transport" and f.get("bandwidth_gbps") is not None]
    if not links:
        return None
    links.sort(key=lambda f: (f.get("utilization") if f.get("utilization") is not None else 9.9, f["rank"], f["transport"]))
    links = sorted(links[:_MAX_BARS], key=lambda f: (f["transport"], f["rank"]))
    figure = _figure(7.5, 3.4)
    axes = figure.add_subplot()
    positions = list(range(len(links)))
    axes.bar(positions, [f["bandwidth_gbps"] for f in links], color=COLOURS["compute"], label=words["chart_measured"])
    nominal = [(i, f["nominal_gbps"]) for i, f in enumerate(links) if f.get("nominal_gbps")]
    if nominal:
        axes.scatter([i for i, _ in nominal], [v for _, v in nominal], marker="_", s=400, linewidths=2,
                     color=COLOURS["nominal"], label=words["chart_nominal"], zorder=3)
    axes.set_xticks(positions, [f"{words['rank']} {f['rank']}\n{wrapped(f['transport'], 16)}" for f in links], fontsize=7)
    axes.set_ylabel("GB/s")
    axes.legend(loc="upper right", frameon=False)
    worst = min(links, key=lambda f: f.get("utilization") if f.get("utilization") is not None else 9.9)
    description = words["chart_bandwidth_alt"].format(
        links=len(links), transport=worst["transport"], rank=worst["rank"], gbps=worst["bandwidth_gbps"]
    )
    return Chart("bandwidth", words["chart_bandwidth"], description, _svg(figure))


def _memory(report: Report, words: dict[str, str]) -> Chart | None:
    series = [f for f in report.facts if f["type"] == "memory" and len(f.get("timeline_us") or []) >= 2]
    if not series:
        return None
    series = series[:_MAX_MEMORY_RANKS]
    start = min(f["timeline_us"][0] for f in series)
    figure = _figure(7.5, 3.4)
    axes = figure.add_subplot()
    palette = ["#0969da", "#bc4c00", "#1a7f37", "#8250df", "#9a6700", "#57606a", "#cf222e", "#0550ae"]
    marks = 0
    for index, fact in enumerate(series):
        colour = palette[index % len(palette)]
        seconds = [(t - start) / 1e6 for t in fact["timeline_us"]]
        axes.plot(seconds, fact["timeline_reserved_mb"], color=colour, linewidth=1.2,
                  label=f"{words['rank']} {fact['rank']} {words['chart_reserved']}")
        axes.plot(seconds, fact["timeline_allocated_mb"], color=colour, linewidth=0.9, linestyle="--",
                  label=f"{words['rank']} {fact['rank']} {words['chart_allocated']}")
        for moment in fact.get("reorganisation_times_us") or []:
            axes.axvline((moment - start) / 1e6, color=COLOURS["mark"], linewidth=0.8, alpha=0.7)
            marks += 1
    if marks:
        axes.plot([], [], color=COLOURS["mark"], linewidth=0.8, label=words["chart_reorganisation"])
    axes.set_xlabel(words["chart_seconds"])
    axes.set_ylabel("MB")
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=7)
    peak = max(max(f["timeline_reserved_mb"]) for f in series)
    description = words["chart_memory_alt"].format(ranks=len(series), peak=peak, marks=marks)
    return Chart("memory", words["chart_memory"], description, _svg(figure))


# --- advisor compare ---


def comparison_charts(comparison, words: dict[str, str]) -> dict[str, Chart]:  # noqa: ANN001 (a Comparison)
    """The charts of a comparison: the step breakdown of both sides, and the operators that differ most."""
    import matplotlib

    charts = {}
    with matplotlib.rc_context(_RC), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        for build in (_compared_steps, _compared_operators):
            chart = build(comparison, words)
            if chart is not None:
                charts[chart.key] = chart
    return charts


def _compared_steps(comparison, words: dict[str, str]) -> Chart | None:  # noqa: ANN001
    """BASE and TARGET as two stacked bars: compute, exposed communication and idle, ms per step."""
    parts = {row.name: row for row in comparison.breakdown}
    if not all(name in parts for name in ("compute", "communication", "free")):
        return None
    figure = _figure(7.5, 2.2)
    axes = figure.add_subplot()
    sides = [words["base"], words["target"]]
    left = [0.0, 0.0]
    for part in ("compute", "communication", "free"):
        values = [parts[part].base / 1000, parts[part].target / 1000]
        axes.barh(sides, values, left=left, color=COLOURS[part], label=words[part], height=0.55)
        left = [a + b for a, b in zip(left, values)]
    for position, total in enumerate(left):
        axes.annotate(f" {total:,.1f} ms", (total, position), va="center", fontsize=8)
    axes.set_xlim(0, max(left) * 1.15 if max(left) > 0 else 1)
    axes.invert_yaxis()
    axes.set_xlabel(words["chart_ms_per_step"])
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, frameon=False)
    description = words["chart_compare_steps_alt"].format(base=left[0], target=left[1])
    return Chart("compare_step_breakdown", words["compare_breakdown"], description, _svg(figure))


def _compared_operators(comparison, words: dict[str, str]) -> Chart | None:  # noqa: ANN001
    """The operators (types, or classes across vendors) with the most time on either side: paired bars, ms per step."""
    rows = sorted(comparison.operators, key=lambda r: (-max(r.base, r.target), r.name))[:_MAX_COMPARED_OPERATORS]
    if len(rows) < 2:
        return None
    names = [wrapped(row.name) for row in rows]
    lines = sum(name.count("\n") + 1 for name in names)
    figure = _figure(7.5, min(1.2 + 0.2 * lines + 0.25 * len(rows), 16))
    axes = figure.add_subplot()
    positions = list(range(len(rows)))
    axes.barh([p - 0.2 for p in positions], [r.base / 1000 for r in rows], height=0.38, color=COLOURS["free"], label=words["base"])
    axes.barh([p + 0.2 for p in positions], [r.target / 1000 for r in rows], height=0.38, color=COLOURS["compute"],
              label=words["target"])
    axes.set_yticks(positions, names, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel(words["chart_ms_per_step"])
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)
    title = words["operators_by_" + comparison.operators_matched_by]
    description = words["chart_compare_operators_alt"].format(count=len(rows), name=rows[0].name)
    return Chart("compare_operators", title, description, _svg(figure))
