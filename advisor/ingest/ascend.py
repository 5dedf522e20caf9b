"""Read one Ascend PyTorch/MindSpore profiler rank directory (text export) into a RankData.

Every file is optional: a missing file is recorded in the coverage as missing, an unusable one as
skipped with the reason, and reading carries on with the rest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from stat import S_ISREG
from typing import Any, TypeVar

import orjson
import numpy as np
import pandas as pd

from advisor.ingest.columns import Columns
from advisor.ingest.communication import parse_communication, parse_matrix
from advisor.ingest.csvtable import Column, read_csv_table, read_header
from advisor.ingest.db import (
    ANALYSIS_DB,
    DbTables,
    open_db,
    profiler_db,
    read_communication,
    read_kernels,
    read_matrix,
    read_memory_record,
    read_metadata,
    read_npu_name,
    read_module_memory,
    read_operator_memory,
    read_step_trace,
    read_trace_tables,
)
from advisor.ingest.ascendserving import ascend_iterations, with_readback_iterations
from advisor.ingest.kinetosteps import window_of
from advisor.ingest.lanes import lane_steps
from advisor.ingest.limits import check_size, read_bounded
from advisor.ingest.model import CommunicationTables, Coverage, CsvTable, FileProblem, Provenance, RankData, SkippedFile
from advisor.ingest.paths import display_path
from advisor.ingest.serving import breakdown_phase, phase_steps
from advisor.ingest.trace import TraceTables, read_trace
from advisor.parallel import in_worker, progress_heard, worker_progress
from advisor.runoptions import current

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
_MAX_JSON_BYTES = 64 << 20
_MAX_COMMUNICATION_BYTES = 2 << 30
_INFO_NAME = re.compile(r"^profiler_info(?:_(\d+))?\.json$")

# PMU pipe utilisation columns of kernel_details (PipeUtilization metrics): cube side, then vector side.
PIPE_RATIOS = ("aic_mac_ratio", "aic_scalar_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio",
               "aiv_vec_ratio", "aiv_scalar_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")

STEP_TRACE_COLUMNS = (
    Column("device_id", ("Device_id",), "float"),
    Column("step", ("Step",), "str"),
    Column("computing_us", ("Computing",), "float", required=True),
    Column("comm_not_overlapped_us", ("Communication(Not Overlapped)",), "float", required=True),
    Column("overlapped_us", ("Overlapped",), "float"),
    Column("communication_us", ("Communication",), "float"),
    Column("free_us", ("Free",), "float", required=True),
    Column("stage_us", ("Stage",), "float"),
    Column("bubble_us", ("Bubble",), "float"),
    Column("preparing_us", ("Preparing",), "float"),
)

KERNEL_COLUMNS = (
    Column("step", ("Step Id", "Step ID"), "str"),
    Column("device_id", ("Device_id",), "float"),
    Column("name", ("Name",), "str", required=True),
    Column("type", ("Type",), "str"),
    Column("accelerator_core", ("Accelerator Core",), "str"),
    Column("duration_us", ("Duration(us)",), "float", required=True),
    Column("start_us", ("Start Time(us)",), "float"),
    Column("input_shapes", ("Input Shapes",), "str"),
    Column("input_dtypes", ("Input Data Types",), "str"),
    Column("block_dim", ("Block Dim", "Block Num"), "float"),
    Column("model_id", ("Model ID",), "float"),  # 4294967295 (UINT32_MAX) for a single op; a graph's id inside one
    *(Column(name, (name,), "float") for name in PIPE_RATIOS),
)

OP_STATISTIC_COLUMNS = (
    Column("device_id", ("Device_id",), "float"),
    Column("type", ("OP Type",), "str", required=True),
    Column("accelerator_core", ("Core Type",), "str"),
    Column("count", ("Count",), "float", required=True),
    Column("total_us", ("Total Time(us)",), "float", required=True),
    Column("max_us", ("Max Time(us)",), "float"),
)

MEMORY_RECORD_COLUMNS = (
    Column("component", ("Component",), "str", required=True),
    Column("timestamp_us", ("Timestamp(us)",), "float", required=True),
    Column("allocated_mb", ("Total Allocated(MB)",), "float"),
    Column("reserved_mb", ("Total Reserved(MB)",), "float", required=True),
    Column("active_mb", ("Total Active(MB)",), "float"),
)

OPERATOR_MEMORY_COLUMNS = (
    Column("name", ("Name",), "str", required=True),
    Column("size_kb", ("Size(KB)",), "float", required=True),
    Column("allocation_us", ("Allocation Time(us)",), "float"),
)

MODULE_MEMORY_COLUMNS = (
    Column("component", ("Component",), "str", required=True),
    Column("reserved_mb", ("Total Reserved(MB)",), "float", required=True),
)

T = TypeVar("T")


def rank_id_from_dir(rank_dir: Path) -> int | None:
    """The rank a directory belongs to, from its ``profiler_info_{rank}.json`` file name or content."""
    for info in sorted(rank_dir.glob("profiler_info*.json")):
        match = _INFO_NAME.match(info.name)
        if match and match.group(1) is not None:
            return int(match.group(1))
        try:  # bounded and non-blocking: a FIFO or a huge sparse file named profiler_info.json is skipped
            content = orjson.loads(read_bounded(info, _MAX_JSON_BYTES))
        except (OSError, ValueError, FileProblem):
            continue
        rank = _as_int(content.get("rank_id")) if isinstance(content, dict) else None
        if rank is not None:
            return rank
    return None


def read_rank(rank_dir: Path, output_dir: Path, rank: int, base: Path, coverage: Coverage, *,
              survey: bool = False, stage: str | None = None) -> RankData:
    """Read every file this version of the tool uses from one rank directory.

    The text export is read when its CSVs are there; otherwise the DB export (ascend_pytorch_profiler_{rank}.db
    and analysis.db) when it is — never both, so a directory holding both is not counted twice. ``survey`` reads
    only the cluster-level files (SURVEY_FILES: the step breakdown, communication and the matrix, with
    profiler_info, profiler_metadata and the device's info.json) and the header line of kernel_details.csv, as
    triage does for the ranks it does not analyse in depth. ``stage``: the serving phase the whole capture holds
    (a recipe's ``prefill/`` or ``decode/`` directory), which its iterations take.
    """
    data = RankData(rank=rank, path=rank_dir, output_dir=output_dir)
    reader = Reader(base, coverage)

    info_files = sorted(rank_dir.glob("profiler_info*.json"))
    if info_files:
        data.profiler_info = reader.read(info_files[0], _json_object) or {}
        data.sources["profiler_info"] = Provenance(info_files[0])
    else:
        coverage.missing.append(display_path(rank_dir / "profiler_info_<rank>.json", base))
    database = profiler_db(output_dir)
    from_db = database is not None and not any((output_dir / n).exists() for n in ("step_trace_time.csv", "kernel_details.csv"))
    if not from_db or (rank_dir / "profiler_metadata.json").exists():  # the DB export keeps it in META_DATA
        data.metadata = reader.read(rank_dir / "profiler_metadata.json", _json_object) or {}
        if data.metadata:
            data.sources["metadata"] = Provenance(rank_dir / "profiler_metadata.json")
    device_info_file = _device_info_file(rank_dir)
    if device_info_file is not None:
        data.device_info = reader.read(device_info_file, _json_object) or {}
        data.sources["device_info"] = Provenance(device_info_file)
        data.device_id = _as_int(device_info_file.name.rsplit(".", 1)[-1])

    if from_db:
        _read_db_export(data, database, reader, survey)
    elif survey:
        _survey_text_export(data, output_dir, reader)
    else:
        _read_text_export(data, output_dir, reader)
        _keep_one_capture(data, reader)
    if not survey and data.trace is not None:
        data.trace = with_readback_iterations(data.trace)
    if not survey and data.step_trace is None:
        _steps_from_lanes(data, reader)
    if not survey and data.trace is not None:
        _serving_steps(data, reader, stage)
    if data.device_id is None:
        data.device_id = _first_device_id(data.step_trace, data.kernels)
    return data


def _read_text_export(data: RankData, output_dir: Path, reader: Reader) -> None:
    data.step_trace = reader.read(output_dir / "step_trace_time.csv", _csv(STEP_TRACE_COLUMNS))
    data.kernels = reader.read(output_dir / "kernel_details.csv", _csv(KERNEL_COLUMNS))
    data.op_statistic = reader.read(output_dir / "op_statistic.csv", _csv(OP_STATISTIC_COLUMNS))
    data.communication = reader.read(output_dir / "communication.json", _communication)
    data.matrix = reader.read(output_dir / "communication_matrix.json", _matrix)
    data.memory_record = reader.read(output_dir / "memory_record.csv", _csv(MEMORY_RECORD_COLUMNS))
    data.operator_memory = reader.read(output_dir / "operator_memory.csv", _csv(OPERATOR_MEMORY_COLUMNS))
    data.module_memory = reader.read(output_dir / "npu_module_mem.csv", _csv(MODULE_MEMORY_COLUMNS))
    trace = output_dir / "trace_view.json"
    if not trace.exists() and (output_dir / "trace_view.json.gz").exists():  # compressed to be shipped
        trace = output_dir / "trace_view.json.gz"
        data.sources["trace"] = Provenance(trace)
    data.trace = reader.read(trace, read_trace)
    if data.trace is not None and data.trace.truncation is not None:
        reader.partly_read(trace, data.trace.truncation)


SURVEY_FILES = ("step_trace_time.csv", "communication.json", "communication_matrix.json")


def _survey_text_export(data: RankData, output_dir: Path, reader: Reader) -> None:
    """The cluster-level files of a rank, and the header of its kernel table (which tells the chip)."""
    data.step_trace = reader.read(output_dir / "step_trace_time.csv", _csv(STEP_TRACE_COLUMNS))
    data.communication = reader.read(output_dir / "communication.json", _communication)
    data.matrix = reader.read(output_dir / "communication_matrix.json", _matrix)
    kernels = output_dir / "kernel_details.csv"
    try:  # a regular file only: a FIFO would never end
        data.kernel_header = [h.strip() for h in read_header(kernels)] if kernels.is_file() else None
    except (OSError, FileProblem):
        data.kernel_header = None


def _read_db_export(data: RankData, database: Path, reader: Reader, survey: bool = False) -> None:
    """The DB export: every table from the profiler DB and analysis.db, none from text files."""
    analysis = database.parent / ANALYSIS_DB
    data.export = "db"
    data.sources |= {table: Provenance(database) for table in (
        "kernels", "memory_record", "operator_memory", "module_memory", "trace")}
    data.sources |= {table: Provenance(analysis) for table in ("step_trace", "communication", "matrix")}

    def profiler_tables(path: Path, warnings: list[str]) -> dict[str, Any]:
        with open_db(path) as connection:
            tables = DbTables(connection, warnings)
            if survey:  # only what the cluster-level facts use
                return {"metadata": read_metadata(tables, path), "npu_name": read_npu_name(tables)}
            found = {"metadata": read_metadata(tables, path), "npu_name": read_npu_name(tables),
                     "kernels": read_kernels(tables, path),
                     "memory_record": read_memory_record(tables, path),
                     "operator_memory": read_operator_memory(tables, path),
                     "module_memory": read_module_memory(tables, path), "trace": read_trace_tables(tables)}
        for reason in tables.left_out:  # a table the file's schema lacks columns of: the rest is still read
            reader.partly_read(path, reason)
        return found

    def analysis_tables(path: Path, warnings: list[str]) -> dict[str, Any]:
        with open_db(path) as connection:
            tables = DbTables(connection, warnings)
            found = {"step_trace": read_step_trace(tables, path), "communication": read_communication(tables, warnings),
                     "matrix": read_matrix(tables)}
        for reason in tables.left_out:
            reader.partly_read(path, reason)
        return found

    for found in (reader.read(database, profiler_tables), reader.read(analysis, analysis_tables)):
        for name, table in (found or {}).items():
            if table is not None and not (name == "metadata" and data.metadata):
                setattr(data, name, table)
                if name == "metadata" and table:
                    data.sources["metadata"] = Provenance(database, "META_DATA")
                if name == "npu_name":
                    data.sources["npu_name"] = Provenance(database, "NPU_INFO")
    expected = {"kernels": (database, "TASK, COMPUTE_TASK_INFO"), "memory_record": (database, "MEMORY_RECORD"),
                "trace": (database, "TASK"), "step_trace": (analysis, "StepTraceTime"),
                "communication": (analysis, "CommAnalyzerTime")}
    if survey:
        expected = {name: where for name, where in expected.items() if where[0] == analysis}
    for name, (path, tables) in expected.items():
        if getattr(data, name) is None and path.is_file() and not reader.was_skipped(path):
            reader.coverage.missing.append(f"{display_path(path, reader.base)}[{tables}]")


# The tables of a text export that carry absolute times (µs of local Unix time), and the columns holding them: start
# and, where the table has one, duration.
_TIMED_TABLES = {"kernels": ("start_us", "duration_us"), "memory_record": ("timestamp_us", None),
                 "operator_memory": ("allocation_us", None)}


def _keep_one_capture(data: RankData, reader: Reader) -> None:
    """Leave out a table that another capture wrote: its times do not overlap those of the rank's trace_view.json
    (else of its kernel_details.csv). Files copied together from two runs into one directory would otherwise be
    merged into one rank: a kernel table of another capture gives operators longer than the step. The table is
    skipped with both time ranges in the reason, so the coverage says why."""
    reference_name, reference = None, None
    if data.trace is not None:
        reference_name, reference = "trace", _trace_span(data.trace)
    if reference is None and data.kernels is not None:
        reference_name, reference = "kernels", _table_span(data.kernels, *_TIMED_TABLES["kernels"])
    if reference is None:
        return
    for name, (start, duration) in _TIMED_TABLES.items():
        table = getattr(data, name)
        span = _table_span(table, start, duration) if name != reference_name and table is not None else None
        if span is None or (span[0] <= reference[1] and reference[0] <= span[1]):
            continue
        setattr(data, name, None)
        reader.not_merged(table.path, f"comes from another capture than {reader.shown(data.file(reference_name))}: "
                                      f"its times ({_time_range(span)}) do not overlap that file's "
                                      f"({_time_range(reference)}), so it is not merged with it")


def _trace_span(trace: TraceTables) -> tuple[float, float] | None:
    """The first and last µs of the trace's host events, device tasks and Overlap Analysis lanes (None without any)."""
    frames = [frame for frame in (trace.host, trace.device, trace.overlap) if not frame.empty]
    if not frames:
        return None
    return (min(float(frame["ts"].min()) for frame in frames),
            max(float((frame["ts"] + frame["dur"]).max()) for frame in frames))


def _table_span(table: CsvTable, start: str, duration: str | None) -> tuple[float, float] | None:
    """The first and last µs a table's rows record (None when it has no usable time)."""
    starts = table.values(start)
    if starts is None:
        return None
    starts = np.asarray(starts, dtype="float64")
    ends = starts
    lengths = table.values(duration) if duration is not None else None
    if lengths is not None:
        ends = starts + np.nan_to_num(np.asarray(lengths, dtype="float64"), nan=0.0)
    known = ~np.isnan(starts)
    if not known.any():
        return None
    return float(starts[known].min()), float(ends[known].max())


def _time_range(span: tuple[float, float]) -> str:
    """'2023-11-09 11:33:42.790 – 11:33:43.307 UTC' for a span in µs of Unix time (the date again when it changes)."""
    first, last = (datetime.fromtimestamp(us / 1e6, tz=timezone.utc) for us in span)
    end = last.strftime("%H:%M:%S.%f" if last.date() == first.date() else "%Y-%m-%d %H:%M:%S.%f")[:-3]
    return f"{first.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]} – {end} UTC"


# What a step table rebuilt from the trace's Overlap Analysis lanes is made of (its Provenance), in the text export
# (trace_view.json) and in the DB export (its tables).
LANE_STEPS = ("Overlap Analysis lanes (Computing, Communication, Communication(Not Overlapped), Free) summed per "
              "ProfilerStep#N window; Preparing: the window's start to its first Computing or Communication")
DB_LANE_STEPS = ("OVERLAP_ANALYSIS (COMPUTE, COMMUNICATION, COMM_NOT_OVERLAP_COMP, FREE) summed per ProfilerStep#N "
                 "window of PYTORCH_API; Preparing: the window's start to its first COMPUTE or COMMUNICATION")


def _steps_from_lanes(data: RankData, reader: Reader) -> None:
    """Without a usable step table (step_trace_time.csv, the DB's StepTraceTime), the rank's step breakdown rebuilt from
    the trace's Overlap Analysis lanes, as torch_npu writes step_trace_time.csv, with its provenance and a note."""
    trace = data.trace
    if trace is None or trace.overlap.empty:
        return
    frame = lane_steps(trace)
    if frame.empty:
        return
    missing = reader.shown(data.file("step_trace")) + ("[StepTraceTime]" if data.export == "db" else "")
    trace_file = data.file("trace")
    data.step_trace = CsvTable.of_frame(trace_file, frame)
    data.sources["step_trace"] = Provenance(trace_file, DB_LANE_STEPS if data.export == "db" else LANE_STEPS)
    reader.coverage.warnings.append(f"{missing} is missing; the step breakdown of rank {data.rank} "
                                    f"comes from the Overlap Analysis lanes of {reader.shown(trace_file)}")


SERVING_STEPS = ("the serving iterations (execute_context_… annotations or execute_model events) of the phase the "
                 "breakdown covers; Overlap Analysis lanes summed per iteration")


def _serving_steps(data: RankData, reader: Reader, stage: str | None) -> None:
    """A serving run (iterations marked on the Python lane, no ProfilerStep): its iterations, and a step table of the
    phase the breakdown covers, one row per iteration, in place of step_trace_time's one row for the whole capture."""
    iterations = ascend_iterations(data.trace, stage)
    if iterations is None:
        return
    data.iterations = iterations
    phase = breakdown_phase(iterations)
    steps = lane_steps(data.trace)
    if phase is not None:
        steps = steps.loc[pd.to_numeric(steps["step"], errors="coerce").isin(phase_steps(iterations, phase))]
    captured = iterations.loc[iterations["graph_captures"] > 0, "step"]
    if len(captured) and (~pd.to_numeric(steps["step"], errors="coerce").isin(captured)).any():
        steps = steps.loc[~pd.to_numeric(steps["step"], errors="coerce").isin(captured)]
        reader.coverage.warnings.append(
            f"{reader.shown(data.file('trace'))}: iteration {', '.join(map(str, captured))} captures its graph "
            "(AscendCL@aclmdlRICapture…): a warm-up, left out of the step breakdown")
    if steps.empty:
        return
    trace_file = data.file("trace")
    data.step_trace = CsvTable.of_frame(trace_file, steps.reset_index(drop=True))
    data.sources["step_trace"] = Provenance(trace_file, SERVING_STEPS)
    _kernels_by_iteration(data, iterations)
    _communication_by_iteration(data, iterations, pd.to_numeric(steps["step"], errors="coerce").dropna().astype(int))
    reader.coverage.warnings.append(
        f"{reader.shown(trace_file)}: a serving run of {len(iterations)} iterations: the step breakdown of rank "
        f"{data.rank} covers its {len(steps)} {phase or ''} iteration(s), from the Overlap Analysis lanes; the other "
        "phases are described in the phase facts")


def _kernels_by_iteration(data: RankData, iterations: pd.DataFrame) -> None:
    """Give each kernel_details row the serving iteration it ran in (its Step Id, empty without ProfilerStep), so the
    operator facts count the iterations the breakdown covers — not a prefill's or a graph capture's kernels divided
    by the decode iterations."""
    if data.kernels is None or data.kernels.values("start_us") is None:
        return
    kernels = data.kernels.frame
    if "step" in kernels and pd.to_numeric(kernels["step"], errors="coerce").notna().any():
        return
    data.kernels = CsvTable.of_frame(data.kernels.path, kernels.assign(
        step=window_of(kernels, iterations[["step", "start", "end"]], column="start_us")), data.kernels.header)


def _communication_by_iteration(data: RankData, iterations: pd.DataFrame, covered: pd.Series) -> None:
    """Keep the communication.json ops (and their traffic) of the iterations the breakdown covers, each with its
    iteration as its step: torch_npu writes one "step" for a capture without ProfilerStep, so a serving run's
    collectives would be the prefill's and every decode's summed, divided by the decode iterations."""
    tables = data.communication
    if tables is None:
        return
    ops, traffic = tables.ops, tables.traffic
    if ops.empty or "start_us" not in ops or pd.to_numeric(ops["step"], errors="coerce").notna().any():
        return
    step = window_of(ops, iterations[["step", "start", "end"]], column="start_us")
    kept = step.isin(covered)
    step_of = dict(zip(ops.loc[kept, "op_name"], step[kept].astype(int)))
    traffic = traffic.loc[traffic["op_name"].isin(step_of)]
    data.communication = CommunicationTables.of_frames(
        ops.loc[kept].assign(step=step[kept].astype(int)).reset_index(drop=True),
        traffic.assign(step=traffic["op_name"].map(step_of)).reset_index(drop=True))


def report_progress(shown: str, path: Path) -> None:
    """Tell the run's progress listener (``RunOptions.progress``, if any) which file is being read and how big it is;
    in a forked worker, the parent's listener (through fork_map)."""
    listener = current().progress
    heard = progress_heard()
    if not heard and (listener is None or in_worker()):  # a worker never draws on the terminal itself
        return
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if heard:  # the progress display lives in the main process: the message goes there
        worker_progress((shown, size))
    elif listener is not None:
        listener(shown, size)


class Reader:
    """Runs one file reader, recording the outcome (read, missing, skipped) in the coverage."""

    def __init__(self, base: Path, coverage: Coverage) -> None:
        self.base = base
        self.coverage = coverage

    def shown(self, path: Path) -> str:
        return display_path(path, self.base)

    def was_skipped(self, path: Path) -> bool:
        shown = display_path(path, self.base)
        return any(s.file == shown for s in self.coverage.skipped)

    def not_merged(self, path: Path, reason: str) -> None:
        """A file read whole but left out (it belongs to another capture): skipped, with ``reason``, not read."""
        shown = display_path(path, self.base)
        self.coverage.read = [name for name in self.coverage.read if name != shown]
        self.coverage.skip(shown, reason)

    def partly_read(self, path: Path, reason: str) -> None:
        self.coverage.partly_read.append(SkippedFile(file=display_path(path, self.base), reason=reason))

    def read(self, path: Path, parse: Callable[[Path, list[str]], T]) -> T | None:
        """Parse ``path``; problems that do not stop the parse become coverage warnings naming the file."""
        shown = display_path(path, self.base)
        warnings: list[str] = []
        try:
            if not _check_usable(path):
                self.coverage.missing.append(shown)
                return None
            report_progress(shown, path)
            result = parse(path, warnings)
        except FileProblem as exc:
            self.coverage.skip(shown, str(exc))
            return None
        except PermissionError:
            self.coverage.skip(shown, "cannot be read (permission denied)")
            return None
        except OSError as exc:
            self.coverage.skip(shown, f"cannot be read ({exc.strerror or exc})")
            return None
        self.coverage.read.append(shown)
        self.coverage.warnings.extend(f"{shown}: {w}" for w in warnings)
        return result


def _check_usable(path: Path) -> bool:
    """False when ``path`` is absent; FileProblem when it cannot be parsed (checked before opening it)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise FileProblem(f"is a symbolic link that leads nowhere (to {os.readlink(path)})") from None
        return False
    except OSError as exc:
        if path.is_symlink():
            raise FileProblem(f"is a symbolic link that leads nowhere (to {os.readlink(path)}: {exc.strerror or exc})") from None
        raise FileProblem(f"cannot be read ({exc.strerror or exc})") from None
    if not S_ISREG(stat.st_mode):
        raise FileProblem("is not a regular file")
    check_size(stat.st_size)
    return True


def _csv(columns: tuple[Column, ...]) -> Callable[[Path, list[str]], CsvTable]:
    return lambda path, warnings: read_csv_table(path, columns, warnings)


def _json_object(path: Path, _warnings: list[str]) -> dict[str, Any]:
    return _read_json_object(path)


def _communication(path: Path, warnings: list[str]) -> CommunicationTables:
    return parse_communication(_read_json_object(path, _MAX_COMMUNICATION_BYTES), warnings)


def _matrix(path: Path, warnings: list[str]) -> Columns:
    return parse_matrix(_read_json_object(path, _MAX_COMMUNICATION_BYTES), warnings)


def _read_json_object(path: Path, max_bytes: int = _MAX_JSON_BYTES) -> dict[str, Any]:
    size = path.stat().st_size
    if size > max_bytes:
        raise FileProblem(f"is {size >> 20} MiB, over the {max_bytes >> 20} MiB this file can plausibly have")
    data = path.read_bytes()
    if not data.strip():
        raise FileProblem("is empty")
    try:
        content = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FileProblem(f"is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc
    if not isinstance(content, dict):
        raise FileProblem(f"holds a JSON {type(content).__name__}, expected an object")
    return content


def _device_info_file(rank_dir: Path) -> Path | None:
    candidates = sorted(rank_dir.glob("PROF_*/device_*/info.json.*"))
    return candidates[0] if candidates else None


def _first_device_id(*tables: CsvTable | None) -> int | None:
    """The first Device_id the tables record (read from the form each holds: a survey never builds frames)."""
    for table in tables:
        values = table.values("device_id") if table is not None else None
        present = np.flatnonzero(~pd.isna(values)) if values is not None else []
        if len(present):
            return int(values[present[0]])
    return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
