"""PyTorch profiler traces in the shapes the field writes, for the classes of profile the real fixtures do not cover.

Each builder writes what a real trace of that kind holds — event categories, argument names and kernel names as
torch.profiler (Kineto) writes them on Hopper, Ampere and ROCm — and says where the shape comes from. ``Trace`` is the
low-level writer: host ops (cpu_op with their ``External id`` and ``Input type``), runtime calls linked to the GPU
activity they launched by ``correlation``, ProfilerStep#N markers, the header's ``deviceProperties``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# Kernel names as they appear in real traces (cuBLASLt/cuBLAS, CUTLASS 3, Transformer Engine, DeepEP, vLLM, NCCL).
FP8_CUBLAS_GEMM = ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_"
                   "off_kernel__5x_cublas")
FP8_CUTLASS3_GEMM = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
                     "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<4, "
                     "cute::tuple<cute::C<1>, cute::C<2>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedPingpong>, "
                     "cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >, cutlass::float_e4m3_t, "
                     "cute::tuple<long, cute::C<1>, long>, cutlass::float_e4m3_t, cute::tuple<long, cute::C<1>, long>, "
                     "cute::TiledMMA<cute::MMA_Atom<cute::SM90_64x128x32_F32E4M3E4M3_SS_TN<> > > > >"
                     "(cutlass::gemm::kernel::GemmUniversal<...>::Params)")
HOPPER_NVJET_GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"  # cuBLASLt on Hopper: no type in the name
FP32_FFMA_GEMM = ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_"
                  "execute_kernel__5x_cublas")
FLASH_ATTENTION = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>(flash::Flash_fwd_params)"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
               "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)")
DEEPEP_DISPATCH = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int const*)"
DEEPEP_COMBINE = "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*, int4 const*)"
VLLM_CUSTOM_ALLREDUCE = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)"
NCCL_SENDRECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
CONV_KERNEL = "sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"


@dataclass
class Trace:
    """A Kineto trace being written: events in µs on one host thread, and the device it ran on."""

    device: str = "NVIDIA H100 80GB HBM3"
    capability: tuple[int, int] | None = (9, 0)
    rank: int | None = 0
    events: list[dict] = field(default_factory=list)
    correlation: int = 0
    external: int = 0

    def op(self, name: str, ts: float, dur: float, input_types: list[str] | None = None,
           category: str = "cpu_op") -> int:
        """A host op; returns its External id (what a kernel it launches points back to)."""
        self.external += 1
        args: dict = {"External id": self.external}
        if input_types is not None:
            args["Input type"] = input_types
            args["Input Dims"] = [[] for _ in input_types]
        self.events.append({"ph": "X", "cat": category, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                            "args": args})
        return self.external

    def runtime(self, name: str, ts: float, dur: float, correlation: int | None = None) -> None:
        args = {"correlation": correlation} if correlation is not None else {}
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                            "args": args})

    def launch(self, kernel: str, launch_ts: float, start: float, dur: float, stream: int = 7, *,
               category: str = "kernel", call: str = "cudaLaunchKernel", call_dur: float = 5.0,
               external: int | None = None) -> int:
        """A runtime call launching GPU activity that runs [start, start + dur); returns the correlation id."""
        self.correlation += 1
        self.runtime(call, launch_ts, call_dur, self.correlation)
        args = {"stream": stream, "device": 0, "correlation": self.correlation}
        if external is not None:
            args["External id"] = external
        self.events.append({"ph": "X", "cat": category, "name": kernel, "pid": 0, "tid": stream, "ts": start,
                            "dur": dur, "args": args})
        self.events.append({"ph": "f", "cat": "ac2g", "id": self.correlation, "pid": 0, "tid": stream, "ts": start,
                            "bp": "e"})
        return self.correlation

    def step(self, number: int, ts: float, dur: float) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": {}})

    def write(self, path: Path) -> Path:
        device: dict = {"id": 0, "name": self.device, "totalGlobalMem": 85 << 30}
        if self.capability is not None:
            device.update(computeMajor=self.capability[0], computeMinor=self.capability[1])
        document = {"schemaVersion": 1, "deviceProperties": [device], "record_shapes": 1,
                    **({"distributedInfo": {"backend": "nccl", "rank": self.rank, "world_size": 8}}
                       if self.rank is not None else {}),
                    "traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
                                    *self.events],
                    "displayTimeUnit": "ms", "traceName": path.name}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document))
        return path


def compute_step(trace: Trace, number: int, start: float, gemms: list[tuple[str, list[str] | None, float]],
                 elementwise: int = 20, elementwise_us: float = 40.0, gap_us: float = 12.0) -> float:
    """One step that keeps the GPU busy: each GEMM (kernel name, its op's Input type or None, µs) launched from an
    aten op, then element-wise kernels; the host runs ahead of the GPU. Returns the step's end on the host."""
    host, gpu = start + 50.0, start + 60.0
    for kernel, types, dur in gemms:
        op_name = "aten::_scaled_mm" if types and "Float8" in types[0] else "aten::mm"
        external = trace.op(op_name, host, 20.0, input_types=types)
        trace.launch(kernel, host + 8.0, max(gpu, host + 15.0), dur, external=external)
        gpu = max(gpu, host + 15.0) + dur
        host += gap_us
    for _ in range(elementwise):
        trace.launch(ELEMENTWISE, host, max(gpu, host + 7.0), elementwise_us)
        gpu = max(gpu, host + 7.0) + elementwise_us
        host += gap_us
    end = max(host, gpu) + 5.0
    trace.step(number, start, end - start)
    return end


def fp8_hopper_training(path: Path, steps: int = 4) -> Path:
    """An FP8 training job on an H800 (compute capability 9.0) with Transformer Engine / torch._scaled_mm: most GEMM
    time in FP8 kernels from cuBLASLt (sm90_xmma_gemm_e4m3…) and CUTLASS 3 (cutlass::device_kernel<… float_e4m3_t …>),
    BF16 GEMMs in nvjet kernels (no type in their names: the op's Input type tells), FlashAttention, and a last FP32
    GEMM on CUDA cores (the loss head kept in FP32). Compute-bound."""
    trace = Trace(device="NVIDIA H800", capability=(9, 0))
    fp8 = ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "c10::BFloat16"]
    bf16 = ["c10::BFloat16", "c10::BFloat16"]
    gemms = ([(FP8_CUBLAS_GEMM, fp8, 900.0)] * 6 + [(FP8_CUTLASS3_GEMM, None, 800.0)] * 4
             + [(HOPPER_NVJET_GEMM, bf16, 500.0)] * 4 + [(FLASH_ATTENTION, None, 400.0)] * 2
             + [(FP32_FFMA_GEMM, ["float", "float"], 1500.0)])
    start = 1_000_000.0
    for number in range(1, steps + 1):
        start = compute_step(trace, number, start, gemms) + 10.0
    return trace.write(path)


