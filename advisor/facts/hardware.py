"""What the tool knows about the hardware: nominal link bandwidths per chip generation, and devices' peak memory
bandwidth.

Link bandwidths are CANN's HcclAnalysisTool standard bandwidths (GB/s). A2/A3 chips cannot be told apart from a text
export (both prefix PMU columns with aic_/aiv_); A3 links are at least as fast as A2's, so using the A2
figures for them never overstates how slow a link is.
"""

from __future__ import annotations

import re

NOMINAL_GBPS: dict[str, dict[str, float]] = {
    "Atlas A1 (Ascend 910)": {"RDMA": 12.5, "HCCS": 18.0, "PCIE": 20.0},
    "Atlas A2/A3 (Ascend 910B/910C)": {"RDMA": 25.0, "HCCS": 28.0},
}


def nominal_bandwidth(hardware: str | None, transport: str) -> float | None:
    """The nominal GB/s of ``transport`` on ``hardware``, or None when unknown."""
    return NOMINAL_GBPS.get(hardware or "", {}).get(transport)


# Peak memory (HBM) bandwidth, TB/s, by the device name a trace records (deviceProperties' name), first match wins:
# the vendors' datasheets (NVIDIA H100/H200/A100/V100/L40S/B200, AMD Instinct MI300X/MI325X/MI250X). A device not
# listed has no peak, and nothing is compared with it.
PEAK_MEMORY_TBPS: list[tuple[re.Pattern[str], float]] = [
    (re.compile(r"H200"), 4.8),
    (re.compile(r"H100.*(PCIe|NVL)", re.IGNORECASE), 2.0),
    (re.compile(r"H100|H800"), 3.35),
    (re.compile(r"B200"), 8.0),
    (re.compile(r"A100.*80GB|A800.*80GB"), 2.039),
    (re.compile(r"A100|A800"), 1.555),
    (re.compile(r"V100"), 0.9),
    (re.compile(r"L40S"), 0.864),
    (re.compile(r"MI325X"), 6.0),
    (re.compile(r"MI300X"), 5.3),
    (re.compile(r"MI250X?"), 3.2),
]


def peak_memory_tbps(device: str | None) -> float | None:
    """The peak memory bandwidth of the device named ``device`` (TB/s), or None when not known."""
    return next((tbps for pattern, tbps in PEAK_MEMORY_TBPS if device and pattern.search(device)), None)
