"""What the tool knows about the hardware: nominal link bandwidths per chip generation.

From CANN's HcclAnalysisTool standard bandwidths (GB/s). A2/A3 chips cannot be told apart from a text
export (both prefix PMU columns with aic_/aiv_); A3 links are at least as fast as A2's, so using the A2
figures for them never overstates how slow a link is.
"""

from __future__ import annotations

NOMINAL_GBPS: dict[str, dict[str, float]] = {
    "Atlas A1 (Ascend 910)": {"RDMA": 12.5, "HCCS": 18.0, "PCIE": 20.0},
    "Atlas A2/A3 (Ascend 910B/910C)": {"RDMA": 25.0, "HCCS": 28.0},
}


def nominal_bandwidth(hardware: str | None, transport: str) -> float | None:
    """The nominal GB/s of ``transport`` on ``hardware``, or None when unknown."""
    return NOMINAL_GBPS.get(hardware or "", {}).get(transport)
