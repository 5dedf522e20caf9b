"""What ingest hands to the fact extractors: the tables of each rank, and what was (not) read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from pydantic import BaseModel, Field

from advisor.ingest.paths import display_path

if TYPE_CHECKING:  # trace.py and kineto.py import FileProblem from here
    from advisor.ingest.kineto import KinetoTrace
    from advisor.ingest.trace import TraceTables

PLATFORM_OF_FORMAT = {"ascend-pytorch": "ascend", "ascend-mindspore": "ascend", "pytorch-kineto": "gpu"}


class FileProblem(Exception):
    """A file that cannot be used; the message says what is wrong with it (without the path)."""


class SkippedFile(BaseModel):
    """A file that exists but could not be used, and why."""

    file: str
    reason: str


class Coverage(BaseModel):
    """Which input files were read, which were expected but absent, which were unusable."""

    read: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    skipped: list[SkippedFile] = Field(default_factory=list)
    partly_read: list[SkippedFile] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def skip(self, file: str, reason: str) -> None:
        self.skipped.append(SkippedFile(file=file, reason=reason))

    def extend(self, later: Coverage) -> None:
        """Add what ``later`` recorded (the coverage of the next rank, read in another process)."""
        for name in ("read", "missing", "skipped", "partly_read", "warnings"):
            getattr(self, name).extend(getattr(later, name))


@dataclass
class CsvTable:
    """A CSV file read into a frame with canonical column names; ``header`` keeps the file's own names."""

    path: Path
    frame: pd.DataFrame
    header: list[str]


@dataclass
class CommunicationTables:
    """communication.json flattened: one row per op, and one per (op, transport) with traffic."""

    ops: pd.DataFrame  # step, kind, op_name, group, elapse_ms, transit_ms, wait_ms, synchronization_ms, idle_ms
    traffic: pd.DataFrame  # step, kind, op_name, group, transport, size_mb, time_ms


@dataclass
class RankData:
    """Everything read from one rank: an ``*_ascend_pt`` directory, or a PyTorch profiler trace (``platform`` gpu)."""

    rank: int
    path: Path
    output_dir: Path
    profiler_info: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    device_info: dict[str, Any] = field(default_factory=dict)
    device_id: int | None = None
    step_trace: CsvTable | None = None
    kernels: CsvTable | None = None
    op_statistic: CsvTable | None = None
    communication: CommunicationTables | None = None
    matrix: pd.DataFrame | None = None  # communication_matrix.json: step, kind, op_type, group, src, dst, transport, size_mb, time_ms
    memory_record: CsvTable | None = None
    operator_memory: CsvTable | None = None
    module_memory: CsvTable | None = None
    trace: TraceTables | None = None
    export: str = "text"  # "db": ascend_pytorch_profiler_{rank}.db and analysis.db; "kineto": a *.pt.trace.json
    platform: str = "ascend"  # "gpu" for a Kineto trace
    kineto: KinetoTrace | None = None  # the trace's own tables (GPU ranks)
    stand_ins: dict[str, Path] = field(default_factory=dict)  # text file name -> the DB file its table came from
    kernel_header: list[str] | None = None  # kernel_details.csv's header, when only it was read (triage's survey)

    def file(self, name: str) -> Path:
        """The file the table of the text export file ``name`` was read from."""
        return self.stand_ins.get(name, self.output_dir / name)


@dataclass
class Profile:
    """A whole profile: one rank or a cluster of ranks, plus the coverage of its files."""

    root: Path
    base: Path
    format: str
    ranks: list[RankData]  # or their facts.scope.RankMeta (no tables) after advisor.cluster's run
    coverage: Coverage
    triage: Any = None  # advisor.cluster.Triage: which ranks were analysed in depth and why (None: all of them)
    _shown: dict[Path, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def platform(self) -> str:
        """'ascend' or 'gpu': which rules and knowledge apply."""
        return PLATFORM_OF_FORMAT.get(self.format, "ascend")

    def shown(self, path: Path) -> str:
        """How ``path`` appears in reports: relative to the directory that holds the rank directories."""
        shown = self._shown.get(path)
        if shown is None:  # resolving paths costs system calls, and every fact names its files
            shown = self._shown[path] = display_path(path, self.base)
        return shown
