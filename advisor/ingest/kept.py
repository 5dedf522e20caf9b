"""What the readers keep of the framework's operators, per platform: the ``aten::`` ops whose calls become ``api``
facts. Declared once here; the Ascend readers (trace_view.json, ascend_pytorch_profiler.db) and the PyTorch trace
reader filter with it, and ``advisor rules lint`` checks a rule's ``api`` names against it (a name the readers of a
platform never keep can never match there)."""

from __future__ import annotations

import re

from advisor.vocabulary import Platform

API_OPS: dict[Platform, re.Pattern[str]] = {
    # every framework op, torch_npu's own (npu::) among them: where the host is while the device waits is told op by op
    "ascend": re.compile(r"aten::|npu::"),
    "gpu": re.compile(r"aten::"),  # a PyTorch trace: every aten:: op
}


def kept_api(platform: Platform, name: str) -> bool:
    """Whether the readers of ``platform`` keep calls of the op ``name`` (so an ``api`` fact of it can exist)."""
    return API_OPS[platform].match(name) is not None
