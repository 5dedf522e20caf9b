"""Serving runs diagnosed as inference (issue 27): iterations and phases, TTFT and TPOT, graph mode from the profile,
the inference rules, and no training advice — on the two real H200 decode traces and on profiles in the shapes the
field writes (tests/inference_shapes.py: vLLM on CUDA and ROCm, SGLang's per-stage files, vLLM-Ascend eager and
aclgraph). Each builder's Truth holds the numbers it was built with; advisor must recover them."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES
from inference_shapes import (
    ascend_aclgraph_decode,
    ascend_eager_decode,
    ascend_prefill_decode_dirs,
    sglang_stage_files,
    vllm_eager_decode,
    vllm_graph_decode_device_bound,
    vllm_graph_decode_host_bound,
    vllm_prefill_heavy,
)

from advisor.compare import compare
from advisor.diagnose import diagnose
from advisor.ingest.kinetosteps import ITERATION
from advisor.ingest.serving import annotated, input_tokens, phase_of, sequence_phases
from advisor.usercontext import build_context

H200 = FIXTURES / "h200-recorded"

# builder → (verdict, the phase the breakdown covers, the top findings an inference engineer writes first, why)
EXPECTED = {
    vllm_graph_decode_host_bound: ("host", "decode", ["inference.host_between_replays"],
                                   "~24 ms of host Python before each token's 81 HIP graph replays"),
    vllm_graph_decode_device_bound: ("compute", "decode", ["inference.busy_decode"],
                                     "busy 92 % on batch-1 GEMMs: the batch is the lever (weight_bound needs --context)"),
    vllm_eager_decode: ("host", "decode", ["inference.decode_launch_bound"],
                        "357 eager launches per token: the engine's graph mode"),
    vllm_prefill_heavy: ("compute", "prefill", ["inference.prefill_dominates"],
                         "8,192-token chunks stall 24 running decodes: the chunk size trades TTFT for TPOT"),
    sglang_stage_files: ("compute", "decode", ["inference.busy_decode"],
                         "one CUDA graph per token, the overlap scheduler hides the host: a busy batch-4 decode"),
    ascend_eager_decode: ("host", "decode", ["inference.decode_launch_bound"],
                          "347 eager aclnn launches per token on the NPU: aclgraph / TorchAir"),
    ascend_aclgraph_decode: ("compute", "decode", ["inference.tp_allreduce_exposed", "inference.busy_decode"],
                             "one aclgraph replay per token: its 56 tiny all-reduces (29 µs each, the collective's own "
                             "handshake, no late member) take 13 % of a token, then the busy NPU's weight reads"),
    ascend_prefill_decode_dirs: ("host", "decode", ["inference.decode_launch_bound", "inference.tp_allreduce_exposed"],
                                 "prof/prefill and prof/decode of one eager worker, no markers: decode waits for "
                                 "launches; its 56 tiny all-reduces per token are the next cost"),
}
# advice a serving run must never get: training loops, CUDA graphs on a graph trace, SDPA for a GEMM
NEVER = ("DataLoader", "prof.step()", "scaled_dot_product_attention", "zero_grad", "gradient", "pin_memory")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    found = {}
    for builder in EXPECTED:
        path, truth = builder(tmp_path_factory.mktemp(builder.__name__))
        found[builder] = (diagnose(path), truth, path)
    return found


def _phase(report, name: str):
    return next(p for p in report.summary.phases if p.phase == name)


def _actions(report) -> str:
    return " ".join(action for f in report.findings for p in f.prescriptions for action in p.actions)


@pytest.mark.parametrize("builder", list(EXPECTED), ids=lambda b: b.__name__)
def test_each_serving_profile_is_diagnosed_as_inference(built, builder):
    verdict, covered, top, _why = EXPECTED[builder]
    report, truth, _path = built[builder]
    assert report.summary.bottleneck == verdict
    assert [p.phase for p in report.summary.phases if p.covered_by_breakdown][0] == covered
    assert [f.id for f in report.findings[: len(top)]] == top
    text = _actions(report)
    assert not [word for word in NEVER if word in text], builder.__name__


@pytest.mark.parametrize("builder", list(EXPECTED), ids=lambda b: b.__name__)
def test_the_phases_recover_the_numbers_the_run_was_built_with(built, builder):
    report, truth, _path = built[builder]
    counts = {p.phase: p.iterations for p in report.summary.phases}
    assert counts == {phase: n for phase, n in truth.iterations.items() if n}
    decode = _phase(report, "decode")
    assert decode.start_to_start_us == pytest.approx(truth.tpot_us, rel=0.01)  # TPOT: median start to start
    prefill = _phase(report, "prefill")
    assert prefill.first_duration_us == pytest.approx(truth.ttft_us, rel=0.01)  # the TTFT proxy
    if truth.marker == "annotation" or truth.platform == "cuda" and "vllm" in truth.engine:
        assert decode.tokens_per_iteration == truth.decode_batch
        assert decode.tokens_per_s == pytest.approx(truth.tokens_per_s, rel=0.01)
    graphs = {0: "eager", 1: "graphs"}.get(truth.graph_launches_per_decode, "piecewise graphs")
    assert decode.graph_mode == graphs
    assert decode.busy_share == pytest.approx(truth.device_busy_share_decode, abs=0.05)


def test_the_verdict_names_decode_tpot_and_the_batch(built):
    """The device-bound batch-1 decode (issue 27's acceptance): decode, its TPOT, its batch; and no CUDA graphs, DataLoader
    or SDPA advice anywhere."""
    report, truth, path = built[vllm_graph_decode_device_bound]
    from advisor.render.common import report_labels, verdict_sentence

    sentence = verdict_sentence(report, report_labels(report))
    assert "Decode is device-bound (busy)" in sentence and "TPOT 18.96 ms" in sentence and "batch 1" in sentence
    ids = {p.id for f in report.findings for p in f.prescriptions}
    assert not ids & {"gpu.cuda_graphs", "inference.decode_graphs", "gpu.dataloader"}
    assert "scaled_dot_product_attention" not in _actions(report)


def test_a_weight_bound_decode_is_told_the_batch_is_the_lever(built, tmp_path):
    """With the model's size in --context (70B, TP=4, bf16): each H100 rank reads 35 GB per token in ~14.6 ms of GEMMs,
    2.4 TB/s of its 3.35 TB/s peak — bound by the weights, so the batch, not the kernels."""
    _report, _truth, path = built[vllm_graph_decode_device_bound]
    settings = tmp_path / "model.yaml"
    settings.write_text("parameters_billion: 70\ndtype: bf16\ntensor_parallel: 4\n")
    report = diagnose(path, context=build_context([], [], settings))
    (decode,) = [f for f in report.facts if f["type"] == "phase" and f["phase"] == "decode"]
    assert decode["weight_read_tbps"] == pytest.approx(2.4, rel=0.05) and decode["peak_memory_tbps"] == 3.35
    assert report.findings[0].id == "inference.weight_bound_decode"
    assert report.findings[0].prescriptions[0].id == "inference.decode_batch"


def test_graphs_on_and_host_bound_names_the_host_time_between_replays_as_a_share_of_tpot(built):
    report, truth, _path = built[vllm_graph_decode_host_bound]
    first = report.findings[0]
    assert first.id == "inference.host_between_replays"
    assert first.estimated_gain_us == pytest.approx(truth.host_between_replays_us, rel=0.05)
    assert "TPOT 39,771 µs" in first.explanation and "60.3%" in first.explanation
    # what runs in the span: the with_stack Python function that holds most of it (vLLM's input preparation)
    assert "the host runs vllm/v1/worker/gpu_model_runner.py(690): _prepare_inputs for" in first.explanation
    ids = {p.id for f in report.findings for p in f.prescriptions}
    assert not ids & {"gpu.cuda_graphs", "inference.decode_graphs"}  # graphs are on


def test_phase_directories_are_one_rank_whose_prefill_joins_its_decode(built):
    """A recipe's prof/prefill/ and prof/decode/ captures of rank 0 are one rank: the decode capture is diagnosed, the
    prefill capture's iterations are its prefill phase (phase from the directory, not guessed), no 'rank 0 appears
    twice' warning; the Ascend-only actions come first, the GPU-only ones are left out, and MC2 is not offered for
    all-reduces that wait (their communication.json ops are counted per decode iteration, not with the prefill's)."""
    report, _truth, _path = built[ascend_prefill_decode_dirs]
    assert report.input.ranks == [0]
    assert {f["phase"]: f["phase_from"] for f in report.facts if f["type"] == "phase"} == {"prefill": "capture",
                                                                                          "decode": "capture"}
    assert not [w for w in report.coverage.warnings if "appears in" in w]
    assert any(f.startswith("prefill/") for f in report.coverage.read) and any(f.startswith("decode/") for f in report.coverage.read)
    actions = _actions(report)
    assert "vLLM-Ascend: run decode on aclgraph" in actions
    assert "MatmulAllReduce" not in actions  # decode's all-reduces mostly wait for the other rank: MC2 would not help
    assert "--disable-cuda-graph" not in actions and "disable_custom_all_reduce" not in actions
    assert "communication.slow_link" not in {f.id for f in report.findings}  # kilobyte all-reduces: latency


def test_a_trace_without_iteration_markers_is_cut_at_its_token_read_backs(tmp_path):
    """vLLM's eager decode with its iteration markers removed: each iteration ends at the read-back of its
    sampled token (the blocking device-to-host copy after the sampling kernel) and begins at the next host operator;
    the phases come from the kernel sequence, TPOT and TTFT are the built ones."""
    import gzip
    import json

    path, truth = vllm_eager_decode(tmp_path)
    (trace_file,) = path.glob("*.pt.trace.json.gz") if path.is_dir() else [path]
    document = json.loads(gzip.decompress(trace_file.read_bytes()))
    document["traceEvents"] = [e for e in document["traceEvents"] if not ITERATION.search(str(e.get("name", "")))]
    trace_file.write_bytes(gzip.compress(json.dumps(document).encode()))
    report = diagnose(path)
    assert report.input.steps_marked_by.startswith("serving iterations, each ending at the read-back")
    assert {p.phase: p.iterations for p in report.summary.phases} == {k: n for k, n in truth.iterations.items() if n}
    assert _phase(report, "decode").start_to_start_us == pytest.approx(truth.tpot_us, rel=0.02)
    assert {f["phase"]: f["phase_from"] for f in report.facts if f["type"] == "phase"}["prefill"] == "kernel sequence"
    assert report.findings[0].id == "inference.decode_launch_bound"


def test_compilations_after_the_first_decode_are_steady_state_recompiles(tmp_path):
    """The eager Ascend decode with a 3 ms AscendCL@opCompile (as CANN records it on the launch thread) at the start of
    decodes 2 to 6, and one in the first decode (warm-up, not counted): inference.steady_state_recompiles fires with
    the compilations after the first, and the training rule host.online_compilation stays quiet on a serving run."""
    import json

    path, _truth = ascend_eager_decode(tmp_path)
    trace_file = path / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = json.loads(trace_file.read_text())
    marks = sorted((float(e["ts"]), float(e["dur"])) for e in events if str(e.get("name", "")).startswith("execute_context_0"))
    launch = next(e for e in events if str(e.get("name", "")).startswith("AscendCL@aclnn"))
    for ts, _dur in marks:  # the decodes: execute_context_0(0)_generation_1(1)
        events.append({**launch, "name": "AscendCL@opCompile", "ts": f"{ts + 100.0:.3f}", "dur": 3000.0,
                       "args": {**launch["args"], "id": "opCompile", "Mode": "ACL_OP"}})
    trace_file.write_text(json.dumps(events))
    report = diagnose(path)
    (decode,) = [f for f in report.facts if f["type"] == "phase" and f["phase"] == "decode"]
    assert decode["compiles_after_first"] == len(marks) - 1
    assert decode["compile_us_after_first_per_iteration"] == pytest.approx(3000.0)
    ids = [f.id for f in report.findings]
    assert "inference.steady_state_recompiles" in ids and "host.online_compilation" not in ids
    actions = _actions(report)
    assert "jit_compile=False" in actions and "mark_dynamic" not in actions


def test_uneven_serving_ranks_are_told_the_serving_causes(tmp_path):
    """Two vLLM-Ascend TP ranks whose decode GEMMs differ (rank 1's device reads its weights at two thirds the speed):
    cluster.uneven_ranks names rank 1, with the serving causes (expert-parallel load balance, data-parallel requests)
    and without the training ones (data loading, checkpoints)."""
    import dataclasses

    from inference_shapes import QWEN_7B_910B, _AscendRank, _VllmAscend

    slow = dataclasses.replace(QWEN_7B_910B, bandwidth=QWEN_7B_910B.bandwidth / 1.5)
    for rank, model in ((0, QWEN_7B_910B), (1, slow)):
        worker = _AscendRank(model, pid=2861473 + rank, base_us=1_764_246_877_000_000, rank=rank, device=rank)
        engine = _VllmAscend(worker, marker="annotation", prep_us=2_000.0)
        engine.iteration(1, 1049, 0, 0)
        for _ in range(6):
            engine.iteration(0, 0, 1, 1)
        worker.write(tmp_path)
    report = diagnose(tmp_path)
    assert report.input.ranks == [0, 1]
    (uneven,) = [f for f in report.findings if f.id == "cluster.uneven_ranks" and f.key == "compute"]
    assert "rank(s) 1 are the ones the others wait for" in uneven.explanation
    actions = " ".join(a for p in uneven.prescriptions for a in p.actions)
    assert "--enable-eplb" in actions and "data-parallel attention" in actions
    assert "data loading" not in actions and "checkpointing" not in actions


def test_read_backs_cut_iterations_only_after_a_sampling_kernel():
    """A read-back with no sampling kernel since the last one (a metadata .tolist()) stays inside its iteration;
    the next iteration begins at the first host operator after the previous one's read-back; one iteration is none."""
    from advisor.ingest.serving import readback_markers

    ops = np.array([0.0, 5.0, 12.0, 30.0, 33.0, 50.0])
    sampling = np.array([10.0, 40.0])
    backs = np.array([6.0, 11.0, 45.0])  # 6: before any sampling (stays inside); 11 ends iteration 1; 45 iteration 2
    markers = readback_markers(ops, sampling, backs)
    assert markers[["ts", "dur"]].values.tolist() == [[0.0, 11.0], [12.0, 33.0]]
    assert readback_markers(ops, sampling[:1], backs[:2]).empty


def test_sglang_stage_files_are_one_rank_with_their_phases(built):
    report, _truth, _path = built[sglang_stage_files]
    assert report.input.ranks == [0]
    assert sorted(report.coverage.read) == sorted(p for p in report.coverage.read if "-TP-0-" in p) and len(report.coverage.read) == 2
    assert {p.phase: p.iterations for p in report.summary.phases} == {"prefill": 3, "decode": 6}


def test_an_aclgraph_capture_iteration_is_warm_up(built):
    report, _truth, _path = built[ascend_aclgraph_decode]
    assert any("captures its graph" in w for w in report.coverage.warnings)
    assert _phase(report, "decode").graph_mode == "graphs"


def test_the_real_h200_decodes(tmp_path):
    """The real traces: eager decode → the engine's graph mode; graph decode → no graph advice, the launch cost inside
    cudaGraphLaunch; each with its prefill told apart by its kernels and TPOT as measured outside the profiler."""
    eager, graph = diagnose(H200 / "decode_eager_small"), diagnose(H200 / "decode_graph_small")
    assert eager.findings[0].id == "inference.decode_launch_bound"
    assert _phase(eager, "decode").start_to_start_us == pytest.approx(15_900, rel=0.02)  # wall TPOT median 15.9 ms
    assert _phase(eager, "prefill").first_duration_us == pytest.approx(24_100, rel=0.05)  # wall TTFT 24.1 ms
    assert graph.findings[0].id == "gpu.graph_launch_exposed"
    assert _phase(graph, "decode").start_to_start_us == pytest.approx(1_900, rel=0.02)  # wall TPOT median 1.9 ms
    assert not {p.id for f in graph.findings for p in f.prescriptions} & {"gpu.cuda_graphs", "inference.decode_graphs"}


@pytest.mark.parametrize("name", ["decode_eager_small", "decode_graph_small"])
def test_the_real_decodes_without_their_markers_give_the_same_iterations(tmp_path, name):
    """The real H200 traces with their 49 execute_model events removed: cut at the read-backs of the sampled tokens,
    they give the same 1 prefill and 48 decodes, TPOT within 1 % and the same first finding as with the markers."""
    import gzip
    import json

    (source,) = (H200 / name).glob("*.pt.trace.json.gz")
    document = json.loads(gzip.decompress(source.read_bytes()))
    document["traceEvents"] = [e for e in document["traceEvents"] if not ITERATION.search(str(e.get("name", "")))]
    (tmp_path / source.name).write_bytes(gzip.compress(json.dumps(document).encode()))
    marked, unmarked = diagnose(H200 / name), diagnose(tmp_path)
    assert unmarked.input.steps_marked_by.startswith("serving iterations, each ending at the read-back")
    assert {p.phase: p.iterations for p in unmarked.summary.phases} == {"prefill": 1, "decode": 48}
    assert _phase(unmarked, "decode").start_to_start_us == pytest.approx(_phase(marked, "decode").start_to_start_us,
                                                                         rel=0.01)
    assert unmarked.findings[0].id == marked.findings[0].id


def test_compare_reports_tpot_and_ttft():
    comparison = compare(H200 / "decode_eager_small", H200 / "decode_graph_small")
    rows = {row.name: row for row in comparison.serving}
    assert rows["tpot_us"].base == pytest.approx(15_816, rel=0.01) and rows["tpot_us"].target == pytest.approx(1_897, rel=0.01)
    assert "TPOT 15.82 ms → 1.90 ms (-88.0 %)" in comparison.headline  # one unit from 1 ms up


# --- the pure functions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("execute_context_1(1049)_generation_0(0)", (1, 1049, 0, 0)),
    ("execute_context_0(0)_generation_24(24)", (0, 0, 24, 24)),
    ("execute_generation_8(8)_context_1(512)", (1, 512, 8, 8)),  # the order has changed between versions
    ("gpu_model_runner.py(1234): execute_model", None),
])
def test_annotations_are_read_tolerantly(name, expected):
    assert annotated(name) == expected


