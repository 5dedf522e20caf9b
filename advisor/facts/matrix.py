"""Matrix math on a GPU: which kernels do it, in which precision, on tensor cores or on CUDA cores (pure functions).

A kernel's name is the first evidence: GEMM, convolution and attention kernels name their library (cuBLAS ``sgemm``,
``gemv``, cuBLASLt ``nvjet``, CUTLASS, cuDNN, ``xmma``/``gmma`` engines, FlashAttention/``fmha``/``sdpa``, rocBLAS/
hipBLASLt ``Cijk_``) and often their math: an MMA shape or instruction (``h884``, ``s1688``, ``16816``, ``hmma``,
``wgmma``, ``tensorop``, ``tensor16x8x16``, AMD ``MFMA``/``MI32x32x8``) means tensor (matrix) cores, ``ffma``/``simt``/
``sgemm``/``scudnn`` means CUDA cores, and an element type (``fp8``/``e4m3``/``e5m2``, ``bf16``, ``f16``, ``tf32``,
``f32f32_f32f32_f32``, template arguments such as ``__nv_bfloat16``) the precision. Where the name is silent (Hopper's
``nvjet_sm90_*`` names no type), the operand types of the framework op that launched the kernel decide — record_shapes'
``Input type`` of ``aten::mm``, ``aten::_scaled_mm``…, linked by the kernel's ``External id``. The GPU's architecture
comes last: FP16/BF16/INT8/TF32/FP8 math runs on tensor cores from compute capability 7.0/7.0/7.2/8.0/8.9 on, and a
GPU below 7.0 has none.

What cannot be told stays ``unknown``: never "CUDA cores" for lack of evidence.
"""

from __future__ import annotations

import re

import pandas as pd

from advisor.names import matching

MATRIX_KERNEL = re.compile(
    r"(?<!fb)gemm|gemv|conv(?!ert)|winograd|dgrad|wgrad|fprop|scudnn|simt|nvjet|cutlass|xmma|gmma|hmma|wmma|imma|fmha|"
    r"flash_?(fwd|bwd|attn|fprop|bprop|_?forward|_?backward)|flash::|sdpa|attention|Cijk_|mfma|_MI\d+x\d+x\d+",
    re.IGNORECASE)
# Precision named in the kernel, lowest first (an FP8 GEMM accumulating in FP32 carries both names).
_NAMED_PRECISION = (
    ("fp8", re.compile(r"fp8|e4m3|e5m2|float_e[45]m|f8f8|_f8_|qmma|_F8", re.IGNORECASE)),
    ("int8", re.compile(r"int8|i8i8|imma|s8s8|i8816|_I8_|_I8I8", re.IGNORECASE)),
    ("bf16", re.compile(r"bf16|bfloat16|_BBS_|_BSS_|_BB_", re.IGNORECASE)),
    ("fp16", re.compile(r"fp16|(?<![a-z])f16|half|(?<![a-z0-9])h(884|1688|16816|gemm)|_HHS_|_HSS_|_HB_|_HH_",
                        re.IGNORECASE)),
    ("tf32", re.compile(r"tf32|tfloat32|(?<![a-z0-9])s1688|xf32", re.IGNORECASE)),
    ("fp64", re.compile(r"dgemm|f64|<double|(?<![a-z])d884|_DB_", re.IGNORECASE)),
    ("fp32", re.compile(r"sgemm|ffma|simt|scudnn|f32f32_f32f32_f32|gemmSN|_f32_|<float|_SB_|_f32(?![a-z0-9])",
                        re.IGNORECASE)),
)
TENSOR_CORE_MARK = re.compile(
    r"884|1688|16816|8816|hmma|imma|wmma|gmma|qmma|tensorop|tensor\d+x\d+x\d+|mfma|_MI\d+x\d+x\d+", re.IGNORECASE)
AMD_MATRIX_CORE_MARK = re.compile(r"mfma|_MI\d+x\d+x\d+", re.IGNORECASE)
CUDA_CORE_MARK = re.compile(r"ffma|simt|sgemm|dgemm|gemmSN|scudnn|gemv", re.IGNORECASE)
# The compute capability from which tensor cores run each precision (Volta: FP16; Turing: INT8; Ampere: BF16, TF32;
# Ada/Hopper: FP8). FP32 and FP64 GEMMs are CUDA-core math here (FP64 tensor cores exist on A100/H100, but the
# advice about them is not AMP).
TENSOR_CORE_FROM = {"fp16": 7.0, "int8": 7.2, "bf16": 8.0, "tf32": 8.0, "fp8": 8.9}
LOW_PRECISION = ("fp8", "int8", "bf16", "fp16")


def named_precision(name: str) -> str | None:
    """The precision a kernel's name states (``_NAMED_PRECISION``), None when it states none."""
    return next((label for label, pattern in _NAMED_PRECISION if pattern.search(name)), None)


