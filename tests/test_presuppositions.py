"""Prescriptions declare what they presuppose, and a report never shows one the profile contradicts (issue 26 item 10).

The mechanism (knowledge ``presupposes``, per entry and per action; withheld findings) is tested on small packs; then
every profile the suite ships — the real fixtures, the examples, the samples, the injected GPU problems and the
field-shaped traces — is diagnosed and each prescription shown is checked against the raw trace by rules written
here, independently of the knowledge files: no CUDA-graph or graph-mode advice where graphs are replayed, no AMP where
matrix math is already low precision, no DDP bucket advice for an all-to-all, no SDPA advice where attention is
fused or absent, no DataLoader advice without a DataLoader; and no finding shown with a gain of 0.
"""

from __future__ import annotations

import gzip
import json
import re
import textwrap
from functools import lru_cache
from pathlib import Path

import pytest
from builders import GpuJob, build_every_category, build_pp2_job, write_gpu_job
from conftest import FIXTURES, SAMPLE_CLUSTER, SAMPLE_SINGLE
from kineto_shapes import (
    blocking_readback,
    communication_kernels,
    cudnn_autotune_capture,
    fp8_hopper_training,
    lagging_device,
    legacy_autograd_trace,
    stepless_training,
    twice_marked_step,
)
from test_gpu import INJECTED

from advisor.diagnose import diagnose
from advisor.errors import RuleError
from advisor.rulebook import load_rulebook
from advisor.render import render_markdown
from advisor.render.common import gain_text, report_labels

EXAMPLES = Path(__file__).parent.parent / "examples"
REAL = ["ascend-level1-2ranks", "ascend-more/db-level1-2ranks", "ascend-more/msprof-analyze-fixture",
        "ascend-more/server-rank0", "ascend-more/text-level0-2ranks", "pytorch-tutorial-resnet50/num_workers_0",
        "pytorch-tutorial-resnet50/num_workers_4", "kineto-more/hta-amd_trace", "kineto-more/hta-nccl_parser_config",
        "kineto-more/hta-ns_resolution_trace", "kineto-more/hta-trace_diff-control", "kineto-more/tb-gpu-metrics-snippet",
        "h200-recorded/decode_eager_small", "h200-recorded/decode_graph_small", "h200-recorded/train_bf16",
        "h200-recorded/train_fp32"]
SHAPES = [fp8_hopper_training, legacy_autograd_trace, lagging_device, blocking_readback, communication_kernels,
          cudnn_autotune_capture, stepless_training, twice_marked_step]


# --- the mechanism --------------------------------------------------------------------------------------------------


def _pack(root: Path, presupposes: str, action_presupposes: str = "") -> Path:
    (root / "rules").mkdir(parents=True)
    (root / "knowledge").mkdir()
    (root / "rules" / "team.busy_gpu.yaml").write_text(textwrap.dedent("""\
        id: team.busy_gpu
        title: The GPU computes most of the step
        category: kernel-efficiency
        platforms: [gpu]
        when:
          all:
            - fact: breakdown
              as: b
              where: {scope: rank, compute_ratio: {gte: 0.1}}
        then:
          recommend: [team.faster_kernels]
          gain_us: b.compute_us * 0.1
          gain_basis: assumed
          charged_to: compute
        explain: "Compute takes {b.compute_ratio:.0%} of the step."
        """))
    entry = "\n".join([
        "id: team.faster_kernels",
        "title: {en: Make the kernels faster, zh: 加速 kernel}",
        "category: kernel-efficiency",
        "platforms: [gpu]",
        "problem: {en: The kernels set the pace., zh: kernel 决定节奏。}",
        presupposes,
        "actions:",
        "  - en: Fuse the element-wise kernels.",
        "    zh: 融合逐元素 kernel。",
        action_presupposes,
        "  - en: Tune the GEMMs.",
        "    zh: 调优 GEMM。",
        "gain: {model: {en: a tenth of compute, zh: 计算的十分之一}}",
    ])
    (root / "knowledge" / "team.faster_kernels.yaml").write_text(entry + "\n")
    return root


