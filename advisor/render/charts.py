"""Charts for the HTML report, drawn with matplotlib into self-contained SVG (no pyplot, no global state).

Each chart is a small function of the Report: the step-time breakdown per rank, the top operators as a
Pareto chart, the bandwidth of each link against its nominal, and device memory over time with the
allocator's reorganisations marked. A chart whose data the profile lacks is left out. Text from the
input (operator names) is drawn as plain text: mathtext parsing is off, and the SVG writer escapes XML.
Output is deterministic (fixed hash salt, no date), so the same report gives the same bytes.
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from advisor.render.common import strip_control
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
_LABEL_CHARS = 28


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


def _short(text: str) -> str:
    text = strip_control(text)
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"


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
    operators = report.summary.top_operators
    if not operators:
        return None
    figure = _figure(7.5, 3.8)
    axes = figure.add_subplot()
    names = [_short(op.op_type) for op in operators]
    positions = list(range(len(operators)))
    axes.bar(positions, [op.total_us_per_step / 1000 for op in operators], color=COLOURS["compute"])
    axes.set_xticks(positions, names, rotation=35, ha="right")
    axes.set_ylabel(words["chart_ms_per_step"])
    cumulative = axes.twinx()
    running, shares = 0.0, []
    for op in operators:
        running += op.share_of_compute
        shares.append(min(running, 1.0) * 100)
    cumulative.plot(positions, shares, color=COLOURS["communication"], marker="o", markersize=3)
    cumulative.set_ylim(0, 105)
    cumulative.set_ylabel(words["chart_cumulative_share"])
    cumulative.spines["right"].set_visible(True)
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
    axes.set_xticks(positions, [f"{words['rank']} {f['rank']}\n{_short(f['transport'])}" for f in links], fontsize=7)
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
