"""Charts for the HTML report, drawn with matplotlib into self-contained SVG (no pyplot, no global state).

Each chart is a small function of the Report: the step-time breakdown per rank, the top operators as a
Pareto chart (from MIN_PARETO operator types: with fewer the table says it all), the bandwidth of each link
against its nominal, and device memory over time with the allocator's reorganisations marked; and for
``advisor compare`` the step breakdown and the operators of both sides. A chart whose data the profile lacks
is left out. Names from the input (operators, kernels) are drawn whole, wrapped over several lines, never cut;
they are plain text: mathtext parsing is off, and the SVG writer escapes XML. Output is deterministic (fixed
hash salt, no date), so the same report gives the same bytes.

The builders draw matplotlib figures (``Drawn``); the HTML report inlines each as SVG (``Chart``), and the Python API
hands out the same figures (``report_figures``, ``Report.figures()``), so a notebook shows what the report shows. Every
bar, marker and line carries a hover title with its value and unit (an SVG ``<title>``).
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape as _xml_escape

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
REPORT_CHARTS = ("step_breakdown", "top_operators", "bandwidth", "memory")  # the keys, in the report's order
COMPARISON_CHARTS = ("compare_step_breakdown", "compare_operators")
_MAX_COMPARED_OPERATORS = 15


@dataclass(frozen=True)
class Chart:
    """A chart of the HTML report: its SVG (standalone, with hover titles) and what the report says of it."""

    key: str
    title: str
    description: str
    svg: str

    def inline(self) -> str:
        """The SVG to put inside an HTML page: no XML prolog, metadata or style sheet of its own (matplotlib's
        ``*{stroke-linejoin…}`` would restyle the page: the two strokes are attributes of the root instead), only the
        ids something refers to, prefixed with the chart's key so that charts on one page never share one, and the
        description as its accessible name."""
        svg = self.svg[self.svg.index("<svg"):]
        svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
        svg = re.sub(r"\s*<defs>\s*<style[^>]*>.*?</style>\s*</defs>", "", svg, flags=re.S)
        svg = re.sub(r"<style[^>]*>.*?</style>", "", svg, flags=re.S)
        used = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', svg))
        svg = re.sub(r'\sid="([^"]+)"', lambda m: f' id="{self.key}-{m.group(1)}"' if m.group(1) in used else "", svg)
        svg = re.sub(r'(url\(#|href="#)([^)"]+)', lambda m: f"{m.group(1)}{self.key}-{m.group(2)}", svg)
        root = (f'<svg class="chart-svg" role="img" aria-label="{_xml_escape(self.description, {chr(34): "&quot;"})}" '
                'stroke-linejoin="round" stroke-linecap="butt"')
        return root + svg[len("<svg"):].rstrip() + "\n"


@dataclass
class Drawn:
    """A chart drawn: the matplotlib figure, what the report says of it, and the hover title of each artist given
    a ``gid`` by ``tip``."""

    key: str
    title: str
    description: str
    figure: Any  # a matplotlib Figure (ChartFigure)
    tips: dict[str, str] = field(default_factory=dict)

    def chart(self) -> Chart:
        svg = _svg(self.figure)
        for gid, text in self.tips.items():
            svg = svg.replace(f'<g id="{gid}">', f"<g><title>{_xml_escape(strip_control(text))}</title>", 1)
        return Chart(self.key, self.title, self.description, svg)


def tip(artist, tips: dict[str, str], text: str) -> None:  # noqa: ANN001 (a matplotlib Artist)
    """Give ``artist`` the hover title ``text`` (its SVG group gets a ``<title>``)."""
    gid = f"advisor-tip-{len(tips) + 1}"
    artist.set_gid(gid)
    tips[gid] = text


def _tips(artists, texts, tips: dict[str, str]) -> None:  # noqa: ANN001
    for artist, text in zip(artists, texts):
        tip(artist, tips, text)


@contextlib.contextmanager
def drawing() -> Iterator[None]:
    """The charts' matplotlib settings, and no missing-glyph warnings: text is measured with matplotlib's bundled
    font, which lacks CJK glyphs; the SVG keeps the text and the viewer's fonts draw it, so the warnings of a Chinese
    report are noise."""
    import matplotlib

    with matplotlib.rc_context(_RC), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        yield


def report_figures(report: Report, words: dict[str, str], keys: Collection[str] | None = None) -> dict[str, Drawn]:
    """Every chart the report's data supports (of ``keys``, when given: REPORT_CHARTS), drawn, by key."""
    return _draw([build for key, build in _report_builders().items() if keys is None or key in keys], report, words)


