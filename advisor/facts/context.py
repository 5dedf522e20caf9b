"""The context fact: what was profiled (versions, level, hardware) and how."""

from __future__ import annotations

from typing import Any

from advisor.facts.models import ContextFact
from advisor.ingest import Profile, RankData


def infer_hardware(profile: Profile) -> str | None:
    """The chip family, from the first rank whose kernel_details header tells it."""
    return next((h for r in profile.ranks if (h := _hardware_from_pmu_columns(r))), None)


def core_counts(profile: Profile, rank: RankData) -> dict[str, int | None]:
    """AI Core ('cube') and vector core counts of a rank's device (device info.json), else of any rank's."""
    device = _device_entry(rank) or next((e for r in profile.ranks if (e := _device_entry(r))), None) or {}
    return {"cube": _int(device.get("ai_core_num")), "vector": _int(device.get("aiv_num"))}


def context_fact(profile: Profile, steps: list[int]) -> ContextFact:
    """Describe the profile from the first rank that has each piece of information."""
    sources: list[str] = []

    def first(getter) -> Any:
        for rank in profile.ranks:
            value = getter(rank)
            if value not in (None, ""):
                return value
        return None

    info_paths = [profile.shown(p) for r in profile.ranks for p in sorted(r.path.glob("profiler_info*.json"))[:1]]
    sources.extend(info_paths[:1])
    device = first(_device_entry) or {}
    if device:
        sources.extend(profile.shown(p) for p in sorted(profile.ranks[0].path.glob("PROF_*/device_*/info.json.*"))[:1])
    hardware = infer_hardware(profile)
    if hardware:
        sources.append(f"{profile.shown(profile.ranks[0].file('kernel_details.csv'))}[header]")
    gpu = next((r.kineto for r in profile.ranks if r.kineto is not None and r.kineto.device_name), None)
    if hardware is None and gpu is not None:
        hardware = gpu.device_name
        sources.append(f"{profile.shown(gpu.path)}[deviceProperties]")
    captured = next((r.kineto for r in profile.ranks if r.kineto is not None and r.kineto.settings), None)
    if captured is not None:
        sources.append(f"{profile.shown(captured.path)}[header: record_shapes, profile_memory, with_stack]")

    return ContextFact(
        id="context",
        sources=sources,
        format=profile.format,
        platform=profile.platform,
        profiler_level=first(lambda r: _str(_experimental(r).get("_profiler_level"))),
        aic_metrics=first(lambda r: _str(_experimental(r).get("_aic_metrics"))),
        torch_npu_version=first(lambda r: _str(r.profiler_info.get("torch_npu_version"))),
        cann_version=first(lambda r: _str(r.profiler_info.get("cann_version")) or _str(r.device_info.get("cannVersion"))),
        hardware=hardware,
        ai_core_count=_int(device.get("ai_core_num")),
        vector_core_count=_int(device.get("aiv_num")),
        aic_frequency_mhz=_float(device.get("aic_frequency")),
        rank_count=max(len(profile.ranks), 1),
        step_count=len(steps),
        has_step_info=bool(steps),
        record_shapes=first(lambda r: _bool(_common(r).get("record_shapes"))),
        profile_memory=first(lambda r: _bool(_common(r).get("profile_memory"))),
        with_stack=first(lambda r: _bool(_common(r).get("with_stack"))),
    )


def _hardware_from_pmu_columns(rank: RankData) -> str | None:
    """A2/A3 ('stars') chips prefix PMU columns with aic_/aiv_; A1 (Ascend 910) writes them bare."""
    if rank.kernels is None:
        return None
    header = set(rank.kernels.header)
    if any(h.startswith(("aic_", "aiv_")) for h in header):
        return "Atlas A2/A3 (Ascend 910B/910C)"
    if {"mac_ratio", "vec_ratio"} & header or {"mac_time(us)", "vec_time(us)"} & header:
        return "Atlas A1 (Ascend 910)"
    return None


def _device_entry(rank: RankData) -> dict[str, Any] | None:
    entries = rank.device_info.get("DeviceInfo")
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        return entries[0]
    return None


def _config(rank: RankData) -> dict[str, Any]:
    config = rank.profiler_info.get("config")
    return config if isinstance(config, dict) else {}


def _experimental(rank: RankData) -> dict[str, Any]:
    value = _config(rank).get("experimental_config")
    return value if isinstance(value, dict) else {}


def _common(rank: RankData) -> dict[str, Any]:
    """The profiler's capture settings: profiler_info's common_config, or a PyTorch trace's header."""
    if rank.kineto is not None:
        return rank.kineto.settings
    value = _config(rank).get("common_config")
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _float(value: Any) -> float | None:
    try:
        number = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if number >= 0 and number == number and number != float("inf") else None
