"""The PyTorch profiler (Kineto) reader and the GPU time analyses with HTA's definitions (issue #7, first part)."""

from __future__ import annotations

import gzip

import pytest
from builders import GpuKernel, write_kineto_trace

from advisor.facts.gpu import comm_comp_overlap, idle_breakdown, max_queue_length, temporal_breakdown
from advisor.ingest.kineto import read_kineto
from advisor.ingest.model import FileProblem

# stream 7: A [0,100) compute, B [150,250) launched after A ended (host wait 50), E [260,280) launched early
# (kernel wait 10), F [330,350) launched early (other 50); stream 20: an NCCL kernel [200,400); a memcpy [450,470)
KERNELS = [
    GpuKernel("ampere_sgemm_128x64_nn", 7, 0.0, 100.0, -20.0),
    GpuKernel("void at::native::vectorized_elementwise_kernel<4>", 7, 150.0, 100.0, 120.0),
    GpuKernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 20, 200.0, 200.0, 130.0),
    GpuKernel("void at::native::reduce_kernel<512, 1>", 7, 260.0, 20.0, 140.0),
    GpuKernel("softmax_warp_forward", 7, 330.0, 20.0, 145.0),
    GpuKernel("Memcpy DtoH (Device -> Pinned)", 21, 450.0, 20.0, 440.0, category="gpu_memcpy"),
]


def test_temporal_breakdown_overlap_and_idle_follow_hta(tmp_path):
    trace = read_kineto(write_kineto_trace(tmp_path / "rank0.pt.trace.json", KERNELS))
    assert trace.rank == 0 and list(trace.gpu["kind"]) == ["compute", "compute", "communication", "compute", "compute",
                                                            "memory"]
    breakdown = temporal_breakdown(trace.gpu)
    # span 0..470; union of all = [0,100) ∪ [150,400) ∪ [450,470) = 370 → idle 100; compute = 100+100+20+20 = 240
    assert breakdown["span_us"] == 470 and breakdown["idle_us"] == 100 and breakdown["compute_us"] == 240
    assert breakdown["non_compute_us"] == 130
    assert breakdown["idle_ratio"] + breakdown["compute_ratio"] + breakdown["non_compute_ratio"] == pytest.approx(1)
    # communication [200,400) overlaps compute [200,250) ∪ [260,280) ∪ [330,350) = 90 µs of 200
    assert comm_comp_overlap(trace.gpu) == pytest.approx(0.45)
    idle = idle_breakdown(trace.gpu, trace.runtime).set_index("stream")
    assert idle.loc[7].to_dict() == {"host_wait_us": 50.0, "kernel_wait_us": 10.0, "other_us": 50.0}
    # stream 7: B (launched at 120), E (140) and F (145) are all queued until B starts at 150
    assert max_queue_length(trace.gpu, trace.runtime) == 3
    assert trace.memory.iloc[0].to_dict() == {"ts": -30.0, "allocated_mb": 3072.0, "reserved_mb": 4096.0}


@pytest.mark.parametrize("variant", [{"ns": True}, {"old_categories": True}, {"hip": True}, {"gz": True},
                                     {"text_streams": True}])
def test_format_variants_give_the_same_tables(tmp_path, variant):
    plain = read_kineto(write_kineto_trace(tmp_path / "a.pt.trace.json", KERNELS, rank=3))
    name = "b.pt.trace.json.gz" if variant.pop("gz", False) else "b.pt.trace.json"
    other = read_kineto(write_kineto_trace(tmp_path / name, KERNELS, rank=3, **variant))
    assert other.rank == 3
    for table in ("gpu", "cpu", "memory"):
        assert getattr(other, table).equals(getattr(plain, table)), table
    assert list(other.runtime["correlation"]) == list(plain.runtime["correlation"])
    assert temporal_breakdown(other.gpu) == temporal_breakdown(plain.gpu)


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "is empty"),
    (b"[1, 2]", "bare JSON array of events.*torch.profiler.profile"),
    (b"42", "is not a PyTorch profiler trace"),
    (b'{"schemaVersion": 1}', "has no traceEvents"),
    (b'{"traceEvents": []}', "has no traceEvents"),
    # too deep for Python 3.11's decoder; 3.13's reads it as one event of the wrong type
    (b'{"traceEvents": [' + b"[" * 5000 + b"]" * 5000 + b"]}", "too deeply|is not a valid JSON array of events|no usable event"),
    (b'{"traceEvents": [1, "x", [2]]}', "holds no usable event: all 3 of its traceEvents have fields of unexpected types"),
])
def test_unusable_traces_are_refused_with_the_reason(tmp_path, content, reason):
    path = tmp_path / "bad.pt.trace.json"
    path.write_bytes(content)
    with pytest.raises(FileProblem, match=reason):
        read_kineto(path)


