"""Warm-up in a PyTorch trace: which steps do work the later ones do not (pure functions over its tables).

A program's first iterations do work its later ones never repeat, and a diagnosis of them misleads. The trace shows:

* a kernel's first launch taking a millisecond or more — CUDA's lazy module loading, cuBLAS/cuDNN handles and
  workspaces created on first use (a launch blocked by a full launch queue is not counted: it is not a first one);
* cudnn.benchmark autotuning: event synchronisations inside a convolution op while cuDNN times its algorithms;
* device memory allocated (cudaMalloc/hipMalloc) in a step when later steps allocate none: the caching allocator
  filling its pool.

A step holding any of these is a warm-up step. The GPU reader leaves warm-up steps out of the step table when steps
that do not warm up follow them (``facts.capture`` says which and why).
"""

from __future__ import annotations

import re

import pandas as pd

from advisor.ingest.kineto import KinetoTrace
from advisor.ingest.kinetosteps import step_source, window_of
from advisor.names import matching

# The runtime calls that launch a kernel (a graph launch too: it replays a graph of kernels)
KERNEL_LAUNCH = re.compile(r"^(cuda|hip)(LaunchKernel(ExC)?|LaunchCooperativeKernel|ExtLaunchKernel|ModuleLaunchKernel|"
                           r"ExtModuleLaunchKernel|GraphLaunch)(_v\d+)?$|^cuLaunchKernel(Ex)?$")
FIRST_CALL_US = 1000.0  # a launch this long is not launch overhead: the runtime loaded or set something up
AUTOTUNE_OPS = re.compile(r"^aten::(cudnn_convolution\w*|_convolution|convolution|miopen_convolution\w*)$")
EVENT_SYNC = re.compile(r"^(cuda|hip)EventSynchronize$")
DEVICE_MALLOC = re.compile(r"^(cuda|hip)Malloc(Async)?$")


def first_call_launches(gpu: pd.DataFrame, runtime: pd.DataFrame) -> pd.DataFrame:
    """Launch calls of FIRST_CALL_US or more that launched a kernel's first appearance in the trace (ts, dur)."""
    calls = runtime.loc[matching(runtime["name"], KERNEL_LAUNCH) & (runtime["dur"] >= FIRST_CALL_US)]
    if calls.empty:
        return calls
    first = gpu.sort_values("ts").drop_duplicates("name")["correlation"].dropna()
    return calls.loc[calls["correlation"].isin(first)]


def autotune_syncs(runtime: pd.DataFrame, cpu: pd.DataFrame) -> pd.DataFrame:
    """Event synchronisations made inside a convolution op (cuDNN timing its algorithms under cudnn.benchmark)."""
    syncs = runtime.loc[matching(runtime["name"], EVENT_SYNC)]
    convolutions = cpu.loc[matching(cpu["name"], AUTOTUNE_OPS)]
    if syncs.empty or convolutions.empty:
        return syncs.iloc[:0]
    spans = pd.DataFrame({"start": convolutions["ts"], "end": convolutions["ts"] + convolutions["dur"]})
    inside = [bool(((spans["start"] <= ts) & (ts <= spans["end"])).any()) for ts in syncs["ts"]]
    return syncs.loc[inside]


def warmup_steps(windows: pd.DataFrame, evidence: dict[str, pd.DataFrame]) -> dict[int, list[str]]:
    """Step number → what warms up in it, from the evidence (what → runtime rows with ts); device allocations count
    only in steps before the last step that allocates (later steps allocating none)."""
    found: dict[int, list[str]] = {}
    for what, rows in evidence.items():
        steps = window_of(rows, windows).dropna().astype(int)
        if what == "allocations" and len(steps):
            last = windows["step"].max()
            if steps.max() >= last:  # every step allocates up to the end: not a warm-up effect
                continue
        for step, count in steps.value_counts().sort_index().items():
            found.setdefault(int(step), []).append(f"{count} {what}")
    return dict(sorted(found.items()))


def warmup_evidence(trace: KinetoTrace) -> dict[str, pd.DataFrame]:
    """What warms up in a trace (what → the runtime rows that show it)."""
    return {"first-call launches of a millisecond or more": first_call_launches(trace.gpu, trace.runtime),
            "cudnn.benchmark autotuning synchronisations": autotune_syncs(trace.runtime, trace.cpu),
            "allocations": trace.runtime.loc[matching(trace.runtime["name"], DEVICE_MALLOC)]}


def warmup_by_step(trace: KinetoTrace, windows: pd.DataFrame) -> dict[int, list[str]]:
    """Step number → what warms up in it, over the trace's numbered step windows (none when it marks no steps)."""
    numbered = windows.dropna(subset=["step"]).astype({"step": int})
    if numbered.empty or step_source(trace.cpu) is None:
        return {}
    return warmup_steps(numbered, warmup_evidence(trace))
