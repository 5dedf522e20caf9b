"""The step windows of an Ascend trace and the step breakdown rebuilt from its Overlap Analysis lanes (pure
functions), as torch_npu writes step_trace_time.csv: for a capture without that file, and for a serving run, whose
iterations are its steps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.ingest.kinetosteps import step_markers, window_of
from advisor.ingest.trace import TraceTables


_LANES = {"Computing": "computing_us", "Communication(Not Overlapped)": "comm_not_overlapped_us",
          "Communication": "communication_us", "Free": "free_us"}


def lane_windows(trace: TraceTables) -> pd.DataFrame:
    """The step windows the lanes are summed in (step, start, end): each ProfilerStep#N from its start to the later of
    its end and the end of the device tasks launched inside it (the device runs behind the host), never past the next
    step's start; empty without ProfilerStep events."""
    markers = step_markers(trace.host) if not trace.host.empty else pd.DataFrame(columns=["step", "ts", "dur"])
    if markers.empty:
        return pd.DataFrame(columns=["step", "start", "end"])
    starts = markers["ts"].to_numpy(float)
    host_ends = starts + markers["dur"].to_numpy(float)
    ends = host_ends.copy()
    device, launches = trace.device, trace.launches
    if not launches.empty and not device.empty:
        task_end = (device["ts"] + device["dur"]).groupby(device["ts"]).max()
        launched = pd.DataFrame({"ts": launches["launch_ts"].to_numpy(float),
                                 "end": launches["device_ts"].map(task_end).to_numpy(float)}).dropna()
        slot = np.searchsorted(starts, launched["ts"].to_numpy(), side="right") - 1
        inside = (slot >= 0) & (launched["ts"].to_numpy() <= host_ends[np.clip(slot, 0, None)])
        np.maximum.at(ends, slot[inside], launched["end"].to_numpy()[inside])
    ends[:-1] = np.minimum(ends[:-1], starts[1:])
    return pd.DataFrame({"step": markers["step"].astype(int).to_numpy(), "start": starts, "end": ends})


def lane_steps(trace: TraceTables) -> pd.DataFrame:
    """step_trace_time rows from the Overlap Analysis lanes, as torch_npu computes them: per step window
    (``lane_windows``), each lane's events that start in it summed; Preparing from the window's start to its first
    Computing or Communication event. One row (step empty) for the whole capture without ProfilerStep events."""
    lanes = trace.overlap.loc[trace.overlap["lane"].isin(_LANES)]
    windows = lane_windows(trace)
    if windows.empty:
        step = pd.Series(-1, index=lanes.index)
        starts = {-1: float(trace.host["ts"].min()) if not trace.host.empty else float(lanes["ts"].min())}
    else:
        step = window_of(lanes, windows)
        starts = dict(zip(windows["step"], windows["start"]))
    kept = lanes.assign(step=step).dropna(subset=["step"])
    if kept.empty:
        return pd.DataFrame()
    sums = kept.groupby(["step", "lane"], sort=True)["dur"].sum().unstack("lane", fill_value=0.0)
    frame = sums.rename(columns=_LANES).reindex(columns=list(_LANES.values()), fill_value=0.0)
    busy = kept.loc[kept["lane"].isin(("Computing", "Communication"))].groupby("step")["ts"].min()
    first = busy.reindex(frame.index)
    frame["preparing_us"] = [max(float(f) - starts[int(s)], 0.0) if f == f else 0.0 for s, f in zip(frame.index, first)]
    frame["overlapped_us"] = (frame["communication_us"] - frame["comm_not_overlapped_us"]).clip(lower=0)
    frame = frame.reset_index()
    frame["step"] = frame["step"].map(lambda s: "" if s == -1 else str(int(s))).astype("str")
    return frame
