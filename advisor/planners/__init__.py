"""Planners: computations that turn a diagnosis into concrete settings (MC2 tiles, HCCL buffer size, parallel layout)."""
