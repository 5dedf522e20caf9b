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
    outside_charts = re.sub(r"<svg\b.*?</svg>", "", page, flags=re.S)  # a chart's bars have <title>s (hover)
    assert not re.search(r"<(html|head|body|meta|title|script|style)\b", outside_charts[outside_charts.index("</style>"):])
    assert verdict_sentence(report, report_labels(report)) in page
    for finding in report.findings[:3]:
        assert finding.title in page
    assert 'data-chart="step_breakdown"' in page and "<svg" in page  # the charts come along, inline
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


_ELEMENT_SELECTOR = re.compile(r"^(?:[a-z][a-z0-9]*|\*)(?![\w-])")


@pytest.mark.parametrize("which", ["report", "comparison"])
def test_no_element_selector_outside_the_scope(report, which):
    """JupyterLab's table CSS must not re-align the report, nor the report's CSS restyle the notebook: every
    selector of the one <style> (the charts have none of their own) starts at the report's container."""
    shown = report if which == "report" else advisor.compare(FIXTURES.parent.parent / "examples" / "gpu-synthetic-2ranks", REAL)
    page = shown._repr_html_()
    (css,) = re.findall(r"<style[^>]*>(.*?)</style>", page, re.S)
    selectors = [sel.strip() for block in re.findall(r"([^{}@]+)\{[^{}]*\}", re.sub(r"@media[^{]*\{", "", css))
                 for sel in block.split(",")]
    assert len(selectors) > 40
    for selector in selectors:
        assert selector.startswith(".advisor-report") and not _ELEMENT_SELECTOR.match(selector), selector
    # JupyterLab's: a fixed table layout, 12 px, striped and highlighted rows, overridden inside the report
    assert ".advisor-report table {table-layout: auto; font-size: inherit;}" in css
    assert ".advisor-report tbody tr:nth-child(odd), .advisor-report tbody tr:hover {background: transparent;}" in css


def test_two_reports_on_one_page_keep_their_charts_apart(report):
    """Inline charts refer to their clip paths and markers by id: each report's ids, and what refers to them, get
    a prefix of their own."""
    pages = [report._repr_html_(), report._repr_html_()]
    ids = [re.findall(r'\sid="([^"]+)"', page) for page in pages]
    assert len(set(ids[0])) == len(ids[0]) and not set(ids[0]) & set(ids[1])
    for page, own in zip(pages, ids):
        targets = re.findall(r'(?:url\(#|href="#)([^)"]+)', page)
        assert any("clip" in page[page.index(t) - 40: page.index(t)] for t in targets) and set(targets) <= set(own)


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


# --- one-line reprs, a comparison's frames, figures ---

RESNET = FIXTURES / "pytorch-tutorial-resnet50"


@pytest.mark.parametrize("path", [REAL, GPU_TRACE, TORCH_CPU], ids=["ascend", "gpu", "empty"])
def test_a_report_repr_is_one_short_line(path):
    shown = advisor.diagnose(path)
    line = repr(shown)
    assert len(line) < 200 and "\n" not in line and str(shown) == line
    assert line.startswith(f"<Report {path.name}: {shown.summary.bottleneck}-bound, ") and line.endswith(">")
    assert f"{len(shown.findings)} finding" in line
    high = sum(f.severity == "high" for f in shown.findings)
    assert (f"({high} high)" in line) == bool(high)
    if shown.summary.step_time_us is not None:
        assert f"step {shown.summary.step_time_us / 1000:,.2f} ms" in line
    if shown.status != "complete":
        assert line.endswith(f", {shown.status}>")


def test_a_report_repr_stays_short_with_a_long_path(report):
    line = repr(report.model_copy(update={"input": report.input.model_copy(update={"path": "/x/" + "y" * 300 + "/"})}))
    assert len(line) < 200 and "yyy…:" in line


@pytest.fixture(scope="module")
def workers():
    """The PyTorch tutorial's before/after pair: DataLoader workers 0 → 4."""
    return advisor.compare(RESNET / "num_workers_0", RESNET / "num_workers_4")


