"""Matrix math by precision and unit (issue 26 item 1): decided from kernel names, the launching op's operand types and
the architecture — never "CUDA cores" for want of evidence — and no AMP advice where the math is already low precision.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import FIXTURES
from kineto_shapes import (
    FLASH_ATTENTION,
    FP8_CUBLAS_GEMM,
    FP8_CUTLASS3_GEMM,
    FP32_FFMA_GEMM,
    HOPPER_NVJET_GEMM,
    fp8_hopper_training,
)

from advisor.diagnose import diagnose
from advisor.facts.gpu import TBE_KERNEL
from advisor.facts.matrix import kernel_math, matrix_kernels, nvidia_capability

H200 = FIXTURES / "h200-recorded"


@pytest.mark.parametrize("name, op_dtype, capability, expected", [
    # the kernel's name says both
    (FP8_CUBLAS_GEMM, None, 9.0, ("fp8", "tensor")),
    (FP8_CUTLASS3_GEMM, None, 9.0, ("fp8", "tensor")),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0", None, 9.0,
     ("fp16", "tensor")),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_128x256_64x3_tn_align2>(Params)", None, 9.0,
     ("bf16", "tensor")),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>(Params)", None, 8.0, ("tf32", "tensor")),
    ("sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1"
     "_tensor16x8x8_execute_kernel_cudnn_train", None, 8.0, ("tf32", "tensor")),
    # an xmma kernel is not a tensor-core kernel when it says ffma (the FP32 GEMMs of the real FP32 H200 trace)
    (FP32_FFMA_GEMM, None, 9.0, ("fp32", "cuda")),
    ("volta_sgemm_128x64_nt", None, 7.0, ("fp32", "cuda")),
    ("cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1", None, 8.0, ("fp32", "cuda")),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80>::Params)",
     None, 9.0, ("fp32", "cuda")),
    # Hopper's nvjet kernels name no type: the op's operands decide, else it stays unknown
    (HOPPER_NVJET_GEMM, None, 9.0, (None, "unknown")),
    (HOPPER_NVJET_GEMM, "bf16", 9.0, ("bf16", "tensor")),
    (HOPPER_NVJET_GEMM, "fp32", 9.0, ("fp32", "cuda")),
    # no tensor cores before Volta; FP8 tensor cores only from compute capability 8.9
    ("maxwell_hgemm_256x128_nt", None, 6.0, ("fp16", "cuda")),
    ("sm89_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x64", None, 8.9, ("fp8", "tensor")),
    # AMD's matrix cores (MFMA) run FP32 too: not CUDA-core math
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0", None, None, ("fp32", "tensor")),
    ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN", None, None, ("bf16", "tensor")),
])
def test_kernel_math(name, op_dtype, capability, expected):
    assert kernel_math(name, op_dtype, capability) == expected


def test_fbgemm_is_not_a_gemm():
    """fbgemm_gpu's embedding kernels carry 'gemm' in their library name only."""
    compute = pd.DataFrame({"name": ["void fbgemm_gpu::permute_indices_weights_kernel<false, int>(int)", "volta_sgemm_64x64_nt"],
                            "dur": [10.0, 20.0], "external_id": [None, None]})
    assert list(matrix_kernels(compute, pd.Series(dtype=object), 7.0)["name"]) == ["volta_sgemm_64x64_nt"]


def test_a_graph_replayed_kernel_takes_the_precision_its_ops_agree_on():
    """Kernels replayed from a CUDA graph have no op; the same kernel launched eagerly elsewhere in the trace does."""
    compute = pd.DataFrame({"name": [HOPPER_NVJET_GEMM] * 3, "dur": [10.0] * 3, "external_id": [7, None, None]})
    found = matrix_kernels(compute, pd.Series({7: "bf16"}), 9.0)
    assert list(found["precision"]) == ["bf16"] * 3 and list(found["unit"]) == ["tensor"] * 3


def test_an_amd_gpu_has_no_nvidia_compute_capability():
    """A ROCm trace's computeMajor 9 is the gfx generation, not Hopper."""
    assert nvidia_capability("AMD Radeon Graphics", "9.0", pd.Series(["hipLaunchKernel"])) is None
    assert nvidia_capability("AMD Instinct MI300X", "9.4", pd.Series([], dtype=str)) is None
    assert nvidia_capability("NVIDIA H200", "9.0", pd.Series(["cudaLaunchKernel"])) == 9.0


def test_an_fp8_hopper_job_is_not_told_to_turn_on_amp(tmp_path):
    """Most GEMM time is FP8 and BF16 on tensor cores (cuBLASLt e4m3, CUTLASS 3 float_e4m3_t, nvjet under BF16 ops); one
    FP32 loss-head GEMM on CUDA cores remains. AMP advice would be wrong: no cuda_core_gemm finding, no AMP prescription."""
    fp8_hopper_training(tmp_path / "h800.pt.trace.json")
    report = diagnose(tmp_path)
    (gpu,) = [f for f in report.facts if f["type"] == "gpu"]
    assert gpu["matrix_precision"] == "fp8" and gpu["tensor_cores"] is True
    assert gpu["low_precision_share_of_matrix"] > 0.8 and gpu["unknown_matrix_share"] == 0.0
    assert 0.05 < gpu["fp32_gemm_share"] < 0.2  # the loss head, known from its ffma kernel and float operands
    assert "gpu.cuda_core_gemm" not in {f.id for f in report.findings}
    assert not {"gpu.amp", "gpu.amp_fp16"} & {p.id for f in report.findings for p in f.prescriptions}


