"""The inference fixture builders write what the formats documents say the field writes, and their Truth agrees with
the events they wrote. Nothing from advisor is imported: every check reads the files by the documents alone
(shared/formats/inference.md, ascend-profiler-output.md, the real Kineto traces' shapes)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import statistics
import time
from decimal import Decimal
from pathlib import Path

import pytest

import inference_shapes as shapes

GPU_BUILDERS = [shapes.vllm_graph_decode_host_bound, shapes.vllm_graph_decode_device_bound, shapes.vllm_eager_decode,
                shapes.vllm_prefill_heavy, shapes.sglang_stage_files]
ASCEND_BUILDERS = [shapes.ascend_eager_decode, shapes.ascend_aclgraph_decode, shapes.ascend_prefill_decode_dirs]
ALL_BUILDERS = GPU_BUILDERS + ASCEND_BUILDERS

ANNOTATION = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)$")
RUNNER = re.compile(r"gpu_model_runner\.py\(\d+\): execute_model$")
SGLANG_FORWARD = re.compile(r"model_executor/model_runner\.py\(\d+\): forward$")
SGLANG_BATCH = re.compile(r"tp_worker\.py\(\d+\): forward_batch_generation$")
LAUNCHES = {"cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC", "hipLaunchKernel",
            "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipExtLaunchKernel"}
GRAPHS = {"cudaGraphLaunch", "hipGraphLaunch"}
COPIES = {"cudaMemcpyAsync", "hipMemcpyAsync"}
SYNCS = {"cudaStreamSynchronize", "hipStreamSynchronize", "cudaEventSynchronize", "hipEventSynchronize"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
HOST_CATS = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}

# shared/formats/ascend-profiler-output.md §3.1, Level1/2 A2 PipeUtilization header — "Step Id" only with ProfilerStep
DOC_KERNEL_DETAILS = (
    "Step Id,Device_id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
    "Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,"
    "aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
    "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
    "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),"
    "aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)").split(",")
# §3.4 (torch_npu ≥2.6), §3.2, §3.8, §3.3
DOC_STEP_TRACE = ("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
                  "Communication(Not Overlapped and Exclude Receive),Preparing").split(",")
DOC_OP_STATISTIC = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),"
                    "Ratio(%)").split(",")
DOC_API_STATISTIC = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance".split(",")
DOC_OPERATOR_DETAILS = ("Name,Input Shapes,Call Stack,Host Self Duration(us),Host Total Duration(us),"
                        "Device Self Duration(us),Device Total Duration(us),Device Self Duration With AICore(us),"
                        "Device Total Duration With AICore(us)").split(",")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every builder once: name -> (returned path, Truth)."""
    out = {}
    for builder in ALL_BUILDERS:
        out[builder.__name__] = builder(tmp_path_factory.mktemp(builder.__name__))
    return out


def _median(values):
    return statistics.median(values)


def _union(spans):
    merged = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return merged


def _covered(merged, lo, hi):
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in merged)


# ---------------------------------------------------------------------------------------------------------------------
# Kineto traces
# ---------------------------------------------------------------------------------------------------------------------


_PARSED: dict[Path, dict] = {}


def _traces(path: Path, truth) -> list[dict]:
    """The builder's trace documents (parsed once per file; tests must not modify them)."""
    files = [path / name for name in truth.files]
    assert all(f.name.endswith(".pt.trace.json.gz") or f.name.endswith(".trace.json.gz") for f in files)
    for f in files:
        if f not in _PARSED:
            _PARSED[f] = json.loads(gzip.decompress(f.read_bytes()))
    return [_PARSED[f] for f in files]


@pytest.mark.parametrize("builder", GPU_BUILDERS, ids=lambda b: b.__name__)
def test_kineto_documents_are_well_formed(built, builder):
    path, truth = built[builder.__name__]
    for doc in _traces(path, truth):
        assert doc["schemaVersion"] == 1 and doc["displayTimeUnit"] == "ms"
        assert isinstance(doc["baseTimeNanoseconds"], int)
        assert doc["deviceProperties"] and all({"id", "name", "totalGlobalMem", "computeMajor", "computeMinor",
                                                "warpSize", "numSms"} <= set(p) for p in doc["deviceProperties"])
        assert doc["deviceProperties"][0]["name"] == truth.device
        assert doc["distributedInfo"]["rank"] == truth.rank
        assert doc["distributedInfo"]["world_size"] == truth.tensor_parallel
        events = doc["traceEvents"]
        xs = [e for e in events if e["ph"] == "X" and e.get("cat") != "Trace"]
        for e in xs:
            assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and e["cat"] in HOST_CATS | GPU_CATS | {
                "gpu_user_annotation"}, e
        host_pids = {e["pid"] for e in xs if e["cat"] in HOST_CATS}
        assert len(host_pids) == 1
        names = {(e["pid"], e["name"]) for e in events if e["ph"] == "M"}
        assert {(pid, "process_name") for pid in host_pids} <= names
        gpu = [e for e in xs if e["cat"] in GPU_CATS | {"gpu_user_annotation"}]
        for e in gpu:  # GPU events: pid = device, tid = stream
            assert e["pid"] == e["args"]["device"] if "device" in e["args"] else True
            if "stream" in e["args"]:
                assert e["tid"] == e["args"]["stream"]
        streams = {(e["pid"], e["tid"]) for e in gpu}
        thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and
                        e["name"] == "thread_name"}
        for stream in streams:  # "stream 7 ", with the trailing space of the real traces
            assert thread_names[stream] == f"stream {stream[1]} "
        if doc.get("with_stack"):
            assert any(e["cat"] == "python_function" for e in xs)
        else:
            assert not any(e["cat"] == "python_function" for e in xs)
        if not doc.get("record_shapes"):
            assert not any("Input Dims" in e.get("args", {}) for e in xs)


