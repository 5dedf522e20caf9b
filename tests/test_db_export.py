"""The DB export (ascend_pytorch_profiler_{rank}.db + analysis.db) gives the same facts as the text export.

``build_rank_db`` writes the same rank as ``build_rank`` in the DB layout of reference §7 (ns integers,
bytes, STRING_IDS), so every fact but its source file must be equal.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from contextlib import closing

import pytest
from builders import EVERY_CATEGORY_CONTEXT, Kernel, RankSpec, StepRow, build_rank, build_rank_db
from conftest import FIXTURES, REAL

from advisor.diagnose import diagnose
from advisor.facts import extract_facts
from advisor.ingest import load_profile
from advisor.runoptions import RunOptions
from advisor.usercontext import build_context

REAL_DB = FIXTURES / "ascend-more" / "db-level1-2ranks"  # the same job family as REAL, exported as DB

SPECS = {
    "default": RankSpec(),
    "host-signals": RankSpec(compiles_per_step=3, syncs_per_step=2, gc_us=400.0, free_us=120.0, optimizer_us=900.0,
                             dataloader_us=4000.0, reserved_drops_per_step=2, alloc_conf="expandable_segments:True"),
    "level0-no-steps": RankSpec(level="Level0", with_step_info=False, block_header="Block Num",
                                steps=[StepRow(None, 1344.32, 1921.46, 85.14, 66.46)],
                                kernels=[Kernel(None, "MatMul_1", "MatMulV3", "AI_CORE", 170.4),
                                         Kernel(None, "hcom_allReduce__1_0_1", "hcom_allReduce_", "COMMUNICATION", 900.0)]),
    "rdma-groups": RankSpec(rank=3, comm_transport="RDMA", comm_transit_share=0.3,
                            groups={"group_name_0": {"group_name": "dp", "global_ranks": [1, 3, 5, 7]}},
                            matrix_links={"0-1": 20.0, "0-2": 21.0, "0-3": 9.5}),
}


def _facts(path) -> dict[str, dict]:
    """Each fact's fields, the file each time range is on left out (trace_view.json against the .db: same clock)."""
    facts = {f.id: f.model_dump(exclude={"sources"}) for f in extract_facts(load_profile(path)).facts}
    for fields in facts.values():
        for stretch in fields.get("ranges", []):
            stretch.pop("file")
    return facts


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("name", SPECS)
def test_text_and_db_exports_give_equal_facts(tmp_path, name):
    build_rank(tmp_path / "text", SPECS[name])
    build_rank_db(tmp_path / "db", SPECS[name])
    text, db = _facts(tmp_path / "text"), _facts(tmp_path / "db")
    assert text.keys() == db.keys()
    different = [f"{fid}.{field}: {text[fid][field]!r} vs {db[fid][field]!r}"
                 for fid in text for field in text[fid] if not _same(text[fid][field], db[fid][field])]
    assert not different, different
    families = {fid.split(":")[0] for fid in db}
    assert {"breakdown", "operator", "communication", "memory", "host"} <= families or name == "level0-no-steps"


def test_db_facts_name_the_db_files_as_their_sources(tmp_path):
    build_rank_db(tmp_path, SPECS["host-signals"])
    facts = extract_facts(load_profile(tmp_path)).facts
    sources = {s.split("[")[0].rsplit("/", 1)[-1] for f in facts for s in f.sources}
    assert {"ascend_pytorch_profiler_0.db", "analysis.db"} <= sources
    assert not sources & {"kernel_details.csv", "trace_view.json", "communication.json", "step_trace_time.csv",
                          "profiler_metadata.json"}
    # the environment variables come from the DB's META_DATA table, and the source says so
    (alloc,) = [f for f in facts if f.family == "environment" and f.name == "PYTORCH_NPU_ALLOC_CONF"]
    assert [s.rsplit("/", 1)[-1] for s in alloc.sources] == ["ascend_pytorch_profiler_0.db[META_DATA: ENV_VARIABLES]"]