def test_a_comparison_repr_is_one_short_line(workers):
    line = repr(workers)
    assert len(line) < 200 and "\n" not in line and str(workers) == line
    assert line.startswith("<ComparisonReport num_workers_0 → num_workers_4: step ")
    base, target = workers.base.step_time_us, workers.target.step_time_us
    assert f"{base / 1000:,.2f} → {target / 1000:,.2f} ms" in line
    assert f"{(target - base) / base:+.1%}".replace("-", "−") in line
    assert f"{len(workers.changes)} changes (1 resolved, " in line


def test_changes_df_is_the_comparisons_changes_with_each_sides_severity_and_gain(workers):
    frame = workers.changes_df()
    assert list(frame.columns) == ["change", "id", "key", "title", "base_severity", "target_severity", "base_gain_us",
                                   "target_gain_us"]
    assert len(frame) == len(workers.changes) > 0
    assert list(zip(frame["id"], frame["change"])) == [(c.id, c.change) for c in workers.changes]
    # against the two reports themselves
    base, target = advisor.diagnose(RESNET / "num_workers_0"), advisor.diagnose(RESNET / "num_workers_4")
    before = {(f.id, f.key): f for f in base.findings}
    after = {(f.id, f.key): f for f in target.findings}
    assert len(frame) == len(before.keys() | after.keys())
    for row in frame.to_dict("records"):
        row = {k: None if not isinstance(v, list) and pd.isna(v) else v for k, v in row.items()}  # missing: NaN
        b, t = before.get((row["id"], row["key"])), after.get((row["id"], row["key"]))
        assert row["change"] == ("persisting" if b and t else "resolved" if b else "new")
        assert (row["base_severity"], row["target_severity"]) == (b and b.severity, t and t.severity)
        assert (row["base_gain_us"], row["target_gain_us"]) == (b and b.estimated_gain_us, t and t.estimated_gain_us)
    resolved = frame[frame.change == "resolved"]
    assert list(resolved["id"]) == ["gpu.slow_dataloader"]  # the DataLoader wait is gone with 4 workers


def test_the_comparisons_other_frames(workers):
    sides = workers.sides_df()
    assert list(sides.index) == ["base", "target"] and sides.index.name == "side"
    assert sides.loc["base", "step_time_us"] == workers.base.step_time_us
    assert sides.loc["target", "median_step_us"] == workers.target.median_step_us
    assert sides.loc["target", "path"] == workers.target.path
    for method, rows in (("collectives_df", workers.collectives), ("memory_df", workers.memory)):
        frame = getattr(workers, method)()
        assert list(frame.columns) == ["name", "detail", "base", "target", "diff", "ratio"] and len(frame) == len(rows)


def test_figures_are_the_html_reports_charts_as_matplotlib_figures(report):
    from matplotlib.figure import Figure

    from advisor.render.charts import REPORT_CHARTS, report_charts

    figures = report.figures()
    assert list(figures) == list(REPORT_CHARTS)  # the real capture has data for every chart
    assert set(figures) == set(report_charts(report, report_labels(report)))
    assert all(isinstance(f, Figure) for f in figures.values())
    # drawn from the same data as the report's: the step breakdown's compute bars are the ranks' compute times
    axes = figures["step_breakdown"].axes[0]
    compute = [bar.get_width() for bar in axes.containers[0]]
    assert compute == pytest.approx([r.compute_us / 1000 for r in report.summary.per_rank])
    png = report.figure("memory")._repr_png_()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    with pytest.raises(InputError, match="no chart 'pie' in this report; the charts are step_breakdown, top_operators"):
        report.figure("pie")
    assert advisor.diagnose(TORCH_CPU).figures() == {}


def test_a_comparison_gives_its_charts_as_figures(workers):
    from matplotlib.figure import Figure

    figures = workers.figures()
    assert list(figures) == ["compare_step_breakdown", "compare_operators"]
    assert all(isinstance(f, Figure) for f in figures.values())
    assert isinstance(workers.figure("compare_operators"), Figure)
    with pytest.raises(InputError, match="no chart 'memory' in this comparison"):
        workers.figure("memory")
