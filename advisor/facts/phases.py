"""The phases of a serving run (``facts.phase``): per rank, one PhaseFact for each of prefill, decode and mixed that
its iterations (``RankData.iterations``, ``ingest.serving``) hold."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from advisor.facts.capture import STEP_SOURCES
from advisor.facts.hardware import peak_memory_tbps
from advisor.facts.models import Fact, PhaseFact
from advisor.facts.platforms import traits
from advisor.facts.scope import RankScope
from advisor.facts.windows import inside
from advisor.ingest.serving import PHASES, breakdown_phase, start_to_start
from advisor.names import matching
from advisor.usercontext import ModelSettings

WEIGHT_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}

PHASE_SOURCE = "iterations: markers, kernels, HtoD/DtoH copies, graph/kernel launches and compilations per iteration"
# torch.compile compiling a frame: PyTorch 2's dynamo_timed record_function around each frame's compilation
DYNAMO_COMPILE = re.compile(r"^_compile\.compile_inner \(dynamo_timed\)$")


def phase_facts(scope: RankScope) -> list[Fact]:
    """The rank's phase facts; none for a training job."""
    rank, iterations = scope.rank, scope.rank.iterations
    if iterations is None or iterations.empty:
        return []
    covered = breakdown_phase(iterations)
    source = f"{scope.show(rank.path)}[{PHASE_SOURCE}]"
    model = scope.user.model if scope.user is not None else None
    weights = _weight_bytes(model) if model is not None else None
    peak = peak_memory_tbps(rank.kineto.device_name if rank.kineto is not None else None)
    compiles = _compilations(rank)
    facts: list[Fact] = []
    for phase in PHASES:
        rows = iterations.loc[iterations["phase"] == phase]
        if rows.empty:
            continue
        sources = [source, scope.user.model_source] if weights is not None else [source]
        fact = _phase_fact(rank.rank, phase, rows, start_to_start(iterations, phase),
                           covered == phase or (covered == "prefill" and phase == "mixed"), sources, weights, peak)
        later = inside(compiles, rows.iloc[1:]) if len(rows) > 1 else compiles.iloc[:0]
        facts.append(fact.model_copy(update={
            "compiles_after_first": len(later),
            "compile_us_after_first_per_iteration": float(later["dur"].sum()) / max(len(rows) - 1, 1)}))
    return facts


def _compilations(rank) -> pd.DataFrame:
    """The rank's online compilations (ts, dur): the runtime's compile steps (AscendCL@opCompile, nvrtc/hiprtc) and
    torch.compile's frame compilations (DYNAMO_COMPILE)."""
    trace = rank.trace
    if trace is None:
        return pd.DataFrame(columns=["ts", "dur"])
    steps = trace.apis.loc[matching(trace.apis["name"], traits(rank.platform).runtime.compile_step)]
    frames = trace.host.loc[matching(trace.host["name"], DYNAMO_COMPILE)]
    return pd.concat([steps[["ts", "dur"]], frames[["ts", "dur"]]], ignore_index=True)


def _weight_bytes(model: ModelSettings) -> float | None:
    """The bytes of weights one rank reads per iteration: all of its share of the parameters (None unknown)."""
    if model.parameters_billion is None:
        return None
    return model.parameters_billion * 1e9 * WEIGHT_BYTES[model.dtype or "bf16"] / (model.tensor_parallel or 1)


def _median(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.median()) if len(values) else None


def _phase_fact(rank: int, phase: str, rows: pd.DataFrame, spacing: np.ndarray, covered: bool, sources: list[str],
                weights: float | None, peak: float | None) -> PhaseFact:
    """The fact of one phase's iterations (``rows``); ``weights``: the bytes of weights the rank reads per iteration,
    ``peak``: the device's peak memory bandwidth (TB/s), each None when unknown."""
    durations = rows["end"] - rows["start"]
    busy = (rows["computing_us"] + rows["comm_not_overlapped_us"]) / durations
    device = rows["device_us"].where(rows["device_us"] > 0)
    tokens = _median(pd.to_numeric(rows["tokens"], errors="coerce"))
    requests = pd.to_numeric(rows["context_requests"], errors="coerce").fillna(0) + pd.to_numeric(
        rows["decode_requests"], errors="coerce").fillna(0)
    per_token = float(np.median(spacing)) if len(spacing) else None
    graphs, kernels = float(rows["graph_launches"].median()), float(rows["kernel_launches"].median())

    def share(column: str) -> float:
        return float(min((rows[column] / device).median(), 1.0)) if device.notna().any() else 0.0

    shares = {family: share(f"{family}_us") for family in ("attention", "kv_cache", "sampling", "collective")}
    outside = float(rows["device_us"].median()) * (1 - sum(shares.values()))  # the GEMMs, norms, activations
    read = weights / outside / 1e6 if weights is not None and outside > 0 else None  # bytes per µs ÷ 1e6 = TB/s
    return PhaseFact(
        id=f"phase:r{rank}:{phase}", sources=sources, rank=rank, phase=phase,
        phase_from=str(rows["phase_from"].dropna().iloc[0]) if rows["phase_from"].notna().any() else "kernel sequence",
        iterations=len(rows), iterations_marked_by=STEP_SOURCES[str(rows["marked_by"].iloc[0])],
        covered_by_breakdown=covered, duration_us=float(durations.median()),
        first_duration_us=float(durations.iloc[0]), start_to_start_us=per_token, tokens_per_iteration=tokens,
        tokens_from=str(rows["tokens_from"].dropna().iloc[0]) if tokens is not None else None,
        **({"batch_words": f"a batch of {tokens:g} token(s) per iteration"} if tokens is not None else {}),
        requests_per_iteration=float(requests.median()) if rows["phase_from"].eq("annotation").all() else None,
        tokens_per_s=tokens / per_token * 1e6 if tokens is not None and per_token else None,
        busy_share=float(min(busy.median(), 1.0)), idle_share=float(max(1.0 - min(busy.median(), 1.0), 0.0)),
        graph_launches_per_iteration=graphs, kernel_launches_per_iteration=kernels,
        graph_mode="eager" if graphs == 0 else "piecewise graphs" if graphs >= 2 and kernels > 0 else "graphs",
        copies_to_host_per_iteration=float(rows["copies_to_host"].median()),
        device_us=float(rows["device_us"].median()), **{f"{family}_share": value for family, value in shares.items()},
        weight_read_tbps=read, peak_memory_tbps=peak, weight_read_share_of_peak=read / peak if read and peak else None,
    )
