"""Whether a GPU capture shows steady state: where its steps come from, and which steps warm up (``ingest.warmup``:
first-call launches of a millisecond or more, cudnn.benchmark autotuning, device allocations that later steps do not
make). The capture has steady state when at least one step that launched GPU work follows the last warm-up step; it has
none when the last step warms up, or when the trace marks no steps at all (no ProfilerStep, no serving iteration, fewer
than two optimizer steps: warm-up and steady state cannot be told apart).
"""

from __future__ import annotations

from advisor.facts.models import CaptureFact, Fact
from advisor.facts.scope import RankScope
from advisor.ingest.kinetosteps import launch_steps, step_source, step_windows
from advisor.ingest.warmup import warmup_by_step, warmup_evidence

STEP_SOURCES = {"ProfilerStep": "ProfilerStep#N markers", "iteration": "the serving engine's iterations",
                "read-back": "serving iterations, each ending at the read-back of its sampled tokens; the trace marks none",
                "Optimizer.step": "Optimizer.step events (no ProfilerStep markers)"}


def capture_facts(scope: RankScope) -> list[Fact]:
    """The capture fact of a GPU rank (``facts.capture``)."""
    rank = scope.rank
    trace = rank.kineto
    if trace is None or trace.gpu.empty:
        return []
    windows = step_windows(trace.gpu, trace.runtime, trace.cpu)
    source = step_source(trace.cpu)
    evidence = warmup_evidence(trace)
    numbered = windows.dropna(subset=["step"]).astype({"step": int})
    warm = warmup_by_step(trace, windows)
    unmarked = source is None
    if unmarked:
        found = [f"{len(rows)} {what}" for what, rows in evidence.items() if len(rows) and what != "allocations"]
        described = ("the trace marks no steps, so warm-up and steady state cannot be told apart"
                     + (f"; it shows {', '.join(found)}" if found else ""))
    elif warm:
        described = "; ".join(f"step {step}: {', '.join(parts)}" for step, parts in warm.items())
    else:
        described = None
    last_warm = max(warm) if warm else None
    working = set(launch_steps(trace.gpu, trace.runtime, trace.cpu).dropna().astype(int))  # steps with GPU work
    steady = [s for s in numbered["step"] if (last_warm is None or s > last_warm) and s in working]
    first = evidence["first-call launches of a millisecond or more"]
    return [CaptureFact(
        id=f"capture:r{rank.rank}", sources=[f"{scope.show(trace.path)}[cuda_runtime, cpu_op, kernel]"], rank=rank.rank,
        step_source=source or "none", steps_described=STEP_SOURCES.get(source or "", "none: the whole capture is one window"),
        steps=len(windows) if unmarked else sum(s in working for s in numbered["step"]),
        warmup_steps=", ".join(map(str, warm)) or None, steady_steps=len(steady) if not unmarked else 0,
        steady_state=False if unmarked or not steady else True, warmup_evidence=described,
        first_call_launches=len(first), first_call_launch_us=float(first["dur"].sum()),
        autotune_syncs=len(evidence["cudnn.benchmark autotuning synchronisations"]),
        device_allocations=len(evidence["allocations"]),
    )]