def test_a_compressed_trace_that_expands_too_far_is_refused(tmp_path):
    path = tmp_path / "bomb.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (32 << 20) + b"]}", mtime=0))
    with pytest.raises(FileProblem, match="decompression bomb"):
        read_kineto(path)


def test_step_breakdown_reads_like_step_trace_time(tmp_path):
    from advisor.ingest.kinetosteps import step_breakdown, step_windows

    trace = read_kineto(write_kineto_trace(tmp_path / "one.pt.trace.json", KERNELS))
    (step,) = step_breakdown(trace.gpu, step_windows(trace.gpu, trace.runtime, trace.cpu)).to_dict("records")
    # the ProfilerStep is [-30, 480): the window; compute 240, communication 200 of which 90 under compute;
    # busy = [0,100) ∪ [150,400) = 350 → 160 without work: 30 before the first kernel (Preparing) and Free 130, which
    # leaves Preparing out as torch_npu's step_trace_time.csv does
    assert step == {"step": "1", "start_us": -30.0, "end_us": 480.0, "computing_us": 240.0, "communication_us": 200.0,
                    "comm_not_overlapped_us": 110.0, "overlapped_us": 90.0, "free_us": 130.0, "preparing_us": 30.0}
    assert step["computing_us"] + step["comm_not_overlapped_us"] + step["free_us"] + step["preparing_us"] == 510.0


def test_step_windows_tile_wall_time_and_reach_the_work_each_step_launched(tmp_path):
    from advisor.ingest.kinetosteps import step_breakdown, step_windows

    # ProfilerSteps [-30, 225) and [225, 480); everything but the memcpy (launched at 440) is launched in step 1,
    # and its last activity (NCCL) ends at 400: step 1 runs [-30, 400), step 2 [400, 480)
    trace = read_kineto(write_kineto_trace(tmp_path / "two.pt.trace.json", KERNELS, steps=2))
    windows = step_windows(trace.gpu, trace.runtime, trace.cpu)
    assert windows.values.tolist() == [[1, -30.0, 400.0], [2, 400.0, 480.0]]
    first, second = step_breakdown(trace.gpu, windows).to_dict("records")
    assert (first["computing_us"], first["communication_us"], first["free_us"], first["preparing_us"]) == (240.0, 200.0, 50.0, 30.0)
    assert second == {"step": "2", "start_us": 400.0, "end_us": 480.0, "computing_us": 0.0, "communication_us": 0.0,
                      "comm_not_overlapped_us": 0.0, "overlapped_us": 0.0, "free_us": 0.0, "preparing_us": 80.0}


def test_a_trace_without_profiler_steps_is_one_window(tmp_path):
    from advisor.ingest.kinetosteps import step_windows

    trace = read_kineto(write_kineto_trace(tmp_path / "one.pt.trace.json", KERNELS))
    windows = step_windows(trace.gpu, trace.runtime, trace.cpu.loc[~trace.cpu["name"].str.startswith("ProfilerStep")])
    # from the first host event (the launch at -20; the [memory] instant is not a span) to the memcpy's end
    assert windows.values.tolist() == [[None, -20.0, 470.0]]


