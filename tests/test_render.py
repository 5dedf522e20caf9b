"""Small pieces of the reports' rendering, checked on their own."""

from __future__ import annotations


def test_steps_profiled_gives_the_count_and_the_step_ids():
    """A single-step capture read 'Steps profiled: 50' beside a table that says 1 step (expert review)."""
    from advisor.render.common import fmt_steps

    assert fmt_steps([50]) == "1 (#50)"
    assert fmt_steps([3, 4, 5, 6, 7, 8], "ProfilerStep#N markers") == "6 (#3–8; ProfilerStep#N markers)"
    assert fmt_steps([]) == "–"


# --- HTML: references are links, charts have hover titles ---


def test_a_reference_with_an_http_address_is_a_link_and_nothing_else_is():
    from advisor.render.documents import reference_html

    assert reference_html("PyTorch profiler recipe <https://pytorch.org/tutorials/recipes/recipes/profiler_recipe.html>") == (
        '<a href="https://pytorch.org/tutorials/recipes/recipes/profiler_recipe.html" rel="noopener noreferrer">'
        "PyTorch profiler recipe</a>")
    # escaped, in the text and in the address
    assert reference_html('A & "B" <http://x.example/?a=1&b=2>') == (
        '<a href="http://x.example/?a=1&amp;b=2" rel="noopener noreferrer">A &amp; &#34;B&#34;</a>')
    # only http(s): any other address, or none, stays escaped text
    for text in ("Run this <javascript:alert(1)>", "A file <file:///etc/passwd>", "Just a title", "<data:text/html,x>",
                 "Quoted <https://x.example/\"onmouseover=\"alert(1)>"):
        html = str(reference_html(text))
        assert "<a" not in html and "<" not in html.replace("&lt;", ""), html


def test_the_html_report_links_its_references():
    import re

    from conftest import FIXTURES

    import advisor

    report = advisor.diagnose(FIXTURES / "pytorch-tutorial-resnet50" / "num_workers_0")
    html = advisor.render(report, "html")
    addressed = [r for f in report.findings for p in f.prescriptions for r in p.references if r.endswith(">")]
    assert addressed
    links = re.findall(r'<a href="(https?://[^"]+)" rel="noopener noreferrer">', html)
    for reference in addressed:
        assert reference[reference.rindex("<") + 1 : -1].replace("&", "&amp;") in links


def test_every_bar_point_and_line_of_a_chart_has_a_hover_title_with_its_value_and_unit():
    import re

    from conftest import REAL

    import advisor
    from advisor.render.charts import report_charts
    from advisor.render.common import report_labels

    report = advisor.diagnose(REAL)
    charts = report_charts(report, report_labels(report))
    titles = {key: re.findall(r"<title>([^<]*)</title>", chart.svg) for key, chart in charts.items()}
    ranks = report.summary.per_rank
    assert len(titles["step_breakdown"]) == 3 * len(ranks)
    first = ranks[0]
    assert f"Rank {first.rank} · Compute: {first.compute_us / 1000:,.2f} ms ({first.compute_ratio:.0%})" in titles["step_breakdown"]
    assert len(titles["top_operators"]) == len(report.summary.top_operators)
    assert all(t.endswith("%)") and " ms (" in t for t in titles["top_operators"])
    assert titles["bandwidth"] and all(t.endswith(" GB/s") for t in titles["bandwidth"])
    assert any("nominal" in t for t in titles["bandwidth"]) and any("measured" in t for t in titles["bandwidth"])
    assert titles["memory"] and all(" MB (" in t and t.endswith(" s)") for t in titles["memory"])
    # inline in the page: no style sheet of its own, an accessible name, the titles kept
    page = advisor.render(report, "html")
    for key, chart in charts.items():
        inline = chart.inline()
        assert inline.startswith('<svg class="chart-svg" role="img" aria-label="') and "<style" not in inline
        assert inline.count("<title>") == len(titles[key]) and inline in page


def test_hover_titles_are_escaped():
    from advisor.render.charts import Drawn, _figure, tip

    figure = _figure(2, 2)
    tips: dict[str, str] = {}
    (bar,) = figure.add_subplot().bar([0], [1])
    tip(bar, tips, "<script>&x</script>")
    svg = Drawn("k", "t", "d", figure, tips).chart().svg
    assert "<title>&lt;script&gt;&amp;x&lt;/script&gt;</title>" in svg and "<script" not in svg


def test_every_format_lists_the_same_number_of_top_actions():
    """Issue 29, item 7: the terminal and the brief Markdown listed five top actions, the full Markdown and the HTML
    three."""
    import io
    import re
    from pathlib import Path

    from rich.console import Console

    import advisor
    from advisor.render import View, render_html, render_markdown
    from advisor.render.common import BRIEF_FINDINGS
    from advisor.render.terminal import render_terminal

    report = advisor.diagnose(Path(__file__).parent / "fixtures" / "ascend-level1-2ranks")
    assert len(report.findings) > BRIEF_FINDINGS
    html = render_html(report)
    top = html[html.index('class="top-actions"'):]
    counts = {"html": top[: top.index("</ol>")].count("<li")}
    for name, view in (("md brief", View("brief")), ("md full", View("full"))):
        text = render_markdown(report, view)
        section = text[text.index("## Top actions"):].split("\n## ")[0]
        counts[name] = len(re.findall(r"(?m)^\d+\. ", section))
    buffer = io.StringIO()
    render_terminal(report, Console(file=buffer, width=200, no_color=True), view=View("brief"))  # the CLI's default
    terminal = buffer.getvalue()
    counts["terminal"] = len(re.findall(r"(?m)^\d+\. ", terminal[terminal.index("Top actions"):]))
    assert set(counts.values()) == {BRIEF_FINDINGS}, counts
