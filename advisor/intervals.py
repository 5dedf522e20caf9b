"""Sets of time intervals as sorted (n, 2) arrays of disjoint [start, end) (pure functions, µs)."""

from __future__ import annotations

import numpy as np
import pandas as pd

EMPTY = np.empty((0, 2))


def merged(intervals: pd.DataFrame) -> np.ndarray:
    """The union of a table's [ts, ts + dur) intervals."""
    if intervals.empty:
        return EMPTY
    return union(np.column_stack([intervals["ts"].to_numpy(float), (intervals["ts"] + intervals["dur"]).to_numpy(float)]))


def union(spans: np.ndarray) -> np.ndarray:
    """The union of any (n, 2) array of [start, end) as disjoint sorted intervals (empty ones dropped)."""
    spans = np.asarray(spans, dtype=float).reshape(-1, 2)
    spans = spans[spans[:, 1] > spans[:, 0]]
    if not len(spans):
        return EMPTY
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    ends = np.maximum.accumulate(spans[:, 1])
    starts_new = np.concatenate([[True], spans[1:, 0] > ends[:-1]])
    groups = np.cumsum(starts_new) - 1
    out = np.empty((groups[-1] + 1, 2))
    out[:, 0] = spans[starts_new, 0]
    out[:, 1] = np.maximum.reduceat(spans[:, 1], np.flatnonzero(starts_new))
    return out


def length(spans: np.ndarray) -> float:
    return float((spans[:, 1] - spans[:, 0]).sum()) if len(spans) else 0.0


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The intervals in both of two disjoint sorted sets: where a sweep over their bounds counts two."""
    if not len(a) or not len(b):
        return EMPTY
    at = np.concatenate([a[:, 0], a[:, 1], b[:, 0], b[:, 1]])
    step = np.concatenate([np.ones(len(a)), -np.ones(len(a)), np.ones(len(b)), -np.ones(len(b))])
    order = np.lexsort((step, at))  # at one instant, ends (-1) before starts: the intervals are half-open
    at, depth = at[order], np.cumsum(step[order])
    both = np.flatnonzero(depth[:-1] == 2)
    spans = np.column_stack([at[both], at[both + 1]])
    return spans[spans[:, 1] > spans[:, 0]]


def intersection(a: np.ndarray, b: np.ndarray) -> float:
    """Total length of the intersection of two disjoint sorted interval sets."""
    return length(intersect(a, b))


def subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The parts of ``a`` outside ``b`` (both disjoint and sorted)."""
    if not len(a) or not len(b):
        return a
    low, high = min(a[0, 0], b[0, 0]), max(a[-1, 1], b[-1, 1])
    gaps = np.column_stack([np.concatenate([[low], b[:, 1]]), np.concatenate([b[:, 0], [high]])])
    return intersect(a, union(gaps))


def clip(spans: np.ndarray, start: float, end: float) -> np.ndarray:
    """The parts of ``spans`` inside [start, end)."""
    return intersect(spans, np.array([[start, end]], dtype=float))
