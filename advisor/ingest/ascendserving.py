"""A serving run on Ascend, as pure functions over one rank's trace tables: its iterations, marked on the Python lane
by vLLM-Ascend's ``execute_context_…`` annotations or its model runner's ``execute_model`` (``kinetosteps.ITERATION``),
each with its device time from the Overlap Analysis lanes (``ingest.lanes``), its kernels, its graph replays
(aclgraph's aclmdlRIExecuteAsync) and kernel launches, and its synchronous copies back to the host — the same iteration
table a GPU serving trace gives (``ingest.serving``)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from advisor.ingest.kinetosteps import SERVING_SOURCES, iteration_names, step_source, window_of
from advisor.ingest.lanes import lane_steps, lane_windows
from advisor.ingest.serving import KERNEL_FAMILIES, family_times, generating, readback_markers, serving_iterations
from advisor.ingest.trace import (ASCEND_COMPUTE_TASK, ASCEND_GRAPH_CAPTURE, ASCEND_GRAPH_LAUNCH, ASCEND_LAUNCH,
                                  ASCEND_QUEUED_LAUNCH, ASCEND_SYNC_COPY, TraceTables)
from advisor.names import matching


def _matching(frame: pd.DataFrame, column: str, pattern) -> pd.DataFrame:
    return frame.loc[matching(frame[column], pattern)]


def _per_window(frame: pd.DataFrame, windows: pd.DataFrame, steps: pd.Series) -> pd.Series:
    """How many of ``frame``'s rows fall in each iteration (by step), 0 where none."""
    counts = window_of(frame, windows).value_counts() if len(frame) else pd.Series(dtype=int)
    return steps.map(counts).fillna(0).astype(int)


def with_readback_iterations(trace: TraceTables) -> TraceTables:
    """``trace`` with markers on its Python lane for the iterations of a generation loop that marks none, cut at the
    synchronous copies (aclrtMemcpy) that bring its sampled tokens back (``serving.readback_markers``); unchanged when
    it marks its steps or runs no generation loop."""
    if trace.host.empty or trace.device.empty or step_source(trace.host) is not None:
        return trace
    compute = _matching(trace.device, "task_type", ASCEND_COMPUTE_TASK)
    if not generating(compute["name"], trace.host["name"]):
        return trace
    copies = _matching(trace.apis, "name", ASCEND_SYNC_COPY)
    sampling = compute.loc[matching(compute["name"], KERNEL_FAMILIES["sampling"], search=True)]
    operators = trace.host.loc[trace.host["name"].str.contains("::", regex=False)]  # aten::…, npu::…
    markers = readback_markers(operators["ts"].to_numpy(float), sampling["ts"].to_numpy(float),
                               (copies["ts"] + copies["dur"]).to_numpy(float))
    if markers.empty:
        return trace
    thread = operators["tid"].mode().iloc[0]
    added = markers.assign(cat="cpu_op", tid=thread)[list(trace.host.columns)]
    return replace(trace, host=pd.concat([trace.host, added], ignore_index=True))


def ascend_iterations(trace: TraceTables, stage: str | None = None) -> pd.DataFrame | None:
    """The serving iterations of one rank (``serving.ITERATION_COLUMNS`` and what each did on the device, as
    ``ingest.gpu.gpu_iterations`` gives them), or None when the trace marks fewer than two iterations or has
    ProfilerStep markers (a training job)."""
    if trace.host.empty or step_source(trace.host) not in SERVING_SOURCES:
        return None
    windows = lane_windows(trace)
    if windows.empty:
        return None
    compute = _matching(trace.device, "task_type", ASCEND_COMPUTE_TASK)
    kernel_step = window_of(compute, windows)
    kernel_sets = [frozenset(compute.loc[kernel_step == step, "name"]) for step in windows["step"]]
    families = family_times(compute["name"], compute["dur"], pd.Series(False, index=compute.index), kernel_step)
    device = windows["step"].map(families["device_us"]).fillna(0.0).tolist()
    iterations = serving_iterations(windows, iteration_names(trace.host), kernel_sets, [[] for _ in range(len(windows))],
                                    None if stage is None else [stage] * len(windows), device)
    lanes = trace.overlap.loc[trace.overlap["lane"] == "Communication"]
    collective = lanes["dur"].groupby(window_of(lanes, windows)).sum() if len(lanes) else pd.Series(dtype=float)
    measured = lane_steps(trace)
    measured = measured.assign(step=pd.to_numeric(measured["step"], errors="coerce")).set_index("step")
    launches = _matching(trace.apis, "name", ASCEND_LAUNCH)
    if launches.empty:
        launches = _matching(trace.host, "name", ASCEND_QUEUED_LAUNCH)
    steps = iterations["step"]
    iterations = iterations.join(families.drop(columns="collective_us"), on="step")
    iterations = iterations.fillna({column: 0.0 for column in families.columns if column != "collective_us"})
    return iterations.assign(
        collective_us=steps.map(collective).fillna(0.0),
        device_us=iterations["device_us"] + steps.map(collective).fillna(0.0),
        computing_us=steps.map(measured["computing_us"]).fillna(0.0),
        comm_not_overlapped_us=steps.map(measured["comm_not_overlapped_us"]).fillna(0.0),
        free_us=steps.map(measured["free_us"] + measured["preparing_us"]).fillna(0.0),
        graph_launches=_per_window(_matching(trace.apis, "name", ASCEND_GRAPH_LAUNCH), windows, steps),
        kernel_launches=_per_window(launches, windows, steps),
        copies_to_host=_per_window(_matching(trace.apis, "name", ASCEND_SYNC_COPY), windows, steps),
        graph_captures=_per_window(_matching(trace.apis, "name", ASCEND_GRAPH_CAPTURE), windows, steps),
    )