def _team_finding(report):
    return next((f for f in report.findings if f.id == "team.busy_gpu"), None)


def test_a_prescription_the_facts_contradict_withholds_its_finding(tmp_path):
    """The team's advice presupposes no graph replays; on a trace that replays none it is shown with the presupposition
    met; when every prescription of a rule is contradicted, the finding is withheld with the facts that say why."""
    write_gpu_job(tmp_path / "job", GpuJob())
    quiet = _pack(tmp_path / "quiet", "presupposes:\n  - requirement: {en: the GPU has no idle time, zh: GPU 无空闲}\n"
                                      "    contradicted_by: {fact: idle, where: {idle_us: {gt: 1000000000.0}}}")
    shown = _team_finding(diagnose(tmp_path / "job", rulebook=load_rulebook([quiet])))
    assert shown is not None
    (checked,) = [c for c in shown.prescriptions[0].preconditions if c.requirement == "the GPU has no idle time"]
    assert checked.status == "met"

    loud = _pack(tmp_path / "loud", "presupposes:\n  - requirement: {en: the job trains, zh: 作业在训练}\n"
                                    "    contradicted_by: {fact: breakdown, where: {compute_ratio: {gte: 0.1}}}")
    report = diagnose(tmp_path / "job", rulebook=load_rulebook([loud]))
    assert _team_finding(report) is None
    (withheld,) = [w for w in report.withheld if w.id == "team.busy_gpu"]
    assert withheld.ranks == [0] and withheld.claimed_gain_us > 0
    assert "team.faster_kernels presupposes: the job trains" in withheld.because[0]
    assert "compute_ratio" in withheld.because[0]
    assert "Withheld" in render_markdown(report)


def test_an_action_the_facts_contradict_is_left_out(tmp_path):
    write_gpu_job(tmp_path / "job", GpuJob())
    pack = _pack(tmp_path / "pack", "", "    presupposes:\n      - requirement: {en: x, zh: x}\n"
                                        "        contradicted_by: {fact: breakdown, where: {compute_ratio: {gte: 0.1}}}")
    finding = _team_finding(diagnose(tmp_path / "job", rulebook=load_rulebook([pack])))
    assert finding.prescriptions[0].actions == ["Tune the GEMMs."]


def test_a_presupposition_on_an_unknown_field_is_a_lint_error(tmp_path):
    pack = _pack(tmp_path / "pack", "presupposes:\n  - requirement: {en: x, zh: x}\n"
                                    "    contradicted_by: {fact: gpu, where: {graph_launches: {gt: 0}}}")
    with pytest.raises(RuleError, match=r"team.faster_kernels.yaml:\d+:\d+: presupposes.0.contradicted_by.graph_launches: "
                                        r"gpu has no field 'graph_launches'"):
        load_rulebook([pack])


# --- every shipped profile ------------------------------------------------------------------------------------------


def _shipped(root: Path) -> dict[str, Path]:
    """Every profile the suite ships or builds, by name."""
    profiles = {name: FIXTURES / name for name in REAL}
    profiles |= {"example-ascend": EXAMPLES / "ascend-level1-2ranks", "example-gpu": EXAMPLES / "gpu-synthetic-2ranks",
                 "sample-single": SAMPLE_SINGLE.parent, "sample-cluster": SAMPLE_CLUSTER}
    for problem, (job, _rule) in INJECTED.items():
        profiles[f"injected-{problem}"] = root / problem
        write_gpu_job(root / problem, job)
    for shape in SHAPES:
        profiles[f"shape-{shape.__name__}"] = root / shape.__name__
        shape(root / shape.__name__ / "rank0.pt.trace.json")
    profiles["every-category"] = build_every_category(root / "every")
    profiles["pp2"] = build_pp2_job(root / "pp2")
    return profiles


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> dict[str, Path]:
    return _shipped(tmp_path_factory.mktemp("shipped"))


