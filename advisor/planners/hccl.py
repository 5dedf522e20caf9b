"""HCCL_BUFFSIZE from the activation size (the Ascend large-model performance-analysis guide §5; formula per shared/knowledge/seed-formulas.md §B).

HCCL_BUFFSIZE [MB] = ceil(micro-batch × sequence length × hidden size × bytes per element / 2^20): the
size of one micro-batch activation [b, s, h], which is what tensor- and sequence-parallel collectives
move. Each communicator reserves twice the buffer (send and receive), for HCCL alone; the default is 200.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_MB = 200
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1, "int8": 1}


@dataclass(frozen=True)
class BuffsizePlan:
    recommended_mb: int
    current_mb: int
    communicators: int | None
    action: str  # raise, lower or keep
    memory_change_mb: int | None  # device memory freed (+) or taken (−) per rank by the change

    def explain(self) -> str:
        if self.action == "keep":
            return f"HCCL_BUFFSIZE={self.current_mb} already covers a {self.recommended_mb} MB activation; keep it."
        change = ""
        if self.memory_change_mb is not None:
            verb = "frees" if self.memory_change_mb > 0 else "takes"
            change = f" ({verb} {abs(self.memory_change_mb)} MB of device memory over {self.communicators} communicator(s))"
        if self.action == "raise":
            return (f"Set HCCL_BUFFSIZE={self.recommended_mb}: one activation is {self.recommended_mb} MB, more than the "
                    f"current {self.current_mb} MB buffer, which slows the collectives that carry it{change}.")
        return (f"HCCL_BUFFSIZE={self.recommended_mb} is enough for one {self.recommended_mb} MB activation; lowering it "
                f"from {self.current_mb} MB returns memory to the model{change}.")


def buffsize_mb(micro_batch: int, sequence_length: int, hidden_size: int, dtype_bytes: int) -> int:
    """ceil(b·s·h·bytes / 2^20), at least 1."""
    if min(micro_batch, sequence_length, hidden_size, dtype_bytes) <= 0:
        raise ValueError("micro-batch, sequence length, hidden size and dtype size must be positive")
    return max(math.ceil(micro_batch * sequence_length * hidden_size * dtype_bytes / (1 << 20)), 1)


def plan_buffsize(
    micro_batch: int, sequence_length: int, hidden_size: int, dtype_bytes: int,
    current_mb: int = DEFAULT_MB, communicators: int | None = None,
) -> BuffsizePlan:
    """Compare the recommended buffer with the current one; lowering is suggested only when the current is ≥ 2× larger."""
    needed = buffsize_mb(micro_batch, sequence_length, hidden_size, dtype_bytes)
    if needed > current_mb:
        action = "raise"
    elif current_mb >= 2 * needed:
        action = "lower"
    else:
        action = "keep"
    change = 2 * (current_mb - needed) * communicators if communicators and action != "keep" else None
    return BuffsizePlan(needed, current_mb, communicators, action, change)