def _report_builders() -> dict[str, Callable[[Report, dict[str, str]], Drawn | None]]:
    return {"step_breakdown": _step_breakdown, "top_operators": _top_operators, "bandwidth": _bandwidth, "memory": _memory}


def report_charts(report: Report, words: dict[str, str]) -> dict[str, Chart]:
    """Every chart the report's data supports, as SVG, by key."""
    with drawing():
        return {key: drawn.chart() for key, drawn in report_figures(report, words).items()}


def _draw(builders: list[Callable[[Any, dict[str, str]], Drawn | None]], subject: Any, words: dict[str, str]) -> dict[str, Drawn]:
    drawn = {}
    with drawing():
        for build in builders:
            result = build(subject, words)
            if result is not None:
                drawn[result.key] = result
    return drawn


_FIGURE_CLASS: list[type] = []


def _figure_class() -> type:
    """A matplotlib Figure that draws with the charts' settings wherever it is drawn (a notebook's PNG, savefig)
    and shows itself in Jupyter as a PNG without pyplot."""
    if not _FIGURE_CLASS:
        from matplotlib.figure import Figure

        class ChartFigure(Figure):
            """A chart of advisor's report as a matplotlib figure: ``savefig``, or display it in Jupyter."""

            def draw(self, renderer) -> None:  # noqa: ANN001
                with drawing():
                    super().draw(renderer)

            def _repr_png_(self) -> bytes:
                buffer = io.BytesIO()
                self.savefig(buffer, format="png")
                return buffer.getvalue()

        _FIGURE_CLASS.append(ChartFigure)
    return _FIGURE_CLASS[0]


def _figure(width: float, height: float):
    return _figure_class()(figsize=(width, height), layout="constrained")


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


def _ms(us: float) -> str:
    return f"{us / 1000:,.2f} ms"


def _step_breakdown(report: Report, words: dict[str, str]) -> Drawn | None:
    ranks = report.summary.per_rank
    if not ranks:
        return None
    figure = _figure(7.5, min(1.2 + 0.32 * len(ranks), 12))
    axes = figure.add_subplot()
    tips: dict[str, str] = {}
    labels = [f"{words['rank']} {r.rank}" for r in ranks]
    left = [0.0] * len(ranks)
    for part, attribute, ratio in (("compute", "compute_us", "compute_ratio"),
                                   ("communication", "comm_not_overlapped_us", "communication_ratio"),
                                   ("free", "free_us", "free_ratio")):
        values = [getattr(r, attribute) / 1000 for r in ranks]
        bars = axes.barh(labels, values, left=left, color=COLOURS[part], label=words[part], height=0.6)
        _tips(bars, [f"{label} · {words[part]}{words['colon_sep']}{_ms(getattr(r, attribute))} ({getattr(r, ratio):.0%})"
                     for label, r in zip(labels, ranks)], tips)
        left = [a + b for a, b in zip(left, values)]
    axes.invert_yaxis()
    axes.set_xlabel(words["chart_ms_per_step"])
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, frameon=False)
    slowest = max(ranks, key=lambda r: r.step_time_us)
    description = words["chart_step_breakdown_alt"].format(ranks=len(ranks), rank=slowest.rank, ms=slowest.step_time_us / 1000)
    return Drawn("step_breakdown", words["step_breakdown"], description, figure, tips)