def test_kernels_read_like_kernel_details(tmp_path):
    from advisor.ingest.kineto import kernel_table, kernel_type
    from advisor.ingest.kinetosteps import launch_steps

    assert kernel_type("void at::native::reduce_kernel<512, 1, at::native::Op<float, std::pair<int, int>>>(float*)") \
        == "at::native::reduce_kernel<512, 1, Op>"
    assert kernel_type("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"
    trace = read_kineto(write_kineto_trace(tmp_path / "two.pt.trace.json", KERNELS, steps=2))
    table = kernel_table(trace, launch_steps(trace.gpu, trace.runtime, trace.cpu))
    assert list(table["step"]) == ["1", "1", "1", "1", "1", "2"]
    assert list(table["accelerator_core"]) == ["GPU", "GPU", "COMMUNICATION", "GPU", "GPU", "MEMORY"]
    assert table.loc[1, "type"] == "at::native::vectorized_elementwise_kernel<4>"
    assert table["duration_us"].sum() == 460.0


@pytest.mark.parametrize("block", [64, 333, 4096])
def test_streaming_in_small_blocks_gives_the_same_tables(tmp_path, monkeypatch, block):
    from advisor.ingest import jsonstream

    path = write_kineto_trace(tmp_path / "r.pt.trace.json", KERNELS, rank=2, ns=True, steps=3)
    whole = read_kineto(path)
    monkeypatch.setattr(jsonstream, "BLOCK_BYTES", block)
    monkeypatch.setattr(jsonstream, "TAIL_BYTES", 32)
    streamed = read_kineto(path)
    assert streamed.rank == 2 and streamed.truncation is None
    for table in ("gpu", "runtime", "cpu", "memory"):
        assert getattr(streamed, table).equals(getattr(whole, table)), table
    assert streamed.gpu["dur"].max() == 200.0  # displayTimeUnit "ns" comes after traceEvents: still applied


def _idle(path):
    from advisor.facts import extract_facts
    from advisor.ingest import load_profile

    (idle,) = [f for f in extract_facts(load_profile(path)).facts if f.family == "idle"]
    return idle


def test_idle_time_is_the_union_of_the_streams_and_each_stretch_has_one_cause(tmp_path):
    # step [-30, 480): idle = [-30,0) ∪ [100,150) ∪ [400,480) = 160 µs. Stream 7's gaps inside the NCCL kernel
    # ([250,260), [280,330)) are not idle: the device communicates. Before A (launched at -20 > -30), before B
    # (launched at 120 > 100) and before the memcpy (launched at 440 > 400) the GPU waits for a launch: 30 + 50 + 50;
    # the memcpy [450,470) runs alone: copy 20; after it nothing is queued: host 10.
    idle = _idle(write_kineto_trace(tmp_path / "one.pt.trace.json", KERNELS))
    assert (idle.idle_us, idle.dispatch_us, idle.copy_us, idle.host_us) == (160.0, 130.0, 20.0, 10.0)
    assert idle.idle_us == sum(idle.part_us(part) for part in idle.PARTS)
    assert idle.largest_part == "dispatch" and idle.step_us == 510.0


def test_idle_under_the_dataloader_is_the_dataloaders(tmp_path):
    # the host fetches a batch in [-28, -8): 20 µs of the 30 before A are the DataLoader's; of the rest, [-30,-28) waits
    # for A's launch (at -20) and [-8,0) has A queued already (host: launch latency)
    loader = ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", -28.0, 20.0)
    idle = _idle(write_kineto_trace(tmp_path / "one.pt.trace.json", KERNELS, host_ops=[loader]))
    assert (idle.dataloader_us, idle.dispatch_us, idle.host_us) == (20.0, 102.0, 18.0)
    assert idle.dataloader_share_of_idle == pytest.approx(20 / 160)


def test_traces_are_found_by_content_whatever_their_names(tmp_path):
    from advisor.ingest import load_profile

    for rank, name in enumerate(("rank-0.json.gz", "benchmark_result_123_trace.json.gz", "nccl_data.json")):
        write_kineto_trace(tmp_path / "job" / name, KERNELS, rank=rank)
    (tmp_path / "job" / "config.json").write_text('{"lr": 0.1, "traceEvents_note": "not a trace"}')
    (tmp_path / "job" / "events.json").write_text('{"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 2}]}')
    profile = load_profile(tmp_path / "job")
    assert profile.format == "pytorch-kineto"
    assert [(r.rank, r.path.name) for r in profile.ranks] == [
        (0, "rank-0.json.gz"), (1, "benchmark_result_123_trace.json.gz"), (2, "nccl_data.json")]


def test_kernel_types_keep_what_tells_kernels_apart():
    from advisor.ingest.kineto import kernel_type

    cutlass = [kernel_type(f"void cutlass::Kernel<cutlass_80_tensorop_{gemm}>(Params)") for gemm in ("s1688gemm_64x64", "h16816gemm_256x128")]
    assert cutlass == ["cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64>", "cutlass::Kernel<cutlass_80_tensorop_h16816gemm_256x128>"]
    assert kernel_type("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>"
                       "(float*, float const*, int, int, int, bool const*, int, bool)") \
        == "at::native::softmax_warp_forward<float, float, float, 10, true, false>"
    add, mul = (kernel_type(f"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_{op}<float>, "
                            f"at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_{op}<float>, at::detail::Array<char*, 3>)")
                for op in ("add", "mul"))
    assert (add, mul) == ("at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add, Array>",
                          "at::native::vectorized_elementwise_kernel<4, CUDAFunctor_mul, Array>")
    assert kernel_type("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::BinaryFunctor"
                       "<float, float, float, at::native::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::"
                       "BinaryFunctor<float, float, float, at::native::MulFunctor<float> > const&)::{lambda(int)#1}>(int, F)") \
        == "at::native::elementwise_kernel<128, 2, MulFunctor>"
    assert kernel_type("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD"


def test_a_copy_is_never_the_dominant_kernel(tmp_path):
    from advisor.diagnose import diagnose

    kernels = [GpuKernel("Memcpy HtoD (Pageable -> Device)", 21, 0.0, 900.0, -20.0, category="gpu_memcpy"),
               GpuKernel("ampere_sgemm_128x64_nn", 7, 900.0, 100.0, -10.0)]
    write_kineto_trace(tmp_path / "copy.pt.trace.json", kernels)
    report = diagnose(tmp_path)
    assert [op.op_type for op in report.summary.top_operators] == ["ampere_sgemm_128x64_nn"]
    assert [f.key for f in report.findings if f.id == "gpu.dominant_kernel"] == ["ampere_sgemm_128x64_nn"]


def test_a_legacy_json_array_trace_says_what_to_record(tmp_path):
    from typer.testing import CliRunner

    from advisor.cli import app

    (tmp_path / "old.pt.trace.json").write_text('[{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2, "tid": 1, "pid": 1}]')
    result = CliRunner().invoke(app, ["diagnose", str(tmp_path / "old.pt.trace.json")])
    assert result.exit_code == 4
    assert "bare JSON array of events" in result.stderr and "torch.profiler.profile" in result.stderr


def _tables(trace) -> list:
    return [trace.gpu, trace.runtime, trace.cpu, trace.memory, trace.python]


@pytest.mark.parametrize("compressed", [False, True])
def test_a_large_trace_read_in_pieces_on_several_cores_gives_the_tables_of_one_read(tmp_path, monkeypatch, compressed):
    """A vLLM serving trace (with_stack Python functions, graph replays, the trailer's keys after traceEvents) read as
    ranges on 2 and 3 cores, its split points moved across many events and into strings holding "}, {": every
    table, setting and warning is that of one sequential read; ranges that do not decode fall back to it."""
    import json

    from inference_shapes import vllm_graph_decode_host_bound

    from advisor.ingest import kineto, pieces

    (tmp_path / "src").mkdir()
    vllm_graph_decode_host_bound(tmp_path / "src", decodes=3)
    (source,) = (tmp_path / "src").glob("*.gz")
    document = json.loads(gzip.decompress(source.read_bytes()))
    for at in range(3, len(document["traceEvents"]), 4):  # names that look like event boundaries
        document["traceEvents"].insert(at, {"ph": "X", "cat": "cpu_op", "name": 'odd"}, {"name' * 40, "pid": 1, "tid": 1,
                                            "ts": 1.0, "dur": 1.0})
    data = json.dumps(document).encode()
    path = tmp_path / ("w.pt.trace.json.gz" if compressed else "w.pt.trace.json")
    path.write_bytes(gzip.compress(data) if compressed else data)
    whole = read_kineto(path)
    monkeypatch.setattr(pieces, "PIECE_BYTES", 4000)
    used = []
    for jobs, pad in [(2, 0), (3, 0), *((2, pad) for pad in range(1, 3000, 211))]:
        monkeypatch.setenv("ADVISOR_JOBS", str(jobs))
        padded = data.replace(b'"traceEvents": [', b'"traceEvents": [' + b" " * pad, 1)
        path.write_bytes(gzip.compress(padded) if compressed else padded)
        found = data.index(b'"traceEvents": [') + len(b'"traceEvents": [')
        used.append(pieces.read_in_pieces(path, found, kineto._read_piece) is not None)
        read = read_kineto(path)
        assert all(a.equals(b) and list(a.dtypes) == list(b.dtypes) for a, b in zip(_tables(read), _tables(whole))), pad
        assert (read.settings, read.warnings, read.device_name, read.rank) == (whole.settings, whole.warnings,
                                                                               whole.device_name, whole.rank)
    assert any(used) and not all(used)  # most splits read in pieces; those inside a string fall back


def test_a_cut_large_trace_is_read_whole_and_reports_the_cut(tmp_path, monkeypatch):
    from inference_shapes import vllm_eager_decode

    from advisor.ingest import pieces

    vllm_eager_decode(tmp_path, decodes=3)
    (source,) = tmp_path.glob("*.gz")
    data = gzip.decompress(source.read_bytes())
    path = tmp_path / "cut.pt.trace.json"
    path.write_bytes(data[: len(data) * 9 // 10])
    whole = read_kineto(path)
    monkeypatch.setattr(pieces, "PIECE_BYTES", 4000)
    monkeypatch.setenv("ADVISOR_JOBS", "3")
    cut = read_kineto(path)
    assert whole.truncation is not None and cut.truncation == whole.truncation
    assert all(a.equals(b) for a, b in zip(_tables(cut), _tables(whole)))
