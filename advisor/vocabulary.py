"""The closed vocabularies that rules, facts, findings and reports share, each defined once: severity, verdict,
category and platform (the type, the tuple of its words in order, and the order lookup), and ``Micros`` for times."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

Severity = Literal["high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)  # most severe first
SEVERITY_ORDER: dict[str, int] = {severity: index for index, severity in enumerate(SEVERITIES)}

Bottleneck = Literal["compute", "communication", "host", "io", "memory", "balanced"]  # what the bottleneck rules derive
Verdict = Literal[Bottleneck, "unknown"]  # a report's: 'unknown' when the profile has no step breakdown

Category = Literal[
    "parallel-strategy",
    "io",
    "host-dispatch",
    "affinity-operator",
    "fused-operator",
    "fused-optimizer",
    "mc2",
    "superkernel",
    "memory",
    "communication",
    "cluster",
    "kernel-efficiency",
    "environment",
    "profiling",
    "comparison",
    "inference",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)

Platform = Literal["ascend", "gpu"]  # ascend: NPU profiler output; gpu: PyTorch profiler (Kineto) traces
PLATFORMS: tuple[Platform, ...] = get_args(Platform)

Micros = Annotated[float, "µs"]  # a time in microseconds (not a share, not a count)
