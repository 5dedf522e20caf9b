"""What a rank's fact families share: the RankScope they read and write, and the RankFacts (with its RankMeta)
that one rank's task returns.

A RankFacts is what a task returns (in a forked worker or a Dask worker), so it must pickle and stay small: the
rank's own facts and the small tables the cross-rank step (``facts.reduce``) needs, never the rank's tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from advisor.facts.context import hardware_from_header
from advisor.facts.models import BreakdownFact, Fact, StepFact
from advisor.facts.windows import WINDOW_COLUMNS, kernel_step_windows, profiler_step_windows
from advisor.ingest.columns import Columns
from advisor.ingest.model import Provenance, RankData, Sourced
from advisor.ingest.kinetoformat import STAGE_FILE
from advisor.ingest.serving import serving_engine
from advisor.usercontext import UserContext
from advisor.vocabulary import Platform

Shown = Callable[[Path], str]

@dataclass
class RankMeta(Sourced):
    """A rank without its tables: who it is, where its files are, and the small documents the profile-wide facts
    read (profiler_info, profiler_metadata, the device's info.json, the capture settings of a PyTorch trace)."""

    rank: int
    path: Path
    output_dir: Path
    platform: Platform = "ascend"
    export: str = "text"
    sources: dict[str, Provenance] = field(default_factory=dict)
    profiler_info: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    device_info: dict[str, Any] = field(default_factory=dict)
    device_id: int | None = None
    hardware_hint: str | None = None  # the chip family its kernel_details header tells, if any
    npu_name: str | None = None  # NPU_INFO's device name (DB export)
    kineto_path: Path | None = None  # a PyTorch trace's file, its GPU and capture settings
    kineto_device_name: str | None = None
    kineto_compute_capability: str | None = None
    kineto_settings: dict[str, bool] | None = None
    serving: bool = False  # a serving run: its iterations were read (ingest.serving)
    serving_engine: str | None = None  # ingest.serving.serving_engine

    @property
    def info_file(self) -> Path | None:
        """Its profiler_info*.json, when one was read."""
        return self.document("profiler_info")

    @property
    def device_info_file(self) -> Path | None:
        """Its PROF_*/device_*/info.json.*, when one was read."""
        return self.document("device_info")

    @classmethod
    def of(cls, rank: RankData) -> RankMeta:
        """The identity and documents of a rank that was read."""
        kineto = rank.kineto
        header = rank.kernels.header if rank.kernels is not None else rank.kernel_header
        return cls(rank=rank.rank, path=rank.path, output_dir=rank.output_dir, platform=rank.platform, export=rank.export,
                   sources=dict(rank.sources), profiler_info=rank.profiler_info, metadata=rank.metadata,
                   device_info=rank.device_info, device_id=rank.device_id,
                   hardware_hint=hardware_from_header(header) if header is not None else None,
                   npu_name=rank.npu_name,
                   kineto_path=kineto.path if kineto is not None else None,
                   kineto_device_name=kineto.device_name if kineto is not None else None,
                   kineto_compute_capability=kineto.compute_capability if kineto is not None else None,
                   kineto_settings=kineto.settings if kineto is not None else None,
                   serving=rank.iterations is not None,
                   serving_engine=_engine(rank) if rank.iterations is not None else None)


def _engine(rank: RankData) -> str | None:
    """The serving engine a GPU rank's trace shows (ingest.serving.serving_engine); None on Ascend."""
    kineto = rank.kineto
    if kineto is None:
        return None
    annotated = bool(kineto.cpu["name"].str.startswith("execute_context_").any()) if len(kineto.cpu) else False
    return serving_engine(kineto.code_roots, annotated, bool(STAGE_FILE.match(kineto.path.name)))


@dataclass
class Mc2Pairs:
    """A rank's MatMul→collective pairs; which are MC2 candidates depends on every rank's communicator groups."""

    pairs: pd.DataFrame
    step_count: int
    step_time: float | None
    sources: list[str]


@dataclass
class RankFacts:
    """What one rank's task returns: its facts and the small tables the cross-rank facts need, never its tables.

    The rank's own facts keep their order in the report: ``head`` (the families placed there in
    ``facts.rank.RANK_FAMILIES``), then the rank's cross-rank facts (computed by the reduce), then ``tail``.
    ``deep`` is False for a rank read only for its cluster-level files (triage).
    """

    meta: RankMeta
    deep: bool = True
    head: list[Fact] = field(default_factory=list)
    tail: list[Fact] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    steps: set[int] = field(default_factory=set)
    step_starts: dict[int, float] = field(default_factory=dict)  # each ProfilerStep#N's start on the trace's clock
    breakdown: BreakdownFact | None = None
    needs_cores: bool = False  # its operator facts' Block Dim remainders wait for another rank's core counts
    mc2: Mc2Pairs | None = None
    ops: Columns | None = None  # communication ops, transit checked against Bandwidth Info
    traffic: Columns | None = None  # per op and transport: Bandwidth Info
    matrix: Columns | None = None  # communication_matrix.json's links
    matrix_groups: dict[str, tuple[frozenset[int], int | None]] = field(default_factory=dict)
    nccl: pd.DataFrame | None = None  # a GPU rank's NCCL kernels (matched across ranks by the reduce)
    recorded_rank: int | None = None  # a GPU trace's own rank (distributedInfo), before any renumbering
    truncation: str | None = None  # a GPU trace cut off mid-write: why only its start was read
    peer_waits: dict[int, float] | None = None  # HCCL Notify_Wait µs per step per group-local peer


@dataclass
class RankScope:
    """What a rank's fact families read — its tables, how paths are shown, what the user told — and what the families
    before them produced: the RankFacts being filled (its steps, breakdown, warnings, …) and every step fact
    (``steps``; the RankFacts lists at most ``facts.steps.MAX_STEP_FACTS`` of them)."""

    rank: RankData
    show: Shown
    user: UserContext | None
    out: RankFacts
    steps: list[StepFact] = field(default_factory=list)

    @property
    def breakdown(self) -> BreakdownFact | None:
        return self.out.breakdown

    @cached_property
    def host_windows(self) -> pd.DataFrame:
        """The trace's host ProfilerStep#N windows (none without a trace), found once for every family (read-only)."""
        trace = self.rank.trace
        return profiler_step_windows(trace.host) if trace is not None else pd.DataFrame(columns=WINDOW_COLUMNS)

    @cached_property
    def kernel_windows(self) -> pd.DataFrame:
        """The kernels' device window per Step Id (none without a kernel table), found once (read-only)."""
        kernels = self.rank.kernels
        return kernel_step_windows(kernels.frame) if kernels is not None else pd.DataFrame(columns=WINDOW_COLUMNS)


def file_source(show: Shown, rank: RankData | RankMeta, table: str, columns: str) -> str:
    """``file[columns]`` for a fact computed from ``columns`` of ``table`` (``file[what]`` where the table was made of
    something else: a PyTorch trace's events)."""
    source = rank.source(table)
    return f"{show(source.file)}[{source.content or columns}]"


def metadata_source(show: Shown, rank: RankData | RankMeta, key: str | None = None) -> str | None:
    """Where the rank's profiler metadata (its entry ``key``) was read: ``profiler_metadata.json[key]``, or the DB
    export's ``….db[META_DATA: key]``; None when no reader recorded it."""
    source = rank.sources.get("metadata")
    if source is None:
        return None
    inside = ": ".join(part for part in (source.content, key) if part)
    return f"{show(source.file)}[{inside}]" if inside else show(source.file)


def float_or_none(value) -> float | None:
    if value is None or pd.isna(value):
        return None
    return max(float(value), 0.0)
