"""Ingest: discovery of rank directories and tolerant reading of the real-world file variants."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from builders import RankSpec, StepRow, build_rank, skipped_reason
from conftest import FIXTURES, REAL, SAMPLE_CLUSTER, SAMPLE_SINGLE

from advisor.errors import InputError
from advisor.ingest import load_profile


def test_real_cluster_finds_both_ranks_and_reads_every_file():
    profile = load_profile(REAL)
    assert [r.rank for r in profile.ranks] == [0, 1]
    assert profile.coverage.skipped == [] and profile.coverage.missing == []
    assert "rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv" in profile.coverage.read


def test_real_kernel_details_survive_tabs_quotes_crlf_and_na():
    raw = (REAL / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv").read_bytes()
    assert b"\t," in raw and b"\r\n" in raw and b'"""' in raw and b"N/A" in raw  # the quirks are really there
    kernels = load_profile(REAL / "rank0_ascend_pt").ranks[0].kernels.frame
    with open(REAL / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(kernels) == len(rows)
    assert kernels["duration_us"].sum() == pytest.approx(sum(float(r["Duration(us)"]) for r in rows))
    assert kernels["step"].dropna().unique().tolist() == ["50"]
    hccl = kernels[kernels["accelerator_core"] == "HCCL"]
    assert len(hccl) > 0 and hccl["name"].str.startswith("hcom_").all()


@pytest.mark.parametrize("path", [SAMPLE_SINGLE, SAMPLE_SINGLE / "ASCEND_PROFILER_OUTPUT"])
def test_single_rank_from_rank_dir_or_output_dir(path):
    profile = load_profile(path)
    assert [(r.rank, r.device_id) for r in profile.ranks] == [(0, 0)]
    assert profile.ranks[0].device_info["DeviceInfo"][0]["ai_core_num"] == 20
    assert all(not p.startswith("/") for p in profile.coverage.read)


def test_cluster_sample_ranks_from_info_file_names():
    profile = load_profile(SAMPLE_CLUSTER)
    assert [(r.rank, r.device_id) for r in profile.ranks] == [(0, 0), (1, 1)]


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"crlf": False},
        {"bom": True},
        {"trailing_tab": False},
        {"device_id_column": False},
        {"block_header": "Block Num"},
        {"comm_core": "HCCL"},
        {"rank_id": 0},
        {"rank_id": "0", "info_name": "profiler_info.json"},
    ],
    ids=lambda v: ",".join(f"{k}={v[k]}" for k in v) or "newest-format",
)
def test_format_variants_read_the_same(tmp_path, variant):
    build_rank(tmp_path, RankSpec(**variant))
    rank = load_profile(tmp_path).ranks[0]
    assert rank.rank == 0
    assert rank.step_trace.frame["computing_us"].tolist() == [1344.32, 1344.32]
    kernels = rank.kernels.frame
    assert kernels["duration_us"].sum() == pytest.approx(2 * (170.4 + 881.64 + 33.06 + 1987.92))
    assert set(kernels["accelerator_core"]) == {"AI_CORE", "MIX_AIC", "AI_VECTOR_CORE", variant.get("comm_core", "COMMUNICATION")}
    assert rank.op_statistic.frame["total_us"].sum() == pytest.approx(2 * (170.4 + 881.64 + 33.06))


