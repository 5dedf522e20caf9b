"""What ingest hands to the fact extractors — the tables of each rank, and what was (not) read — and what an input
format declares (InputFormat) and discovery finds (Layout, RankDir)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from advisor.ingest.paths import display_path
from advisor.vocabulary import Platform

if TYPE_CHECKING:  # trace.py and kineto.py import FileProblem from here; pandas only names the tables' type
    import pandas as pd

    from advisor.ingest.columns import Columns
    from advisor.ingest.kineto import KinetoTrace
    from advisor.ingest.service import ServiceData
    from advisor.ingest.trace import TraceTables

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


def coverage_problems(coverage: Coverage | Any) -> list[str]:
    """One line per input skipped, read in part or read with problems, in that order (as the CLI prints them), of a
    Coverage or of a report's copy of one."""
    return ([f"skipped {skipped.file}: {skipped.reason}" for skipped in coverage.skipped]
            + [f"read only part of {partial.file}: {partial.reason}" for partial in coverage.partly_read]
            + list(coverage.warnings))


# The tables of a rank by their neutral names — RankData's fields — and the file of the Ascend text export each
# comes from unless its reader records another (the DB export, a compressed trace, a PyTorch trace).
TEXT_FILES = {
    "step_trace": "step_trace_time.csv", "kernels": "kernel_details.csv", "op_statistic": "op_statistic.csv",
    "communication": "communication.json", "matrix": "communication_matrix.json", "memory_record": "memory_record.csv",
    "operator_memory": "operator_memory.csv", "module_memory": "npu_module_mem.csv", "trace": "trace_view.json",
}
# The documents a reader records in RankData.sources when it read them (they have no default file): the profiler's
# settings, its metadata (environment variables, parallel groups) and the device's info.json.
DOCUMENTS = ("profiler_info", "metadata", "device_info")


@dataclass(frozen=True)
class Provenance:
    """Where a rank's table came from: the file, and what in it when that is not the columns the facts name (a
    PyTorch trace's events stand for the step breakdown, the kernels, the memory series...)."""

    file: Path
    content: str | None = None  # None: the columns of the text export, as each fact names them


class Sourced:
    """Where a rank's tables and documents came from, for a class with ``sources`` and ``output_dir`` (RankData, and
    facts.scope.RankMeta, which carries them without the tables)."""

    sources: dict[str, Provenance]
    output_dir: Path

    def source(self, table: str) -> Provenance:
        """Where ``table`` (a name of TEXT_FILES) was read from (for a document of DOCUMENTS: ``sources.get``)."""
        found = self.sources.get(table)
        return found if found is not None else Provenance(self.output_dir / TEXT_FILES[table])

    def file(self, table: str) -> Path:
        """The file ``table`` (a name of TEXT_FILES) was read from."""
        return self.source(table).file

    def document(self, name: str) -> Path | None:
        """The file the document ``name`` (of DOCUMENTS) was read from; None when it was not."""
        found = self.sources.get(name)
        return found.file if found is not None else None


def _made(table: object, *forms: str) -> None:
    """TypeError unless ``table`` holds one of its ``forms`` (it was made by one of its of_… constructors)."""
    if not any(form in table.__dict__ for form in forms):
        raise TypeError(f"a {type(table).__name__} is made by its of_… constructors")


@dataclass(eq=False)
class CsvTable:
    """A CSV file read into a table with canonical column names; ``header`` keeps the file's own names. The table is
    held as ``columns`` (numbers as float64, text as objects, missing as NaN) or as a ``frame`` (text as pandas' str),
    whichever it was made as (``of_columns``, ``of_frame``); the other is built on first use, and ``values`` reads one
    column from the form it holds. A cluster's survey reads each rank's small step table as columns only; a large
    table (the kernels) is a frame, never copied into columns unless read so."""

    path: Path
    header: list[str]
    rows: int

    @classmethod
    def of_columns(cls, path: Path, columns: Columns, header: list[str], rows: int) -> CsvTable:
        table = cls(path, header, rows)
        table.__dict__["columns"] = columns  # cached_property's own slot
        return table

    @classmethod
    def of_frame(cls, path: Path, frame: pd.DataFrame, header: list[str] | None = None) -> CsvTable:
        """A table made as a DataFrame (the header: its column names unless given)."""
        table = cls(path, list(frame.columns) if header is None else header, len(frame))
        table.__dict__["frame"] = frame
        return table

    @cached_property
    def columns(self) -> Columns:
        from advisor.ingest.columns import columns_of

        _made(self, "frame")
        return columns_of(self.frame)

    @cached_property
    def frame(self) -> pd.DataFrame:
        from advisor.ingest.columns import text_frame_of

        _made(self, "columns")
        return text_frame_of(self.columns, self.rows)

    def values(self, name: str) -> Any:
        """The cells of column ``name`` as a numpy array (None when there is no such column), building neither form."""
        if "columns" in self.__dict__:
            return self.columns.get(name)
        return self.frame[name].to_numpy() if name in self.frame else None


