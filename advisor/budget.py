"""The time budget of a step: every finding's gain is charged once, to one bucket of the step.

A step is compute + exposed communication + idle (free) time. A rule says which part its fix recovers with
``charged_to`` — a path in this tree::

    step
    ├── compute
    │   ├── operator:<type>          the device time of one operator type
    │   └── sequence:<what>          a chain of kernels a fused operator would replace
    ├── communication                exposed (not overlapped) communication
    │   ├── wait                     waiting for peers / idle inside the collectives
    │   └── transfer                 moving data
    └── idle                         the device has nothing to run
        ├── dataloader  dispatch  sync  allocator  compile  gc  optimizer  zero_grad  copy  host

A gain charged to a bucket can never exceed what is left of that bucket or of any bucket above it, so the
gains of one rank never add up to more than its step, and two findings that claim the same time (the same
operator, the same idle stretch) share it: the first charged gets it, the next only the remainder. Findings
are charged measured first, then the most specific bucket first (a cause before the umbrella holding it), then
by the size of their claim. A bucket whose size the profile does not give
(e.g. ``idle/gc`` without an idle attribution) is as large as the largest claim on it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

ROOT_BUCKET = "step"
TOP_BUCKETS = ("compute", "communication", "idle")
CHILD_BUCKETS = {
    "communication": ("wait", "transfer"),
    "idle": ("dataloader", "dispatch", "sync", "allocator", "compile", "gc", "optimizer", "zero_grad", "copy", "host"),
}
NAMED_CHILDREN = {"compute": ("operator", "sequence")}  # compute/operator:<name>, compute/sequence:<name>
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def bucket_problem(path: str) -> str | None:
    """Why ``path`` (a ``charged_to`` template) is not a bucket of the tree above, or None when it is."""
    text = _PLACEHOLDER.sub("x", path)
    parts = text.split("/", 1)
    if parts == [ROOT_BUCKET]:
        return None
    if parts[0] not in TOP_BUCKETS:
        return (f"{path!r} is not a bucket of the step: use step, {', '.join(TOP_BUCKETS)}, or one of their parts "
                f"({', '.join(_children_help())})")
    if len(parts) == 1:
        return None
    child = parts[1]
    named = NAMED_CHILDREN.get(parts[0], ())
    if ":" in child:
        kind, _, name = child.partition(":")
        if kind in named and name.strip():
            return None
    elif child in CHILD_BUCKETS.get(parts[0], ()):
        return None
    return f"{path!r}: {parts[0]} has no part {child!r} (parts: {', '.join(_children_help(parts[0]))})"


def _children_help(top: str | None = None) -> list[str]:
    names = []
    for parent in ([top] if top else TOP_BUCKETS):
        names += [f"{parent}/{c}" for c in CHILD_BUCKETS.get(parent, ())]
        names += [f"{parent}/{c}:<name>" for c in NAMED_CHILDREN.get(parent, ())]
    return names


def ancestors(path: str) -> list[str]:
    """The bucket and every bucket above it, innermost first: compute/operator:X → [compute/operator:X, compute, step]."""
    if path == ROOT_BUCKET:
        return [ROOT_BUCKET]
    top, _, child = path.partition("/")  # an operator's name may hold '/'
    return ([path] if child else []) + [top, ROOT_BUCKET]


def holding_children(size: dict[str, float], measured: set[str]) -> dict[str, float]:
    """``size`` with each bucket the profile did not measure (not in ``measured``) at least as large as the buckets
    under it together: without a step breakdown, an operator's claim and a fused sequence's claim both fit in
    ``compute`` instead of the first one charged taking all of it."""
    widened = dict(size)
    for parent in (*TOP_BUCKETS, ROOT_BUCKET):
        if parent in measured:
            continue
        below = [b for b in widened if b != parent and parent in ancestors(b) and (
            parent != ROOT_BUCKET or b in TOP_BUCKETS)]
        total = sum(widened[b] for b in below)
        if below and total > widened.get(parent, 0.0):
            widened[parent] = total
    return widened


@dataclass
class Budget:
    """What is left of each bucket of one step (µs). ``size`` holds the buckets the profile measured."""

    size: dict[str, float]
    used: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def remaining(self, path: str) -> float | None:
        """The most that can still be charged to ``path`` (None: no bucket on its way up has a known size)."""
        left = [self.size[p] - self.used[p] for p in ancestors(path) if p in self.size]
        return max(min(left), 0.0) if left else None

    def charge(self, path: str, claim: float, limit: float | None = None) -> float:
        """Charge up to ``claim`` µs (and at most ``limit``) to ``path`` and every bucket above it; return what was charged."""
        allowed = claim
        for cap in (self.remaining(path), limit):
            if cap is not None:
                allowed = min(allowed, cap)
        allowed = max(allowed, 0.0)
        for p in ancestors(path):
            self.used[p] += allowed
        return allowed