def test_missing_files_are_recorded_not_fatal(tmp_path):
    build_rank(tmp_path, RankSpec(omit=("op_statistic.csv", "profiler_metadata.json")))
    profile = load_profile(tmp_path)
    assert sorted(Path(m).name for m in profile.coverage.missing) == [  # the builder writes no operator/module memory
        "communication_matrix.json", "npu_module_mem.csv", "op_statistic.csv", "operator_memory.csv",
        "profiler_metadata.json"]
    assert profile.ranks[0].op_statistic is None and profile.ranks[0].kernels is not None


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "is empty"),
        (b"Step,Computing\r\n5,1.0\r\n", "lacks the column(s) 'Communication(Not Overlapped)', 'Free'"),
        (b"\x00\x01\x02binary", "is binary"),
        (b"Step,Comput\xe9,Communication(Not Overlapped),Free\n5,1,2,3\n", "header is not UTF-8 text (byte 11)"),
    ],
)
def test_broken_csv_is_skipped_with_its_reason(tmp_path, content, reason):
    file, why = skipped_reason(tmp_path, "ASCEND_PROFILER_OUTPUT/step_trace_time.csv", content)
    assert file.endswith("ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
    assert reason in why
    assert load_profile(tmp_path).ranks[0].kernels is not None  # the rest is still read


def test_values_that_are_not_utf8_are_kept_with_replacement_characters(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec())
    path = rank_dir / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    path.write_bytes(path.read_bytes().replace(b"RmsNorm", b"RmsNorm\xe9", 1))
    profile = load_profile(tmp_path)
    names = profile.ranks[0].kernels.frame["name"].tolist()
    assert "RmsNorm\ufffd" in names and len(names) == len(RankSpec().kernels)
    assert any("1 value(s) in column 'Name' are not UTF-8 text" in w for w in profile.coverage.warnings)


def test_ragged_rows_and_non_numbers_become_warnings(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec())
    path = rank_dir / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"
    path.write_text(
        "Step,Computing,Communication(Not Overlapped),Free\n5,10,20,30\n6,1,2\n7,abc,2,3\n8,inf,1,1\n"
    )
    profile = load_profile(tmp_path)
    frame = profile.ranks[0].step_trace.frame
    assert frame["step"].tolist() == ["5", "7", "8"]
    assert frame["computing_us"].isna().tolist() == [False, True, True]
    warnings = " ".join(profile.coverage.warnings)
    assert "1 row(s) with the wrong number of fields" in warnings
    assert "non-numeric value(s) in column 'Computing'" in warnings
    assert "infinite value(s) in column 'Computing'" in warnings


def test_a_directory_where_a_file_should_be(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec(omit=("kernel_details.csv",)))
    (rank_dir / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").mkdir()
    (skipped,) = load_profile(tmp_path).coverage.skipped
    assert skipped.reason == "is not a regular file"


def test_duplicate_rank_keeps_the_newest_directory(tmp_path):
    build_rank(tmp_path, RankSpec(dir_name="host_1_20250101000000000_ascend_pt"))
    build_rank(tmp_path, RankSpec(dir_name="host_2_20250102000000000_ascend_pt", steps=[StepRow(9, 1.0, 2.0, 3.0)]))
    profile = load_profile(tmp_path)
    assert [r.path.name for r in profile.ranks] == ["host_2_20250102000000000_ascend_pt"]
    # captured a day apart: two runs, not one cluster; the newest is diagnosed and the warning says so
    assert any("holds 2 separate runs" in w and "Diagnosing the newest, run 2" in w for w in profile.coverage.warnings)


def test_directories_without_rank_ids_are_numbered(tmp_path):
    for index in range(2):
        build_rank(tmp_path, RankSpec(rank_id=None, info_name="profiler_info.json", dir_name=f"w{index}_1_2_ascend_pt"))
    profile = load_profile(tmp_path)
    assert [r.rank for r in profile.ranks] == [0, 1]
    assert sum("no rank id recorded" in w for w in profile.coverage.warnings) == 2


def test_nested_cluster_layout_is_found(tmp_path):
    build_rank(tmp_path / "node0", RankSpec(rank=0))
    build_rank(tmp_path / "node1", RankSpec(rank=8, rank_id="8"))
    assert [r.rank for r in load_profile(tmp_path).ranks] == [0, 8]


def test_symlink_loop_does_not_hang(tmp_path):
    build_rank(tmp_path / "jobs", RankSpec())
    (tmp_path / "jobs" / "loop").symlink_to(tmp_path / "jobs")
    assert len(load_profile(tmp_path).ranks) == 1


def _file(path: Path) -> Path:
    path.write_text("{}")
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "absent", "no such file or directory"),
        (lambda p: _file(p / "f.json"), r"f.json: is not a PyTorch profiler trace \(an empty JSON object\)"),
        (lambda p: p, "is empty"),
    ],
)
def test_paths_that_are_not_profiles(tmp_path, make, message):
    with pytest.raises(InputError, match=message):
        load_profile(make(tmp_path))


@pytest.mark.parametrize("name", ["ASCEND_PROFILER_OUTPUT/trace_view.json", "ASCEND_PROFILER_OUTPUT/kernel_details.csv"])
def test_a_file_of_a_rank_is_read_as_its_rank_and_says_so(name):
    """Seed 003, msprof-analyze's -d: a trace_view.json may be given instead of its directory. Before: refused with exit
    2 ('is a file; advisor reads …')."""
    from advisor.render.messages import localised

    path = REAL / "rank0_ascend_pt" / name
    profile = load_profile(path)
    assert [r.rank for r in profile.ranks] == [0] and profile.ranks[0].kernels is not None
    (warning,) = [w for w in profile.coverage.warnings if "is one file of the rank" in w]
    assert warning.startswith(f"{path}: is one file of the rank {path.parent}; the rank is read whole")
    assert "是 rank" in localised(warning, "zh") and "read whole" not in localised(warning, "zh")


def test_a_trace_view_json_away_from_its_rank_is_named_as_what_it_is(tmp_path):
    """Review: a trace_view.json copied out of ASCEND_PROFILER_OUTPUT was read as a legacy PyTorch trace and told to
    'Record GPU activity'."""
    lone = tmp_path / "trace_view.json"
    shutil.copy(REAL / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", lone)
    with pytest.raises(InputError, match=r"trace_view.json: is the Ascend profiler's trace_view.json \(it has an Ascend "
                                         r"Hardware process\) outside its ASCEND_PROFILER_OUTPUT directory"):
        load_profile(lone)


def test_a_device_tasks_model_id_of_any_type_or_size_keeps_the_task(tmp_path):
    """A device task's args 'Model Id' (the single-op 4294967295 on the real Level0 capture) is read as a plain integer;
    true, an array, 1e400 or text leave it unknown and keep the task — they must not make its args unreadable."""
    from advisor.ingest.trace import read_trace

    source = FIXTURES / "ascend-more" / "text-level0-2ranks" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    text = source.read_text()
    for odd in ('"Model Id": true,', '"Model Id": [4294967295],', '"Model Id": 1e400,', '"Model Id": "x",'):
        text = text.replace('"Model Id": 4294967295,', odd, 1)
    (tmp_path / "trace_view.json").write_text(text)
    warnings: list[str] = []
    device = read_trace(tmp_path / "trace_view.json", warnings).device
    assert len(device) == 533 and not warnings
    assert device["model_id"].isna().sum() == 4 and (device["model_id"].dropna() == 4294967295).all()