def legacy_autograd_trace(path: Path) -> Path:
    """A trace as torch.autograd.profiler.profile(use_cuda=True).export_chrome_trace wrote it before PyTorch 1.8: a
    bare JSON array of "CPU functions" X events, and per CUDA interval an 's'/'f' flow (cat cpu_to_cuda, same id) and
    a "CUDA functions" X event whose tid is the device — the exporter's own format strings, reproduced."""
    events = []
    flow = 0
    host = 100.0
    for step in range(3):
        for name, gpu_us in (("aten::addmm", 900.0), ("aten::relu", 60.0), ("aten::addmm", 850.0), ("aten::sum", 40.0)):
            events.append({"name": name, "ph": "X", "ts": host, "dur": 30.0, "tid": 1, "pid": "CPU functions", "args": {}})
            start = host + 20.0 + step * 0.0
            events.append({"name": name, "ph": "s", "ts": host, "tid": 1, "pid": "CPU functions", "id": flow,
                           "cat": "cpu_to_cuda", "args": {}})
            events.append({"name": name, "ph": "f", "ts": start, "tid": 0, "pid": "CUDA functions", "id": flow,
                           "cat": "cpu_to_cuda", "args": {}})
            events.append({"name": name, "ph": "X", "ts": start, "dur": gpu_us, "tid": 0, "pid": "CUDA functions",
                           "args": {}})
            flow += 1
            host = start + gpu_us + 15.0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[" + ", ".join(json.dumps(e) for e in events) + "]")
    return path


