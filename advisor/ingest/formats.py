"""The input formats advisor reads, one line each, in the order discovery prefers them.

The import rule (the registry is explicit, never found by scanning modules): this module imports every format
module; a format module declares one InputFormat (``ingest.model``) from the readers it needs (and another format's
predicates) and never imports this module or ``ingest.discover``. Discovery, ``load_profile`` and the cluster's rank
tasks reach a format only through this module (``FORMATS``, ``format_of``), looked up at call time.
"""

from __future__ import annotations

from advisor.ingest.ascendformat import ASCEND
from advisor.ingest.kinetoformat import KINETO
from advisor.ingest.model import InputFormat
from advisor.ingest.serviceformat import SERVICE

FORMATS: list[InputFormat] = [
    ASCEND,
    KINETO,
    SERVICE,  # last: found beside another format's ranks, it joins their profile (InputFormat.joins)
]


def format_of(name: str) -> InputFormat:
    """The format whose layouts are called ``name`` (Layout.format, Profile.format)."""
    return next(f for f in FORMATS if name in f.platforms)


def platform_of(name: str) -> str:
    """'ascend' or 'gpu' for a Profile.format (Ascend for one no format declares)."""
    return next((f.platforms[name] for f in FORMATS if name in f.platforms), "ascend")