def _top_operators(report: Report, words: dict[str, str]) -> Drawn | None:
    """Horizontal bars of time per step, largest first, each with its share and the running (cumulative) share
    of compute: a Pareto chart whose operator names are read whole down the side."""
    operators = report.summary.top_operators
    if len(operators) < MIN_PARETO:
        return None
    names = [wrapped(op.op_type) for op in operators]
    lines = sum(name.count("\n") + 1 for name in names)
    figure = _figure(7.5, min(1.0 + 0.22 * lines + 0.12 * len(names), 16))
    axes = figure.add_subplot()
    tips: dict[str, str] = {}
    positions = list(range(len(operators)))
    values = [op.total_us_per_step / 1000 for op in operators]
    bars = axes.barh(positions, values, color=COLOURS["compute"], height=0.6)
    axes.set_yticks(positions, names, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel(words["chart_ms_per_step"])
    running, shares = 0.0, []
    for position, (op, value) in enumerate(zip(operators, values)):
        running += op.share_of_compute
        shares.append(min(running, 1.0) * 100)
        axes.annotate(f" {op.share_of_compute:.0%} · Σ {shares[-1]:.0f}%", (value, position), va="center", fontsize=7,
                      color=COLOURS["nominal"])
    _tips(bars, [f"{op.op_type}: {_ms(op.total_us_per_step)} ({op.share_of_compute:.0%} · Σ {share:.0f}%)"
                 for op, share in zip(operators, shares)], tips)
    axes.set_xlim(0, max(values) * 1.3 if max(values) > 0 else 1)
    axes.set_title(words["chart_cumulative_share"], loc="left", fontsize=8, color=COLOURS["free"])
    description = words["chart_top_operators_alt"].format(count=len(operators), share=shares[-1])
    return Drawn("top_operators", words["top_operators"], description, figure, tips)


def _bandwidth(report: Report, words: dict[str, str]) -> Drawn | None:
    links = [f for f in report.facts if f["type"] == "transport" and f.get("bandwidth_gbps") is not None]
    if not links:
        return None
    links.sort(key=lambda f: (f.get("utilization") if f.get("utilization") is not None else 9.9, f["rank"], f["transport"]))
    links = sorted(links[:_MAX_BARS], key=lambda f: (f["transport"], f["rank"]))
    figure = _figure(7.5, 3.4)
    axes = figure.add_subplot()
    tips: dict[str, str] = {}
    positions = list(range(len(links)))
    bars = axes.bar(positions, [f["bandwidth_gbps"] for f in links], color=COLOURS["compute"], label=words["chart_measured"])
    names = [f"{words['rank']} {f['rank']} · {f['transport']}" for f in links]
    _tips(bars, [f"{name} · {words['chart_measured']}{words['colon_sep']}{f['bandwidth_gbps']:,.1f} GB/s" for name, f in zip(names, links)], tips)
    nominal = [(i, f["nominal_gbps"]) for i, f in enumerate(links) if f.get("nominal_gbps")]
    for number, (i, value) in enumerate(nominal):  # a marker each, each with its own hover title
        legend = {"label": words["chart_nominal"]} if number == 0 else {}
        marker = axes.scatter([i], [value], marker="_", s=400, linewidths=2, color=COLOURS["nominal"], zorder=3, **legend)
        tip(marker, tips, f"{names[i]} · {words['chart_nominal']}{words['colon_sep']}{value:,.1f} GB/s")
    axes.set_xticks(positions, [f"{words['rank']} {f['rank']}\n{wrapped(f['transport'], 16)}" for f in links], fontsize=7)
    axes.set_ylabel("GB/s")
    axes.legend(loc="upper right", frameon=False)
    worst = min(links, key=lambda f: f.get("utilization") if f.get("utilization") is not None else 9.9)
    description = words["chart_bandwidth_alt"].format(
        links=len(links), transport=worst["transport"], rank=worst["rank"], gbps=worst["bandwidth_gbps"]
    )
    return Drawn("bandwidth", words["chart_bandwidth"], description, figure, tips)


def _memory(report: Report, words: dict[str, str]) -> Drawn | None:
    series = [f for f in report.facts if f["type"] == "memory" and len(f.get("timeline_us") or []) >= 2]
    if not series:
        return None
    series = series[:_MAX_MEMORY_RANKS]
    start = min(f["timeline_us"][0] for f in series)
    figure = _figure(7.5, 3.4)
    axes = figure.add_subplot()
    tips: dict[str, str] = {}
    palette = ["#0969da", "#bc4c00", "#1a7f37", "#8250df", "#9a6700", "#57606a", "#cf222e", "#0550ae"]
    marks = 0
    for index, fact in enumerate(series):
        colour = palette[index % len(palette)]
        seconds = [(t - start) / 1e6 for t in fact["timeline_us"]]
        for kind, style, width in (("reserved", "-", 1.2), ("allocated", "--", 0.9)):
            values = fact[f"timeline_{kind}_mb"]
            label = f"{words['rank']} {fact['rank']} {words['chart_' + kind]}"
            (line,) = axes.plot(seconds, values, color=colour, linewidth=width, linestyle=style, label=label)
            peak = max(range(len(values)), key=values.__getitem__)
            tip(line, tips, f"{label}{words['colon_sep']}{words['chart_peak']} {values[peak]:,.0f} MB ({seconds[peak]:,.2f} s)")
        for moment in fact.get("reorganisation_times_us") or []:
            mark = axes.axvline((moment - start) / 1e6, color=COLOURS["mark"], linewidth=0.8, alpha=0.7)
            tip(mark, tips, f"{words['rank']} {fact['rank']} · {words['chart_reorganisation']}{words['colon_sep']}{(moment - start) / 1e6:,.2f} s")
            marks += 1
    if marks:
        axes.plot([], [], color=COLOURS["mark"], linewidth=0.8, label=words["chart_reorganisation"])
    axes.set_xlabel(words["chart_seconds"])
    axes.set_ylabel("MB")
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=7)
    peak = max(max(f["timeline_reserved_mb"]) for f in series)
    description = words["chart_memory_alt"].format(ranks=len(series), peak=peak, marks=marks)
    return Drawn("memory", words["chart_memory"], description, figure, tips)


