"""Cluster scale: one task per rank — read it, compute its facts — then one reduce over what the tasks return.

A task (``run_rank_task``) reads one rank directory or PyTorch trace and returns a RankFacts (``facts.rank``, ``facts.scope``): the
rank's facts and the small tables the cross-rank facts need, never the rank's tables. ``facts.reduce`` then computes
the cross-rank facts. So this process holds the tasks' results and never every rank's tables at once: its memory
stays flat in the number and size of ranks, beyond the facts themselves.

The run's settings come in one ``RunOptions`` (``advisor.runoptions``), which each task carries to wherever it runs.

**Where tasks run.** By default in forked worker processes on this machine (``parallel.fork_map``, ``jobs`` /
``--jobs`` / ``ADVISOR_JOBS``; this process only collects); with ``scheduler`` (or ``ADVISOR_SCHEDULER``) on Dask:
``"local"`` starts a LocalCluster of one single-threaded worker per job, an address (``tcp://host:8786``) uses an
existing cluster whose workers read the profile from shared storage at the same path, and a
``distributed.Client`` is used as it is. The reduce always runs here. Results are the same wherever tasks run.

**Triage.** A cluster of more than TRIAGE_ABOVE ranks (unless ``deep`` / ``ADVISOR_DEEP`` is ``"all"``) is read in
two passes, as msprof-analyze does but with every rank counted: first every rank's cluster-level files
(step_trace_time.csv, communication.json, communication_matrix.json, and the small metadata files), from which
each rank's step, communication, link and straggler facts follow; then the deep analysis (operators, kernel
sequences, memory, host, idle) of the ranks that stand out — the slowest and fastest step, the most and least
compute, exposed communication and free time, the stragglers of the communicators that lose the most waiting for
them — and of a few typical ranks (step time nearest the median). The report names them and why (``input.triage``
and a coverage note). PyTorch traces have no cluster-level files: every trace is analysed in depth.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from advisor.errors import InputError
from advisor.facts.cluster import collective_stragglers
from advisor.facts.rank import rank_facts
from advisor.facts.reduce import FactSet, group_waits, reduce_facts, stacked, step_counts
from advisor.facts.scope import RankFacts
from advisor.ingest import read_layout_service
from advisor.ingest.columns import records
from advisor.ingest.discover import discover
from advisor.ingest.formats import format_of
from advisor.ingest.groups import groups_by_hash
from advisor.ingest.kinetoformat import number_traces
from advisor.ingest.model import Coverage, Layout, Profile, RankDir, SkippedFile
from advisor.ingest.paths import Shown
from advisor.parallel import fork_map
from advisor.runoptions import RunOptions, reading
from advisor.usercontext import UserContext

TRIAGE_ABOVE = 64  # ranks; at 64 or fewer every rank is analysed in depth
STRAGGLERS_IN_DEPTH = 4  # the stragglers of the communicators that lose the most
TYPICAL_IN_DEPTH = 4  # ranks whose step time is nearest the median
UNPLACED_IN_DEPTH = 4  # ranks whose cluster files give no step breakdown
SCHEDULER_VARIABLE = "ADVISOR_SCHEDULER"
DEEP_VARIABLE = "ADVISOR_DEEP"
DEEP_MODES = ("auto", "all")
POOL = "pool"  # the built-in process pool, whatever ADVISOR_SCHEDULER says
_EXTREMES = {"step_time_us": ("slowest step", "fastest step"), "compute_us": ("most compute", "least compute"),
             "comm_not_overlapped_us": ("most exposed communication", "least exposed communication"),
             "free_us": ("most free (idle) time", "least free (idle) time")}


@dataclass(frozen=True)
class RankTask:
    """One rank to read and analyse: an Ascend rank directory, a PyTorch trace … (``kind``: its Profile.format, which
    names its input format in ``ingest.formats``).

    ``rank`` is the rank's number (for a trace: the number to give it, see ``_traces``); ``stage`` and ``companions``
    the serving phase of its capture and the captures of its other phases (``RankDir``); ``survey`` reads only the
    cluster-level files; ``serial`` forbids forking inside the task (it runs in a Dask worker's thread); ``options``
    are the run's (without the progress listener on Dask)."""

    path: Path
    output_dir: Path
    base: Path
    rank: int
    kind: str
    stage: str | None = None
    companions: tuple[tuple[str, Path], ...] = ()
    survey: bool = False
    user: UserContext | None = None
    serial: bool = False
    options: RunOptions = field(default_factory=RunOptions)


@dataclass
class RankOutcome:
    """What a task returns: what reading recorded, and the rank's facts (None: a trace that could not be read)."""

    coverage: Coverage
    facts: RankFacts | None


def run_rank_task(task: RankTask) -> RankOutcome:
    """Read one rank and compute its facts; runs in a forked worker, a Dask worker, or this process."""
    with reading(replace(task.options, jobs=1) if task.serial else task.options):
        return _run(task)


def _run(task: RankTask) -> RankOutcome:
    coverage = Coverage()
    data = format_of(task.kind).read(RankDir(task.path, task.output_dir, task.rank, task.stage, task.companions),
                                     task.base, coverage, task.survey)
    if data is None:  # a trace that could not be read
        return RankOutcome(coverage, None)
    data.rank = task.rank  # a trace's own rank stays in RankFacts.recorded_rank
    return RankOutcome(coverage, rank_facts(data, Shown(task.base), task.user, deep=not task.survey))


@dataclass
class Triage:
    """Which ranks of a large cluster were analysed in depth, and why."""

    ranks: int
    threshold: int
    reasons: dict[int, list[str]] = field(default_factory=dict)  # rank → why, in rank order

    def note(self) -> str:
        chosen = "; ".join(f"{rank} ({', '.join(why)})" for rank, why in self.reasons.items())
        return (f"triage: {self.ranks} ranks (more than {self.threshold}): the cluster-level files of every rank "
                "(step_trace_time.csv, communication.json, communication_matrix.json) were read for its step, "
                f"communication, link and straggler facts; {len(self.reasons)} ranks were analysed in depth "
                f"(operators, kernel sequences, memory, host, idle): {chosen}. Diagnose with --deep all "
                f"({DEEP_VARIABLE}=all) to analyse every rank in depth")


def deep_mode(deep: str | None) -> str:
    """'auto' (triage above TRIAGE_ABOVE ranks) or 'all', from ``deep``, else ADVISOR_DEEP; InputError otherwise."""
    if deep is None:
        text = os.environ.get(DEEP_VARIABLE, "").strip().lower()
        if text and text not in DEEP_MODES:
            raise InputError(f"{DEEP_VARIABLE}={text!r}: expected one of {', '.join(DEEP_MODES)}")
        return text or "auto"
    if deep not in DEEP_MODES:
        raise InputError(f"deep: {deep!r} is not one of {', '.join(DEEP_MODES)}")
    return deep


def scheduler_of(scheduler: Any) -> Any:
    """Where tasks run: None for the built-in pool, else 'local', an address, or a distributed.Client."""
    if scheduler is None:
        scheduler = os.environ.get(SCHEDULER_VARIABLE, "").strip() or None
    if isinstance(scheduler, str):
        scheduler = scheduler.strip()
        if scheduler in ("", POOL):
            return None
    return scheduler


def run(path: Path, user: UserContext | None = None, options: RunOptions | None = None) -> tuple[Profile, FactSet]:
    """Read and analyse the profile at ``path``: one task per rank, then the reduce. Returns the profile (its ranks
    as RankMetas, without tables) and its facts. ``options``: the run's settings (where the tasks run, triage, jobs,
    file-size limit, progress)."""
    options = options or RunOptions()
    mode = deep_mode(options.deep)
    with reading(options):
        layout = discover(path)
        with _Runner(scheduler_of(options.scheduler), options) as runner:
            hint = format_of(layout.format).rank_hint
            if hint is not None:
                outcomes, coverage = _traces(layout, hint, user, runner)
                triage = None
            else:
                outcomes, coverage, triage = _rank_dirs(layout, user, runner, mode)
        service = read_layout_service(layout, coverage)  # service-level data: once, here, not in a rank's task
    ranks = [o.facts for o in outcomes if o.facts is not None]
    profile = Profile(root=path, base=layout.base, format=layout.format, ranks=[r.meta for r in ranks],
                      coverage=coverage, triage=triage, service=service)
    return profile, reduce_facts(profile, ranks, user)


def _rank_dirs(layout: Layout, user: UserContext | None, runner: _Runner, mode: str
               ) -> tuple[list[RankOutcome], Coverage, Triage | None]:
    coverage = Coverage(warnings=list(layout.warnings))
    found = [r for r in layout.ranks if r.rank is not None]
    tasks = [RankTask(r.path, r.output_dir, layout.base, r.rank, layout.format, r.stage, r.companions, user=user)
             for r in found]
    triage = None
    if mode == "auto" and len(tasks) > TRIAGE_ABOVE:
        outcomes = runner.map([replace(t, survey=True) for t in tasks])
        reasons = choose_deep([o.facts for o in outcomes])
        if reasons is None:  # the cluster files place no rank: analyse every one
            outcomes = runner.map(tasks)
        else:
            chosen = [i for i, t in enumerate(tasks) if t.rank in reasons]
            for index, outcome in zip(chosen, runner.map([tasks[i] for i in chosen])):
                outcomes[index] = outcome
            triage = Triage(len(tasks), TRIAGE_ABOVE, {rank: reasons[rank] for rank in sorted(reasons)})
    else:
        outcomes = runner.map(tasks)
    for outcome in outcomes:
        coverage.extend(outcome.coverage)
    if triage is not None:
        coverage.warnings.append(triage.note())
    return outcomes, coverage, triage


def choose_deep(ranks: Sequence[RankFacts]) -> dict[int, list[str]] | None:
    """The ranks to analyse in depth, each with why, from every rank's cluster-level facts; None when fewer than two
    ranks have a step breakdown (nothing to choose by)."""
    rows = pd.DataFrame([{"rank": r.meta.rank, **{c: getattr(r.breakdown, c) for c in _EXTREMES}}
                         for r in ranks if r.breakdown is not None])
    if len(rows) < 2:
        return None
    reasons: dict[int, list[str]] = {}

    def add(rank: int, why: str) -> None:
        reasons.setdefault(int(rank), []).append(why)

    for column, (high, low) in _EXTREMES.items():
        ordered = rows.dropna(subset=[column]).sort_values([column, "rank"], kind="stable")
        if ordered.empty:
            continue
        add(ordered.iloc[-1]["rank"], high)
        add(ordered.iloc[0]["rank"], low)
    ops = {r.meta.rank: r.ops for r in ranks if r.ops is not None}
    waits = group_waits(stacked(ops), step_counts(ops), "collective")
    if not waits.empty:
        names = {h: g.name for r in ranks for h, g in groups_by_hash(r.meta.metadata).items()}
        stragglers = collective_stragglers(waits).sort_values(["lost_us", "group"], ascending=[False, True], kind="stable")
        for row in records(stragglers.loc[stragglers["lost_us"] > 0].head(STRAGGLERS_IN_DEPTH)):
            group = row["group"]
            add(row["rank"], f"straggler of communicator {names.get(group, group)} ({group}), "
                             f"{row['lost_us']:,.0f} µs per step lost waiting for it")
    for rank in [r.meta.rank for r in ranks if r.breakdown is None][:UNPLACED_IN_DEPTH]:
        add(rank, "no step breakdown in its cluster-level files")
    median = rows["step_time_us"].median()
    typical = rows.assign(distance=(rows["step_time_us"] - median).abs()).sort_values(["distance", "rank"], kind="stable")
    for rank in [int(r) for r in typical["rank"] if int(r) not in reasons][:TYPICAL_IN_DEPTH]:
        add(rank, "typical (step time near the median)")
    return reasons


def _traces(layout: Layout, rank_hint: Callable[[Path], int | None], user: UserContext | None, runner: _Runner
            ) -> tuple[list[RankOutcome], Coverage]:
    """Every trace, numbered as ingest.load_profile numbers them: the rank each records (distributedInfo), a missing or
    repeated one the next free number. The numbers are planned from each file's head (``rank_hint``); a trace whose
    full read tells otherwise (its keys after traceEvents) is analysed again under its right number."""
    coverage = Coverage(warnings=list(layout.warnings))
    hints = [rank_hint(t.path) for t in layout.ranks]
    planned, _ = number_traces([h if h is not None and h >= 0 else -1 for h in hints])
    tasks = [RankTask(t.path, t.output_dir, layout.base, number, layout.format, t.stage, t.companions, user=user)
             for t, number in zip(layout.ranks, planned)]
    outcomes = runner.map(tasks)
    for outcome in outcomes:
        coverage.extend(outcome.coverage)
    read = [(i, o.facts) for i, o in enumerate(outcomes) if o.facts is not None]
    numbers, notes = number_traces([facts.recorded_rank if facts.recorded_rank is not None else -1 for _, facts in read])
    redo = [(position, index) for position, ((index, facts), number) in enumerate(zip(read, numbers))
            if facts.meta.rank != number]
    if redo:
        again = runner.map([replace(tasks[index], rank=numbers[position]) for position, index in redo])
        for (_, index), outcome in zip(redo, again):
            outcomes[index] = RankOutcome(outcomes[index].coverage, outcome.facts)
    shown = Shown(layout.base)
    for index, facts in read:
        facts = outcomes[index].facts
        if facts is not None and facts.truncation is not None:
            coverage.partly_read.append(SkippedFile(file=shown(facts.meta.path), reason=facts.truncation))
    coverage.warnings.extend(f"{shown(layout.ranks[read[position][0]].path)}: {why}" for position, why in notes)
    ordered = sorted((o for o in outcomes if o.facts is not None), key=lambda o: o.facts.meta.rank)
    return ordered, coverage


class _Runner:
    """Runs rank tasks: forked workers here, or a Dask cluster (started and stopped with this object when it is
    'local' or an address; a given Client is left running)."""

    def __init__(self, scheduler: Any, options: RunOptions) -> None:
        self.scheduler = scheduler
        self.options = options
        self.dask = None

    def __enter__(self) -> _Runner:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.dask is not None:
            self.dask.close()

    def map(self, tasks: list[RankTask]) -> list[RankOutcome]:
        if not tasks:
            return []
        if self.scheduler is None:
            return fork_map(run_rank_task, [replace(t, options=self.options) for t in tasks], jobs=self.options.jobs,
                            progress=self.options.progress, main_works=False)
        if self.dask is None:
            from advisor.distributed import DaskRunner

            self.dask = DaskRunner(self.scheduler, self.options.jobs)
        portable = self.options.portable()
        return self.dask.map(run_rank_task, [replace(t, serial=True, options=portable) for t in tasks])