def lagging_device(path: Path, steps: int = 5, lag_us: float = 40_000.0, step_us: float = 20_000.0) -> Path:
    """A device-bound job whose GPU runs ``lag_us`` behind the host from the first profiled step on: when the capture
    began, the GPU was still running kernels launched before it (the warm-up steps'), which the trace does not record.
    The host's launches are throttled to the GPU's pace, so the ProfilerStep cadence equals the GPU's step."""
    trace = Trace()
    host0 = 1_000_000.0
    kernels = 10
    for number in range(1, steps + 1):
        host = host0 + (number - 1) * step_us
        gpu = host0 + lag_us + (number - 1) * step_us
        for _ in range(kernels):
            trace.launch(ELEMENTWISE, host + 100.0, gpu, step_us / kernels)
            host += 300.0
            gpu += step_us / kernels
        trace.step(number, host0 + (number - 1) * step_us, step_us)
    return trace.write(path)


def blocking_readback(path: Path, steps: int = 4) -> Path:
    """Each step computes for ~10 ms, then reads a loss value with ``.item()`` the way PyTorch 1.12 did on the real A100
    trace of HTA (trace_diff-control): aten::item → aten::_local_scalar_dense → cudaMemcpyAsync into pageable memory,
    which waits for the stream to drain before its 2 µs "Memcpy DtoH (Device -> Pageable)" runs; the host then takes
    300 µs to launch the next step's work. The batch arrives by pinned, non-blocking HtoD copies."""
    trace = Trace(device="NVIDIA A100-SXM4-80GB", capability=(8, 0))
    host = 1_000_000.0
    gpu = host
    for number in range(1, steps + 1):
        start = host
        for _ in range(2):
            trace.launch("Memcpy HtoD (Pinned -> Device)", host, max(gpu, host + 10.0), 50.0, stream=21,
                         category="gpu_memcpy", call="cudaMemcpyAsync")
            host += 20.0
        for _ in range(40):
            trace.launch(CONV_KERNEL, host, max(gpu, host + 8.0), 250.0)
            gpu = max(gpu, host + 8.0) + 250.0
            host += 15.0
        trace.op("aten::item", host, gpu - host + 40.0)
        trace.op("aten::_local_scalar_dense", host + 2.0, gpu - host + 36.0)
        trace.launch("Memcpy DtoH (Device -> Pageable)", host + 5.0, gpu + 5.0, 2.0, category="gpu_memcpy",
                     call="cudaMemcpyAsync", call_dur=gpu - host + 10.0)
        host = gpu + 20.0 + 300.0  # the value is logged before the next launches
        gpu = host
        trace.step(number, start, host - start)
    return trace.write(path)


def communication_kernels(path: Path, steps: int = 3) -> Path:
    """An expert-parallel MoE step on 8 GPUs that nothing overlaps: DeepEP dispatch and combine around the experts'
    GEMMs, a vLLM-style custom all-reduce, and NCCL send/recv kernels launched under nccl:all_to_all (an all-to-all)
    and an NCCL all-reduce under nccl:all_reduce — kernel and op names as the field writes them."""
    trace = Trace()
    host = 1_000_000.0
    gpu = host
    bf16 = ["c10::BFloat16", "c10::BFloat16"]

    def run(kernel: str, dur: float, stream: int = 7, op: str | None = None, types: list[str] | None = None) -> None:
        nonlocal host, gpu
        external = trace.op(op, host, dur + 20.0, input_types=types) if op else None
        trace.launch(kernel, host + 5.0, max(gpu, host + 10.0), dur, stream=stream, external=external)
        gpu = max(gpu, host + 10.0) + dur
        host += 15.0

    for number in range(1, steps + 1):
        start = host
        run(DEEPEP_DISPATCH, 1500.0, stream=20)
        for _ in range(8):
            run(HOPPER_NVJET_GEMM, 400.0, op="aten::mm", types=bf16)
        run(DEEPEP_COMBINE, 1500.0, stream=20)
        run(VLLM_CUSTOM_ALLREDUCE, 600.0, stream=20)
        run(NCCL_SENDRECV, 2000.0, stream=20, op="nccl:all_to_all")
        run(NCCL_ALLREDUCE, 800.0, stream=20, op="nccl:all_reduce")
        host = max(host, gpu) + 20.0
        trace.step(number, start, host - start)
    return trace.write(path)


