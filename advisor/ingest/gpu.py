"""Turn PyTorch profiler (Kineto) traces into RankData, so GPU ranks go through the same fact code as Ascend ones.

Each trace becomes the tables an Ascend rank has, each with its Provenance (the trace, and which of its events):

* step_trace ← ``kinetosteps.step_breakdown`` over ``step_windows`` (each ProfilerStep#N extended to the end of
  the GPU work it launched; the whole trace as one step when it has no ProfilerStep);
* kernels ← the GPU activity with canonical columns (``kineto.kernel_table``);
* memory_record ← the ``[memory]`` instants (Total Allocated / Total Reserved after each allocator event),
  as the allocator's own series (component ``PTA``, the name the memory facts read);
* trace ← host CPU ops (ProfilerStep, DataLoader, Optimizer.step, aten::), runtime calls
  (``cuda*``/``hip*``), the GPU activity as device tasks and the launch → kernel pairs by correlation;
* communication ← NCCL kernels, only for 2+ ranks: each collective is matched across ranks by step, type
  and order, its transfer time taken as the fastest rank's duration and the rest of each rank's as waiting for
  the others (a rank that arrives late waits least). A single rank has no way to tell, so it gets none.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from advisor.ingest.communication import TRAFFIC_COLUMNS
from advisor.ingest.kineto import KinetoTrace, kernel_table, read_kineto
from advisor.ingest.kinetosteps import (SERVING_SOURCES, capture_backlog, iteration_names, launch_steps, launch_times,
                                       step_breakdown,
                                       step_markers, step_source, step_windows, window_of)
from advisor.ingest.model import CommunicationTables, CsvTable, Provenance, RankData
from advisor.ingest.serving import (KERNEL_FAMILIES, breakdown_phase, family_times, generating, phase_steps,
                                    readback_markers, serving_iterations)
from advisor.ingest.trace import TraceTables
from advisor.ingest.warmup import KERNEL_LAUNCH, warmup_by_step
from advisor.names import matching

# What in the trace each table is made of (the facts name the text export's columns, which a trace does not have).
TRACE_CONTENT = {
    "step_trace": "ProfilerStep#N windows; kernel, gpu_memcpy, gpu_memset events by launch correlation",
    "kernels": "kernel, gpu_memcpy, gpu_memset events: name, ts, dur, args.stream, args.correlation",
    "memory_record": "[memory] instants: Total Allocated, Total Reserved",
    "trace": "cuda_runtime calls, cpu_op events, kernels by correlation",
    "communication": "NCCL kernels matched across ranks: transit = the fastest rank's duration, wait = the rest",
}
_NCCL_OP = re.compile(r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|AllToAll|SendRecv|Send|Recv)", re.IGNORECASE)
_P2P = {"sendrecv", "send", "recv"}


def read_gpu_rank(path: Path, warnings: list[str]) -> RankData:
    """One trace as a RankData (rank from distributedInfo, else 0 — the loader renumbers clashes)."""
    trace = read_kineto(path)
    warnings.extend(trace.warnings)
    return gpu_rank_data(trace, path, warnings)


def read_gpu_stages(files: list[tuple[str, Path]], warnings: list[str]) -> RankData:
    """One rank's per-stage traces (SGLang's ``…-TP-<r>-EXTEND``/``-DECODE`` files: (phase, path) in order) as one
    RankData whose serving iterations take their phase from the file that holds them."""
    traces = [read_kineto(path) for _phase, path in files]
    for trace in traces:
        warnings.extend(trace.warnings)
    spans = [(phase, *trace_span(trace)) for (phase, _path), trace in zip(files, traces)]
    return gpu_rank_data(merged_traces(traces), files[0][1], warnings, spans)


def trace_span(trace: KinetoTrace) -> tuple[float, float]:
    """The first and last µs a trace's host and GPU events cover."""
    frames = [f for f in (trace.cpu, trace.gpu, trace.runtime) if not f.empty]
    if not frames:
        return (float("inf"), float("-inf"))
    return (min(float(f["ts"].min()) for f in frames), max(float((f["ts"] + f["dur"]).max()) for f in frames))