# --- advisor compare ---


def comparison_figures(comparison, words: dict[str, str]) -> dict[str, Drawn]:  # noqa: ANN001 (a Comparison)
    """The charts of a comparison, drawn: the step breakdown of both sides, and the operators that differ most."""
    return _draw([_compared_steps, _compared_operators], comparison, words)


def comparison_charts(comparison, words: dict[str, str]) -> dict[str, Chart]:  # noqa: ANN001 (a Comparison)
    """The charts of a comparison as SVG, by key."""
    with drawing():
        return {key: drawn.chart() for key, drawn in comparison_figures(comparison, words).items()}


def _compared_steps(comparison, words: dict[str, str]) -> Drawn | None:  # noqa: ANN001
    """BASE and TARGET as two stacked bars: compute, exposed communication and idle, ms per step."""
    parts = {row.name: row for row in comparison.breakdown}
    if not all(name in parts for name in ("compute", "communication", "free")):
        return None
    figure = _figure(7.5, 2.2)
    axes = figure.add_subplot()
    tips: dict[str, str] = {}
    sides = [words["base"], words["target"]]
    left = [0.0, 0.0]
    for part in ("compute", "communication", "free"):
        values = [parts[part].base / 1000, parts[part].target / 1000]
        bars = axes.barh(sides, values, left=left, color=COLOURS[part], label=words[part], height=0.55)
        _tips(bars, [f"{side} · {words[part]}{words['colon_sep']}{_ms(value * 1000)}" for side, value in zip(sides, values)], tips)
        left = [a + b for a, b in zip(left, values)]
    for position, total in enumerate(left):
        axes.annotate(f" {total:,.1f} ms", (total, position), va="center", fontsize=8)
    axes.set_xlim(0, max(left) * 1.15 if max(left) > 0 else 1)
    axes.invert_yaxis()
    axes.set_xlabel(words["chart_ms_per_step"])
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, frameon=False)
    description = words["chart_compare_steps_alt"].format(base=left[0], target=left[1])
    return Drawn("compare_step_breakdown", words["compare_breakdown"], description, figure, tips)


def _compared_operators(comparison, words: dict[str, str]) -> Drawn | None:  # noqa: ANN001
    """The operators (types, or classes across vendors) with the most time on either side: paired bars, ms per step."""
    rows = sorted(comparison.operators, key=lambda r: (-max(r.base, r.target), r.name))[:_MAX_COMPARED_OPERATORS]
    if len(rows) < 2:
        return None
    names = [wrapped(row.name) for row in rows]
    lines = sum(name.count("\n") + 1 for name in names)
    figure = _figure(7.5, min(1.2 + 0.2 * lines + 0.25 * len(rows), 16))
    axes = figure.add_subplot()
    tips: dict[str, str] = {}
    positions = list(range(len(rows)))
    for side, offset, colour in (("base", -0.2, COLOURS["free"]), ("target", 0.2, COLOURS["compute"])):
        bars = axes.barh([p + offset for p in positions], [getattr(r, side) / 1000 for r in rows], height=0.38,
                         color=colour, label=words[side])
        _tips(bars, [f"{r.name} · {words[side]}{words['colon_sep']}{_ms(getattr(r, side))}" for r in rows], tips)
    axes.set_yticks(positions, names, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel(words["chart_ms_per_step"])
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)
    title = words["operators_by_" + comparison.operators_matched_by]
    description = words["chart_compare_operators_alt"].format(count=len(rows), name=rows[0].name)
    return Drawn("compare_operators", title, description, figure, tips)