def cudnn_autotune_capture(path: Path) -> Path:
    """One profiled step of a convolutional network run with torch.backends.cudnn.benchmark = True, as a capture of the
    first iteration shows it: inside each aten::cudnn_convolution, cuDNN times candidate algorithms — kernels bracketed
    by cudaEventRecord/cudaEventSynchronize — then runs the chosen one; the caching allocator grows its pool with
    cudaMalloc; the first launch of the kernel module takes milliseconds (lazy loading)."""
    trace = Trace(device="NVIDIA A100-SXM4-80GB", capability=(8, 0))
    host = gpu = start = 1_000_000.0
    trace.runtime("cudaMalloc", host, 900.0)
    host += 1000.0
    for layer in range(6):
        external = trace.op("aten::cudnn_convolution", host, 0.0, input_types=["c10::BFloat16", "c10::BFloat16"])
        op_start = host
        for algorithm in range(3):
            trace.runtime("cudaEventRecord", host, 3.0)
            call_us = 2500.0 if layer == 0 and algorithm == 0 else 6.0  # lazy module loading on the first launch
            trace.launch(f"{CONV_KERNEL}_algo{algorithm}", host + 4.0, max(gpu, host + 4.0 + call_us), 300.0,
                         call_dur=call_us, external=external)
            gpu = max(gpu, host + 4.0 + call_us) + 300.0
            host = max(host + 4.0 + call_us + 5.0, gpu)
            trace.runtime("cudaEventSynchronize", host - 290.0, 290.0)
        trace.launch(CONV_KERNEL, host + 5.0, host + 12.0, 300.0, external=external)
        gpu = host + 312.0
        host += 20.0
        trace.events[[e.get("args", {}).get("External id") for e in trace.events].index(external)]["dur"] = host - op_start
    for _ in range(20):
        trace.launch(ELEMENTWISE, host, max(gpu, host + 7.0), 30.0)
        gpu = max(gpu, host + 7.0) + 30.0
        host += 12.0
    end = max(host, gpu) + 5.0
    trace.step(1, start, end - start)
    return trace.write(path)


def stepless_training(path: Path, iterations: int = 3) -> Path:
    """Training profiled with ``with torch.profiler.profile(): for batch in loader: train_step(batch)`` — no schedule,
    no prof.step(): no ProfilerStep markers, but each iteration ends in the optimizer's step (Optimizer.step#AdamW.step,
    its record_function) and starts its next forward right after."""
    trace = Trace()
    host = gpu = 1_000_000.0
    for _ in range(iterations):
        for _ in range(30):
            trace.launch(HOPPER_NVJET_GEMM, host, max(gpu, host + 8.0), 300.0,
                         external=trace.op("aten::mm", host - 2.0, 10.0, input_types=["c10::BFloat16", "c10::BFloat16"]))
            gpu = max(gpu, host + 8.0) + 300.0
            host += 15.0
        opt = host
        for _ in range(4):
            trace.launch("void at::native::multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata>(...)", host,
                         max(gpu, host + 8.0), 80.0)
            gpu = max(gpu, host + 8.0) + 80.0
            host += 15.0
        trace.op("Optimizer.step#AdamW.step", opt, host - opt, category="user_annotation")
        host = max(host, gpu) + 50.0
    return trace.write(path)


def twice_marked_step(path: Path) -> Path:
    """A step listed twice, as some exporters do (a ProfilerStep#1 user annotation and a cpu_op of the same name over
    the same span), followed by two more steps."""
    trace = Trace()
    start = 1_000_000.0
    for number in range(1, 4):
        start = compute_step(trace, number, start, [(HOPPER_NVJET_GEMM, ["c10::BFloat16", "c10::BFloat16"], 500.0)] * 8)
        start += 10.0
    first = next(e for e in trace.events if e.get("name") == "ProfilerStep#1")
    trace.events.append({**first, "cat": "cpu_op"})
    return trace.write(path)
