"""`advisor compare BASE TARGET`: the injected difference comes first, across platforms and before/after."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
from contextlib import closing

import pytest
from builders import ELEMENTWISE, GpuJob, Kernel, RankSpec, StepRow, build_rank, write_gpu_job
from conftest import FIXTURES, REAL
from typer.testing import CliRunner

from advisor.cli import app
from advisor.compare import MIN_STEPS, collective_type, compare, incomparabilities, operator_class
from advisor.comparison import Side
from advisor.diagnose import default_rulebook
from advisor.render.common import labels

LEVEL0 = FIXTURES / "ascend-more" / "text-level0-2ranks"


def _run(*arguments: str):
    return CliRunner().invoke(app, list(arguments), env={"LANG": "C.UTF-8", "COLUMNS": "120"})


def _slow_down(rank_dir, op_type: str, factor: float) -> float:
    """Make every kernel of ``op_type`` ``factor``× longer in kernel_details.csv and add the time to Computing."""
    output = rank_dir / "ASCEND_PROFILER_OUTPUT"
    kernels = output / "kernel_details.csv"
    with kernels.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    type_at, duration_at = header.index("Type"), header.index("Duration(us)")
    extra = 0.0
    for row in rows[1:]:
        if row[type_at] == op_type:
            before = float(row[duration_at])
            row[duration_at] = f"{before * factor:.3f}"
            extra += before * (factor - 1)
    with kernels.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    steps = output / "step_trace_time.csv"
    with steps.open(newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    computing = table[0].index("Computing")
    table[1][computing] = f"{float(table[1][computing]) + extra:.3f}"
    with steps.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(table)
    return extra


def _ascend_job(parent, ranks: int = 1, matmul_us: float = 170.4, allreduce_us: float = 1987.92):
    """An Ascend job of three steps per rank (the builders' default kernels): a slower MatMul adds its extra time to
    Computing, a longer AllReduce to the exposed communication."""
    for rank in range(ranks):
        kernels = [k for step in (5, 6, 7) for k in (
            Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", matmul_us),
            Kernel(step, "FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 881.64),
            Kernel(step, "RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 33.06),
            Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", allreduce_us),
        )]
        steps = [StepRow(step, 1344.32 + matmul_us - 170.4, allreduce_us - 66.46, 85.14, 66.46) for step in (5, 6, 7)]
        build_rank(parent, RankSpec(rank=rank, steps=steps, kernels=kernels))
    return parent


def test_before_after_on_ascend_puts_the_injected_slow_operator_first(tmp_path):
    # MatMulV3 5× slower: 681.6 µs more per step, 12.7 % of the 5.35 ms base step (the rule asks for 2 %)
    before, after = _ascend_job(tmp_path / "before"), _ascend_job(tmp_path / "after", matmul_us=5 * 170.4)
    result = compare(before, after, default_rulebook())
    assert result.comparable and result.not_comparable_because == []
    assert result.operators_matched_by == "type"
    first = result.findings[0]
    assert (first.id, first.key) == ("compare.operator_slower", "MatMulV3")
    assert first.estimated_gain_us == pytest.approx(4 * 170.4)
    matmul = next(r for r in result.operators if r.name == "MatMulV3")
    assert matmul.ratio == pytest.approx(5.0)
    assert result.operators[0].name == "MatMulV3"
    assert result.breakdown[1].name == "compute" and result.breakdown[1].diff == pytest.approx(4 * 170.4)
    assert "longer than BASE's" in result.headline


def test_one_step_is_too_few_to_call_the_injected_slow_operator_a_regression(tmp_path):
    """The real capture holds one step per rank: a MatMulV2 5× slower shows in the tables, and nothing is called a
    regression."""
    shutil.copytree(REAL, tmp_path / "after")
    extra = _slow_down(tmp_path / "after" / "rank0_ascend_pt", "MatMulV2", 5.0)
    extra += _slow_down(tmp_path / "after" / "rank1_ascend_pt", "MatMulV2", 5.0)
    result = compare(REAL, tmp_path / "after", default_rulebook())
    assert not result.comparable and result.findings == [] and result.gain_check is None
    assert [(r.kind, r.side) for r in result.not_comparable_because] == [("few_steps", "base"), ("few_steps", "target")]
    assert result.warnings[:2] == [r.message for r in result.not_comparable_because]
    assert "BASE holds 1 profiled step(s)" in result.warnings[0]
    assert result.headline.startswith("BASE and TARGET cannot be compared") and "longer" not in result.headline
    matmul = next(r for r in result.operators if r.name == "MatMulV2")
    assert matmul.ratio == pytest.approx(5.0, rel=1e-3)
    assert result.breakdown[1].diff == pytest.approx(extra / 2, rel=1e-3)


def test_before_after_on_gpus_names_the_slower_kernel_and_checks_the_fix(tmp_path):
    write_gpu_job(tmp_path / "before", GpuJob(syncs=3))
    write_gpu_job(tmp_path / "after", GpuJob(elementwise_us=120.0))
    result = compare(tmp_path / "before", tmp_path / "after", default_rulebook())
    first = result.findings[0]
    assert (first.id, first.key) == ("compare.operator_slower", "at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add, Array>")
    assert first.estimated_gain_us == pytest.approx(60 * 90.0)
    resolved = [c for c in result.changes if c.change == "resolved"]
    assert [c.id for c in resolved] == ["gpu.host_sync"]
    assert result.gain_check is not None and result.gain_check.step_reduction_us < 0  # the fix was undone by the slowdown


def test_a_fix_that_delivers_is_measured_against_its_estimate(tmp_path):
    write_gpu_job(tmp_path / "before", GpuJob(syncs=3))
    write_gpu_job(tmp_path / "after", GpuJob())
    result = compare(tmp_path / "before", tmp_path / "after", default_rulebook())
    check = result.gain_check
    assert check is not None and check.resolved == 1
    assert check.step_reduction_us == pytest.approx(result.base.step_time_us - result.target.step_time_us)
    assert check.step_reduction_us > 0 and check.delivered_ratio == pytest.approx(check.step_reduction_us / check.estimated_gain_us)


def test_gpu_against_the_real_ascend_capture_matches_operators_by_class(tmp_path):
    write_gpu_job(tmp_path / "gpu", GpuJob(ranks=2, nccl_us=3000.0))
    result = compare(tmp_path / "gpu", REAL, default_rulebook())
    assert result.operators_matched_by == "class"
    assert (result.base.platform, result.target.platform) == ("gpu", "ascend")
    matmul = next(r for r in result.operators if r.name == "matmul")
    assert "MatMulV2" in matmul.detail and "xmma_gemm" in matmul.detail
    allreduce = next(r for r in result.collectives if r.name == "allreduce")
    assert allreduce.base == pytest.approx(3000.0) and allreduce.target > 100_000
    # the real capture holds one step: shown side by side, not diagnosed (a GPU trace records no profiler level)
    assert (result.base.step_count, result.target.step_count) == (3, 1)
    assert (result.base.profiler_level, result.target.profiler_level) == (None, "Level1")
    assert [(r.kind, r.side) for r in result.not_comparable_because] == [("few_steps", "target")]
    assert result.findings == []


def test_gpu_against_a_communication_bound_ascend_job_names_the_collective_first(tmp_path):
    write_gpu_job(tmp_path / "gpu", GpuJob(ranks=2, nccl_us=3000.0))
    result = compare(tmp_path / "gpu", _ascend_job(tmp_path / "npu", ranks=2, allreduce_us=30_000.0), default_rulebook())
    assert result.comparable and result.operators_matched_by == "class"
    # the AllReduce is the largest difference, and it comes first; the growth of the exposed communication is
    # mostly the same time (it shares it)
    first = result.findings[0]
    assert (first.id, first.key) == ("compare.collective_slower", "allreduce")
    (grew,) = [f for f in result.findings if f.id == "compare.communication_grew"]
    assert grew.estimated_gain_us < grew.claimed_gain_us and grew.shares_time_with == ["compare.collective_slower [allreduce]"]
    assert not any(f.id.startswith(("gpu.", "host.", "hccl.")) for f in result.findings)


def _side(step_count: int, level: str | None) -> Side:
    return Side(path="p", format="f", platform="ascend" if level else "gpu", ranks=[0], steps=list(range(step_count)),
                hardware=None, status="complete", step_time_us=1000.0, step_count=step_count, profiler_level=level)


@pytest.mark.parametrize(("base", "target", "expected"), [
    ((MIN_STEPS, "Level1"), (MIN_STEPS, "Level1"), []),
    ((MIN_STEPS, None), (MIN_STEPS, "Level1"), []),  # a GPU trace records no level
    ((MIN_STEPS - 1, "Level1"), (MIN_STEPS, "Level1"), [("few_steps", "base")]),
    ((MIN_STEPS, "Level1"), (0, "Level1"), [("few_steps", "target")]),  # no step breakdown
    ((MIN_STEPS, "Level1"), (MIN_STEPS, "Level2"), [("profiler_levels", None)]),
])
def test_what_makes_two_profiles_incomparable(base, target, expected):
    reasons = incomparabilities(_side(*base), _side(*target), labels("en"))
    assert [(r.kind, r.side) for r in reasons] == expected


def test_a_level0_step_against_a_level1_step_is_not_compared_in_any_format(tmp_path):
    """The two real captures of one step each, at Level0 and Level1: every format says why nothing is called a
    regression, and the JSON says it is not comparable."""
    outputs = {suffix: tmp_path / f"gap.{suffix}" for suffix in ("md", "html", "json", "txt")}
    result = _run("compare", str(LEVEL0), str(REAL), "--fail-on", "low", *[a for o in outputs.values() for a in ("-o", str(o))])
    assert result.exit_code == 0, result.output  # no finding, so no gate
    level = "BASE was captured at profiler level Level0 and TARGET at Level1"
    assert level in result.output and "TARGET holds 1 profiled step(s)" in result.output  # standard error
    texts = {suffix: " ".join(path.read_text(encoding="utf-8").split()) for suffix, path in outputs.items()}
    for suffix, text in texts.items():
        assert level in text and "BASE holds 1 profiled step(s)" in text, suffix
        assert "BASE and TARGET cannot be compared" in text, suffix
        assert suffix == "json" or "The difference was not diagnosed" in text, suffix
        assert "longer than BASE" not in text and "takes longer on TARGET" not in text, suffix
    document = json.loads(outputs["json"].read_text(encoding="utf-8"))
    assert document["comparable"] is False and document["findings"] == [] and document["gain_check"] is None
    assert [(r["kind"], r["side"]) for r in document["not_comparable_because"]] == [
        ("few_steps", "base"), ("few_steps", "target"), ("profiler_levels", None)]
    assert (document["base"]["profiler_level"], document["target"]["profiler_level"]) == ("Level0", "Level1")
    assert texts["md"].index("## Warnings") < texts["md"].index("## Step breakdown")
    zh = compare(LEVEL0, REAL, default_rulebook(), lang="zh")
    assert zh.headline.startswith("BASE 与 TARGET 无法比较") and "无法比较：BASE 以采集级别 Level0 采集" in zh.warnings[2]


@pytest.mark.parametrize(("name", "expected"), [
    ("MatMulV2", "matmul"), ("ampere_sgemm_128x64_nn", "matmul"), ("FlashAttentionScore", "attention"),
    ("flash_fwd_kernel", "attention"), ("softmax_warp_forward", "softmax"), ("LayerNormV3", "normalization"),
    ("at::native::(anonymous namespace)::vectorized_layer_norm_kernel", "normalization"), ("Conv2DBackpropInput", "convolution"),
    ("TransData", "layout"), ("IndexPutV2", "embedding"), ("MaxPoolWithArgmaxV1", "pooling"), ("NLLLoss", "nllloss"),
])
def test_operator_classes_across_vendors(name, expected):
    assert operator_class(name) == expected


@pytest.mark.parametrize(("name", "expected"), [
    ("hcom_allReduce__360_0_1", "allreduce"), ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "allreduce"),
    ("hcom_reduceScatter_", "reducescatter"), ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "allgather"),
    ("hcom_receive_", "recv"), ("ncclDevKernel_SendRecv", "sendrecv"), ("something", "other"),
])
def test_collective_types_across_vendors(name, expected):
    assert collective_type(name) == expected


@pytest.mark.parametrize("suffix", [".md", ".html", ".json", ".txt"])
def test_the_cli_writes_every_format_and_escapes_names(tmp_path, suffix):
    hostile = "evil<img src=x onerror=alert`1` | **bold**"  # an unclosed '<' survives the template stripping
    write_gpu_job(tmp_path / "before", GpuJob())
    write_gpu_job(tmp_path / "after", GpuJob(elementwise_us=120.0))
    for path in (tmp_path / "after").iterdir():
        path.write_text(path.read_text().replace(ELEMENTWISE.replace('"', '\\"'), hostile))
    out = tmp_path / f"comparison{suffix}"
    arguments = ["compare", str(tmp_path / "before"), str(tmp_path / "after"), "-o", str(out)]
    result = _run(*arguments, *(["--format", "terminal"] if suffix == ".txt" else []))
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    if suffix == ".json":
        document = json.loads(text)
        assert document["schema_version"] == "advisor-compare/1" and document["findings"][0]["key"] == hostile
    elif suffix == ".html":
        # the charts are <img src="data:image/svg+xml;…">; the name's own <img …> must not be one
        assert "<img src=x" not in text and "evil&lt;img src=x onerror=alert`1` | **bold**" in text
        assert all(tag.startswith('<img src="data:image/svg+xml;base64,') for tag in re.findall(r"<img[^>]*", text))
    elif suffix == ".md":
        assert "<img" not in text and r"evil&lt;img src=x onerror=alert\`1\` \| \*\*bold\*\*" in text
    else:
        assert "An operator takes longer on TARGET" in text


def test_the_cli_fails_on_regressions_when_asked_and_names_a_missing_side(tmp_path):
    write_gpu_job(tmp_path / "before", GpuJob())
    write_gpu_job(tmp_path / "after", GpuJob(elementwise_us=120.0))
    gate = _run("compare", str(tmp_path / "before"), str(tmp_path / "after"), "--fail-on", "high", "-f", "json")
    assert gate.exit_code == 1
    same = _run("compare", str(tmp_path / "before"), str(tmp_path / "before"), "--fail-on", "high", "-f", "json")
    assert same.exit_code == 0 and json.loads(same.stdout)["findings"] == []
    assert json.loads(same.stdout)["headline"].startswith("TARGET's step takes as long as BASE's")
    missing = _run("compare", str(tmp_path / "before"), str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "nowhere: no such file or directory" in missing.output


def test_time_come_back_counts_measured_gains_only_and_needs_an_estimate():
    """'Did the fix deliver?' names where time came back: measured gains that grew or are new (at most three, the
    largest first), never an assumed gain (no time the profile shows), and nothing when the resolved findings
    estimated no gain."""
    from types import SimpleNamespace

    from advisor.compare import _gain_check
    from advisor.comparison import Side

    def finding(rule, gain, basis="measured", key=None):
        return SimpleNamespace(id=rule, key=key, title=rule, estimated_gain_us=gain, gain_basis=basis)

    def side(step, median=None):
        return Side(path="p", format="pytorch-kineto", platform="gpu", ranks=[0], steps=[1, 2, 3], hardware=None,
                    status="complete", step_time_us=step, median_step_us=median)

    base = SimpleNamespace(findings=[finding("fixed", 50_000.0), finding("grows", 1_000.0), finding("assumed", 100.0, "assumed")])
    target = SimpleNamespace(findings=[finding("grows", 9_000.0), finding("assumed", 40_000.0, "assumed"),
                                       finding("new.a", 6_000.0), finding("new.b", 5_000.0), finding("new.c", 4_000.0),
                                       finding("small", 2_000.0)])
    check = _gain_check(base, target, side(200_000.0, 190_000.0), side(170_000.0, 150_000.0))
    assert check.estimated_gain_us == 50_000.0 and check.step_reduction_us == 30_000.0
    assert [(c.title, c.grown_us, c.new) for c in check.came_back] == [
        ("grows", 8_000.0, False), ("new.a", 6_000.0, True), ("new.b", 5_000.0, True)]
    assert check.median_step_reduction_us == 40_000.0 and check.median_delivered_ratio == 0.8
    base.findings[0].estimated_gain_us = 0.0  # resolved findings that estimated nothing: no yardstick
    assert _gain_check(base, target, side(200_000.0), side(210_000.0)).came_back == []


def test_each_sides_problems_are_printed_once_as_warnings(tmp_path):
    """compare names what it could not read on each side (skipped files, not only the readers' warnings), each line
    once, at the warning level — as diagnose does."""
    base = FIXTURES / "ascend-more" / "msprof-analyze-fixture"
    result = _run("compare", str(base), str(FIXTURES / "ascend-more" / "text-level0-2ranks"), "-o", str(tmp_path / "c.md"))
    lines = [line for line in result.stderr.splitlines() if not line.startswith("advisor: note: report written")]
    assert lines and all(line.startswith("advisor: warning: ") for line in lines), lines
    assert len(lines) == len(set(lines))
    assert any(line.startswith("advisor: warning: base: skipped x_1_20250101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                               "kernel_details.csv: comes from another capture") for line in lines), lines


def test_framework_ops_are_set_side_by_side_as_msprof_analyzes_api_compare_does():
    """Seed 003, --enable_api_compare: the tutorial's num_workers 0 → 4 run the same 53 convolutions a step, each slower
    on the host with four loader processes beside the training loop; the rows are the api facts' means over ranks."""
    from advisor.diagnose import analyse
    from advisor.facts.models import ApiFact

    base_path, target_path = (FIXTURES / "pytorch-tutorial-resnet50" / f"num_workers_{n}" for n in (0, 4))
    comparison = compare(base_path, target_path)
    rows = {row.name: row for row in comparison.apis}
    assert 0 < len(rows) <= 30 and [row.diff for row in comparison.apis] == sorted((r.diff for r in comparison.apis), reverse=True)
    conv = rows["aten::cudnn_convolution_backward"]
    assert conv.detail == "53 → 53 calls" and conv.diff == pytest.approx(conv.target - conv.base) and conv.diff > 1000
    book = default_rulebook()
    for path, side in ((base_path, conv.base), (target_path, conv.target)):
        facts = [f for f in analyse(path, book).all_facts if isinstance(f, ApiFact)
                 and f.name == "aten::cudnn_convolution_backward"]
        assert side == pytest.approx(sum(f.us_per_step for f in facts) / len({f.rank for f in facts}))
    assert "调用 53 → 53 次" in {r.detail for r in compare(base_path, target_path, lang="zh").apis}
    markdown = CliRunner().invoke(app, ["compare", str(base_path), str(target_path), "-f", "md"]).stdout
    assert "## Framework ops (host time per step, including the ops they call)" in markdown
    assert "aten::cudnn\\_convolution\\_backward (53 → 53 calls)" in markdown


def _stepped_job(parent, matmul_us: dict[int, float], allreduce_us: dict[int, float] | None = None,
                 slow_shape: tuple[str, float] | None = None):
    """An Ascend job of steps 5, 6, 7 (one rank): each step's MatMulV3 and AllReduce time as given, the extra time in
    that step's Computing / exposed communication; ``slow_shape`` adds, in every step, a MatMulV3 of those input shapes
    lasting that long (the base job has the same kernel at 100 µs)."""
    allreduce_us = allreduce_us or {}
    kernels, steps = [], []
    for step in (5, 6, 7):
        matmul, allreduce = matmul_us.get(step, 170.4), allreduce_us.get(step, 1987.92)
        kernels += [Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", matmul),
                    Kernel(step, "FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 881.64),
                    Kernel(step, "RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 33.06),
                    Kernel(step, "hcom_allReduce__612_0_1", "hcom_allReduce_", "COMMUNICATION", allreduce)]
        extra = 0.0
        if slow_shape is not None:
            kernels.append(Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", slow_shape[1],
                                  shapes=slow_shape[0]))
            extra = slow_shape[1]
        steps.append(StepRow(step, 1344.32 + matmul - 170.4 + extra, allreduce - 66.46, 85.14, 66.46))
    build_rank(parent, RankSpec(rank=0, steps=steps, kernels=kernels))
    return parent


def test_operator_memory_is_set_side_by_side_per_operator_on_the_real_capture(tmp_path):
    """Seed 003, --enable_memory_compare: operator_memory.csv's allocations inside the step, per operator name, MB and
    allocations per step on each side; the operator whose allocations doubled on TARGET comes first."""
    import pandas as pd

    shutil.copytree(REAL / "rank1_ascend_pt", tmp_path / "after")
    memory = tmp_path / "after" / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"
    rows = memory.read_text(encoding="utf-8").splitlines(keepends=True)
    memory.write_text("".join(rows + [row for row in rows[1:] if row.startswith("aten::mm,")]), encoding="utf-8")
    comparison = compare(REAL / "rank0_ascend_pt", tmp_path / "after")
    table = pd.read_csv(REAL / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv")
    allocated = table.loc[(table["Name"] == "aten::mm") & (table["Size(KB)"] > 0), "Size(KB)"]
    first = comparison.operator_memory[0]
    assert (first.name, first.detail) == ("aten::mm", f"{len(allocated)} → {2 * len(allocated)} allocations")
    assert first.base == pytest.approx(allocated.sum() / 1024) and first.diff == pytest.approx(first.base)
    assert first.ratio == pytest.approx(2.0)
    assert len(comparison.operator_memory) == 1  # nothing else changed: an unchanged operator is not listed
    markdown = CliRunner().invoke(app, ["compare", str(REAL / "rank0_ascend_pt"), str(tmp_path / "after"), "-f", "md"]).stdout
    assert "## Memory allocated per step by each operator (MB)" in markdown
    assert "| aten::mm (7 → 14 allocations) |" in markdown
    # an operator name is escaped in every document format
    hostile = "evil<img src=x onerror=alert`1` | **bold**"
    memory.write_text(memory.read_text(encoding="utf-8").replace("aten::mm,", f'"{hostile}",'), encoding="utf-8")
    for suffix in (".md", ".html"):
        _run("compare", str(REAL / "rank0_ascend_pt"), str(tmp_path / "after"), "-o", str(tmp_path / f"c{suffix}"))
    assert r"evil&lt;img src=x onerror=alert\`1\` \| \*\*bold\*\* (0 → 14 allocations)" in (tmp_path / "c.md").read_text()
    html = (tmp_path / "c.html").read_text()
    assert "<img src=x" not in html and "evil&lt;img src=x onerror=alert`1` | **bold** (0 → 14 allocations)" in html
    # the DB export's OP_MEMORY names CANN's operators without operator_memory.csv's cann:: — the same job's text and
    # DB exports match operator for operator (review, 2026-11-28: every CANN operator read as new on one side)
    db = FIXTURES / "ascend-more" / "db-level1-2ranks"
    assert compare(REAL / "rank0_ascend_pt", db / "rank0_ascend_pt").operator_memory == []
    doubled = tmp_path / "db-after"
    shutil.copytree(db / "rank0_ascend_pt", doubled)
    with closing(sqlite3.connect(doubled / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")) as connection, \
            connection:
        connection.execute("INSERT INTO OP_MEMORY SELECT * FROM OP_MEMORY WHERE name = "
                           "(SELECT id FROM STRING_IDS WHERE value = 'ReduceSum7')")
    (changed,) = compare(REAL / "rank0_ascend_pt", doubled).operator_memory
    assert changed.name == "ReduceSum7" and changed.ratio == pytest.approx(2.0)
    # a GPU trace records no operator memory: no table
    gpu = FIXTURES / "pytorch-tutorial-resnet50"
    assert compare(gpu / "num_workers_0", gpu / "num_workers_4").operator_memory == []


def test_operators_are_matched_by_type_and_input_shapes(tmp_path):
    """Seed 003, --enable_kernel_compare: one MatMulV3 shape slower on TARGET is its own row, first, with exactly the
    injected difference, while the type-level table merges it with the unchanged shape."""
    before = _stepped_job(tmp_path / "before", {}, slow_shape=("8192,1024;1024,8192", 100.0))
    after = _stepped_job(tmp_path / "after", {}, slow_shape=("8192,1024;1024,8192", 400.0))
    comparison = compare(before, after)
    first = comparison.operator_shapes[0]
    assert (first.name, first.detail) == ("MatMulV3", "8192,1024;1024,8192")
    assert (first.base, first.target, first.diff) == pytest.approx((100.0, 400.0, 300.0))
    unchanged = next(r for r in comparison.operator_shapes if r.detail == "4096,1024;4096,1024" and r.name == "MatMulV3")
    assert unchanged.diff == pytest.approx(0.0) and unchanged.base == pytest.approx(170.4)
    matmul = next(r for r in comparison.operators if r.name == "MatMulV3")
    assert (matmul.base, matmul.diff) == pytest.approx((270.4, 300.0))
    assert comparison.operator_shapes_note is None


def test_shapes_on_the_real_capture_and_their_absence_on_gpu_traces():
    """rank 0 against rank 1 of the real capture: each row is kernel_details.csv's Duration summed per Type and Input
    Shapes; two GPU traces record no shapes, and every format says so."""
    import pandas as pd

    comparison = compare(REAL / "rank0_ascend_pt", REAL / "rank1_ascend_pt")
    sums = [pd.read_csv(REAL / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
            .assign(shapes=lambda t: t["Input Shapes"].str.strip('"')).groupby(["Type", "shapes"])["Duration(us)"].sum()
            for rank in (0, 1)]
    first = comparison.operator_shapes[0]
    assert (first.name, first.detail) == ("MatMulV2", "32,4096;4096,4096;4096")
    key = (first.name, first.detail)
    assert (first.base, first.target) == pytest.approx((sums[0][key], sums[1][key]))
    assert [r.diff for r in comparison.operator_shapes] == sorted((r.diff for r in comparison.operator_shapes), reverse=True)
    gpu = FIXTURES / "pytorch-tutorial-resnet50"
    traces = compare(gpu / "num_workers_0", gpu / "num_workers_4")
    assert traces.operator_shapes == [] and traces.operator_shapes_note.startswith("No input shapes on BASE and TARGET")
    markdown = CliRunner().invoke(app, ["compare", str(gpu / "num_workers_0"), str(gpu / "num_workers_4"), "-f", "md"]).stdout
    assert "## Operators (matched by type and input shapes)\n\nNo input shapes on BASE and TARGET" in markdown


def test_one_chosen_step_per_side_is_compared_alone(tmp_path):
    """Seed 003, --base_step / --comparison_step: TARGET's step 6 alone is slower (MatMulV3 and the AllReduce); the mean
    over steps shows a third of it, step 6 against step 6 all of it, step 5 against step 5 nothing."""
    before = _stepped_job(tmp_path / "before", {})
    after = _stepped_job(tmp_path / "after", {6: 5 * 170.4}, {6: 2987.92})
    mean = compare(before, after)
    assert next(r for r in mean.operators if r.name == "MatMulV3").diff == pytest.approx(4 * 170.4 / 3)
    chosen = compare(before, after, base_step=6, target_step=6)
    assert (chosen.base.chosen_step, chosen.target.chosen_step) == (6, 6)
    assert next(r for r in chosen.operators if r.name == "MatMulV3").diff == pytest.approx(4 * 170.4)
    assert next(r for r in chosen.operator_shapes if r.name == "MatMulV3").diff == pytest.approx(4 * 170.4)
    assert next(r for r in chosen.collectives if r.name == "allreduce").diff == pytest.approx(1000.0)
    step_time = next(r for r in chosen.breakdown if r.name == "step_time")
    assert step_time.diff == pytest.approx(4 * 170.4 + 1000.0) and chosen.target.step_time_us == pytest.approx(step_time.target)
    assert not chosen.comparable and chosen.findings == []
    assert [(r.kind, r.side) for r in chosen.not_comparable_because] == [("chosen_step", None)]
    assert "one step is compared (BASE step 6, TARGET step 6)" in chosen.warnings[0]
    quiet = compare(before, after, base_step=5, target_step=5)
    assert all(r.diff == pytest.approx(0.0) for r in quiet.operators + quiet.collectives)
    # the command line: the step row, and a step a side did not profile is refused, naming the steps it did
    markdown = _run("compare", str(before), str(after), "--base-step", "6", "--target-step", "6", "-f", "md")
    assert markdown.exit_code == 0 and "| Step compared | 6 | 6 |" in markdown.stdout
    missing = _run("compare", str(before), str(after), "--base-step", "6", "--new-step", "9")
    assert missing.exit_code == 2
    assert f"TARGET: no step 9 in {after}; the steps it profiled: 5, 6, 7" in " ".join(missing.stderr.split())


def test_a_chosen_step_of_two_gpu_traces_uses_that_steps_kernels_and_framework_ops():
    """The tutorial's ResNet-50, step 7 of num_workers 0 against step 8 of num_workers 4: the breakdown is those steps'
    step facts, the framework ops are counted in those ProfilerStep windows (53 convolutions backward each)."""
    from advisor.diagnose import analyse
    from advisor.facts import StepFact

    gpu = FIXTURES / "pytorch-tutorial-resnet50"
    comparison = compare(gpu / "num_workers_0", gpu / "num_workers_4", base_step=7, target_step=8)
    book = default_rulebook()
    for name, step, side in (("num_workers_0", 7, "base"), ("num_workers_4", 8, "target")):
        fact = next(f for f in analyse(gpu / name, book).facts.facts if isinstance(f, StepFact) and f.step == step)
        assert getattr(comparison.breakdown[0], side) == pytest.approx(fact.step_time_us)
    conv = next(r for r in comparison.apis if r.name == "aten::cudnn_convolution_backward")
    assert conv.detail == "53 → 53 calls"
    assert comparison.apis != compare(gpu / "num_workers_0", gpu / "num_workers_4").apis


def test_a_chosen_step_beyond_the_listed_step_facts_and_a_rank_without_it(tmp_path):
    """Review, 2026-11-28: a capture of more than MAX_STEP_FACTS steps lists only some as step facts, but any step it
    profiled can be chosen (its breakdown from the step table); on a cluster, a rank that did not profile the chosen
    step stays out of that step's means instead of counting as zero."""
    from advisor.facts import MAX_STEP_FACTS

    count = MAX_STEP_FACTS + 10
    kernels = [Kernel(step, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 170.4)
               for step in range(1, count + 1)]
    steps = [StepRow(step, 1344.32 + (step % 7), 1921.46, 85.14, 66.46) for step in range(1, count + 1)]
    long = build_rank(tmp_path / "long", RankSpec(rank=0, steps=steps, kernels=kernels, kernel_spacing_us=50.0))
    from advisor.diagnose import analyse, build_report, default_rulebook

    book = default_rulebook()
    analysis = analyse(long, book)
    shown = build_report(analysis, book, "en", str(long)).input.steps
    unlisted = next(step for step in range(1, count + 1) if step not in shown)
    listed = next(f for f in analysis.facts.facts if f.family == "step" and f.step == shown[0])
    chosen = compare(long, long, base_step=unlisted, target_step=unlisted)
    step_time = next(r for r in chosen.breakdown if r.name == "step_time")
    # the step table's row of that step: the listed step's time, shifted by the Computing the two differ in
    assert step_time.base == pytest.approx(listed.step_time_us - shown[0] % 7 + unlisted % 7)
    # two ranks, the second without step 6: step 6's MatMulV3 is rank 0's, not half of it
    pair = tmp_path / "pair"
    _stepped_job(pair / "a", {6: 400.0})
    build_rank(pair / "a", RankSpec(rank=1, rank_id="1", device_id=1, steps=[StepRow(5, 1344.32, 1921.46, 85.14, 66.46)],
                                    kernels=[Kernel(5, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 170.4)]))
    single = _stepped_job(tmp_path / "single", {6: 400.0})
    together = next(r for r in compare(single, pair / "a", base_step=6, target_step=6).operators if r.name == "MatMulV3")
    assert together.target == pytest.approx(400.0) and together.diff == pytest.approx(0.0)