def test_phase_of_and_input_tokens():
    assert (phase_of(1, 0), phase_of(0, 3), phase_of(1, 3), phase_of(0, 0)) == ("prefill", "decode", "mixed", None)
    assert input_tokens([4196, 8392, 4, 8]) == 1049  # input_ids int32 beside positions int64; seq_lens beside query_start_loc
    assert input_tokens([4, 8]) == 1 and input_tokens([12, 100]) is None


def test_the_decode_sequence_is_the_most_common_and_a_prompt_is_told_by_its_attention_or_its_size():
    decode = frozenset({"gemm_small", "paged_attention_decode", "rms_norm", "argmax"})
    prompt_same_ops = frozenset({"gemm_small", "flash_attention_varlen", "rms_norm", "argmax"})
    assert sequence_phases([prompt_same_ops, decode, decode, decode]) == ["prefill", "decode", "decode", "decode"]
    assert sequence_phases([decode, decode, decode], [70_000.0, 10_000.0, 10_000.0]) == ["prefill", "decode", "decode"]
    assert sequence_phases([decode, prompt_same_ops]) == [None, None]  # nothing repeats: the capture cannot tell


ENGINE_ACTIONS = {"vLLM": "vLLM: do not pass `--enforce-eager`", "SGLang": "SGLang: do not pass",
                  "own": "Your own generate loop", "vLLM-Ascend": "vLLM-Ascend: run decode on aclgraph"}


