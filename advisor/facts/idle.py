"""Where the device's idle time goes: each idle stretch of a step charged to what the host was doing (pure functions).

The same on both platforms: idle is step-window time with neither compute nor communication on the device. It is
split, in this order, into the parts of ``IdleFact``:

1. the host inside a DataLoader call, compiling an operator online, freeing or allocating device memory, in a
   garbage collection, in the optimizer's step or in its zero_grad (the host events' own spans);
2. ``sync``: from a synchronisation call's start until the device next starts work — after the host waited for
   the device, the device waits for the host to queue new work;
3. ``copy``: a memory copy runs, but nothing else, or the host is inside a memory-copy call (a copy from pageable
   host memory blocks the host until it is staged, so nothing new is launched meanwhile);
4. ``dispatch``: what is left of a gap whose next task was launched only after the gap began (the host could not
   keep the device fed — launch-bound, HTA's "host wait"); ``host``: the rest (the next task was queued already,
   or the step ends without one).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.intervals import EMPTY, intersect, length, subtract, union

HOST_PARTS = ("dataloader", "compile", "allocator", "gc", "optimizer", "zero_grad")
PARTS = (*HOST_PARTS, "sync", "copy", "dispatch", "host")
OUTLIER_FACTOR = 1.2  # a step more than 20 % longer than the median step is an outlier
MIN_STEPS_FOR_SPREAD = 3  # fewer steps have no median worth comparing with


def spans(frame: pd.DataFrame) -> np.ndarray:
    """The [ts, ts + dur) intervals of a table's rows (any order, overlapping or not)."""
    if frame.empty:
        return EMPTY
    return union(np.column_stack([frame["ts"].to_numpy(float), (frame["ts"] + frame["dur"]).to_numpy(float)]))


def until_next_busy(calls: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Each call extended from its start to the next start of device work after the call ends."""
    if not len(calls):
        return EMPTY
    starts = busy[:, 0] if len(busy) else np.array([])
    at = np.searchsorted(starts, calls[:, 1], side="left")
    ends = np.where(at < len(starts), starts[np.minimum(at, max(len(starts) - 1, 0))] if len(starts) else calls[:, 1],
                    calls[:, 1])
    return union(np.column_stack([calls[:, 0], np.maximum(ends, calls[:, 1])]))


def attribute_idle(idle: np.ndarray, busy: np.ndarray, host: dict[str, np.ndarray], syncs: np.ndarray,
                   copies: np.ndarray, tasks: pd.DataFrame, item_syncs: np.ndarray = EMPTY) -> dict[str, float]:
    """µs of ``idle`` (disjoint, sorted) per part of ``PARTS``, and ``item_sync``: the part of ``sync`` that follows
    the synchronisations made by ``.item()`` reads (``item_syncs``, a subset of ``syncs``).

    ``busy``: the device's compute and communication; ``host``: the host spans of each of ``HOST_PARTS``;
    ``syncs``: synchronisation calls; ``copies``: memory copies on the device and the host's copy calls; ``tasks``: device task starts
    (``device_ts``) with the start of the call that launched them (``launch_ts``, NaN when unknown).
    """
    out = dict.fromkeys(PARTS, 0.0)
    left = idle
    for part in HOST_PARTS:
        cause = host.get(part, EMPTY)
        out[part] = length(intersect(left, cause))
        left = subtract(left, cause)
    out["item_sync"] = length(intersect(left, until_next_busy(item_syncs, busy)))
    for part, cause in (("sync", until_next_busy(syncs, busy)), ("copy", copies)):
        out[part] = length(intersect(left, cause))
        left = subtract(left, cause)
    out["dispatch"], out["host"] = _late_launches(left, tasks)
    return out


def step_outliers(windows: pd.DataFrame, free: np.ndarray, parts_of) -> dict[str, object]:
    """The spread of the step windows (``step``, ``start``, ``end``): the median step, the steps longer than
    OUTLIER_FACTOR × the median, what they add to the mean step, and the slowest step with its largest idle part
    (``parts_of(idle)``: µs per part of PARTS for some of ``free``). Empty below MIN_STEPS_FOR_SPREAD steps."""
    durations = (windows["end"] - windows["start"]).to_numpy(float)
    if len(durations) < MIN_STEPS_FOR_SPREAD:
        return {}
    median = float(np.median(durations))
    slow = durations > OUTLIER_FACTOR * median
    worst = int(np.argmax(durations))
    window = windows[["start", "end"]].to_numpy(float)[worst:worst + 1]
    parts = {part: value for part, value in parts_of(intersect(free, window)).items() if part in PARTS}
    part = max(parts, key=lambda name: parts[name])
    steps = windows["step"].tolist()
    return {
        "step_median_us": median,
        "slowest_step": None if steps[worst] is None else int(steps[worst]),
        "slowest_step_us": float(durations[worst]),
        "outlier_steps": ", ".join(str(step) for step, out in zip(steps, slow) if out) or None,
        "outlier_excess_us": float((durations[slow] - median).sum() / len(durations)),
        "slowest_idle_part": part if parts[part] > 0 else None,
        "slowest_idle_part_us": float(parts[part]),
    }


def _late_launches(gaps: np.ndarray, tasks: pd.DataFrame) -> tuple[float, float]:
    """Split idle stretches by the next device task after each: launched after the stretch began (dispatch) or not."""
    if not len(gaps):
        return 0.0, 0.0
    known = tasks.dropna(subset=["device_ts"]).sort_values("device_ts", kind="stable")
    starts = known["device_ts"].to_numpy(float)
    launches = known["launch_ts"].to_numpy(float)
    at = np.searchsorted(starts, gaps[:, 1] - 1e-6, side="left")  # the first task starting at the gap's end or later
    found = at < len(starts)
    launched = np.where(found, launches[np.minimum(at, max(len(starts) - 1, 0))] if len(starts) else np.nan, np.nan)
    late = found & (launched > gaps[:, 0])
    sizes = gaps[:, 1] - gaps[:, 0]
    return float(sizes[late].sum()), float(sizes[~late].sum())