@pytest.mark.parametrize("builder", GPU_BUILDERS, ids=lambda b: b.__name__)
def test_every_gpu_event_has_its_runtime_launch_and_flows_pair_up(built, builder):
    path, truth = built[builder.__name__]
    for doc in _traces(path, truth):
        events = doc["traceEvents"]
        calls = {e["args"]["correlation"]: e for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
        gpu = [e for e in events if e.get("cat") in GPU_CATS]
        for e in gpu:
            call = calls[e["args"]["correlation"]]
            if e["cat"] == "kernel":
                assert call["name"] in LAUNCHES | GRAPHS, call
            else:
                assert call["name"] in COPIES
            assert call["ts"] + call["dur"] <= e["ts"] + 1e-6, (call, e)  # a launch precedes its work
            if "External id" in e["args"]:
                assert e["args"]["External id"] == call["args"].get("External id")
        per_call = {}
        for e in gpu:
            per_call.setdefault(e["args"]["correlation"], []).append(e)
        for correlation, works in per_call.items():
            if calls[correlation]["name"] in LAUNCHES | COPIES:
                assert len(works) == 1
        externals = {e["args"]["External id"] for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
        assert all(e["args"]["External id"] in externals for e in events
                   if e.get("cat") in HOST_CATS | GPU_CATS and "External id" in e.get("args", {}))
        starts = {}
        for e in events:
            if e["ph"] == "s":
                assert e["cat"] == "ac2g" and e["id"] not in starts
                starts[e["id"]] = e
        finishes = [e for e in events if e["ph"] == "f"]
        gpu_at = {(e["args"]["correlation"], e["ts"]) for e in gpu}
        for f in finishes:  # every f has its s; s at the call, f at the GPU work (one f per kernel of a graph)
            assert f["bp"] == "e" and f["id"] in starts
            assert (f["id"], f["ts"]) in gpu_at
            assert starts[f["id"]]["ts"] == calls[f["id"]]["ts"]
        assert len(finishes) == len(gpu)
        unmatched = {i for i in starts} - {f["id"] for f in finishes}
        assert all(calls[i]["name"] == "cudaStreamSynchronize" for i in unmatched)  # as in the real traces


@pytest.mark.parametrize("builder", GPU_BUILDERS, ids=lambda b: b.__name__)
def test_host_events_nest(built, builder):
    """Ops, annotations and Python frames of one thread are properly nested; Python parents exist."""
    path, truth = built[builder.__name__]
    for doc in _traces(path, truth):
        host = [e for e in doc["traceEvents"] if e.get("cat") in HOST_CATS]
        by_thread = {}
        for e in host:
            by_thread.setdefault(e["tid"], []).append(e)
        for events in by_thread.values():
            stack = []
            for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
                while stack and stack[-1] <= e["ts"] + 1e-6:
                    stack.pop()
                end = round(e["ts"] + e["dur"], 3)
                assert not stack or end <= stack[-1] + 1e-3, e
                stack.append(end)
        frames = {e["args"]["Python id"]: e for e in host if e["cat"] == "python_function"}
        for e in frames.values():
            parent = e["args"]["Python parent id"]
            if parent is not None:
                p = frames[parent]
                assert p["ts"] <= e["ts"] + 1e-6 and e["ts"] + e["dur"] <= p["ts"] + p["dur"] + 1e-3


def _gpu_iterations(truth, docs) -> list[dict]:
    """Iteration windows by the markers the documents describe, with what each holds."""
    out = []
    for doc in docs:
        events = doc["traceEvents"]
        host = [e for e in events if e.get("cat") in HOST_CATS]
        annotations = [e for e in host if e["cat"] == "user_annotation" and ANNOTATION.match(e["name"])]
        if truth.engine == "sglang":
            markers = [e for e in host if e["cat"] == "python_function" and SGLANG_FORWARD.search(e["name"])]
            batches = [e for e in host if e["cat"] == "python_function" and SGLANG_BATCH.search(e["name"])]
        elif annotations:
            markers = batches = annotations
        else:
            markers = batches = [e for e in host if e["cat"] == "python_function" and RUNNER.search(e["name"])]
        calls = sorted((e for e in host if e["cat"] in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])
        gpu = {e["args"]["correlation"]: e for e in events if e.get("cat") in GPU_CATS}
        for marker, batch in zip(sorted(markers, key=lambda e: e["ts"]), sorted(batches, key=lambda e: e["ts"])):
            lo, hi = batch["ts"], batch["ts"] + batch["dur"]
            inside = [c for c in calls if c["tid"] == batch["tid"] and lo <= c["ts"] <= hi]
            match = ANNOTATION.match(marker["name"])
            htod = []
            for c in inside:
                if c["name"] in COPIES:
                    work = gpu[c["args"]["correlation"]]
                    if "HtoD" in work["name"]:
                        htod.append(int(c["args"]["size"]) if "size" in c["args"] else work["args"]["bytes"])
            dtoh = [gpu[c["args"]["correlation"]] for c in inside
                    if c["name"] in COPIES and "DtoH" in gpu[c["args"]["correlation"]]["name"]]
            out.append({"marker": marker, "batch": batch, "context": match and (int(match[1]), int(match[2])),
                        "generation": match and (int(match[3]), int(match[4])),
                        "graphs": [c for c in inside if c["name"] in GRAPHS],
                        "eager": sum(c["name"] in LAUNCHES for c in inside), "htod": htod, "dtoh": dtoh,
                        "doc": doc})
    return out


@pytest.mark.parametrize("builder", GPU_BUILDERS, ids=lambda b: b.__name__)
def test_gpu_truth_matches_the_events(built, builder):
    path, truth = built[builder.__name__]
    docs = _traces(path, truth)
    its = _gpu_iterations(truth, docs)
    empty = [i for i in its if not i["graphs"] and not i["eager"]]
    assert len(empty) == (1 if builder is shapes.vllm_graph_decode_device_bound else 0)  # the last one is empty
    if empty:
        assert its[-1] is empty[0]
        its = its[:-1]
    assert len(its) == len(truth.phases)
    for it, phase, ctx, gen, htod in zip(its, truth.phases, truth.context_tokens, truth.generation_tokens,
                                         truth.htod_bytes):
        if it["context"] is not None:  # the annotation carries requests and tokens of both kinds
            assert it["context"][1] == ctx and it["generation"][1] == gen
            assert (it["context"][0] > 0) == (ctx > 0) and (it["generation"][0] > 0) == (gen > 0)
        if htod is None:
            assert truth.engine == "sglang"
        else:  # input_ids int32 (bytes ÷ 4) then positions int64 (bytes ÷ 8), as many tokens as the step carries
            assert it["htod"][:2] == list(htod) and htod == (4 * (ctx + gen), 8 * (ctx + gen))
        assert len(it["dtoh"]) == truth.blocking_dtoh_per_iteration == 1
        assert it["dtoh"][0]["name"].startswith("Memcpy DtoH")
        read = it["dtoh"][0]
        waits = [e for e in it["doc"]["traceEvents"] if e.get("name") in SYNCS
                 and e["ts"] <= read["ts"] + read["dur"] <= e["ts"] + e["dur"] + 1e-6]
        assert waits, "the read-back is waited for (blocking)"
        assert (phase == "decode") == (ctx == 0 and gen > 0)
    decodes = [it for it, phase in zip(its, truth.phases) if phase == "decode"]
    assert {it["generation"][1] if it["generation"] else truth.decode_batch for it in decodes} == {truth.decode_batch}
    assert _median(len(it["graphs"]) for it in decodes) == truth.graph_launches_per_decode
    assert _median(it["eager"] for it in decodes) == truth.eager_launches_per_decode
    first_prefill = its[truth.phases.index("prefill")]
    if truth.engine == "sglang":  # from the forward frame to the main thread's wait for the sampled ids
        m = first_prefill["marker"]
        waits = [e for e in first_prefill["doc"]["traceEvents"] if e.get("name") == "cudaEventSynchronize"]
        end = min(e["ts"] + e["dur"] for e in waits if e["ts"] > m["ts"])
        assert end - m["ts"] == pytest.approx(truth.ttft_us, abs=0.01)
    else:
        assert first_prefill["marker"]["dur"] == pytest.approx(truth.ttft_us, abs=0.01)
    pairs = [(a, b) for a, b, pa, pb in zip(its, its[1:], truth.phases, truth.phases[1:]) if pa == pb == "decode"]
    assert _median(b["marker"]["ts"] - a["marker"]["ts"] for a, b in pairs) == pytest.approx(truth.tpot_us, abs=0.01)
    assert truth.tokens_per_s == pytest.approx(truth.decode_batch / truth.tpot_us * 1e6, abs=2e-3)
    shares = []
    for a, b in pairs:
        spans = [(e["ts"], e["ts"] + e["dur"]) for e in a["doc"]["traceEvents"] if e.get("cat") in GPU_CATS]
        lo, hi = a["marker"]["ts"], b["marker"]["ts"]
        shares.append(_covered(_union(spans), lo, hi) / (hi - lo))
    assert _median(shares) == pytest.approx(truth.device_busy_share_decode, abs=1e-3)
    if truth.graph_launches_per_decode:
        between = []
        for previous, it in zip(its, its[1:]):
            if it not in decodes:
                continue
            if truth.engine == "sglang":
                free = it["batch"]["ts"]
            else:  # the previous iteration's blocking wait returned
                lo, hi = previous["marker"]["ts"], previous["marker"]["ts"] + previous["marker"]["dur"]
                free = max(e["ts"] + e["dur"] for e in previous["doc"]["traceEvents"]
                           if e.get("name") in SYNCS and lo <= e["ts"] <= hi)
            between.append(it["graphs"][0]["ts"] - free)
        assert _median(between) == pytest.approx(truth.host_between_replays_us, abs=0.01)
    else:
        assert truth.host_between_replays_us == 0


def test_graph_builders_shape(built):
    _, host_bound = built["vllm_graph_decode_host_bound"]
    _, device_bound = built["vllm_graph_decode_device_bound"]
    _, eager = built["vllm_eager_decode"]
    _, heavy = built["vllm_prefill_heavy"]
    _, sglang = built["sglang_stage_files"]
    assert host_bound.graph_launches_per_decode == device_bound.graph_launches_per_decode == 81  # 80 layers + 1
    assert host_bound.iterations == device_bound.iterations == {"prefill": 1, "mixed": 0, "decode": 9}
    assert host_bound.prefill_tokens == device_bound.prefill_tokens == (1049,)
    assert host_bound.htod_bytes[0] == (4196, 8392) and host_bound.htod_bytes[1] == (4, 8)
    assert 20_000 <= host_bound.host_between_replays_us <= 30_000 and host_bound.device_busy_share_decode < 0.5
    assert device_bound.device_busy_share_decode >= 0.9 and device_bound.host_between_replays_us < 2_000
    assert eager.graph_launches_per_decode == 0 and eager.eager_launches_per_decode >= 300
    assert eager.device_busy_share_decode < 0.6
    assert heavy.iterations["prefill"] + heavy.iterations["mixed"] > heavy.iterations["decode"] > 0
    assert sglang.graph_launches_per_decode == 1 and sglang.device_busy_share_decode > 0.9
    for truth in (host_bound, device_bound, heavy, sglang):
        assert "CUDA graphs" in truth.must_not_advise


def test_rocm_trace_uses_hip_names(built):
    path, truth = built["vllm_graph_decode_host_bound"]
    (doc,) = _traces(path, truth)
    events = doc["traceEvents"]
    runtime = {e["name"] for e in events if e.get("cat") == "cuda_runtime"}
    assert {"hipGraphLaunch", "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync"} <= runtime
    assert not any(n.startswith("cuda") for n in runtime)
    kernels = {e["name"] for e in events if e.get("cat") == "kernel"}
    assert any(k.startswith("Cijk_") for k in kernels)
    assert any("paged_attention_ll4mi" in k for k in kernels)
    assert any("cross_device_reduce_1stage" in k for k in kernels)
    assert all(e["args"]["kind"] == "Dispatch Kernel" for e in events if e.get("cat") == "kernel")
    assert all(isinstance(e["args"]["stream"], str) for e in events if e.get("name") == "hipLaunchKernel")
    # 81 graph replays per decode, attention (QKV + reduce) and its KV write eager between them
    annotations = [e for e in events if e.get("cat") == "user_annotation"]
    assert [ANNOTATION.match(a["name"]) is not None for a in annotations] == [True] * 10


def test_cuda_graph_kernels_carry_the_launch_correlation(built):
    path, truth = built["vllm_graph_decode_device_bound"]
    (doc,) = _traces(path, truth)
    events = doc["traceEvents"]
    launches = [e for e in events if e.get("name") == "cudaGraphLaunch"]
    assert all("External id" not in e["args"] and e["args"]["cbid"] == 311 for e in launches)
    per_launch = {}
    for e in events:
        if e.get("cat") == "kernel":
            per_launch.setdefault(e["args"]["correlation"], []).append(e)
    assert all(len(per_launch[e["args"]["correlation"]]) >= 5 for e in launches)
    kernels = {e["name"] for e in events if e.get("cat") == "kernel"}
    assert any(k.startswith("nvjet") for k in kernels) and any(k.startswith("sm90_xmma") for k in kernels)
    assert any("flash_fwd_splitkv" in k for k in kernels)
    assert any(k.startswith("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") for k in kernels)
    assert not any(e.get("cat") == "user_annotation" for e in events)  # older vLLM: no annotation
    # GEMMs launched eagerly go through the driver, as in the real eager trace
    assert any(e["name"] == "cuLaunchKernelEx" and e["cat"] == "cuda_driver" for e in events)


def test_metadata_copies_variant(tmp_path):
    path, truth = shapes.vllm_graph_decode_host_bound(tmp_path, decodes=3, metadata_copies=True)
    its = _gpu_iterations(truth, _traces(path, truth))
    for it, htod in zip(its, truth.htod_bytes):
        assert len(it["htod"]) == 6 and set(htod) <= set(it["htod"])


def test_sglang_stage_files(built):
    path, truth = built["sglang_stage_files"]
    names = sorted(p.name for p in path.iterdir())
    assert names == sorted(truth.files)
    assert [re.fullmatch(r"[\d.]+-TP-0-(EXTEND|DECODE)\.trace\.json\.gz", n)[1] for n in names] == ["DECODE", "EXTEND"]
    extend, decode = (json.loads(gzip.decompress((path / n).read_bytes())) for n in truth.files)
    assert not any(e.get("name") in GRAPHS for e in extend["traceEvents"])
    assert sum(e.get("name") in GRAPHS for e in decode["traceEvents"]) == truth.iterations["decode"]
    tids = {e["tid"] for e in decode["traceEvents"] if e.get("name") in GRAPHS}
    main = {e["tid"] for e in decode["traceEvents"] if e.get("name") == "cudaEventSynchronize"}
    assert len(tids) == len(main) == 1 and tids != main  # forward thread launches, scheduler thread waits


# ---------------------------------------------------------------------------------------------------------------------
# Ascend
# ---------------------------------------------------------------------------------------------------------------------


def _rank_dirs(path: Path) -> list[Path]:
    if path.name.endswith("_ascend_pt"):
        return [path]
    return sorted(p for p in path.rglob("*_ascend_pt") if p.is_dir())


def _csv(path: Path) -> tuple[list[str], list[list[str]], bytes]:
    raw = path.read_bytes()
    rows = list(csv.reader(io.StringIO(raw.decode(), newline="")))
    return rows[0], rows[1:], raw


def _trace_view(rank: Path) -> list[dict]:
    """trace_view.json of a rank directory (parsed once; tests must not modify it)."""
    if rank not in _PARSED:
        _PARSED[rank] = json.loads((rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    return _PARSED[rank]


def _processes(events):
    return {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}


@pytest.mark.parametrize("builder", ASCEND_BUILDERS, ids=lambda b: b.__name__)
def test_ascend_directory_and_info_files(built, builder):
    path, truth = built[builder.__name__]
    ranks = _rank_dirs(path)
    assert len(ranks) == (2 if builder is shapes.ascend_prefill_decode_dirs else 1)
    if builder is shapes.ascend_prefill_decode_dirs:
        assert path.name == "prof" and [r.parent.name for r in ranks] == ["decode", "prefill"]
    for rank in ranks:
        assert re.fullmatch(r"[\w.-]+_\d+_\d{17}_ascend_pt", rank.name)
        info = json.loads((rank / "profiler_info_0.json").read_text())
        assert (rank / "profiler_info_0.json").read_text().startswith("{\n    ")  # indent 4
        assert info["config"]["experimental_config"]["_profiler_level"] == "Level1"
        assert info["config"]["experimental_config"]["_aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"
        assert info["rank_id"] == truth.rank and info["torch_npu_version"] and info["cann_version"]
        meta_text = (rank / "profiler_metadata.json").read_text()
        assert "\n" not in meta_text.strip()
        meta = json.loads(meta_text)
        assert {"ASCEND_LAUNCH_BLOCKING", "PYTORCH_NPU_ALLOC_CONF"} <= set(meta["ENV_VARIABLES"])
        assert all(set(g) == {"group_name", "group_rank", "global_ranks"} for g in meta["parallel_group_info"].values())
        device_info = next(rank.glob("PROF_*/device_0/info.json.0"))
        assert re.fullmatch(r"PROF_\d+_\d+_[0-9a-zA-Z]+", device_info.parent.parent.name)
        for name in truth.files:
            assert (path / name).exists() if builder is shapes.ascend_prefill_decode_dirs else (rank / name).exists()


@pytest.mark.parametrize("builder", ASCEND_BUILDERS, ids=lambda b: b.__name__)
def test_ascend_csvs_follow_the_reference(built, builder):
    path, truth = built[builder.__name__]
    for rank in _rank_dirs(path):
        out = rank / "ASCEND_PROFILER_OUTPUT"
        header, rows, raw = _csv(out / "kernel_details.csv")
        assert header == DOC_KERNEL_DETAILS[1:]  # no ProfilerStep, so no Step Id
        assert raw.count(b"\r\n") == len(rows) + 1 and b"\n" not in raw.replace(b"\r\n", b"")
        assert b'"""' in raw  # shapes carry literal quotes
        at = {h: i for i, h in enumerate(header)}
        assert all(len(r) == len(header) for r in rows)
        starts = [r[at["Start Time(us)"]] for r in rows]
        assert all(s.endswith("\t") and re.fullmatch(r"\d{16}\.\d{3}", s.strip()) for s in starts)
        assert [Decimal(s.strip()) for s in starts] == sorted(Decimal(s.strip()) for s in starts)
        for r in rows:
            if r[at["Accelerator Core"]] == "COMMUNICATION":
                assert r[at["Task ID"]] == r[at["Stream ID"]] == "N/A" and r[at["Name"]].startswith("hcom_")
                assert re.fullmatch(r"hcom_(allReduce|allGather)__\d{3}_\d+_1", r[at["Name"]])
            else:
                assert r[at["Accelerator Core"]] in {"AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MIX_AIC", "MIX_AIV"}
        models = {r[at["Model ID"]] for r in rows}
        if builder is shapes.ascend_aclgraph_decode:
            assert models == {"4294967295", "1"}
        else:
            assert models == {"4294967295"}
        cores = {r[at["Accelerator Core"]] for r in rows}
        types = {r[at["Type"]] for r in rows}
        decode_dir = builder is not shapes.ascend_prefill_decode_dirs or rank.parent.name == "decode"
        if decode_dir:
            assert "AI_CPU" in cores and {"TransData", "Cast"} <= types
            assert types & {"IncreFlashAttention", "FusedInferAttentionScore"}
        step_header, step_rows, step_raw = _csv(out / "step_trace_time.csv")
        assert step_header == DOC_STEP_TRACE and step_raw.endswith(b"\r\n")
        (row,) = step_rows
        assert row[1] == ""  # no step info: one row for the whole capture
        value = dict(zip(step_header, row))
        tiled = (float(value["Computing"]) + float(value["Communication(Not Overlapped)"]) + float(value["Free"])
                 - float(value["Bubble"]))
        assert float(value["Stage"]) == pytest.approx(tiled, abs=0.01)
        assert float(value["Overlapped"]) == pytest.approx(float(value["Communication"]) -
                                                           float(value["Communication(Not Overlapped)"]), abs=0.01)
        events = _trace_view(rank)
        procs = _processes(events)
        lanes = {}
        for e in events:
            if e["ph"] == "X" and procs.get(e["pid"]) == "Overlap Analysis":
                lanes[e["name"]] = lanes.get(e["name"], 0.0) + e["dur"]
        for lane in ("Computing", "Communication", "Communication(Not Overlapped)", "Free"):
            assert lanes.get(lane, 0.0) == pytest.approx(float(value[lane]), abs=0.05)
        stat_header, stat_rows, _ = _csv(out / "op_statistic.csv")
        assert stat_header == DOC_OP_STATISTIC
        totals = {}
        for r in rows:
            if r[at["Accelerator Core"]] != "COMMUNICATION":
                key = (r[at["Type"]], r[at["Accelerator Core"]])
                totals[key] = totals.get(key, 0.0) + float(r[at["Duration(us)"]])
        assert {(r[1], r[2]): float(r[4]) for r in stat_rows} == pytest.approx(totals, abs=0.01)
        assert _csv(out / "api_statistic.csv")[0] == DOC_API_STATISTIC
        assert _csv(out / "operator_details.csv")[0] == DOC_OPERATOR_DETAILS
        communication = json.loads((out / "communication.json").read_text())
        assert set(communication) == {"step"} and set(communication["step"]) == {"p2p", "collective"}
        comm_rows = {r[at["Name"]]: float(r[at["Duration(us)"]]) for r in rows
                     if r[at["Accelerator Core"]] == "COMMUNICATION"}
        ops = {k.split("@")[0]: v for k, v in communication["step"]["collective"].items() if k != "Total Op Info"}
        assert set(ops) == set(comm_rows)
        for name, op in ops.items():
            assert op["Communication Time Info"]["Elapse Time(ms)"] * 1000 == pytest.approx(comm_rows[name], abs=0.01)
            assert set(op["Communication Bandwidth Info"]) == {"RDMA", "HCCS", "PCIE", "SDMA", "SIO"}
        group_hashes = {k.split("@")[1] for k in communication["step"]["collective"] if k != "Total Op Info"}
        meta = json.loads((rank / "profiler_metadata.json").read_text())
        assert group_hashes <= {str(shapes.double_hash(name)) for name in meta["parallel_group_info"]}


def test_double_hash_matches_the_reference():
    assert shapes.double_hash("group_name_0") == 5862276093215481612  # the reference's worked example


@pytest.mark.parametrize("builder", ASCEND_BUILDERS, ids=lambda b: b.__name__)
def test_ascend_trace_view_shapes(built, builder):
    path, truth = built[builder.__name__]
    for rank in _rank_dirs(path):
        events = _trace_view(rank)
        assert isinstance(events, list)
        procs = _processes(events)
        assert {"Python", "CANN", "Ascend Hardware", "Communication", "Overlap Analysis"} <= set(procs.values())
        labels = {e["pid"]: e["args"]["labels"] for e in events if e["ph"] == "M" and e["name"] == "process_labels"}
        assert labels[next(p for p, n in procs.items() if n == "Ascend Hardware")] == "NPU 0"
        for e in events:
            if e["ph"] == "M":
                assert "ts" not in e
            else:
                assert isinstance(e["ts"], str) and re.fullmatch(r"\d{16}\.\d{3}", e["ts"]), e
            assert not e["name"].startswith("ProfilerStep")
        xs = [e for e in events if e["ph"] == "X"]
        hardware = {(e["name"], e["ts"]) for e in xs if procs.get(e["pid"]) == "Ascend Hardware"}
        comm_ops = {(e["name"], e["ts"]) for e in xs if procs.get(e["pid"]) == "Communication" and e["tid"] == 0}
        header, rows, _ = _csv(rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
        at = {h: i for i, h in enumerate(header)}
        for r in rows:  # every row is a device task (or a collective op) of the trace, by name and start
            key = (r[at["Name"]], r[at["Start Time(us)"]].strip())
            assert key in (comm_ops if r[at["Accelerator Core"]] == "COMMUNICATION" else hardware), key
        # flows: HostToDevice (string ids) and torch_to_npu (id = the device task's start in ns) pair up
        for name in ("HostToDevice", "async_npu", "async_task_queue"):
            s = {e["id"] for e in events if e["ph"] == "s" and e.get("cat") == name}
            f = [e for e in events if e["ph"] == "f" and e.get("cat") == name]
            assert f and all(e["id"] in s for e in f) and all(e["bp"] == "e" for e in f)
            if name == "HostToDevice":
                assert all(isinstance(e["id"], str) and e["name"] == f"HostToDevice{e['id']}" for e in f)
            if name == "async_npu":
                assert all(e["id"] == int(e["ts"].replace(".", "")) for e in f)
        enqueue = {e["args"]["correlation_id"]: e["name"].split("@", 1)[1] for e in xs if e.get("cat") == "enqueue"}
        dequeue = {e["args"]["correlation_id"]: e["name"].split("@", 1)[1] for e in xs if e.get("cat") == "dequeue"}
        assert enqueue == dequeue and all(e["name"].startswith("Enqueue@") for e in xs if e.get("cat") == "enqueue")
        cann = [e for e in xs if procs.get(e["pid"]) == "CANN"]
        assert all(e["args"]["Mode"] == "ACL_NN" for e in cann if e["name"].startswith("AscendCL@aclnn"))
        assert all(e["args"]["level"] == "node" for e in cann if e["name"] == "Node@launch")
        graph = [e for e in cann if e["name"].startswith("AscendCL@aclmdlRI")]
        if builder is shapes.ascend_aclgraph_decode:
            names = [e["name"] for e in graph]
            assert names.count("AscendCL@aclmdlRICaptureBegin") == names.count("AscendCL@aclmdlRICaptureEnd") == 1
            assert names.count("AscendCL@aclmdlRIExecuteAsync") == truth.iterations["decode"]
            assert all(e["args"]["Mode"] == "ACL_MODEL" for e in graph)
            graph_tasks = [e for e in xs
                           if procs.get(e["pid"]) == "Ascend Hardware" and e["args"]["Model Id"] != 4294967295]
            assert graph_tasks and all(e["tid"] == 6 or e["tid"] == 4 for e in graph_tasks)
        else:
            assert not graph
            assert all(e["args"]["Model Id"] == 4294967295 for e in xs if procs.get(e["pid"]) == "Ascend Hardware")


def _ascend_iterations(truth, rank: Path, marker: str) -> list[dict]:
    events = _trace_view(rank)
    procs = _processes(events)
    # µs strings near 1.76e15: subtract a base in Decimal before going to float (float64 keeps only 0.25 µs there)
    base = min(Decimal(e["ts"]) for e in events if "ts" in e).to_integral_value(rounding="ROUND_FLOOR")
    xs = [dict(e, t=float(Decimal(e["ts"]) - base)) for e in events if e["ph"] == "X"]
    python = [e for e in xs if procs.get(e["pid"]) == "Python"]
    if marker == "annotation":
        markers = [e for e in python if e.get("cat") == "cpu_op" and ANNOTATION.match(e["name"])]
        windows = [(m["t"], m["t"] + m["dur"]) for m in markers]
    elif marker == "execute_model":
        markers = [e for e in python if e.get("cat") == "python_function" and e["name"].endswith(": execute_model")]
        windows = [(m["t"], m["t"] + m["dur"]) for m in markers]
    else:  # no marker: from the first op after the previous read-back to the end of its own read-back
        reads = sorted(e["t"] + e["dur"] for e in xs if e["name"] == "AscendCL@aclrtMemcpy")
        ops = sorted(e["t"] for e in python if e.get("cat") == "cpu_op")
        windows, previous = [], float("-inf")
        for end in reads:
            start = min(t for t in ops if t > previous)
            windows.append((start, end))
            previous = end
    flows = {e["id"] for e in events if e["ph"] == "f" and e.get("cat") == "HostToDevice"}
    cann = [e for e in xs if procs.get(e["pid"]) == "CANN"]
    hardware = [e for e in xs if procs.get(e["pid"]) in ("Ascend Hardware",)]
    out = []
    for lo, hi in windows:
        inside = [e for e in cann if lo <= e["t"] <= hi]
        out.append({"start": lo, "end": hi,
                    "eager": sum(e["name"] == "Node@launch" and str(e["args"]["connection_id"]) in flows
                                 for e in inside),
                    "graphs": [e for e in inside if e["name"] == "AscendCL@aclmdlRIExecuteAsync"],
                    "syncs": [e for e in inside if e["name"] == "AscendCL@aclrtSynchronizeStreamWithTimeout"],
                    "reads": [e for e in inside if e["name"] == "AscendCL@aclrtMemcpy"],
                    "htod": [e["args"]["size(B)"] for e in hardware
                             if e["name"] == "MEMCPY_ASYNC" and lo <= e["t"] <= hi]})
    busy = [(e["t"], e["t"] + e["dur"]) for e in hardware if e["tid"] != 4]
    busy += [(e["t"], e["t"] + e["dur"]) for e in xs if procs.get(e["pid"]) == "Communication" and e["tid"] == 0]
    return out, _union(busy)


@pytest.mark.parametrize("builder", ASCEND_BUILDERS, ids=lambda b: b.__name__)
def test_ascend_truth_matches_the_events(built, builder):
    path, truth = built[builder.__name__]
    marker = {"annotation": "annotation", "execute_model": "execute_model"}.get(truth.marker, "none")
    its = []
    for rank in reversed(_rank_dirs(path)):  # prefill/ before decode/ (each on its own base: no pair crosses them)
        found, busy = _ascend_iterations(truth, rank, marker)
        its += [dict(it, busy=busy) for it in found]
    assert len(its) == len(truth.phases)
    first = its[truth.phases.index("prefill")]
    assert first["end"] - first["start"] == pytest.approx(truth.ttft_us, abs=0.01)
    pairs = [(a, b) for a, b, pa, pb in zip(its, its[1:], truth.phases, truth.phases[1:]) if pa == pb == "decode"]
    assert _median(b["start"] - a["start"] for a, b in pairs) == pytest.approx(truth.tpot_us, abs=0.01)
    shares = [_covered(a["busy"], a["start"], b["start"]) / (b["start"] - a["start"]) for a, b in pairs]
    assert _median(shares) == pytest.approx(truth.device_busy_share_decode, abs=1e-3)
    decodes = [it for it, phase in zip(its, truth.phases) if phase == "decode"]
    assert _median(it["eager"] for it in decodes) == truth.eager_launches_per_decode
    assert _median(len(it["graphs"]) for it in decodes) == truth.graph_launches_per_decode
    assert all(len(it["syncs"]) == truth.blocking_dtoh_per_iteration == 1 for it in its)
    for it, htod in zip(its, truth.htod_bytes):
        assert tuple(it["htod"]) == htod
    if truth.graph_launches_per_decode:
        # the host is free of the previous step when its blocking read-back (the sync, then aclrtMemcpy) returns
        between = [it["graphs"][0]["t"] - (prev["reads"][-1]["t"] + prev["reads"][-1]["dur"])
                   for prev, it in zip(its, its[1:]) if it in decodes]
        assert _median(between) == pytest.approx(truth.host_between_replays_us, abs=0.01)
    else:
        assert truth.host_between_replays_us == 0


def test_ascend_builders_shape(built):
    _, eager = built["ascend_eager_decode"]
    _, graph = built["ascend_aclgraph_decode"]
    _, dirs = built["ascend_prefill_decode_dirs"]
    assert eager.graph_launches_per_decode == 0 and eager.eager_launches_per_decode > 300
    assert eager.device_busy_share_decode < 0.6
    assert graph.graph_launches_per_decode == 1 and graph.eager_launches_per_decode < 20
    assert graph.device_busy_share_decode > 0.85
    assert dirs.iterations == {"prefill": 2, "mixed": 0, "decode": 6}
    # without markers the iterations are still recognisable: one attention kernel per layer, one ArgMax per step
    decode_dir = next((dirs_path := built["ascend_prefill_decode_dirs"][0] / "decode").iterdir())
    header, rows, _ = _csv(decode_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    types = [r[header.index("Type")] for r in rows]
    assert types.count("ArgMaxV2") == 6 and types.count("IncreFlashAttention") == 6 * dirs.layers
    assert dirs_path.parent.name == "prof"


# ---------------------------------------------------------------------------------------------------------------------
# Every builder
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("builder", ALL_BUILDERS, ids=lambda b: b.__name__)
def test_builders_are_deterministic_and_fast(tmp_path, builder):
    started = time.process_time()  # CPU time: a loaded CI machine does not make a fast builder look slow
    first, truth_a = builder(tmp_path / "a")
    elapsed = time.process_time() - started
    second, truth_b = builder(tmp_path / "b")
    assert truth_a == truth_b
    files_a = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert files_a == files_b
    for relative in files_a:  # byte-identical, gzip headers included
        assert (first / relative).read_bytes() == (second / relative).read_bytes(), relative
    assert elapsed < 1.5, f"{builder.__name__} took {elapsed:.2f} s"


@pytest.mark.parametrize("builder", ALL_BUILDERS, ids=lambda b: b.__name__)
def test_truth_is_complete(built, builder):
    _, truth = built[builder.__name__]
    assert len(truth.phases) == len(truth.context_tokens) == len(truth.generation_tokens) == len(truth.htod_bytes)
    assert truth.iterations["decode"] >= 3 and truth.iterations["prefill"] >= 1
    assert truth.ttft_us > 0 and truth.tpot_us > 0 and 0 < truth.device_busy_share_decode <= 1
    assert truth.expected_verdict and len(truth.expected_top_findings) >= 2 and truth.must_not_advise
    assert truth.files
    assert "DataLoader" in truth.must_not_advise