def test_a_db_cluster_diagnoses_like_the_text_one(tmp_path, rulebook):
    for rank in (0, 1):
        spec = RankSpec(rank=rank, device_id=rank, rank_id=str(rank),
                        steps=[StepRow(5, 1344.32, 1921.46 * (1 + rank), 85.14, 66.46)] * 1)
        build_rank(tmp_path / "text", spec)
        build_rank_db(tmp_path / "db", spec)
    text, db = diagnose(tmp_path / "text", rulebook=rulebook), diagnose(tmp_path / "db", rulebook=rulebook)
    assert db.status == "complete" and db.input.ranks == [0, 1]
    assert [(f.id, f.key, f.ranks) for f in db.findings] == [(f.id, f.key, f.ranks) for f in text.findings]
    assert db.findings, "the cluster has findings to compare"


def test_a_directory_with_both_exports_reads_the_text_one_only(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec())
    db_dir = build_rank_db(tmp_path / "other", RankSpec())
    for name in ("ascend_pytorch_profiler_0.db", "analysis.db"):
        shutil.copy(db_dir / "ASCEND_PROFILER_OUTPUT" / name, rank_dir / "ASCEND_PROFILER_OUTPUT" / name)
    shutil.rmtree(tmp_path / "other")
    profile = load_profile(tmp_path)
    assert len(profile.ranks) == 1 and profile.ranks[0].export == "text"
    assert not any(r.endswith(".db") for r in profile.coverage.read)