def merged_traces(traces: list[KinetoTrace]) -> KinetoTrace:
    """Traces of one rank taken one after another, as one: their tables concatenated, each later trace's correlation
    and external ids moved past the earlier ones' so that launches still pair with their kernels."""
    offset_correlation = offset_external = 0.0
    gpu, runtime, cpu, memory, python = [], [], [], [], []
    for trace in traces:
        gpu.append(trace.gpu.assign(correlation=trace.gpu["correlation"] + offset_correlation,
                                    external_id=trace.gpu["external_id"] + offset_external))
        runtime.append(trace.runtime.assign(correlation=trace.runtime["correlation"] + offset_correlation))
        cpu.append(trace.cpu.assign(external_id=trace.cpu["external_id"] + offset_external))
        memory.append(trace.memory)
        python.append(trace.python)
        offset_correlation += float(pd.concat([trace.gpu["correlation"], trace.runtime["correlation"]]).max(skipna=True) or 0) + 1
        offset_external += float(pd.concat([trace.gpu["external_id"], trace.cpu["external_id"]]).max(skipna=True) or 0) + 1
    first = traces[0]
    return replace(first, gpu=pd.concat(gpu, ignore_index=True), runtime=pd.concat(runtime, ignore_index=True),
                   cpu=pd.concat(cpu, ignore_index=True), memory=pd.concat(memory, ignore_index=True),
                   python=pd.concat(python, ignore_index=True),
                   truncation=next((t.truncation for t in traces if t.truncation), None), warnings=[],
                   code_roots=frozenset().union(*(t.code_roots for t in traces)))


def gpu_rank_data(trace: KinetoTrace, path: Path, warnings: list[str],
                  stages: list[tuple[str, float, float]] | None = None) -> RankData:
    """The RankData of one rank's trace; ``stages``: (phase, first µs, last µs) of each per-stage trace merged into
    it, which the serving iterations inside each take their phase from."""
    trace = with_readback_iterations(trace)
    data = RankData(rank=trace.rank if trace.rank is not None and trace.rank >= 0 else -1, path=path,
                    output_dir=path.parent, platform="gpu", export="kineto", kineto=trace)
    data.sources = {table: Provenance(path, content) for table, content in TRACE_CONTENT.items()}
    data.device_id = int(trace.gpu["device"].dropna().iloc[0]) if trace.gpu["device"].notna().any() else None
    steps = launch_steps(trace.gpu, trace.runtime, trace.cpu)
    windows = step_windows(trace.gpu, trace.runtime, trace.cpu)
    breakdown = step_breakdown(trace.gpu, windows)
    one_phase = False  # whether the breakdown covers one phase of a serving run
    if step_source(trace.cpu) in SERVING_SOURCES and not breakdown.empty:
        data.iterations = gpu_iterations(trace, windows, steps, breakdown, stages)
        phased = phase_breakdown(breakdown, data.iterations)
        one_phase = phased is not None
        breakdown = phased if one_phase else breakdown
    breakdown = steady_steps(breakdown, warmup_by_step(trace, windows), warnings)
    if one_phase and not breakdown.empty:
        warnings.extend(phase_note(data.iterations, len(breakdown)))
    if not breakdown.empty and not trace.gpu.empty:
        data.step_trace = CsvTable.of_frame(path, breakdown)
        cadence = cadence_note(trace, breakdown)
        if cadence:
            warnings.append(cadence)
        backlog = capture_backlog(trace.gpu, trace.runtime, trace.cpu)
        if backlog is not None:
            warnings.append(f"ProfilerStep {breakdown['step'].iloc[0]}: the GPU was still running work launched before "
                            f"the capture for {backlog.us / 1000:,.1f} ms when the step began; the step is measured from "
                            "when the GPU started its own work")
        partial = partial_steps(trace, steps)
        if partial:
            warnings.append(f"ProfilerStep {', '.join(map(str, partial))}: some launches have no GPU activity in the "
                            "trace (the capture ended or began inside the step); the step is kept, its device "
                            "times are a lower bound")
    if not trace.gpu.empty:
        kernels = kernel_table(trace, steps)
        data.kernels = CsvTable.of_frame(path, kernels)
    if not trace.memory.empty:
        memory = trace.memory.rename(columns={"ts": "timestamp_us"}).assign(component="PTA", active_mb=float("nan"))
        data.memory_record = CsvTable.of_frame(path, memory)
    data.trace = trace_tables(trace)
    return data