@pytest.mark.parametrize(("source", "engine", "shown"), [
    ("real H200 own loop", "none", {"own"}),  # with_stack frames: torch/, the script's own files; no engine package
    ("vLLM annotations", "vLLM", {"vLLM"}),  # execute_context_ annotations, no with_stack
    ("Ascend", None, {"vLLM-Ascend"}),  # nothing tells the engine; the platform picks the action
])
def test_graph_mode_advice_follows_the_engine_the_trace_shows(built, source, engine, shown):
    """The graph-mode prescription keeps only the actions for the engine the trace shows: a generation loop of the
    user's own (the real H200 eager decode, whose frames are torch's and the script's) gets torch.compile and a static
    cache, not vLLM or SGLang flags; a vLLM trace gets vLLM's, not the transformers recipe."""
    report = {"real H200 own loop": lambda: diagnose(H200 / "decode_eager_small"),
              "vLLM annotations": lambda: built[vllm_eager_decode][0],
              "Ascend": lambda: built[ascend_eager_decode][0]}[source]()
    (context,) = [f for f in report.facts if f["type"] == "context"]
    assert context["serving_engine"] == engine
    (finding,) = [f for f in report.findings if f.id == "inference.decode_launch_bound"]
    actions = " ".join(finding.prescriptions[0].actions)
    assert {key for key, text in ENGINE_ACTIONS.items() if text in actions} == shown, actions
    # vLLM's CUDA-graph LLM(...) before/after only for vLLM on a GPU: not for a loop of the user's own (expert review,
    # 2026-11-28), nor on an Ascend NPU
    assert (finding.prescriptions[0].code is not None) is (engine == "vLLM")


def test_the_serving_engine_is_the_package_of_the_traces_frames():
    from advisor.ingest.kineto import _code_root
    from advisor.ingest.serving import serving_engine

    assert _code_root("vllm/v1/worker/gpu_model_runner.py(1543): execute_model") == "vllm"
    assert _code_root("<built-in method item of Tensor object at 0x7f>") == "" == _code_root("generate.py(12): main")
    assert serving_engine(frozenset({"torch", "vllm", "vllm_ascend"}), False, False) == "vLLM-Ascend"
    assert serving_engine(frozenset({"torch", "sglang"}), False, False) == "SGLang"
    assert serving_engine(frozenset({"torch", "transformers"}), False, False) == "none"
    assert serving_engine(frozenset(), True, False) == "vLLM"
    assert serving_engine(frozenset(), False, True) == "SGLang"
    assert serving_engine(frozenset(), False, False) is None
