"""The context fact: what was profiled (versions, level, hardware) and how."""

from __future__ import annotations

import re
from typing import Any

from advisor.facts.models import ContextFact
from advisor.ingest import Profile

# The profile-wide facts read each rank's RankMeta (facts.scope): its documents, hardware_hint and kineto_* fields.


def core_counts_of(device: dict[str, Any] | None) -> dict[str, int | None]:
    """The core counts of one device's info.json entry."""
    device = device or {}
    return {"cube": _int(device.get("ai_core_num")), "vector": _int(device.get("aiv_num"))}


def context_fact(profile: Profile, steps: list[int]) -> ContextFact:
    """Describe the profile from the first rank that has each piece of information."""
    sources: list[str] = []
    ranks = list(profile.ranks)  # RankMeta: facts.reduce runs on the ranks' metas

    def first(getter) -> Any:
        for rank in ranks:
            value = getter(rank)
            if value not in (None, ""):
                return value
        return None

    info_paths = [profile.shown(r.info_file) for r in ranks if r.info_file is not None]
    sources.extend(info_paths[:1])
    device = first(lambda r: device_entry(r.device_info)) or {}
    if device and ranks[0].device_info_file is not None:
        sources.append(profile.shown(ranks[0].device_info_file))
    hardware = first(lambda r: r.hardware_hint)
    if hardware:
        sources.append(f"{profile.shown(ranks[0].file('kernels'))}[header]")
    npu = next((r for r in ranks if r.npu_name), None)
    if npu is not None:
        sources.append(f"{profile.shown(npu.sources['npu_name'].file)}[NPU_INFO]")
    gpu = next((r for r in ranks if r.kineto_device_name), None)
    if hardware is None and gpu is not None:
        hardware = gpu.kineto_device_name
        sources.append(f"{profile.shown(gpu.kineto_path)}[deviceProperties]")
    captured = next((r for r in ranks if r.kineto_settings), None)
    if captured is not None:
        sources.append(f"{profile.shown(captured.kineto_path)}[header: record_shapes, profile_memory, with_stack; "
                       "else ops' Input Dims, Call stack]")

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
        npu_name=npu.npu_name if npu is not None else None,
        chip=atlas_generation(npu.npu_name) if npu is not None else None,
        compute_capability=gpu.kineto_compute_capability if gpu is not None else None,
        ai_core_count=_int(device.get("ai_core_num")),
        vector_core_count=_int(device.get("aiv_num")),
        aic_frequency_mhz=_float(device.get("aic_frequency")),
        rank_count=max(len(ranks), 1),
        step_count=len(steps),
        has_step_info=bool(steps),
        record_shapes=first(lambda r: _bool(_common(r).get("record_shapes"))),
        profile_memory=first(lambda r: _bool(_common(r).get("profile_memory"))),
        with_stack=first(lambda r: _bool(_common(r).get("with_stack"))),
        serving=any(r.serving for r in ranks),
        serving_engine=next((r.serving_engine for r in ranks if r.serving_engine is not None), None),
    )


def atlas_generation(npu_name: str) -> str | None:
    """The Atlas generation of an NPU named as CANN names its SoC: Ascend910B1…B4 (or the bare Ascend910B the
    profiler writes) Atlas A2; Ascend910_93xx (Ascend 910C) Atlas A3; anything else None."""
    name = npu_name.replace(" ", "").upper()
    if re.match(r"ASCEND910B", name):
        return "Atlas A2"
    if re.match(r"ASCEND910_?93|ASCEND910C", name):
        return "Atlas A3"
    return None


def hardware_from_header(header: list[str]) -> str | None:
    """A2/A3 ('stars') chips prefix PMU columns with aic_/aiv_ in kernel_details; A1 (Ascend 910) writes them bare."""
    names = set(header)
    if any(h.startswith(("aic_", "aiv_")) for h in names):
        return "Atlas A2/A3 (Ascend 910B/910C)"
    if {"mac_ratio", "vec_ratio"} & names or {"mac_time(us)", "vec_time(us)"} & names:
        return "Atlas A1 (Ascend 910)"
    return None


def device_entry(device_info: dict[str, Any]) -> dict[str, Any] | None:
    """The first DeviceInfo entry of a device's info.json."""
    entries = device_info.get("DeviceInfo") if isinstance(device_info, dict) else None
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        return entries[0]
    return None


def _config(rank) -> dict[str, Any]:
    config = rank.profiler_info.get("config")
    return config if isinstance(config, dict) else {}


def _experimental(rank) -> dict[str, Any]:
    value = _config(rank).get("experimental_config")
    return value if isinstance(value, dict) else {}


def _common(rank) -> dict[str, Any]:
    """The profiler's capture settings: profiler_info's common_config, or a PyTorch trace's header."""
    if rank.kineto_settings is not None:
        return rank.kineto_settings
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
