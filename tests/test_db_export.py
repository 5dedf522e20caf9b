"""The DB export (ascend_pytorch_profiler_{rank}.db + analysis.db) gives the same facts as the text export.

``build_rank_db`` writes the same rank as ``build_rank`` in the DB layout of reference §7 (ns integers,
bytes, STRING_IDS), so every fact but its source file must be equal.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3

import pytest
from builders import EVERY_CATEGORY_CONTEXT, Kernel, RankSpec, StepRow, build_rank, build_rank_db

from advisor.diagnose import diagnose
from advisor.facts import extract_facts
from advisor.ingest import load_profile
from advisor.usercontext import build_context

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
    return {f.id: f.model_dump(exclude={"sources"}) for f in extract_facts(load_profile(path)).facts}


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
    assert profile.ranks[0].kernels is not None and profile.ranks[0].step_trace is None


def test_db_export_metadata_and_user_context_reach_the_facts(tmp_path, rulebook):
    build_rank_db(tmp_path, RankSpec(alloc_conf="expandable_segments:True"))
    context = tmp_path / "model.yaml"
    context.write_text(EVERY_CATEGORY_CONTEXT)
    report = diagnose(tmp_path, rulebook=rulebook, context=build_context([], [], context))
    env = {f["name"]: f["value"] for f in report.facts if f["type"] == "environment"}
    assert env.get("PYTORCH_NPU_ALLOC_CONF") == "expandable_segments:True"
    assert json.loads(json.dumps(report.coverage.model_dump()))["skipped"] == []
