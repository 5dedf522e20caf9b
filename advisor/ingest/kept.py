"""What the readers keep of the framework's operators, per platform: the ``aten::`` ops whose calls become ``api``
facts. Declared once here; the Ascend readers (trace_view.json, ascend_pytorch_profiler.db) and the PyTorch trace
reader filter with it, and ``advisor rules lint`` checks a rule's ``api`` names against it (a name the readers of a
platform never keep can never match there)."""

from __future__ import annotations

import re

from advisor.vocabulary import Platform

API_OPS: dict[Platform, re.Pattern[str]] = {
    # torch_npu traces are large: only the ops the facts count — host reads of device values, copies between host
    # and device (.to(), .cpu()), and ops that fused kernels replace
    "ascend": re.compile(
        r"aten::(item|_local_scalar_dense|_to_copy|nonzero|index_put_?|masked_fill_?|_?softmax|rsqrt|neg|cat|silu|"
        r"gelu|native_layer_norm|native_group_norm|one_hot|repeat_interleave|gather)$"
    ),
    "gpu": re.compile(r"aten::"),  # a PyTorch trace: every aten:: op
}


def kept_api(platform: Platform, name: str) -> bool:
    """Whether the readers of ``platform`` keep calls of the op ``name`` (so an ``api`` fact of it can exist)."""
    return API_OPS[platform].match(name) is not None
