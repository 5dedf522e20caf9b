"""Host-side facts from trace_view.json: dispatch, compilation, synchronisation, data loading, GC.

Pure functions over the trace tables. Counts and times are per profiled step: events are kept when they
start inside a ``ProfilerStep#N`` window (the whole capture is one step when there is none).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from advisor.facts.windows import inside

COMPILE_API = "AscendCL@aclopCompileAndExecute"
SYNC_APIS = re.compile(r"^AscendCL@aclrtSynchronize(Stream|Device|Event)")
LAUNCH_API = "Node@launch"
FREE_APIS = re.compile(r"^AscendCL@aclrtFree(Physical)?$")
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
SYNC_BATCH_NORM = re.compile(r"SyncBatchNorm", re.IGNORECASE)
DATALOADER = re.compile(r"dataloader", re.IGNORECASE)
COMPUTE_TASK = re.compile(r"^(AI_CORE|AI_VECTOR_CORE|AI_CPU|MIX_AIC|MIX_AIV|KERNEL_AICORE|KERNEL_AIVEC|KERNEL_MIX_AIC|KERNEL_MIX_AIV|KERNEL_AICPU)$")


def host_summary(host: pd.DataFrame, apis: pd.DataFrame, device: pd.DataFrame, launches: pd.DataFrame,
                 windows: pd.DataFrame) -> dict[str, float | None]:
    """Per-step counts and times of the dispatch-related host activity."""
    steps = max(len(windows), 1)
    apis = inside(apis, windows)
    host = inside(host, windows)
    compile_calls = apis.loc[apis["name"] == COMPILE_API, "dur"]
    sync_calls = apis.loc[apis["name"].str.match(SYNC_APIS), "dur"]
    launch_calls = apis.loc[apis["name"] == LAUNCH_API, "dur"]
    free_calls = apis.loc[apis["name"].str.match(FREE_APIS), "dur"]
    gc = host.loc[host["cat"] == "GC", "dur"]
    optimizer = host.loc[host["name"].str.match(OPTIMIZER_STEP), "dur"]
    launch_cost = float(launch_calls.mean()) if len(launch_calls) else None
    compute = inside(device, windows).loc[lambda d: d["task_type"].fillna("").str.match(COMPUTE_TASK)]
    latency = inside(launches, windows, "launch_ts")
    latency = (latency["device_ts"] - latency["launch_ts"]).clip(lower=0)
    return {
        "compile_calls_per_step": len(compile_calls) / steps,
        "compile_us_per_step": float(compile_calls.sum()) / steps,
        "sync_calls_per_step": len(sync_calls) / steps,
        "sync_us_per_step": float(sync_calls.sum()) / steps,
        "launch_calls_per_step": len(launch_calls) / steps,
        "free_calls_per_step": len(free_calls) / steps,
        "free_us_per_step": float(free_calls.sum()) / steps,
        "launch_us_mean": launch_cost,
        "launch_latency_us_median": float(latency.median()) if len(latency) else None,
        "launch_latency_us_p90": float(latency.quantile(0.9)) if len(latency) else None,
        "tiny_kernel_share": float((compute["dur"] < launch_cost).mean()) if launch_cost and len(compute) else None,
        "gc_calls_per_step": len(gc) / steps,
        "gc_us_per_step": float(gc.sum()) / steps,
        "optimizer_us_per_step": float(optimizer.sum()) / steps,
        "sync_batch_norm_calls_per_step": int(host["name"].str.contains(SYNC_BATCH_NORM).sum()) / steps,
    }


def dataloader_summary(host: pd.DataFrame, windows: pd.DataFrame) -> dict[str, object] | None:
    """Data-loading time per step: the outermost events whose name mentions a DataLoader."""
    rows = inside(host, windows)
    rows = rows.loc[rows["name"].str.contains(DATALOADER)].sort_values("ts")
    if rows.empty:
        return None
    outer = rows.loc[rows["ts"] >= (rows["ts"] + rows["dur"]).cummax().shift(fill_value=-np.inf)]  # drop nested
    names = " ".join(rows["name"].unique())
    iterator = "multi-process" if "MultiProcessing" in names else "single-process" if "SingleProcess" in names else "unknown"
    steps = max(len(windows), 1)
    return {"calls_per_step": len(outer) / steps, "us_per_step": float(outer["dur"].sum()) / steps, "iterator": iterator}


def api_calls(host: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Per framework op (aten::…): calls and host time per step inside the step windows."""
    ops = inside(host, windows)
    ops = ops.loc[ops["name"].str.startswith("aten::")]
    steps = max(len(windows), 1)
    grouped = ops.groupby("name", sort=True)["dur"].agg(["size", "sum"]).reset_index()
    return pd.DataFrame({"name": grouped["name"], "calls_per_step": grouped["size"] / steps,
                         "us_per_step": grouped["sum"] / steps})