def with_readback_iterations(trace: KinetoTrace) -> KinetoTrace:
    """``trace`` with markers for the iterations of a generation loop that marks none, cut at the device-to-host copies
    that bring its sampled tokens back (``serving.readback_markers``; a copy ends when both the GPU copy and the call
    that issued it have); unchanged when it marks its steps or runs no generation loop."""
    if trace.gpu.empty or trace.cpu.empty or step_source(trace.cpu) is not None:
        return trace
    compute = trace.gpu.loc[trace.gpu["kind"] == "compute"]
    if not generating(compute["name"], trace.cpu["name"]):
        return trace
    back = trace.gpu.loc[trace.gpu["name"].str.startswith("Memcpy DtoH")]
    call_end = (trace.runtime["ts"] + trace.runtime["dur"]).groupby(trace.runtime["correlation"]).max()
    ends = np.maximum((back["ts"] + back["dur"]).to_numpy(float),
                      back["correlation"].map(call_end).astype(float).fillna(-np.inf).to_numpy())
    sampling = compute.loc[matching(compute["name"], KERNEL_FAMILIES["sampling"], search=True)]
    markers = readback_markers(trace.cpu["ts"].to_numpy(float), sampling["ts"].to_numpy(float), ends)
    if markers.empty:
        return trace
    added = markers.assign(tid=trace.cpu["tid"].mode().iloc[0], external_id=None, dtype=None)[list(trace.cpu.columns)]
    return replace(trace, cpu=pd.concat([trace.cpu, added], ignore_index=True))


def cadence_note(trace: KinetoTrace, breakdown: pd.DataFrame) -> str | None:
    """Why the steps differ from the ProfilerStep events' own mean by more than 2 %, when they do: each step lasts
    until the GPU work it launched ends (as tb-profiler counts it), so steps of a GPU that runs behind the host are
    longer than their markers, and steps without the capture's leading lag or warm-up steps can be shorter."""
    markers = step_markers(trace.cpu)
    if markers.empty or step_source(trace.cpu) != "ProfilerStep":
        return None
    host = float(markers["dur"].mean())
    measured = float((breakdown["end_us"] - breakdown["start_us"]).mean())
    if not host or abs(measured - host) <= 0.02 * host:
        return None
    why = ("the GPU runs behind the host, so each step lasts until the GPU work it launched ends (tb-profiler extends "
           "its steps the same way, but its mean can differ where it keeps steps this one re-bases or leaves out)"
           if measured > host else
           "the steps leave out GPU work launched before the capture and warm-up steps, which the ProfilerStep events "
           "hold")
    return (f"ProfilerStep events last {host / 1000:,.1f} ms on average on the host; the steps last "
            f"{measured / 1000:,.1f} ms on average: {why}")


def steady_steps(breakdown: pd.DataFrame, warm: dict[int, list[str]], warnings: list[str]) -> pd.DataFrame:
    """The step table without its warm-up steps (``ingest.warmup``) when steps that do not warm up follow the last of
    them — the breakdown is then the steady state's —, with a warning naming them; unchanged otherwise."""
    if not warm or breakdown.empty:
        return breakdown
    numbers = pd.to_numeric(breakdown["step"], errors="coerce")
    kept = breakdown.loc[~numbers.isin(list(warm))]
    working = kept["computing_us"] + kept["communication_us"] > 0  # a step cut off before its GPU work is no step
    if not (working & (numbers.loc[kept.index] > max(warm))).any():
        return breakdown
    warnings.append("; ".join(f"step {step} warms up ({', '.join(parts)})" for step, parts in warm.items())
                    + ": left out of the step breakdown, which covers the steady-state steps after it")
    return kept.reset_index(drop=True)


GRAPH_LAUNCH = re.compile(r"^(cuda|hip)GraphLaunch(_v\d+)?$")


