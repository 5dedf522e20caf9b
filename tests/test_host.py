"""Host-side facts from trace_view.json: compilation, synchronisation, launches, data loading, GC."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from builders import RankSpec, build_rank, skipped_reason
from conftest import REAL, SAMPLE_SINGLE

import advisor
from advisor.facts import DataLoaderFact, HostFact, extract_facts
from advisor.ingest import load_profile

TRACE = "ASCEND_PROFILER_OUTPUT/trace_view.json"


def test_real_host_facts_match_an_independent_count_of_the_trace():
    events = json.loads((REAL / "rank0_ascend_pt" / TRACE).read_text())
    (step,) = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    start, end = float(step["ts"]), float(step["ts"]) + step["dur"]

    def in_step(name: str) -> list[dict]:
        return [e for e in events if e.get("ph") == "X" and e.get("name") == name and start <= float(e["ts"]) <= end]

    (host,) = extract_facts(load_profile(REAL / "rank0_ascend_pt")).of(HostFact)
    compiles = in_step("AscendCL@opCompile")  # the compilation inside each aclopCompileAndExecute
    assert host.compile_calls_per_step == len(compiles) == len(in_step("AscendCL@aclopCompileAndExecute")) == 19
    assert host.compile_us_per_step == pytest.approx(sum(e["dur"] for e in compiles))
    launches = in_step("Node@launch")
    assert host.launch_calls_per_step == len(launches)
    assert host.launch_us_mean == pytest.approx(sum(e["dur"] for e in launches) / len(launches))
    syncs = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("AscendCL@aclrtSynchronize")
             and start <= float(e["ts"]) <= end]
    assert host.sync_calls_per_step == len(syncs) == 7
    assert host.sources == ["rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json[CANN, Python, Ascend Hardware, HostToDevice]",
                            "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv[Model ID]"]  # single_op_kernels_only


def test_real_dataloader_counts_only_outermost_events():
    (loader,) = extract_facts(load_profile(REAL / "rank0_ascend_pt")).of(DataLoaderFact)
    events = json.loads((REAL / "rank0_ascend_pt" / TRACE).read_text())
    (step,) = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    start, end = float(step["ts"]), float(step["ts"]) + step["dur"]
    spans = sorted((float(e["ts"]), float(e["ts"]) + e["dur"]) for e in events
                   if e.get("ph") == "X" and "dataloader" in e.get("name", "").lower() and start <= float(e["ts"]) <= end)
    outer = [s for s in spans if not any(o[0] <= s[0] and s[1] <= o[1] and o != s for o in spans)]
    assert len(spans) > len(outer)  # the python_function frames inside __next__ exist …
    assert loader.calls_per_step == len(outer)  # … and are not counted again
    assert loader.us_per_step == pytest.approx(sum(b - a for a, b in outer), abs=0.5)  # µs timestamps as floats
    assert loader.iterator == "multi-process"


@pytest.mark.parametrize(
    ("spec", "finding", "text"),
    [
        (RankSpec(compiles_per_step=3, steps=None), "host.online_compilation", "3 operator compilation(s) per step"),
        (RankSpec(syncs_per_step=5), "host.synchronisation", "synchronises with the device 5 times per step"),
        (RankSpec(dataloader_us=30000.0, steps=None), "io.slow_dataloader", "takes 30,000 µs"),
        (RankSpec(gc_us=900.0), "host.gc_pauses", "1.0 GC pause(s) per step take 900 µs"),
    ],
    ids=["compile", "sync", "dataloader", "gc"],
)
def test_injected_host_signals_are_measured_and_diagnosed(tmp_path, spec, finding, text):
    if spec.steps is None:  # a slow loader or a compilation needs idle device time to hide in
        from builders import StepRow
        spec.steps = [StepRow(5, 1344.32, 300.0, 40000.0), StepRow(6, 1344.32, 300.0, 40000.0)]
    build_rank(tmp_path, spec)
    report = advisor.diagnose(tmp_path)
    matched = [f for f in report.findings if f.id == finding]
    assert matched, [f.id for f in report.findings]
    assert text in matched[0].explanation


def test_quiet_host_on_the_synthetic_sample():
    ids = {f.id for f in advisor.diagnose(SAMPLE_SINGLE).findings}
    assert not ids & {"host.online_compilation", "host.synchronisation", "io.slow_dataloader", "host.gc_pauses"}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "is empty"),
        (b"[{\"ph\": \"X\"", "is not a valid JSON array of events"),
        (b"{\"traceEvents\": []}", "is not a JSON array of events (the file holds an object)"),
        (b"   \n ", "is empty"),
        (b"[{\"ph\": \"X\", \"name\": \"a\", \"ts\": \"1\", \"dur\": 1}]", "has no process_name metadata"),
    ],
)
def test_unusable_trace_is_skipped(tmp_path, content, reason):
    file, why = skipped_reason(tmp_path, TRACE, content)
    assert file.endswith("trace_view.json") and reason in why


def test_events_of_unexpected_types_are_dropped_one_by_one(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec(compiles_per_step=2))
    events = json.loads((rank_dir / TRACE).read_text())
    events.append({"ph": "X", "name": {"not": "a string"}, "pid": 1, "ts": "1", "dur": 1})
    events.append({"ph": "X", "name": "AscendCL@x", "pid": [1], "ts": "1", "dur": 1})
    (rank_dir / TRACE).write_text(json.dumps(events))
    profile = load_profile(tmp_path)
    assert any("2 event(s) with fields of unexpected types were ignored" in w for w in profile.coverage.warnings)
    (host,) = extract_facts(profile).of(HostFact)
    assert host.compile_calls_per_step == 2


def test_block_reading_gives_the_same_tables_as_one_read(tmp_path, monkeypatch):
    """Events whose strings contain "}, {" and blocks far smaller than one event must not change anything."""
    from advisor.ingest import jsonstream, trace

    rank_dir = build_rank(tmp_path, RankSpec(compiles_per_step=2, syncs_per_step=3))
    events = json.loads((rank_dir / TRACE).read_text())
    events.insert(5, {"ph": "X", "name": 'odd"}, {"name' + "x" * 3000, "pid": 1, "tid": 1, "ts": "1", "dur": 1})
    events.insert(9, {"ph": "C", "name": "}, {", "pid": 1, "ts": "2", "args": {"v": "},{" * 50}})
    (rank_dir / TRACE).write_text(json.dumps(events))
    whole = trace.read_trace(rank_dir / TRACE, [])
    monkeypatch.setattr(jsonstream, "BLOCK_BYTES", 700)
    monkeypatch.setattr(jsonstream, "TAIL_BYTES", 50)
    blocked = trace.read_trace(rank_dir / TRACE, [])
    for table in ("host", "apis", "device", "overlap", "launches"):
        assert getattr(blocked, table).equals(getattr(whole, table)), table
    assert len(whole.apis) == 2 * (2 * 2 + 3) + 2 * 4  # compile calls and their opCompile + syncs + one launch per kernel, 2 steps


def test_a_badly_typed_event_before_a_block_cut_inside_a_string_reads_like_one_read(tmp_path, monkeypatch):
    """The decoder reports a field type before it reaches the block's end: the cut must still be checked."""
    from advisor.ingest import jsonstream, trace

    rank_dir = build_rank(tmp_path, RankSpec(compiles_per_step=2))
    events = json.loads((rank_dir / TRACE).read_text())
    events.insert(3, {"ph": "X", "name": "AscendCL@x", "pid": [1], "ts": "1", "dur": 1})
    events.insert(6, {"ph": "X", "name": 'odd"}, {"name' * 300, "pid": 1, "tid": 1, "ts": "1", "dur": 1})
    (rank_dir / TRACE).write_text(json.dumps(events))
    warnings: list[str] = []
    whole = trace.read_trace(rank_dir / TRACE, warnings)
    for block in range(900, 6000, 211):  # block ends walk through the long string
        monkeypatch.setattr(jsonstream, "BLOCK_BYTES", block)
        blocked_warnings: list[str] = []
        blocked = trace.read_trace(rank_dir / TRACE, blocked_warnings)
        assert blocked_warnings == warnings and "1 event(s) with fields of unexpected types" in warnings[0]
        for table in ("host", "apis", "device", "overlap", "launches"):
            assert getattr(blocked, table).equals(getattr(whole, table)), (block, table)


