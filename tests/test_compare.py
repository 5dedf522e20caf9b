"""`advisor compare BASE TARGET`: the injected difference comes first, across platforms and before/after."""

from __future__ import annotations

import csv
import json
import re
import shutil

import pytest
from builders import ELEMENTWISE, GpuJob, write_gpu_job
from conftest import REAL
from typer.testing import CliRunner

from advisor.cli import app
from advisor.compare import collective_type, compare, operator_class
from advisor.diagnose import default_rulebook


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


def test_before_after_on_ascend_puts_the_injected_slow_operator_first(tmp_path):
    shutil.copytree(REAL, tmp_path / "after")
    # MatMulV2 5× slower: its class grows 2.4 % of the 153 ms base step (the rule asks for 2 %)
    extra = _slow_down(tmp_path / "after" / "rank0_ascend_pt", "MatMulV2", 5.0)
    extra += _slow_down(tmp_path / "after" / "rank1_ascend_pt", "MatMulV2", 5.0)
    result = compare(REAL, tmp_path / "after", default_rulebook())
    assert result.operators_matched_by == "type"
    first = result.findings[0]
    assert (first.id, first.key) == ("compare.operator_slower", "MatMulV2")
    assert first.estimated_gain_us == pytest.approx(extra / 2, rel=1e-3)  # per step, mean over the two ranks
    matmul = next(r for r in result.operators if r.name == "MatMulV2")
    assert matmul.ratio == pytest.approx(5.0, rel=1e-3)
    assert result.operators[0].name == "MatMulV2"
    assert result.breakdown[1].name == "compute" and result.breakdown[1].diff == pytest.approx(extra / 2, rel=1e-3)


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
    # the real job is communication-bound: that is the largest difference, and it comes first; the growth of the
    # exposed communication is the same time (it shares it, keeping nothing), so the idle time comes second
    assert [f.id for f in result.findings[:2]] == ["compare.collective_slower", "compare.free_grew"]
    assert result.findings[0].key == "allreduce"
    (grew,) = [f for f in result.findings if f.id == "compare.communication_grew"]
    assert grew.estimated_gain_us == 0.0 and grew.shares_time_with == ["compare.collective_slower [allreduce]"]
    assert not any(f.id.startswith(("gpu.", "host.", "hccl.")) for f in result.findings)


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