def gpu_iterations(trace: KinetoTrace, windows: pd.DataFrame, steps: pd.Series, breakdown: pd.DataFrame,
                   stages: list[tuple[str, float, float]] | None = None) -> pd.DataFrame:
    """A serving trace's iterations (``ingest.serving``) with what each did on the GPU: its breakdown (computing,
    exposed communication, free µs), its graph and kernel launches, and its copies back to the host; ``stages`` (see
    ``gpu_rank_data``) give the phase of the iterations inside them."""
    gpu = trace.gpu
    compute = gpu["kind"] == "compute"
    sets: dict[str, set[str]] = {}
    for step, name in set(zip(steps.loc[compute].tolist(), gpu.loc[compute, "name"].tolist())):
        if isinstance(step, str):
            sets.setdefault(step, set()).add(name)
    kernel_sets = [frozenset(sets.get(str(step), ())) for step in windows["step"]]
    to_device = gpu["name"].str.startswith("Memcpy HtoD")
    sizes = gpu.loc[to_device, "bytes"].groupby(steps.loc[to_device]).agg(list)
    copies = [sizes.get(str(step), []) for step in windows["step"]]
    staged = None if stages is None else [
        next((phase for phase, first, last in stages if first <= start <= last), None) for start in windows["start"]]
    kernels = gpu["kind"] != "memory"
    families = family_times(gpu.loc[kernels, "name"], gpu.loc[kernels, "dur"], gpu.loc[kernels, "kind"] == "communication",
                            pd.to_numeric(steps.loc[kernels], errors="coerce"))
    device = windows["step"].map(families["device_us"]).fillna(0.0).tolist()
    iterations = serving_iterations(windows, iteration_names(trace.cpu), kernel_sets, copies, staged, device)
    runtime = trace.runtime
    launched = window_of(runtime, windows)
    graph = matching(runtime["name"], GRAPH_LAUNCH)
    kernel = matching(runtime["name"], KERNEL_LAUNCH) & ~graph
    back = gpu["name"].str.startswith("Memcpy DtoH")
    measured = breakdown.assign(step=pd.to_numeric(breakdown["step"], errors="coerce")).set_index("step")
    iterations = iterations.join(families, on="step").fillna({column: 0.0 for column in families.columns})
    return iterations.assign(
        computing_us=iterations["step"].map(measured["computing_us"]),
        comm_not_overlapped_us=iterations["step"].map(measured["comm_not_overlapped_us"]),
        free_us=iterations["step"].map(measured["free_us"]),
        graph_launches=iterations["step"].map(launched.loc[graph].value_counts()).fillna(0).astype(int),
        kernel_launches=iterations["step"].map(launched.loc[kernel].value_counts()).fillna(0).astype(int),
        copies_to_host=iterations["step"].map(steps.loc[back].dropna().astype(int).value_counts()).fillna(0).astype(int),
    )