@pytest.mark.parametrize("jobs", [2, 3])
def test_reading_in_pieces_on_several_cores_gives_the_same_tables(tmp_path, monkeypatch, jobs):
    """Every split point, including ones inside strings holding "}, {", gives what one sequential read gives."""
    from advisor.ingest import pieces as pieces_module
    from advisor.ingest import trace

    rank_dir = build_rank(tmp_path, RankSpec(compiles_per_step=2, syncs_per_step=3))
    events = json.loads((rank_dir / TRACE).read_text())
    for at in range(5, len(events) * 2, 8):
        events.insert(at, {"ph": "X", "name": 'odd"}, {"name' * 20, "pid": 1, "tid": 1, "ts": "1", "dur": 1})
    data = json.dumps(events).encode()
    (rank_dir / TRACE).write_bytes(data)
    whole = trace.read_trace(rank_dir / TRACE, [])
    monkeypatch.setenv("ADVISOR_JOBS", str(jobs))
    monkeypatch.setattr(pieces_module, "PIECE_BYTES", 1000)
    used = []
    for pad in range(0, 6000, 149):  # spaces after '[' move the split points across many events
        (rank_dir / TRACE).write_bytes(b"[" + b" " * pad + data[1:])
        used.append(trace._read_in_pieces(rank_dir / TRACE) is not None)
        pieces = trace.read_trace(rank_dir / TRACE, [])
        for table in ("host", "apis", "device", "overlap", "launches"):
            assert getattr(pieces, table).equals(getattr(whole, table)), (pad, table)
    assert any(used) and not all(used)  # most splits read in pieces; those inside a string fall back