def kernel_math(name: str, op_dtype: str | None, capability: float | None) -> tuple[str | None, str]:
    """(precision, unit) of one matrix kernel: the precision from its name, else its op's operands (``op_dtype``);
    the unit ``tensor``, ``cuda`` or ``unknown`` from the name's markers, else from the precision and the GPU's
    compute ``capability`` (None: not recorded)."""
    precision = named_precision(name) or op_dtype
    if capability is not None and capability < 7.0:
        return precision, "cuda"  # no tensor cores before Volta
    if AMD_MATRIX_CORE_MARK.search(name):
        return precision, "tensor"  # AMD's matrix cores (MFMA) run FP32 too
    if TENSOR_CORE_MARK.search(name) and precision not in ("fp32", "fp64"):
        return precision, "tensor"
    if CUDA_CORE_MARK.search(name) and precision not in LOW_PRECISION + ("tf32",):
        return precision or "fp32", "cuda"
    if precision in ("fp32", "fp64"):
        return precision, "cuda"
    if precision in TENSOR_CORE_FROM:
        if capability is None or capability >= TENSOR_CORE_FROM[precision]:
            return precision, "tensor"
        return precision, "cuda"
    return precision, "unknown"


def matrix_kernels(compute: pd.DataFrame, op_dtypes: pd.Series, capability: float | None) -> pd.DataFrame:
    """The matrix-math kernels among ``compute`` (GPU rows with name, dur, external_id), each with its ``precision``
    (None: unknown) and ``unit``. ``op_dtypes`` maps an External id to its op's operand precision; a kernel without an
    op (a CUDA-graph replay launches kernels no op records) takes the precision its other launches' ops agree on —
    the same kernel binary runs the same types."""
    names = compute["name"]
    is_matrix = matching(names, MATRIX_KERNEL, search=True)
    rows = compute.loc[is_matrix]
    dtypes = rows["external_id"].map(op_dtypes) if len(op_dtypes) else pd.Series(None, index=rows.index, dtype=object)
    agreed = dtypes.dropna().groupby(rows["name"]).agg(lambda seen: seen.iloc[0] if seen.nunique() == 1 else None)
    dtypes = dtypes.fillna(rows["name"].map(agreed)) if len(agreed) else dtypes
    pairs = list(zip(rows["name"].tolist(), (d if isinstance(d, str) else None for d in dtypes.tolist())))
    known = {pair: kernel_math(*pair, capability) for pair in set(pairs)}
    math = [known[pair] for pair in pairs]
    return rows.assign(precision=[m[0] for m in math], unit=[m[1] for m in math])


def op_precisions(cpu: pd.DataFrame) -> pd.Series:
    """External id → the operand precision of the matrix op that carries it (the trace's ops with a ``dtype``)."""
    if "dtype" not in cpu.columns:
        return pd.Series(dtype=object)
    known = cpu.loc[cpu["dtype"].notna() & cpu["external_id"].notna(), ["external_id", "dtype"]]
    return known.drop_duplicates("external_id").set_index("external_id")["dtype"]


def matrix_summary(compute: pd.DataFrame, cpu: pd.DataFrame, capability: float | None) -> dict[str, object]:
    """The GpuFact fields about matrix math, as shares of compute-kernel time: all of it, on CUDA cores (FP32/FP64),
    in low precision on tensor cores, in TF32, and of unknown unit; the precision most of it runs in."""
    total = float(compute["dur"].sum())
    matrix = matrix_kernels(compute, op_precisions(cpu), capability)
    time = float(matrix["dur"].sum())

    def share(mask: pd.Series) -> float:
        return float(matrix.loc[mask, "dur"].sum()) / total if total > 0 else 0.0

    by_precision = matrix.groupby(matrix["precision"].fillna("unknown"))["dur"].sum()
    dominant = str(by_precision.idxmax()) if time > 0 else None
    if dominant is not None and by_precision.max() < 0.6 * time:
        dominant = "mixed"
    tensor = matrix["unit"] == "tensor"
    return {
        "matrix_share_of_compute": time / total if total > 0 else 0.0,
        "fp32_gemm_share": share(matrix["unit"] == "cuda"),
        "low_precision_matrix_share": share(tensor & matrix["precision"].isin(LOW_PRECISION)),
        "low_precision_share_of_matrix": (float(matrix.loc[tensor & matrix["precision"].isin(LOW_PRECISION), "dur"].sum())
                                          / time if time > 0 else None),
        "tf32_matrix_share": share(tensor & (matrix["precision"] == "tf32")),
        "unknown_matrix_share": share(matrix["unit"] == "unknown"),
        "matrix_precision": dominant,
        "tensor_cores": None if capability is None else bool(capability >= 7.0),
    }


AMD_DEVICE = re.compile(r"AMD|Radeon|Instinct|\bMI\d{3}", re.IGNORECASE)


def nvidia_capability(device: str | None, capability: str | None, runtime_names: pd.Series) -> float | None:
    """An NVIDIA GPU's compute capability ("9.0") as a number; None when not recorded or when the GPU is AMD's (a
    ROCm trace's computeMajor is the gfx generation, which says nothing about tensor cores)."""
    if device and AMD_DEVICE.search(device) or runtime_names.str.startswith("hip").any():
        return None
    try:
        return float(capability) if capability else None
    except ValueError:
        return None

