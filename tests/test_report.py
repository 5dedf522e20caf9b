"""Reports: the JSON contract and its schema, the four renderings, languages, escaping, determinism."""

from __future__ import annotations

import io
import json
import re
from html import escape as html_escape

import jsonschema
import pytest
from builders import Kernel, RankSpec, StepRow, build_rank
from conftest import REAL, SAMPLE_CLUSTER, SAMPLE_SINGLE
from rich.console import Console

import advisor
from advisor.render import render_html, render_json, render_markdown, render_terminal
from advisor.render.documents import md_escape
from advisor.report import SCHEMA_PATH, report_schema

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def test_shipped_schema_is_current():
    assert SCHEMA == json.loads(json.dumps(report_schema())), "run `make schema` and commit the result"


@pytest.mark.parametrize("path", [REAL, REAL / "rank0_ascend_pt", SAMPLE_SINGLE, SAMPLE_CLUSTER])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_json_report_validates_against_the_schema(path, lang):
    document = json.loads(render_json(advisor.diagnose(path, lang=lang)))
    jsonschema.validate(document, SCHEMA)
    assert document["schema_version"] == 1 and document["lang"] == lang
    for key in ("input", "summary", "findings", "facts", "coverage"):
        assert key in document


def test_json_is_byte_identical_across_runs():
    assert render_json(advisor.diagnose(REAL)) == render_json(advisor.diagnose(REAL))


def test_findings_are_ranked_by_severity_then_gain_and_traceable_to_facts():
    report = advisor.diagnose(SAMPLE_CLUSTER)
    order = {"high": 0, "medium": 1, "low": 2}
    assert [order[f.severity] for f in report.findings] == sorted(order[f.severity] for f in report.findings)
    for severity in order:  # within a severity: estimated first, largest first (an assumed gain counting half)
        scores = [(f.estimated_gain_us or 0.0) * (0.5 if f.gain_basis == "assumed" else 1.0)
                  for f in report.findings if f.severity == severity and f.estimated_gain_us is not None]
        assert scores == sorted(scores, reverse=True)
    fact_ids = {f["id"] for f in report.model_dump()["facts"]}
    for finding in report.findings:
        assert set(finding.trace.facts) <= fact_ids
        assert finding.trace.rule_file.startswith("rules/")
    verdicts = [f for f in report.model_dump()["facts"] if f["type"] == "bottleneck"]
    assert {(v["scope"], v["rank"], v["kind"]) for v in verdicts} == {
        ("profile", None, "communication"), ("rank", 0, "communication"), ("rank", 1, "communication")}
    assert all(v["id"].startswith("bottleneck:bottleneck.communication:") for v in verdicts)


def test_markdown_and_html_carry_the_same_findings():
    report = advisor.diagnose(SAMPLE_CLUSTER)
    markdown, html = render_markdown(report), render_html(report)
    assert report.findings
    for finding in report.findings:
        assert finding.title in markdown and finding.title in html
        assert finding.id in markdown and finding.id in html
        for prescription in finding.prescriptions:
            assert md_escape(prescription.title) in markdown and html_escape(prescription.title) in html


def test_chinese_report_uses_the_chinese_knowledge_text():
    report = advisor.diagnose(SAMPLE_CLUSTER, lang="zh")
    transfer = next(f for f in report.findings if f.id == "communication.transfer_bound")
    assert transfer.title == "未掩盖的通信时间花在数据传输上"
    assert transfer.prescriptions[0].title == "减少数据量、增大消息并与计算重叠"
    assert "在传输数据" in transfer.explanation
    for text in (render_markdown(report), render_html(report)):
        assert "通信瓶颈" in text and "问题与建议" in text and "减少数据量、增大消息并与计算重叠" in text


def test_html_is_self_contained():
    html = render_html(advisor.diagnose(REAL))
    assert "<script" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html
    assert "default-src 'none'" in html


