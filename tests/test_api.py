"""The Python API as a notebook uses it: env and context as dicts, ``advisor.render``, Jupyter display, DataFrames."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from conftest import FIXTURES, REAL
from markupsafe import escape

import advisor
from advisor.api import ComparisonReport
from advisor.compare import compare as compare_module_function
from advisor.errors import InputError
from advisor.facts import FACT_FAMILIES
from advisor.render import render_html, render_json, render_markdown
from advisor.render.common import report_labels, verdict_sentence
from advisor.render.comparison import render_comparison_json, render_comparison_markdown
from advisor.render.fragment import html_fragment, scope_css
from advisor.usercontext import UserContext, build_context, context_from_dicts, resolve_context

GPU_TRACE = FIXTURES / "pytorch-tutorial-resnet50" / "num_workers_0"
TORCH_CPU = FIXTURES / "torch-cpu"


@pytest.fixture(scope="module")
def report():
    return advisor.diagnose(REAL)


# --- env and context as dicts ---


def test_env_and_context_dicts_reach_the_rules_and_name_their_source():
    report = advisor.diagnose(REAL, env={"TASK_QUEUE_ENABLE": 1, "ASCEND_LAUNCH_BLOCKING": "1"},
                              context={"micro_batch_size": 4, "sequence_length": 4096, "dtype": "bf16"})
    assert {"host.task_queue_level", "environment.launch_blocking"} <= {f.id for f in report.findings}
    env = report.facts_df("environment").set_index("name")
    assert env.loc["TASK_QUEUE_ENABLE", "value"] == "1" and env.loc["TASK_QUEUE_ENABLE", "sources"] == ["env"]
    (model,) = report.facts_df("model").to_dict("records")
    assert (model["micro_batch_size"], model["sequence_length"], model["dtype"], model["sources"]) == (4, 4096, "bf16", ["context"])


def test_the_dicts_give_the_same_report_as_the_files(tmp_path):
    (tmp_path / "model.yaml").write_text("micro_batch_size: 4\ntensor_parallel: 8\n")
    from_files = advisor.diagnose(REAL, context=build_context(["TASK_QUEUE_ENABLE=0"], [], tmp_path / "model.yaml"))
    from_dicts = advisor.diagnose(REAL, env={"TASK_QUEUE_ENABLE": "0"}, context={"micro_batch_size": 4, "tensor_parallel": 8})
    from_path = advisor.diagnose(REAL, env={"TASK_QUEUE_ENABLE": "0"}, context=str(tmp_path / "model.yaml"))

    def without_sources(report):
        return [(f.id, f.key, f.explanation, f.estimated_gain_us) for f in report.findings]

    assert without_sources(from_files) == without_sources(from_dicts) == without_sources(from_path)


@pytest.mark.parametrize(
    ("env", "context", "message"),
    [
        ({"NOT A NAME": "1"}, None, "env: 'NOT A NAME' is not a valid variable name"),
        ({"": "1"}, None, "env: '' is not a valid variable name"),
        ({"TASK_QUEUE_ENABLE": True}, None, "env: TASK_QUEUE_ENABLE: expected a string or a number as the value, got bool"),
        ({"TASK_QUEUE_ENABLE": [2]}, None, "env: TASK_QUEUE_ENABLE: expected a string or a number as the value, got list"),
        ({"HCCL_BUFFSIZE": float("nan")}, None, "env: HCCL_BUFFSIZE: expected a string or a number as the value, got float"),
        (["TASK_QUEUE_ENABLE=2"], None, "env: expected a mapping of variable names to values, got list"),
        (None, {"micro_batch_size": 0}, "context: micro_batch_size: Input should be greater than or equal to 1"),
        (None, {"dtype": "fp4"}, "context: dtype: Input should be 'fp32', 'fp16', 'bf16', 'fp8', 'int8' or 'int4'"),
        (None, {"batch": 4}, "context: batch: Extra inputs are not permitted"),
        (None, [("micro_batch_size", 4)], "context: expected a dict of model settings, the path of a settings file or a UserContext, got list"),
    ],
)
def test_bad_dicts_are_refused_naming_the_key(env, context, message):
    with pytest.raises(InputError) as error:
        advisor.diagnose(REAL, env=env, context=context)
    assert str(error.value) == message


def test_context_from_dicts_validates_like_the_files_and_merges_over_a_base():
    base = build_context(["TASK_QUEUE_ENABLE=0", "HCCL_BUFFSIZE=200"], [], None)
    merged = context_from_dicts({"TASK_QUEUE_ENABLE": 2, "CPU_AFFINITY_CONF": 0.5}, None, base=base)
    assert merged.env == {"TASK_QUEUE_ENABLE": ("2", "env"), "HCCL_BUFFSIZE": ("200", "--env"), "CPU_AFFINITY_CONF": ("0.5", "env")}
    assert base.env["TASK_QUEUE_ENABLE"] == ("0", "--env")  # the base is not changed
    named = context_from_dicts(None, {"micro_batch_size": "4"}, model_source="mcp")
    assert named.model.micro_batch_size == 4 and named.model_source == "mcp"  # "4" is a number, as in YAML
    with pytest.raises(InputError, match="^ctx: expected a mapping of model settings"):
        context_from_dicts(None, 4, model_source="ctx")
    assert resolve_context(None, None) is None
    user = UserContext(env={"A": ("1", "x")})
    assert resolve_context(user, None).env == user.env


def test_the_keyword_arguments_of_before_still_work(tmp_path):
    (tmp_path / "model.yaml").write_text("device_memory_gb: 2.2\n")
    report = advisor.diagnose(REAL, lang="zh", rulebook=None, context=build_context([], [], tmp_path / "model.yaml"))
    assert report.lang == "zh" and "memory.near_capacity" in {f.id for f in report.findings}
    with pytest.raises(InputError, match="^lang: 'fr' is not a report language; one of en, zh$"):
        advisor.diagnose(REAL, lang="fr")
    with pytest.raises(InputError, match="no such file or directory"):
        advisor.diagnose(tmp_path / "absent")


# --- render ---


def test_render_gives_each_format_as_the_command_line_writes_it(report):
    assert advisor.render(report, "json") == render_json(report)
    assert json.loads(advisor.render(report, "json"))["findings"][0]["id"] == report.findings[0].id
    assert advisor.render(report, "markdown") == advisor.render(report, "md") == render_markdown(report)
    assert advisor.render(report, "html") == render_html(report)
    terminal = advisor.render(report, "terminal")
    assert "\x1b[" not in terminal and report.findings[0].title in " ".join(terminal.split())
    assert max(len(line) for line in terminal.splitlines()) <= 100
    assert "✓" in advisor.render(report, "terminal", explain=True) and "✓" not in terminal
    with pytest.raises(InputError, match="unknown report format 'pdf'; one of terminal, markdown, html, json"):
        advisor.render(report, "pdf")
    with pytest.raises(TypeError, match="expected a Report or a Comparison, got dict"):
        advisor.render({"findings": []}, "json")


def test_the_cli_json_and_the_api_json_are_the_same():
    from test_cli import advisor as run_cli

    plain = run_cli("diagnose", str(REAL), "-f", "json", "--lang", "en")
    assert plain.returncode == 0, plain.stderr
    assert advisor.render(advisor.diagnose(str(REAL)), "json") == plain.stdout
    told = run_cli("diagnose", str(REAL), "-f", "json", "--lang", "en", "--env", "TASK_QUEUE_ENABLE=1")
    api = json.loads(advisor.render(advisor.diagnose(str(REAL), env={"TASK_QUEUE_ENABLE": "1"}), "json"))
    (fact,) = [f for f in api["facts"] if f["id"] == "environment:TASK_QUEUE_ENABLE"]
    assert fact["sources"] == ["env"]  # the one difference: where the value came from (the fact, and traces citing it)

    def as_cli(value):
        if value == ["env"]:
            return ["--env"]
        if isinstance(value, dict):
            return {k: as_cli(v) for k, v in value.items()}
        return [as_cli(v) for v in value] if isinstance(value, list) else value

    assert as_cli(api) == json.loads(told.stdout)


# --- Jupyter ---


def test_the_report_shows_itself_in_jupyter_as_the_html_body(report):
    page = report._repr_html_()
    assert page.startswith('<div class="advisor-report">\n<style>') and page.rstrip().endswith("</div>")
    assert not re.search(r"<(html|head|body|meta|title|script)\b", page)
    assert verdict_sentence(report, report_labels(report)) in page
    for finding in report.findings[:3]:
        assert finding.title in page
    assert 'data-chart="breakdown"' in page or "<figure" in page  # the charts come along, as data URIs
    assert report._repr_markdown_() == render_markdown(report)


def test_the_style_sheet_is_confined_to_the_report(report):
    page = report._repr_html_()
    css = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    flat = re.sub(r"@media[^{]*\{", "", css)
    for selectors in re.findall(r"([^{}]+)\{[^{}]*\}", flat):
        for selector in selectors.split(","):
            assert selector.strip().startswith(".advisor-report"), selector
    # links stay inside one report when two are on one page
    again = report._repr_html_()
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert ids and not set(ids) & set(re.findall(r'\sid="([^"]+)"', again))
    for target in re.findall(r'href="#([^"]+)"', page):
        assert target in ids


def test_scope_css_rewrites_page_selectors_and_media_blocks():
    css = """/* c */ :root { --a: 1; } * { b: 2; } body, h1 > a:is(.x, .y) { c: 3; }
    @media (max-width: 700px) { body { d: 4; } .k { e: 5; } } @font-face { font-family: F; } bodyx { f: 6; }"""
    assert scope_css(css, ".s").split("\n") == [
        ".s {--a: 1;}",
        ".s, .s * {b: 2;}",
        ".s, .s h1 > a:is(.x, .y) {c: 3;}",
        "@media (max-width: 700px) {",
        ".s {d: 4;}",
        ".s .k {e: 5;}",
        "}",
        "@font-face { font-family: F; }",
        ".s bodyx {f: 6;}",
    ]
    with pytest.raises(ValueError, match="no <body>"):
        html_fragment("<p>not a document</p>")


# --- DataFrames ---


def test_findings_df_has_one_row_per_finding_in_the_reports_order(report):
    frame = report.findings_df()
    assert list(frame.columns[:10]) == ["id", "key", "category", "severity", "title", "estimated_gain_us",
                                        "estimated_gain_ratio", "gain_basis", "charged_to", "claimed_gain_us"]
    assert {"ranks", "prescriptions", "shares_time_with", "explanation"} <= set(frame.columns)
    assert list(frame["id"]) == [f.id for f in report.findings]
    first = frame.iloc[0]
    finding = report.findings[0]
    assert (first["severity"], first["estimated_gain_us"], first["charged_to"], first["ranks"]) == (
        finding.severity, finding.estimated_gain_us, finding.charged_to, finding.ranks)
    assert first["prescriptions"] == [p.id for p in finding.prescriptions]
    first["ranks"].append(99)
    assert 99 not in finding.ranks  # the frame holds copies


def test_facts_df_by_family_and_whole(report):
    whole = report.facts_df()
    assert len(whole) == len(report.facts) and list(whole.columns[:2]) == ["type", "id"]
    breakdown = report.facts_df("breakdown")
    assert list(breakdown.columns) == ["type", *FACT_FAMILIES["breakdown"].model_fields]
    assert len(breakdown) == sum(f["type"] == "breakdown" for f in report.facts) > 0
    assert report.facts_df("pipeline").empty and "stage" in "".join(report.facts_df("pipeline").columns)
    breakdown.loc[0, "sources"].append("changed")
    assert "changed" not in next(f for f in report.facts if f["type"] == "breakdown")["sources"]  # copies
    with pytest.raises(InputError, match="unknown fact family 'nope'; known: context, environment"):
        report.facts_df("nope")


def test_steps_df_is_the_per_rank_step_table(report):
    steps = report.steps_df()
    assert steps.index.name == "rank" and list(steps.index) == [r.rank for r in report.summary.per_rank]
    row = report.summary.per_rank[0]
    assert steps.loc[row.rank, "step_time_us"] == row.step_time_us and steps.loc[row.rank, "bottleneck"] == row.bottleneck
    total = steps["compute_us"] + steps["comm_not_overlapped_us"] + steps["free_us"]
    assert (abs(total - steps["step_time_us"]) < 1.0).all()
    assert list(report.operators_df()["op_type"]) == [o.op_type for o in report.summary.top_operators]


def test_a_report_with_nothing_diagnosed_gives_empty_frames_with_their_columns():
    empty = advisor.diagnose(TORCH_CPU)
    assert empty.status == "empty"
    assert empty.steps_df().empty and "step_time_us" in empty.steps_df().columns
    assert list(empty.findings_df()["id"]) == ["gpu.no_gpu_activity"]
    assert empty.facts_df("breakdown").empty
    assert "<div" in empty._repr_html_()


def test_a_gpu_trace_gives_the_same_api():
    gpu = advisor.diagnose(GPU_TRACE)
    assert gpu.findings_df()["id"].iloc[0] == "gpu.slow_dataloader"
    assert gpu.steps_df().loc[0, "bottleneck"] == "io"
    assert gpu.facts_df("gpu")["device"].notna().all()
    assert "<div class=\"advisor-report\">" in gpu._repr_html_()


# --- compare ---


def test_compare_returns_a_comparison_that_shows_itself():
    base, target = FIXTURES.parent.parent / "examples" / "gpu-synthetic-2ranks", REAL
    gap = advisor.compare(base, target, env={"TASK_QUEUE_ENABLE": "1"})
    assert isinstance(gap, ComparisonReport)
    plain = compare_module_function(base, target, context=build_context(["TASK_QUEUE_ENABLE=1"], [], None))
    assert advisor.render(gap, "json") == render_comparison_json(plain.model_copy(update={"facts": gap.facts}))
    assert gap.model_dump(exclude={"facts"}) == plain.model_dump(exclude={"facts"})
    assert gap._repr_markdown_() == render_comparison_markdown(gap)
    page = gap._repr_html_()
    assert page.startswith('<div class="advisor-report">') and str(escape(gap.headline)) in page
    assert list(gap.findings_df()["id"]) == [f.id for f in gap.findings]
    assert set(gap.facts_df()["type"]) <= {"step_delta", "operator_delta", "collective_delta", "memory_delta", "breakdown"}
    assert "step_time" in set(gap.breakdown_df()["name"])
    assert isinstance(gap.operators_df(), pd.DataFrame)
    assert advisor.render(gap, "terminal").strip()