def phase_breakdown(breakdown: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame | None:
    """The step table of the phase the breakdown covers (``serving.breakdown_phase``); None when the run has one
    phase, or none of the steps is that phase's."""
    phase = breakdown_phase(iterations)
    if phase is None:
        return None
    kept = breakdown.loc[pd.to_numeric(breakdown["step"], errors="coerce").isin(phase_steps(iterations, phase))]
    return None if kept.empty else kept.reset_index(drop=True)


def phase_note(iterations: pd.DataFrame, kept: int) -> list[str]:
    """The warning that the step breakdown (``kept`` steps, after warm-up) covers one phase and the phase facts
    describe the other phase's iterations; none when the run has one phase."""
    phase = breakdown_phase(iterations)
    other = "prefill" if phase == "decode" else "decode"
    others = len(phase_steps(iterations, other))
    if not others:
        return []
    return [f"a serving run: the step breakdown covers {kept} of its {len(phase_steps(iterations, phase))} {phase} "
            f"iteration(s); the {others} {'prefill or mixed' if other == 'prefill' else other} iteration(s) are "
            "described in the phase facts"]


def partial_steps(trace: KinetoTrace, steps: pd.Series) -> list[int]:
    """Steps holding a kernel launch whose GPU activity is not in the trace."""
    launches = trace.runtime.loc[trace.runtime["correlation"].notna() & trace.runtime["name"].str.contains("Launch")]
    missing = launches.loc[~launches["correlation"].isin(trace.gpu["correlation"].dropna())]
    if missing.empty:
        return []
    windows = step_markers(trace.cpu)
    found = set()
    for ts in missing["ts"]:
        hit = windows.loc[(windows["ts"] <= ts) & (ts <= windows["ts"] + windows["dur"]), "step"]
        found.update(int(s) for s in hit)
    return sorted(found)


def trace_tables(trace: KinetoTrace) -> TraceTables:
    """The host-side tables of the trace in trace_view.json's shape (device tasks typed by their kind)."""
    gpu = trace.gpu
    launched = gpu["correlation"].map(launch_times(trace.runtime))
    pairs = pd.DataFrame({"launch_ts": launched, "device_ts": gpu["ts"]}).dropna()
    return TraceTables(
        host=trace.cpu.assign(cat="cpu_op")[["name", "cat", "tid", "ts", "dur"]],
        apis=trace.runtime[["name", "tid", "ts", "dur"]],
        device=pd.DataFrame({"stream": gpu["stream"], "name": gpu["name"], "task_type": gpu["kind"], "ts": gpu["ts"],
                             "dur": gpu["dur"]}),
        overlap=pd.DataFrame(columns=["lane", "ts", "dur"]),
        launches=pairs.sort_values("launch_ts", ignore_index=True),
    )


def nccl_collectives(trace: KinetoTrace, steps: pd.Series) -> pd.DataFrame:
    """The NCCL kernels of one rank: step, op type, its order among that type in the step, duration (µs)."""
    comm = trace.gpu.loc[trace.gpu["kind"] == "communication"]
    op = comm["name"].str.extract(_NCCL_OP, expand=False).fillna("Other")
    frame = pd.DataFrame({"step": steps.loc[comm.index].fillna(""), "op_type": op, "ts": comm["ts"], "dur": comm["dur"]})
    frame = frame.sort_values("ts", kind="stable")
    frame["order"] = frame.groupby(["step", "op_type"]).cumcount()
    return frame


def attach_nccl_waits(ranks: list[RankData]) -> None:
    """Give each GPU rank communication tables from its NCCL kernels matched across ranks (2+ ranks only)."""
    gpu_ranks = [r for r in ranks if r.kineto is not None and r.kernels is not None]
    matched = match_nccl({r.rank: nccl_collectives(r.kineto, r.kernels.frame["step"]) for r in gpu_ranks})
    for rank in gpu_ranks:
        if rank.rank in matched:
            rank.communication = CommunicationTables.of_frames(matched[rank.rank], pd.DataFrame(columns=list(TRAFFIC_COLUMNS)))


def match_nccl(per_rank: dict[int, pd.DataFrame]) -> dict[int, pd.DataFrame]:
    """Each rank's communication ops from the NCCL kernels of every rank (``nccl_collectives`` per rank, in rank
    order): a collective is matched across ranks by step, type and order; its transit is the fastest rank's duration
    and the rest of each rank's is waiting. Only collectives seen on every rank count; 2+ ranks only."""
    if len(per_rank) < 2:
        return {}
    everything = pd.concat([f.assign(rank=rank) for rank, f in per_rank.items()], ignore_index=True)
    if everything.empty:
        return {}
    key = ["step", "op_type", "order"]
    seen = everything.groupby(key)["rank"].transform("nunique")
    fastest = everything.groupby(key)["dur"].transform("min")
    matched = everything.assign(transit=fastest.where(seen == len(per_rank)))
    found = {}
    for rank in per_rank:
        rows = matched.loc[(matched["rank"] == rank) & matched["transit"].notna()]
        if rows.empty:
            continue
        kind = rows["op_type"].str.lower().map(lambda op: "p2p" if op in _P2P else "collective")
        found[rank] = pd.DataFrame({
            "step": rows["step"].replace("", None), "kind": kind,
            "op_name": rows["op_type"] + "#" + rows["order"].astype(str), "group": "nccl",
            "elapse_ms": rows["dur"] / 1000, "transit_ms": rows["transit"] / 1000,
            "wait_ms": (rows["dur"] - rows["transit"]) / 1000, "synchronization_ms": 0.0, "idle_ms": 0.0,
            "start_us": rows["ts"],
        }).reset_index(drop=True)
    return found