class CommunicationTables:
    """communication.json flattened: one row per op (``ops``: step, kind, op_name, group, elapse_ms, transit_ms,
    wait_ms, synchronization_ms, idle_ms, start_us), and one per (op, transport) with traffic (``traffic``: step,
    kind, op_name, group, transport, size_mb, time_ms). Held as columns (``op_columns``, ``traffic_columns``: what the
    cluster facts read, and all a cluster's survey builds) or as DataFrames, whichever they were made as; the other
    is built on first use."""

    @classmethod
    def of_columns(cls, ops: Columns, traffic: Columns) -> CommunicationTables:
        tables = cls()
        tables.__dict__.update(op_columns=ops, traffic_columns=traffic)  # cached_property's own slots
        return tables

    @classmethod
    def of_frames(cls, ops: pd.DataFrame, traffic: pd.DataFrame) -> CommunicationTables:
        tables = cls()
        tables.__dict__.update(ops=ops, traffic=traffic)
        return tables

    @cached_property
    def op_columns(self) -> Columns:
        from advisor.ingest.columns import columns_of

        _made(self, "ops")
        return columns_of(self.ops)

    @cached_property
    def traffic_columns(self) -> Columns:
        from advisor.ingest.columns import columns_of

        _made(self, "traffic")
        return columns_of(self.traffic)

    @cached_property
    def ops(self) -> pd.DataFrame:
        from advisor.ingest.columns import frame_of

        _made(self, "op_columns")
        return frame_of(self.op_columns)

    @cached_property
    def traffic(self) -> pd.DataFrame:
        from advisor.ingest.columns import frame_of

        _made(self, "traffic_columns")
        return frame_of(self.traffic_columns)


@dataclass
class RankData(Sourced):
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
    matrix: Columns | None = None  # communication_matrix.json: step, kind, op_type, group, src, dst, transport, size_mb, time_ms
    memory_record: CsvTable | None = None
    operator_memory: CsvTable | None = None
    module_memory: CsvTable | None = None
    trace: TraceTables | None = None
    export: str = "text"  # "db": ascend_pytorch_profiler_{rank}.db and analysis.db; "kineto": a *.pt.trace.json
    platform: Platform = "ascend"  # "gpu" for a Kineto trace
    kineto: KinetoTrace | None = None  # the trace's own tables (GPU ranks)
    iterations: pd.DataFrame | None = None  # a serving run's iterations (ingest.serving.ITERATION_COLUMNS and what each
    # did on the device), None for a training job
    sources: dict[str, Provenance] = field(default_factory=dict)  # a table -> where it came from, when not its
    # TEXT_FILES file; a document of DOCUMENTS -> where it was read from
    kernel_header: list[str] | None = None  # kernel_details.csv's header, when only it was read (triage's survey)
    npu_name: str | None = None  # the device's name as the DB export's NPU_INFO records it, e.g. "Ascend910B"


@dataclass
class Profile:
    """A whole profile: one rank or a cluster of ranks, plus the coverage of its files."""

    root: Path
    base: Path
    format: str
    ranks: list[RankData]  # or their facts.scope.RankMeta (no tables) after advisor.cluster's run
    coverage: Coverage
    triage: Any = None  # advisor.cluster.Triage: which ranks were analysed in depth and why (None: all of them)
    service: ServiceData | None = None  # msServiceProfiler's output read with (or as) the profile (ingest.service)
    _shown: dict[Path, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def platform(self) -> str:
        """'ascend' or 'gpu': which rules and knowledge apply."""
        from advisor.ingest.formats import platform_of  # the formats import this module

        return platform_of(self.format)

    def shown(self, path: Path) -> str:
        """How ``path`` appears in reports: relative to the directory that holds the rank directories."""
        shown = self._shown.get(path)
        if shown is None:  # resolving paths costs system calls, and every fact names its files
            shown = self._shown[path] = display_path(path, self.base)
        return shown


@dataclass(frozen=True)
class RankDir:
    """A rank found on disk (a rank directory, or a PyTorch trace) and where its files are (Ascend:
    ASCEND_PROFILER_OUTPUT); ``rank`` None until it is numbered. A serving recipe that captures each phase into a
    directory of its own (``prof/prefill/…``, ``prof/decode/…``) gives the ``stage`` this capture holds and the
    ``companions`` (stage, rank directory) that hold the same rank's other phases."""

    path: Path
    output_dir: Path
    rank: int | None
    stage: str | None = None
    companions: tuple[tuple[str, Path], ...] = ()


@dataclass(frozen=True)
class Layout:
    """The result of discovery: the profile's format, its ranks, and the base that paths are shown relative to."""

    format: str
    ranks: list[RankDir]
    base: Path
    warnings: list[str]
    service: Path | None = None  # a directory of msServiceProfiler output read with the profile (beside or instead)


@dataclass(frozen=True)
class InputFormat:
    """An input format: how discovery recognises its ranks, and how one is read (``ingest.formats`` lists them).

    ``rank_at(path, is_dir)`` is the rank a path given or met while walking is (a directory returned is not entered),
    else None; ``layout(found, path, base)`` numbers the ranks found under the path given. ``read(rank, base,
    coverage, survey)`` reads one rank (``survey``: only its cluster-level files), in any process. ``finish`` runs
    on every rank read in this process (``load_profile``); ``rank_hint`` tells, from a file's head, the rank it
    records, for a format whose ranks are numbered from their content once read (None: discovery numbers them).
    ``joins``: its data is about the whole profile, not ranks (service-level data): found beside another format's
    ranks it joins their profile (``Layout.service``) instead of being left out with a warning. ``not_one(path)``:
    why a file ``rank_at`` claims (by its name) is certainly not one of the format's files ('is not a PyTorch profiler
    trace (…)'), else None; discovery refuses a path whose every such file is not one."""

    platforms: dict[str, str]  # Profile.format of its layouts → the platform whose rules and knowledge apply
    described: str  # what advisor reads of it, in the message for a path that is no profile
    what: str  # what its ranks are, in the warning for those beside another format's
    rank_at: Callable[[Path, bool], Path | None]
    layout: Callable[[list[Path], Path, Path], Layout]
    read: Callable[[RankDir, Path, Coverage, bool], RankData | None]
    finish: Callable[[list[RankData], Layout, Coverage], list[RankData]] | None = None
    rank_hint: Callable[[Path], int | None] | None = None
    joins: bool = False
    not_one: Callable[[Path], str | None] | None = None

