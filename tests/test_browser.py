"""The HTML report in a real browser (headless Chromium over the DevTools protocol).

For the real two-rank capture and for a job with a finding in every category, in English and Chinese:
no console errors, no network request beyond the file itself, every chart drawn (inline SVG, with hover titles),
every finding shown, no horizontal overflow on a desktop or a phone-sized screen. Low-severity findings are
collapsed (a closed <details>, no script) and code blocks wrap instead of scrolling. The comparison page of
`advisor compare` draws its charts the same way. Full-page screenshots are saved under test-artifacts/ (or
$ADVISOR_TEST_ARTIFACTS) for people to look at.
Skipped only where no Chromium is installed; .ci/run installs Debian's chromium when it is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser import Chromium, find_chromium
from builders import (
    EVERY_CATEGORY_CONTEXT,
    EVERY_CATEGORY_ENV,
    Kernel,
    RankSpec,
    build_every_category,
    build_rank,
)

from advisor.diagnose import diagnose
from advisor.compare import compare
from advisor.render import render_html
from advisor.render.comparison import render_comparison_html
from advisor.usercontext import build_context
from advisor.vocabulary import CATEGORIES

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "ascend-level1-2ranks"
ARTIFACTS = Path(os.environ.get("ADVISOR_TEST_ARTIFACTS", ROOT / "test-artifacts"))
ALL_CHARTS = {"step_breakdown", "top_operators", "bandwidth", "memory"}
PAGE = {
    "charts": "[...document.querySelectorAll('figure.chart')].map(f => f.dataset.chart)",
    # inline SVG, drawn at its own proportions, named for screen readers, each bar or line with a hover title
    "charts_drawn": "[...document.querySelectorAll('figure.chart svg')].every(s => { const r = s.getBoundingClientRect();"
                    " const v = s.viewBox.baseVal; return r.width > 100 && Math.abs(r.height / r.width - v.height / v.width) < 0.02; })",
    "chart_alts": "[...document.querySelectorAll('figure.chart svg')].every(s => s.getAttribute('aria-label').length > 20)",
    "chart_titles": "[...document.querySelectorAll('figure.chart svg')].every(s => s.querySelectorAll('g > title').length > 0)",
    "findings": "[...document.querySelectorAll('article.finding h3')].map(h => h.textContent)",
    "overflow": "document.documentElement.scrollWidth - document.documentElement.clientWidth",
    "scripts": "document.scripts.length",
    "pwned": "typeof window.__pwned",
    # closed <details> of low findings: their articles are not rendered; the others are
    "low_closed": "[...document.querySelectorAll('details.low-findings')].every(d => !d.open)",
    "low_rendered": "[...document.querySelectorAll('details.low-findings article')].filter(a => a.checkVisibility()).length",
    "low_count": "document.querySelectorAll('details.low-findings article').length",
    "others_rendered": "[...document.querySelectorAll('article.finding:not(.severity-low)')].every(a => a.checkVisibility())",
    "code_scrolls": "[...document.querySelectorAll('pre')].filter(p => p.checkVisibility() && p.scrollWidth > p.clientWidth + 1).length",
    "warnings": "[...document.querySelectorAll('section.coverage li')].map(li => li.textContent)",
}

chromium_path = find_chromium()
if chromium_path is None and os.environ.get("ADVISOR_REQUIRE_BROWSER"):
    raise RuntimeError("ADVISOR_REQUIRE_BROWSER is set but no chromium is on PATH")
needs_chromium = pytest.mark.skipif(chromium_path is None, reason="no chromium on PATH (.ci/run installs it)")


@pytest.fixture(scope="module")
def browser():
    with Chromium(chromium_path) as instance:
        yield instance


@pytest.fixture(scope="module")
def every_category(tmp_path_factory):
    root = tmp_path_factory.mktemp("every")
    context = root / "context.yaml"
    context.write_text(EVERY_CATEGORY_CONTEXT)
    return build_every_category(root / "job"), build_context(EVERY_CATEGORY_ENV, [], context)


def _visit(browser: Chromium, report, name: str, tmp_path: Path, compared: bool = False) -> dict:
    page = tmp_path / f"{name}.html"
    page.write_text(render_comparison_html(report) if compared else render_html(report), encoding="utf-8")
    wide = browser.visit(page.as_uri(), 1280, 900, PAGE)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(ARTIFACTS / f"{name}.png")
    narrow = browser.visit(page.as_uri(), 390, 844, PAGE)
    browser.screenshot(ARTIFACTS / f"{name}-narrow.png")
    for visit in (wide, narrow):
        assert visit.errors == []
        assert all(url == page.as_uri() or url.startswith("data:image/svg+xml") for url in visit.requests), visit.requests
        assert visit.values["scripts"] == 0 and visit.values["pwned"] == "undefined"
        assert visit.values["overflow"] <= 0, f"{name}: the page scrolls sideways by {visit.values['overflow']} px"
        assert visit.values["charts_drawn"] and visit.values["chart_alts"] and visit.values["chart_titles"]
        assert visit.values["low_closed"] and visit.values["low_rendered"] == 0 and visit.values["others_rendered"]
        assert visit.values["code_scrolls"] == 0, f"{name}: a code block scrolls instead of wrapping"
    if not compared:
        assert wide.values["low_count"] == sum(f.severity == "low" for f in report.findings)
    shown = wide.values["findings"]
    assert len(shown) == len(report.findings)
    for heading, finding in zip(shown, report.findings):
        assert finding.title in heading
    return wide.values


@needs_chromium
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_real_capture_in_the_browser(browser, tmp_path, lang):
    report = diagnose(FIXTURE, lang=lang)
    values = _visit(browser, report, f"report-real-{lang}", tmp_path)
    assert set(values["charts"]) == ALL_CHARTS
    assert values["low_count"] >= 5  # the real capture has low findings: they are there, collapsed


@needs_chromium
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_comparison_in_the_browser(browser, tmp_path, lang):
    """GPU job against the real capture: both comparison charts drawn, the different-workload warning shown."""
    gap = compare(ROOT / "examples" / "gpu-synthetic-2ranks", FIXTURE, lang=lang)
    values = _visit(browser, gap, f"compare-{lang}", tmp_path, compared=True)
    assert set(values["charts"]) == {"compare_step_breakdown", "compare_operators"}
    assert any(("different workloads" if lang == "en" else "不同的负载") in w for w in values["warnings"])


@needs_chromium
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_category_in_the_browser(browser, every_category, tmp_path, lang):
    path, context = every_category
    report = diagnose(path, lang=lang, context=context)
    # every category but 'comparison' (advisor compare) and 'inference' (a serving run's: the test below); its only
    # 'profiling' finding is that two steps are few
    assert {f.category for f in report.findings} == set(CATEGORIES) - {"comparison", "inference"}
    assert [f.id for f in report.findings if f.category == "profiling"] == ["profiling.few_steps"]
    values = _visit(browser, report, f"report-every-category-{lang}", tmp_path)
    assert set(values["charts"]) == ALL_CHARTS


@needs_chromium
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_serving_run_in_the_browser(browser, tmp_path, lang):
    """The inference findings and the table of phases render like the rest (a vLLM decode on HIP graphs)."""
    from inference_shapes import vllm_graph_decode_host_bound

    path, _truth = vllm_graph_decode_host_bound(tmp_path / "serving")
    report = diagnose(path, lang=lang)
    assert report.findings[0].category == "inference" and report.summary.phases
    _visit(browser, report, f"report-serving-{lang}", tmp_path)
    page = (tmp_path / f"report-serving-{lang}.html").read_text(encoding="utf-8")
    assert ("Phases of the serving run" if lang == "en" else "推理服务各阶段") in page


HOSTILE = [
    "<script>window.__pwned=1</script>",
    '"><img src=x onerror="window.__pwned=2">',
    "$\\frac{a}{b}$ *bold* _em_ | pipe ` tick [link](http://example.com)",
    "\x1b[31mred\x1b[0m 算子名称很长很长很长很长很长很长很长很长很长很长很长很长很长很长很长很长很长很长",
]


@needs_chromium
def test_hostile_operator_names_neither_run_nor_break_the_page(browser, tmp_path):
    kernels = [Kernel(step, name, name, "AI_CORE", 400.0 + 50 * i) for step in (5, 6) for i, name in enumerate(HOSTILE)]
    build_rank(tmp_path / "job", RankSpec(kernels=kernels))
    report = diagnose(tmp_path / "job")
    values = _visit(browser, report, "report-hostile", tmp_path)
    assert "top_operators" in values["charts"]
    page = (tmp_path / "report-hostile.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "\x1b" not in page