@lru_cache(maxsize=None)
def _raw_events(path: Path) -> tuple[list[dict], ...]:
    """The events of every PyTorch trace under ``path`` (one list per trace)."""
    traces = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".json", ".gz")
                                                      and "ASCEND_PROFILER_OUTPUT" not in p.parts and p.name != "profiler_info.json"
                                                      and not p.name.startswith(("profiler_", "communication")))
    found = []
    for trace in traces:
        text = gzip.decompress(trace.read_bytes()) if trace.suffix == ".gz" else trace.read_bytes()
        data = json.loads(text)
        found.append(data if isinstance(data, list) else data.get("traceEvents", []))
    return tuple(found)


def _names(path: Path, category: str | None = None) -> list[str]:
    return [e.get("name", "") for events in _raw_events(path) for e in events
            if category is None or (e.get("cat") or "").lower() == category]


def _ascend_api_names(path: Path) -> list[str]:
    """The event names of an Ascend profile's host and CANN timelines: trace_view.json, or the DB export's PYTORCH_API
    and CANN_API tables (names through STRING_IDS)."""
    import sqlite3

    names = []
    for trace in path.rglob("trace_view.json"):
        names += [e.get("name", "") for e in json.loads(trace.read_text()) if isinstance(e, dict)]
    for database in path.rglob("ascend_pytorch_profiler*.db"):
        with sqlite3.connect(f"file:{database}?mode=ro&immutable=1", uri=True) as connection:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            for table in ("PYTORCH_API", "CANN_API") if "STRING_IDS" in tables else ():
                if table in tables:
                    names += [row[0] for row in connection.execute(
                        f"SELECT s.value FROM {table} t JOIN STRING_IDS s ON s.id = t.name")]
    return names


def _has_host_timeline(path: Path) -> bool:
    """Whether the profile records the host's events at all (a trace, a DB export's API tables or a PyTorch trace)."""
    return bool(_ascend_api_names(path) or _names(path))


def _shown(report) -> list[tuple[object, object]]:
    return [(finding, prescription) for finding in report.findings for prescription in finding.prescriptions]


@pytest.mark.parametrize("name", [*REAL, "example-ascend", "example-gpu", "sample-single", "sample-cluster",
                                  *(f"injected-{p}" for p in sorted(INJECTED)), *(f"shape-{s.__name__}" for s in SHAPES),
                                  "every-category", "pp2"])