def test_a_broken_db_is_skipped_and_a_missing_table_reported(tmp_path):
    rank_dir = build_rank_db(tmp_path, RankSpec())
    (rank_dir / "ASCEND_PROFILER_OUTPUT" / "analysis.db").write_bytes(b"not a database at all")
    with sqlite3.connect(rank_dir / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db") as db:
        db.execute("DROP TABLE MEMORY_RECORD")
    profile = load_profile(tmp_path)
    (skipped,) = profile.coverage.skipped
    assert skipped.file.endswith("ASCEND_PROFILER_OUTPUT/analysis.db") and skipped.reason == "is not an SQLite database"
    assert any(m.endswith("ascend_pytorch_profiler_0.db[MEMORY_RECORD]") for m in profile.coverage.missing)
    assert profile.ranks[0].kernels is not None
    # without analysis.db's StepTraceTime the steps come from the profiler DB's OVERLAP_ANALYSIS lanes, as it says
    rank = profile.ranks[0]
    assert rank.source("step_trace").file.name == "ascend_pytorch_profiler_0.db"
    assert rank.source("step_trace").content.startswith("OVERLAP_ANALYSIS")
    assert rank.step_trace.values("computing_us").tolist() == [1344.32, 1344.32]
    assert any(w.endswith("analysis.db[StepTraceTime] is missing; the step breakdown of rank 0 comes from the Overlap "
                          "Analysis lanes of localhost_2231054_20251127192733120_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                          "ascend_pytorch_profiler_0.db") for w in profile.coverage.warnings)


def test_db_export_metadata_and_user_context_reach_the_facts(tmp_path, rulebook):
    build_rank_db(tmp_path, RankSpec(alloc_conf="expandable_segments:True"))
    context = tmp_path / "model.yaml"
    context.write_text(EVERY_CATEGORY_CONTEXT)
    report = diagnose(tmp_path, rulebook=rulebook, context=build_context([], [], context))
    env = {f["name"]: f["value"] for f in report.facts if f["type"] == "environment"}
    assert env.get("PYTORCH_NPU_ALLOC_CONF") == "expandable_segments:True"
    assert json.loads(json.dumps(report.coverage.model_dump()))["skipped"] == []


# Number columns the readers use, in the DB file that holds them; the real export declares PYTORCH_API's TEXT.
NUMBER_COLUMNS = [("ascend_pytorch_profiler_3.db", "PYTORCH_API", "startNs"),
                  ("ascend_pytorch_profiler_3.db", "PYTORCH_API", "endNs"),
                  ("ascend_pytorch_profiler_3.db", "TASK", "endNs"),
                  ("ascend_pytorch_profiler_3.db", "CANN_API", "startNs"),
                  ("ascend_pytorch_profiler_3.db", "COMMUNICATION_OP", "startNs"),
                  ("ascend_pytorch_profiler_3.db", "MEMORY_RECORD", "totalReserved"),
                  ("ascend_pytorch_profiler_3.db", "STEP_TIME", "startNs"),
                  ("analysis.db", "StepTraceTime", "computing"),
                  ("analysis.db", "CommAnalyzerTime", "elapse_time"),
                  ("analysis.db", "CommAnalyzerBandwidth", "transit_size"),
                  ("analysis.db", "CommAnalyzerMatrix", "transit_time")]


def _as_text(database, table: str, column: str, values: tuple = ()) -> None:
    """Declare ``table.column`` TEXT and store its numbers as text, as the real export does with PYTORCH_API's times;
    then add a copy of the first row for each of ``values``, holding that value in the column."""
    with closing(sqlite3.connect(database)) as db:
        declared = [(row[1], row[2]) for row in db.execute(f"PRAGMA table_info({table})")]
        db.executescript(
            f"CREATE TABLE retyped({', '.join(f'{n} TEXT' if n == column else f'{n} {t}' for n, t in declared)});"
            f"INSERT INTO retyped SELECT {', '.join(f'CAST({n} AS TEXT)' if n == column else n for n, _ in declared)}"
            f" FROM {table}; DROP TABLE {table}; ALTER TABLE retyped RENAME TO {table};")
        assert db.execute(f"SELECT DISTINCT typeof({column}) FROM {table}").fetchall() == [("text",)]
        for value in values:
            copy = db.execute(f"INSERT INTO {table} SELECT * FROM {table} ORDER BY rowid LIMIT 1").lastrowid
            db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (value, copy))
        db.commit()


@pytest.mark.parametrize(("file", "table", "column"), NUMBER_COLUMNS, ids=[f"{t}.{c}" for _, t, c in NUMBER_COLUMNS])
def test_numbers_stored_as_text_read_as_the_numbers(tmp_path, file, table, column):
    spec = SPECS["rdma-groups"]  # rank 3, with a matrix
    build_rank_db(tmp_path / "ints", spec)
    rank_dir = build_rank_db(tmp_path / "texts", spec)
    _as_text(rank_dir / "ASCEND_PROFILER_OUTPUT" / file, table, column)
    profile = load_profile(tmp_path / "texts")
    assert not profile.coverage.warnings and not profile.coverage.partly_read and not profile.coverage.skipped
    ints, texts = _facts(tmp_path / "ints"), _facts(tmp_path / "texts")
    assert ints.keys() == texts.keys()
    different = [f"{fid}.{field}" for fid in ints for field in ints[fid]
                 if not _same(ints[fid][field], texts[fid][field])]
    assert not different, different


@pytest.mark.parametrize(("file", "table", "column"), NUMBER_COLUMNS, ids=[f"{t}.{c}" for _, t, c in NUMBER_COLUMNS])
def test_text_that_is_not_a_number_is_counted_against_its_table_and_column(tmp_path, rulebook, file, table, column):
    rank_dir = build_rank_db(tmp_path, SPECS["rdma-groups"])
    # rows holding garbage, a number with a tail (CAST would read 12), a NULL (missing, not garbage) and a blob
    _as_text(rank_dir / "ASCEND_PROFILER_OUTPUT" / file, table, column, ("garbage", "12abc", None, b"\x00\x01"))
    report = diagnose(tmp_path, rulebook=rulebook)
    assert report.input.ranks == [3] and report.facts
    shown = f"{rank_dir.name}/ASCEND_PROFILER_OUTPUT/{file}"
    assert f"{shown}: 3 non-numeric value(s) in column {column} of table {table} were treated as missing" \
        in report.coverage.warnings


def test_the_real_db_export_stores_numbers_as_text_and_diagnoses(rulebook):
    """PYTORCH_API declares startNs/endNs TEXT in the real export (torch_npu 2.x, DB schema 1.0.0): it used to stop the
    diagnosis with a TypeError (exit 70)."""
    database = REAL_DB / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
    with closing(sqlite3.connect(f"file:{database}?mode=ro&immutable=1", uri=True)) as db:
        stored = db.execute("SELECT DISTINCT typeof(startNs), typeof(endNs) FROM PYTORCH_API").fetchall()
    assert stored == [("text", "text")]
    report = diagnose(REAL_DB, rulebook=rulebook)
    assert report.status == "complete" and report.input.ranks == [0, 1]
    assert not report.coverage.warnings and not report.coverage.missing and not report.coverage.skipped
    assert report.findings[0].id == "cluster.straggler_outside_capture"


def test_the_real_db_export_agrees_with_the_text_export_of_the_same_job(rulebook):
    """REAL_DB is the DB export of the job REAL exports as text, captured again 28 minutes later: the same step
    (ProfilerStep#50), the same 191 device tasks per rank (187 kernels, 4 AllReduces), the same traffic. What the two
    captures record the same, the two exports must say the same; the rest differs because of what follows:

    * another capture: durations differ by a few percent, and in the DB capture the ranks wait for local rank 6
      rather than 5 (its Notify_Wait tasks, 88 ms of rank 0's, name peer 6);
    * rank 1's profiler DB has no OVERLAP_ANALYSIS table (rank 0's has): its lanes are rebuilt from TASK ⋈
      COMPUTE_TASK_INFO and COMMUNICATION_OP as CANN computes them, so its idle time includes the Preparing stretch
      where its blocking copy and DataLoader sit, and io.blocking_copies is measured on both ranks, as in the text
      export (4.6 ms against 6.6 ms a step while the host waits in the copies: medium in both);
    * in the DB capture the task queue launched the optimizer's ForeachAddList kernels 5 ms after Optimizer.step
      ended, so the launches inside it are backward kernels; the capture's own multi-tensor kernels then say the
      optimizer is foreach (a review found optimizer.unfused_step firing on the DB export only);
    * OP_MEMORY names GE's operators without the ``cann::`` prefix of operator_memory.csv.
    """
    db, text = load_profile(REAL_DB), load_profile(REAL)
    for db_rank, text_rank in zip(db.ranks, text.ranks):
        assert len(db_rank.kernels.frame) == len(text_rank.kernels.frame) == 191
        assert set(db_rank.kernels.frame["step"]) == set(text_rank.kernels.frame["step"]) == {"50"}
    db_facts = {f.id: f for f in extract_facts(db).facts}
    text_facts = {f.id: f for f in extract_facts(text).facts}
    for rank in (0, 1):
        same = ("compile_calls_per_step", "sync_calls_per_step", "item_sync_calls_per_step", "copy_sync_calls_per_step",
                "launch_calls_per_step", "stream_gaps_per_step")
        assert [getattr(db_facts[f"host:r{rank}"], n) for n in same] == [19, 7, 5, 2, 191, 179]
        assert [getattr(text_facts[f"host:r{rank}"], n) for n in same] == [19, 7, 5, 2, 191, 179]
        assert db_facts[f"host:r{rank}"].optimizer_foreach_kernels_per_step == 4  # ForeachAddList ×2, ForeachMulScalar ×2
        assert text_facts[f"host:r{rank}"].optimizer_foreach_kernels_per_step == 4
        db_hccs, text_hccs = db_facts[f"transport:r{rank}:HCCS"], text_facts[f"transport:r{rank}:HCCS"]
        assert (db_hccs.size_mb_per_step, db_hccs.ops_per_step) == (text_hccs.size_mb_per_step, text_hccs.ops_per_step)
        assert db_hccs.size_mb_per_step == pytest.approx(427.596096)  # once per op, not once per packet size
        db_step, text_step = db_facts[f"breakdown:r{rank}"], text_facts[f"breakdown:r{rank}"]
        assert db_step.compute_us == pytest.approx(text_step.compute_us, rel=0.01)
        assert db_step.step_time_us == pytest.approx(text_step.step_time_us, rel=0.05)
        assert db_facts[f"memory:r{rank}"].peak_reserved_mb == text_facts[f"memory:r{rank}"].peak_reserved_mb == 1526.75
        assert db_facts[f"memory:r{rank}"].process_peak_reserved_mb == pytest.approx(
            text_facts[f"memory:r{rank}"].process_peak_reserved_mb, rel=0.01)  # NPU_MEM's app rows
    links = {(f.rank, f.src_rank, f.dst_rank, f.transport, round(f.size_mb_per_step, 6))
             for f in db_facts.values() if f.family == "link"}
    assert links == {(f.rank, f.src_rank, f.dst_rank, f.transport, round(f.size_mb_per_step, 6))
                     for f in text_facts.values() if f.family == "link"}
    waited = [facts["communication:r0:collective"].waited_peer for facts in (db_facts, text_facts)]
    assert waited == [6, 5]  # Notify_Wait tasks, from COMMUNICATION_TASK_INFO in the DB
    db_report, text_report = diagnose(REAL_DB, rulebook=rulebook), diagnose(REAL, rulebook=rulebook)
    top = {f.id for f in text_report.findings[:5]}
    assert {f.id for f in db_report.findings[:5]} == top and db_report.findings[0].id == text_report.findings[0].id
    assert [f.severity for f in text_report.findings if f.id == "io.blocking_copies"] == ["medium"]
    assert [(f.severity, f.ranks) for f in db_report.findings if f.id == "io.blocking_copies"] == [("medium", [0, 1])]
    assert {f.id for f in db_report.findings} == {f.id for f in text_report.findings}
    assert "optimizer.unfused_step" not in {f.id for f in db_report.findings}


def test_without_overlap_analysis_the_lanes_are_rebuilt_from_the_tasks_as_cann_does():
    """Rank 1 of the real DB export has no OVERLAP_ANALYSIS table (nor the depth columns rank 0's PYTORCH_API and
    CANN_API have): its lanes come from TASK ⋈ COMPUTE_TASK_INFO and COMMUNICATION_OP, and agree with its analysis.db
    StepTraceTime, and on rank 0 with the OVERLAP_ANALYSIS table it has."""
    from advisor.ingest.db import DbTables, _overlap, _overlap_of_tasks, open_db

    expected = {0: None, 1: {"Computing": 8915.634, "Communication(Not Overlapped)": 94556.05,
                             "Communication": 98590.19, "Free": 25840.499}}  # rank 1's StepTraceTime
    for rank in (0, 1):
        database = REAL_DB / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db"
        with open_db(database) as connection:
            tables = DbTables(connection, [])
            rebuilt = _overlap_of_tasks(tables).groupby("lane")["dur"].sum().to_dict()
            written = _overlap(tables).groupby("lane")["dur"].sum().to_dict() if rank == 0 else expected[rank]
        assert rebuilt.keys() == written.keys()
        for lane, value in written.items():
            assert rebuilt[lane] == pytest.approx(value, abs=3.0), (rank, lane)
    rank1 = load_profile(REAL_DB).ranks[1]
    assert set(rank1.trace.overlap["lane"]) == {"Computing", "Communication", "Communication(Not Overlapped)", "Free"}


def test_a_db_without_overlap_analysis_gets_lanes_of_its_kernels_and_collectives(tmp_path):
    rank_dir = build_rank_db(tmp_path, RankSpec())
    with closing(sqlite3.connect(rank_dir / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")) as db:
        db.execute("DROP TABLE OVERLAP_ANALYSIS")
        db.commit()
    lanes = load_profile(tmp_path).ranks[0].trace.overlap
    sums = lanes.groupby("lane")["dur"].sum()  # µs of Unix time as floats: each end within 0.25 µs
    # per step (5 and 6): MatMul 170.4, FlashAttention 881.64, RmsNorm 33.06 µs, 5 ms apart, then a 1987.92 µs AllReduce
    assert sums["Computing"] == pytest.approx(2 * (170.4 + 881.64 + 33.06), abs=2.0)
    assert sums["Communication"] == sums["Communication(Not Overlapped)"] == pytest.approx(2 * 1987.92, abs=2.0)
    first, last = lanes["ts"].min(), (lanes["ts"] + lanes["dur"]).max()
    assert sums["Free"] == pytest.approx(last - first - sums["Computing"] - sums["Communication"], abs=0.01)
    assert first == pytest.approx(1764246877000000.0 + 5 * 100_000.0)  # the first kernel of step 5


def test_a_query_that_takes_more_work_than_the_file_can_need_is_stopped_and_its_table_left_out(monkeypatch, rulebook):
    """Per-row work beyond what stored data needs (a computed column the schema check does not know, a hostile
    schema) is bounded: with the budget cut to 50,000 SQLite steps every large query of the real export stops,
    the tables it feeds are left out by name, and the small ones are still read."""
    import advisor.ingest.db as db

    monkeypatch.setattr(db, "_WORK_FLOOR", 50_000)
    monkeypatch.setattr(db, "_WORK_PER_BYTE", 0)
    report = diagnose(REAL_DB, rulebook=rulebook, options=RunOptions(jobs=1))
    assert report.status == "partial"
    stopped = [part for part in report.coverage.partly_read
               if "takes more work to read than 50,000 SQLite steps" in part.reason]
    assert {part.file.rpartition("/")[2] for part in stopped} == {"ascend_pytorch_profiler_0.db",
                                                                  "ascend_pytorch_profiler_1.db"}
    assert any("kernel_details (TASK, COMPUTE_TASK_INFO) left out" in part.reason for part in stopped)
    assert report.input.ranks == [0, 1]


@pytest.mark.parametrize(("name", "read", "chip"), [
    ("Ascend910B", "Ascend910B", "Atlas A2"), ("Ascend910B3", "Ascend910B3", "Atlas A2"),
    ("Ascend910_9392", "Ascend910_9392", "Atlas A3"), ("Ascend310P3", "Ascend310P3", None),
    ("Ascend910B\x1b[31m", None, None), ("Ascend 910B", None, None), ("x" * 70, None, None)])
def test_the_chip_is_read_from_npu_info(tmp_path, name, read, chip):
    """Issue 31 (seed 002, Atlas A3 only): the DB export names its NPU (NPU_INFO; the real export: Ascend910B). Its
    generation answers SuperKernel's A3-only precondition without --context: Atlas A2 leaves superkernel.gate_unknown
    quiet; a name not shaped like one the profiler writes is left out."""
    copy = tmp_path / "rank0_ascend_pt"
    shutil.copytree(REAL_DB / "rank0_ascend_pt", copy)
    with closing(sqlite3.connect(copy / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")) as db, db:
        db.execute("UPDATE NPU_INFO SET name = ?", (name,))
    (context,) = [f for f in extract_facts(load_profile(copy)).facts if f.family == "context"]
    assert (context.npu_name, context.chip) == (read, chip)
    if read is not None:
        assert "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db[NPU_INFO]" in context.sources


def test_the_real_db_export_is_an_eager_atlas_a2_job_with_no_superkernel_finding():
    """The real DB export's TASK rows all carry the single-op modelId 4294967295 and NPU_INFO names an Ascend910B
    (Atlas A2): like its text export, no SuperKernel finding (expert review, 2026-11-28: it had one); preconditions on
    the chip are checked against NPU_INFO."""
    report = diagnose(REAL_DB)
    assert not {f.id for f in report.findings} & {"superkernel.gate_unknown", "superkernel.short_kernels"}
    hosts = [f for f in report.facts if f["type"] == "host"]
    assert hosts and all(h["single_op_kernels_only"] for h in hosts)
    details = {c.detail for f in report.findings for p in f.prescriptions for c in p.preconditions}
    assert "profile: NPU_INFO Ascend910B: Atlas A2" in details


def test_npu_info_without_its_id_column_is_still_read(tmp_path):
    """NPU_INFO's id only orders the devices it lists: a table of names alone gives the name, and the report stays
    complete (review, 2026-11-28: it was left out as partly read)."""
    copy = tmp_path / "rank0_ascend_pt"
    shutil.copytree(REAL_DB / "rank0_ascend_pt", copy)
    with closing(sqlite3.connect(copy / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")) as db, db:
        db.execute("DROP TABLE NPU_INFO")
        db.execute("CREATE TABLE NPU_INFO(name TEXT)")
        db.execute("INSERT INTO NPU_INFO VALUES ('Ascend910_9392')")
    report = diagnose(copy)
    assert report.status == "complete"
    assert [(f["npu_name"], f["chip"]) for f in report.facts if f["type"] == "context"] == [("Ascend910_9392", "Atlas A3")]


@pytest.mark.parametrize("damage", [
    "",  # an export: STRING_IDS lists every name, so the kept rows are read in one pass
    "UPDATE PYTORCH_API SET name = name + 900000 WHERE rowid % 7 = 0; "
    "UPDATE CANN_API SET name = NULL WHERE rowid % 5 = 0",
    "UPDATE TASK_PMU_INFO SET name = CAST(name AS TEXT) WHERE rowid % 3 = 0; "
    "UPDATE COMMUNICATION_TASK_INFO SET taskType = 'Notify_Wait' WHERE rowid % 4 = 0",
    "INSERT INTO STRING_IDS VALUES (-9223372036854775808, 'aten::mm'); "
    "UPDATE PYTORCH_API SET name = -9223372036854775808 WHERE rowid % 10 = 0; "
    "UPDATE PYTORCH_API SET name = NULL WHERE rowid % 10 = 1"])
def test_kept_rows_read_in_one_pass_are_those_that_grouping_the_names_first_reads(tmp_path, monkeypatch, damage):
    """Issue 30 (fourth pass): the host events, runtime calls, PMU ratios and Notify_Wait tasks read in the pass that
    looks for names STRING_IDS does not list give the tables and warnings of grouping those names first, on the real
    rank and with unlisted names (an id STRING_IDS lacks, NULL, text, and the id the one pass reads a non-id as)."""
    import pandas as pd

    from advisor.ingest.db import DbTables

    copy = tmp_path / "rank0_ascend_pt"
    shutil.copytree(REAL_DB / "rank0_ascend_pt", copy)
    with closing(sqlite3.connect(copy / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")) as db, db:
        db.executescript(damage)
    one_pass = load_profile(copy)
    monkeypatch.setattr(DbTables, "kept_rows", lambda *_args: None)
    grouped = load_profile(copy)
    assert one_pass.coverage == grouped.coverage
    (read,), (expected,) = one_pass.ranks, grouped.ranks
    pd.testing.assert_frame_equal(read.kernels.frame, expected.kernels.frame, check_exact=True)
    for part in ("host", "apis", "device", "overlap", "launches", "notify"):
        pd.testing.assert_frame_equal(getattr(read.trace, part), getattr(expected.trace, part), check_exact=True)