def test_terminal_report_fits_100_columns():
    buffer = io.StringIO()
    render_terminal(advisor.diagnose(REAL), Console(file=buffer, width=100, no_color=True))
    lines = buffer.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 100
    assert any("communication-bound" in line for line in lines)


HOSTILE = '<script>alert("x")</script>|*_[x](http://e.invalid)`\x1b[31m'


def _hostile_profile(tmp_path):
    kernels = [Kernel(5, HOSTILE, HOSTILE, "AI_CORE", 900.0), Kernel(5, "Add", "Add", "AI_VECTOR_CORE", 100.0)]
    build_rank(tmp_path, RankSpec(steps=[StepRow(5, 1000.0, 100.0, 50.0)], kernels=kernels))
    return advisor.diagnose(tmp_path)


def test_hostile_operator_names_are_escaped_in_html(tmp_path):
    report = _hostile_profile(tmp_path)
    assert any(f.key == HOSTILE for f in report.findings)  # the name reached the finding verbatim
    html = render_html(report)
    assert "<script>" not in html and "&lt;script&gt;" in html and "\x1b" not in html


def test_hostile_operator_names_are_escaped_in_markdown(tmp_path):
    markdown = render_markdown(_hostile_profile(tmp_path))
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown
    assert not re.search(r"(?<!\\)\]\(http", markdown)  # no live link
    assert "\x1b" not in markdown
    for line in markdown.splitlines():
        if line.startswith("| ") and "script" in line:
            assert line.count(" | ") == line.replace("\\|", "").count(" | ")  # no extra table cells


def test_hostile_operator_names_cannot_drive_the_terminal(tmp_path):
    buffer = io.StringIO()
    render_terminal(_hostile_profile(tmp_path), Console(file=buffer, width=100, no_color=True))
    assert "\x1b" not in buffer.getvalue()
    assert "<script>" in buffer.getvalue()  # shown as text, verbatim


def test_json_keeps_operator_names_verbatim(tmp_path):
    document = json.loads(render_json(_hostile_profile(tmp_path)))
    assert any(f["key"] == HOSTILE for f in document["findings"])


def _markdown_tokens(markdown: str):
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").parse(markdown)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_markdown_structure_parses_as_a_tracker_would(lang):
    """Headings, tables, balanced <details>, closed code fences, and no raw HTML but <details>/<summary>."""
    report = advisor.diagnose(REAL, lang=lang)
    markdown = render_markdown(report)
    tokens = _markdown_tokens(markdown)
    headings = [(t.tag, tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[0][0] == "h1" and sum(tag == "h2" for tag, _ in headings) >= 4
    assert sum(tag == "h3" for tag, _ in headings) == len(report.findings)
    for finding, (_, title) in zip(report.findings, [h for h in headings if h[0] == "h3"]):
        assert finding.title in title
    assert sum(t.type == "table_open" for t in tokens) >= 3  # profile summary, step breakdown, operators, evidence
    html = [t.content for t in tokens if t.type in ("html_block", "html_inline")]
    tags = re.findall(r"</?([a-zA-Z]+)", "".join(html))
    assert set(tags) <= {"details", "summary"}
    assert tags.count("details") % 2 == 0 and markdown.count("<details>") == markdown.count("</details>")
    fences = [t for t in tokens if t.type == "fence"]
    assert fences and markdown.count("```") == 2 * len(fences)  # every fence closed, none swallowing the rest
    assert all("\n## " not in fence.content for fence in fences)


def test_hostile_names_keep_the_markdown_structure(tmp_path):
    markdown = render_markdown(_hostile_profile(tmp_path))
    tokens = _markdown_tokens(markdown)
    html = "".join(t.content for t in tokens if t.type in ("html_block", "html_inline"))
    assert set(re.findall(r"</?([a-zA-Z]+)", html)) <= {"details", "summary"}
    assert not [t for t in tokens if t.type == "link_open"]