def test_the_real_h200_bf16_job_runs_its_matrix_math_on_tensor_cores():
    """train_bf16: cuBLASLt nvjet GEMMs (BF16 by their aten::mm operands) and cuDNN SDPA — nothing on CUDA cores."""
    report = diagnose(H200 / "train_bf16")
    (gpu,) = [f for f in report.facts if f["type"] == "gpu"]
    assert gpu["fp32_gemm_share"] == 0.0 and gpu["unknown_matrix_share"] == 0.0
    assert gpu["low_precision_share_of_matrix"] == pytest.approx(1.0)
    assert "gpu.cuda_core_gemm" not in {f.id for f in report.findings}


def test_the_real_h200_bf16_jobs_casts_are_its_copy_kernels_only():
    """train_bf16's casts are the copy kernels autocast and .to() run (bfloat16_copy_kernel_cuda 882 calls, 8,166 µs;
    direct_copy_kernel_cuda with LoadWithCast 738, 12,473 µs; over 6 steps): 3,440 µs per step. The 144 mixed-dtype
    adds (CUDAFunctor_add<float> loading with a cast, 4,662 µs) do the model's math and are not counted (expert review,
    2026-11-28: they were, 4,217 µs per step)."""
    report = diagnose(H200 / "train_bf16")
    (gpu,) = [f for f in report.facts if f["type"] == "gpu"]
    assert gpu["cast_us_per_step"] == pytest.approx((8166 + 12473) / 6, abs=2)


def test_the_real_h200_fp32_job_is_told_amp_first():
    """train_fp32: FP32 with TF32 off — sgemm (simt), xmma ffma GEMMs and FP32 memory-efficient attention are 94 % of
    compute on CUDA cores. AMP is the first fix; the assumed gain (75 % of that time) is 70 % of the step, below the
    84 % the BF16 run of the same model measured."""
    report = diagnose(H200 / "train_fp32")
    first = report.findings[0]
    assert first.id == "gpu.cuda_core_gemm" and first.gain_basis == "assumed"
    assert 0.6 < first.estimated_gain_ratio < 0.84
    (gpu,) = [f for f in report.facts if f["type"] == "gpu"]
    assert gpu["fp32_gemm_share"] == pytest.approx(0.94, abs=0.01) and gpu["matrix_precision"] == "fp32"
    assert [p.id for p in first.prescriptions] == ["gpu.amp"]  # Hopper: BF16 autocast, not the FP16 recipe for Volta


def test_an_unknown_precision_is_never_called_cuda_cores(tmp_path):
    """A Hopper trace without record_shapes: nvjet GEMMs name no type and no op says it — unknown, not FP32."""
    from kineto_shapes import Trace, compute_step

    trace = Trace(device="NVIDIA H100 80GB HBM3")
    start = 1_000_000.0
    for number in range(1, 4):
        start = compute_step(trace, number, start, [(HOPPER_NVJET_GEMM, None, 800.0)] * 10) + 10.0
    trace.write(tmp_path / "nvjet.pt.trace.json")
    report = diagnose(tmp_path)
    (gpu,) = [f for f in report.facts if f["type"] == "gpu"]
    assert gpu["fp32_gemm_share"] == 0.0 and gpu["unknown_matrix_share"] > 0.5 and gpu["matrix_precision"] == "unknown"
    assert "gpu.cuda_core_gemm" not in {f.id for f in report.findings}


def test_flash_attention_names_its_type():
    assert kernel_math(FLASH_ATTENTION, None, 9.0) == ("bf16", "tensor")



@pytest.mark.parametrize(("name", "fused"), [
    ("void split_embedding_codegen_forward_unweighted_kernel<float, float, int64_t, 32>(...)", True),
    ("void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1(...)", True),
    ("void split_embedding_nobag_codegen_forward_unweighted_small_kernel<float, float, int64_t>(...)", True),
    ("void split_embedding_nobag_backward_codegen_sgd_unweighted_kernel_warp_per_row_1(...)", True),
    ("void dense_embedding_codegen_forward_weighted_kernel<float, float, int32_t>(...)", True),
    ("void fbgemm_gpu::int_nbit_split_embedding_codegen_forward_unweighted_kernel_small_L<...>(...)", True),
    ("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, float, long>(...)", False),
    ("void at::native::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>(...)", False)])
def test_fbgemm_table_batched_embedding_kernels_are_told_by_name(name, fused):
    """FBGEMM's TBE kernels, pooled (split_embedding_*) or not (nobag), dense or split, training or inference
    (int_nbit_*), say the embedding tables are fused already; PyTorch's own embedding kernels do not."""
    assert bool(TBE_KERNEL.search(name)) is fused