def test_no_prescription_contradicts_the_profile(shipped, name):
    path = shipped[name]
    report = diagnose(path)
    kernels = _names(path, "kernel")
    runtime = _names(path, "cuda_runtime") + _ascend_api_names(path)
    cpu = (_names(path, "cpu_op") + _names(path, "operator") + _names(path, "user_annotation")
           + _names(path, "python_function"))
    facts = {(f["type"], f.get("rank")): f for f in report.facts}
    for finding, prescription in _shown(report):
        where = f"{name}: {finding.id} → {prescription.id}"
        if prescription.id in ("gpu.cuda_graphs", "host.graph_mode"):
            assert not any(re.match(r"^(cuda|hip)GraphLaunch|AscendCL@aclmdl(RI)?Execute", n) for n in runtime), where
        if prescription.id == "gpu.cuda_graphs" and any("reduce-overhead" in a or "CUDAGraph" in a for a in prescription.actions):
            assert not any("sparse_data_dist" in n for n in cpu), where  # TorchRec's pipeline: shapes change per batch
        if any("TBE" in action for action in prescription.actions):  # fusing the tables, where FBGEMM TBE runs already
            assert not any("split_embedding" in k for k in kernels), where
        if any(action.startswith(("vLLM:", "SGLang:")) for action in prescription.actions):  # an engine's flags
            frames = _names(path, "python_function")
            assert not frames or any(n.startswith(("vllm/", "sglang/")) for n in frames), where
        if prescription.id in ("gpu.amp", "gpu.amp_fp16"):
            for rank in finding.ranks:
                gpu = facts[("gpu", rank)]
                assert (gpu["low_precision_share_of_matrix"] or 0.0) < 0.5, where
                low = sum(1 for k in kernels if re.search(r"bf16|bfloat16|e4m3|e5m2|fp8", k, re.I))
                assert low < len([k for k in kernels if re.search(r"gemm|nvjet|cutlass", k, re.I)]) / 2, where
        if prescription.id == "gpu.nccl_overlap":
            assert not any(n in ("nccl:all_to_all", "nccl:send", "nccl:recv") for n in cpu) or \
                all(facts[("gpu", r)]["exposed_gradient_sync_share"] >= 0.5 for r in finding.ranks), where
        if any("scaled_dot_product_attention" in action for action in prescription.actions):
            assert not any(re.search(r"flash|fmha|sdpa|attention", k, re.I) for k in kernels), where
            assert any(re.search(r"softmax", k, re.I) for k in kernels), where
        if any("DataLoader(" in action or "DataLoader with" in action for action in prescription.actions):
            # shown only where the host's timeline shows a DataLoader, or records no host events at all (unknown)
            assert any("dataloader" in n.lower() for n in cpu + _ascend_api_names(path)) or not _has_host_timeline(path), where
    exported: dict[str, set[str]] = {}  # one report never asks for two values of one variable
    for _finding, prescription in _shown(report):
        for variable, value in prescription.env.items():
            exported.setdefault(variable, set()).add(value)
    assert not {v: values for v, values in exported.items() if len(values) > 1}, f"{name}: clashing exports {exported}"
    for finding in report.findings:
        assert finding.estimated_gain_us is None or finding.estimated_gain_us >= 0.05 or finding.shares_time_with, \
            f"{name}: {finding.id} is listed with a gain of {finding.estimated_gain_us} µs and no other finding took it"
        shown = gain_text(finding, report_labels(report))
        assert not re.match(r"0(\.0+)? (µs|ms)", shown), f"{name}: {finding.id} shows its gain as {shown!r}"
        if finding.id == "gpu.no_gpu_activity":
            assert not kernels, f"{name}: says there is no GPU activity, but the trace has {len(kernels)} kernels"


def test_no_report_asks_for_two_values_of_one_variable(tmp_path):
    """The every-category job with its context: near capacity and reorganising, it was told both
    PYTORCH_NPU_ALLOC_CONF=garbage_collection_threshold:0.95 and =expandable_segments:True — two values of one
    variable, and a pair torch_npu refuses together at start-up."""
    from builders import EVERY_CATEGORY_CONTEXT, EVERY_CATEGORY_ENV

    from advisor.usercontext import build_context

    (tmp_path / "model.yaml").write_text(EVERY_CATEGORY_CONTEXT)
    report = diagnose(build_every_category(tmp_path / "every"),
                      context=build_context(EVERY_CATEGORY_ENV, [], tmp_path / "model.yaml"))
    exported = [(p.id, variable, value) for _f, p in _shown(report) for variable, value in p.env.items()]
    alloc = {value for _id, variable, value in exported if variable == "PYTORCH_NPU_ALLOC_CONF"}
    assert alloc == {"expandable_segments:True"}, exported
    memory = next(f for f in report.facts if f["type"] == "memory" and f.get("peak_share_of_capacity"))
    assert memory["reserved_unused_ratio"] >= 0.3  # a third of the cache holds no tensor at the peak:
    found = {f.id for f in report.findings}        # the allocator's advice, not ZeRO or recomputation
    assert "memory.near_capacity_cached" in found and "memory.near_capacity" not in found