def test_a_cut_trace_read_in_pieces_reports_the_cut_like_one_read(tmp_path, monkeypatch):
    from advisor.ingest import pieces as pieces_module
    from advisor.ingest import trace

    rank_dir = build_rank(tmp_path, RankSpec(compiles_per_step=2))
    data = (rank_dir / TRACE).read_bytes()
    (rank_dir / TRACE).write_bytes(data[: len(data) * 9 // 10])
    whole = trace.read_trace(rank_dir / TRACE, [])
    monkeypatch.setenv("ADVISOR_JOBS", "2")
    monkeypatch.setattr(pieces_module, "PIECE_BYTES", 1000)
    assert trace._read_in_pieces(rank_dir / TRACE) is None
    pieces = trace.read_trace(rank_dir / TRACE, [])
    assert pieces.truncation == whole.truncation and "truncated at byte" in pieces.truncation
    assert pieces.device.equals(whole.device)


def test_framework_op_calls_per_step_from_the_real_trace():
    from advisor.facts import extract_facts
    from advisor.facts.models import ApiFact
    from advisor.ingest import load_profile

    calls = {f.name: f for f in extract_facts(load_profile(REAL / "rank0_ascend_pt")).of(ApiFact)}
    assert calls["aten::item"].calls_per_step == 27 and calls["aten::_local_scalar_dense"].calls_per_step == 27
    assert all(name.startswith("aten::") for name in calls)


def test_frees_of_device_memory_per_step(tmp_path):
    from builders import RankSpec, build_rank

    from advisor.facts import extract_facts
    from advisor.facts.models import HostFact
    from advisor.ingest import load_profile

    from builders import StepRow

    # 13 ms of each step free (the lane starts with the DataLoader's 500 µs); aclrtFree runs 12 ms inside it
    steps = [StepRow(step, 1344.32, 1921.46, 13000.0, 66.46) for step in (5, 6)]
    build_rank(tmp_path, RankSpec(free_us=12000.0, steps=steps))
    (host,) = extract_facts(load_profile(tmp_path)).of(HostFact)
    assert (host.free_calls_per_step, host.free_us_per_step) == (1.0, 12000.0)
    report = advisor.diagnose(tmp_path)
    (finding,) = [f for f in report.findings if f.id == "memory.free_calls"]
    assert finding.estimated_gain_us == pytest.approx(12000.0) and finding.gain_basis == "measured"

    # with the device busy while the host frees (1 % of the device span free), only the call's first ms costs
    # anything: it starts 1 ms before the step's first device task, while the host prepares the step
    build_rank(tmp_path / "busy", RankSpec(free_us=12000.0))
    (finding,) = [f for f in advisor.diagnose(tmp_path / "busy").findings if f.id == "memory.free_calls"]
    assert 900.0 < finding.estimated_gain_us <= 1000.0


def _host(tmp_path, spec: RankSpec) -> HostFact:
    build_rank(tmp_path, spec)
    (host,) = extract_facts(load_profile(tmp_path)).of(HostFact)
    return host


def test_gaps_on_the_compute_stream_and_between_runtime_calls_stay_inside_each_step(tmp_path):
    # per step: MatMul at +0 (170.4 µs), FlashAttention at +5000 (881.64), RmsNorm at +10000, the allreduce at
    # +15000 on the same stream but not compute; launches 80 µs before each task, 12 µs long, one sync before them
    host = _host(tmp_path, RankSpec())
    # (timestamps near 1.76e15 µs resolve to 0.25 µs, hence the 1 µs tolerance)
    assert host.stream_gap_us_per_step == pytest.approx((5000 - 170.4) + (10000 - 5000 - 881.64), abs=1)
    assert host.stream_gap_max_us == pytest.approx(4829.6, abs=1) and host.stream_gaps_per_step == 2
    assert host.host_gap_us_per_step == pytest.approx(3 * (5000 - 12), abs=1)  # the 870 µs before the first launch is short
    assert host.host_gap_max_us == pytest.approx(4988, abs=1)


def test_kernels_launched_inside_optimizer_step_are_counted_with_their_device_time(tmp_path):
    host = _host(tmp_path, RankSpec(optimizer_us=2000.0))  # the region covers the first launch of each step
    assert host.optimizer_kernels_per_step == 1 and host.optimizer_kernel_us_per_step == pytest.approx(170.4, abs=0.5)
    assert _host(tmp_path / "none", RankSpec()).optimizer_kernels_per_step is None


def test_real_optimizer_step_launches_dozens_of_kernels():
    hosts = {h.rank: h for h in extract_facts(load_profile(REAL)).of(HostFact)}
    assert hosts[0].optimizer_kernels_per_step == 58 and hosts[1].optimizer_kernels_per_step == 84
    assert 4000 < hosts[0].optimizer_kernel_us_per_step < 4400


def test_synchronisations_are_told_apart_by_what_made_them():
    from advisor.facts.platforms import ASCEND_RUNTIME
    from advisor.facts.host import sync_calls

    apis = pd.DataFrame({"name": ["AscendCL@aclrtSynchronizeStream", "AscendCL@aclrtFree", "AscendCL@aclrtSynchronizeDevice",
                                  "AscendCL@aclrtSynchronizeStream"],
                         "tid": 1, "ts": [100.0, 200.0, 210.0, 400.0], "dur": [50.0, 100.0, 20.0, 30.0]})
    # the first sync is inside a .item() read, the second inside the allocator's aclrtFree, the third the program's own
    host = pd.DataFrame({"name": ["aten::item", "aten::_local_scalar_dense"], "cat": "cpu_op", "tid": 1,
                         "ts": [90.0, 95.0], "dur": [70.0, 60.0]})
    program, items, copies, allocator = sync_calls(apis, host, ASCEND_RUNTIME)
    assert list(program["ts"]) == [100.0, 400.0] and list(items["ts"]) == [100.0] and list(allocator["ts"]) == [210.0]
    assert copies.empty
    # a synchronisation inside aten::_to_copy (a .to() of a pageable batch) is a blocking copy's
    copy_op = pd.DataFrame({"name": ["aten::_to_copy"], "cat": "cpu_op", "tid": 1, "ts": [390.0], "dur": [50.0]})
    program, items, copies, allocator = sync_calls(apis, pd.concat([host, copy_op]), ASCEND_RUNTIME)
    assert list(copies["ts"]) == [400.0] and list(items["ts"]) == [100.0] and list(program["ts"]) == [100.0, 400.0]
