"""Communication facts from communication.json, checked against the file's own numbers."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from builders import RankSpec, build_rank, skipped_reason
from conftest import REAL, SAMPLE_CLUSTER

import advisor
from advisor.facts import CommunicationFact, TransportFact, extract_facts
from advisor.ingest import load_profile
from advisor.ingest.communication import parse_communication
from advisor.ingest.model import FileProblem


def _file(rank_dir) -> dict:
    return json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT/communication.json").read_text())


@pytest.mark.parametrize("root", [REAL, SAMPLE_CLUSTER], ids=["real", "sample"])
def test_collective_times_add_up_to_the_files_own_totals(root):
    facts = {f.rank: f for f in extract_facts(load_profile(root)).of(CommunicationFact)}
    for rank, rank_dir in enumerate(sorted(p.parent.parent for p in root.rglob("ASCEND_PROFILER_OUTPUT/communication.json"))):
        document = _file(rank_dir)
        steps = len(document)
        totals = {"elapse": 0.0, "transit": 0.0, "wait": 0.0, "idle": 0.0}
        for step in document.values():
            total = step["collective"]["Total Op Info"]["Communication Time Info"]  # CANN/torch_npu's own sum
            for name in totals:
                totals[name] += total[f"{name.capitalize()} Time(ms)"]
        fact = facts[rank]
        assert fact.kind == "collective"
        assert fact.elapse_us == pytest.approx(totals["elapse"] * 1000 / steps)
        assert fact.transit_us == pytest.approx(totals["transit"] * 1000 / steps)
        assert fact.wait_us == pytest.approx(totals["wait"] * 1000 / steps)
        assert fact.idle_us == pytest.approx(totals["idle"] * 1000 / steps)
        assert fact.transit_share + fact.wait_share + fact.idle_share == pytest.approx(1.0, abs=1e-6)


def test_real_job_collectives_mostly_wait_and_hccs_runs_at_15_6_gbps():
    facts = extract_facts(load_profile(REAL / "rank0_ascend_pt"))
    (collective,) = facts.of(CommunicationFact)
    assert collective.transit_share == pytest.approx(0.0348, abs=1e-3)
    assert collective.idle_share == pytest.approx(0.909, abs=1e-3)
    (hccs,) = facts.of(TransportFact)  # SDMA (= HCCS here) is not counted twice
    total = _file(REAL / "rank0_ascend_pt")["step50"]["collective"]["Total Op Info"]["Communication Bandwidth Info"]["HCCS"]
    assert hccs.size_mb_per_step == pytest.approx(total["Transit Size(MB)"])
    assert hccs.bandwidth_gbps == pytest.approx(total["Transit Size(MB)"] / total["Transit Time(ms)"])
    assert (hccs.nominal_gbps, round(hccs.utilization, 3)) == (28.0, round(hccs.bandwidth_gbps / 28, 3))
    assert hccs.sources == ["rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json[Communication Bandwidth Info]"]


def test_flat_command_line_layout_and_p2p_ops():
    op = {"Communication Time Info": {"Elapse Time(ms)": 2.0, "Transit Time(ms)": 1.0, "Wait Time(ms)": 0.5,
                                      "Synchronization Time(ms)": 0.1, "Idle Time(ms)": 0.5},
          "Communication Bandwidth Info": {"RDMA": {"Transit Size(MB)": 0.5, "Transit Time(ms)": 1.0}}}
    tables = parse_communication({"hcom_send__1_0_1@9": op, "hcom_allGather__1_1_1@9": op, "total": {}}, [])
    assert sorted(tables.ops["kind"]) == ["collective", "p2p"]
    assert tables.ops["step"].isna().all()
    assert set(tables.traffic["transport"]) == {"RDMA"}


def test_ops_without_time_info_are_counted_and_an_empty_file_is_refused():
    warnings: list[str] = []
    good = {"Communication Time Info": {"Elapse Time(ms)": 1.0, "Transit Time(ms)": 1.0, "Wait Time(ms)": 0,
                                        "Synchronization Time(ms)": 0, "Idle Time(ms)": 0}}
    parse_communication({"step1": {"collective": {"a@1": good, "b@1": {"x": 1}, "c@1": {"Communication Time Info": {}}}}}, warnings)
    assert warnings == ["2 communication op(s) without usable time info were ignored"]
    with pytest.raises(FileProblem, match="holds no communication op"):
        parse_communication({"step1": {"collective": {}, "p2p": {}}}, [])


@pytest.mark.parametrize(("content", "reason"), [(b"", "is empty"), (b"[1,2]", "holds a JSON list"), (b"{\"step1\": ", "is not valid JSON")])
def test_broken_communication_file_is_skipped(tmp_path, content, reason):
    file, why = skipped_reason(tmp_path, "ASCEND_PROFILER_OUTPUT/communication.json", content)
    assert file.endswith("communication.json") and reason in why


def test_injected_waiting_collectives_are_diagnosed_as_not_transferring(tmp_path):
    build_rank(tmp_path, RankSpec(comm_transit_share=0.1, comm_wait_share=0.8))
    report = advisor.diagnose(tmp_path)
    ids = [f.id for f in report.findings]
    assert ids[0] == "communication.not_transferring"
    assert "communication.transfer_bound" not in ids and "communication.exposed_collectives" not in ids
    assert "80.0% is waiting for peers" in report.findings[0].explanation


def test_injected_slow_hccs_link_is_flagged(tmp_path):
    # 33.5 MB in 85 % of 1.99 ms is 19.7 GB/s; 5 MB in the same time is 3 GB/s, 11 % of the nominal 28
    build_rank(tmp_path, RankSpec(comm_size_mb=5.0))
    slow = next(f for f in advisor.diagnose(tmp_path).findings if f.id == "communication.slow_link")
    assert slow.key == "HCCS" and "11% of the 28 GB/s nominal" in slow.explanation
    assert not [f for f in advisor.diagnose(build_rank(tmp_path / "ok", RankSpec())).findings if f.id == "communication.slow_link"]


def test_without_communication_json_the_generic_finding_remains(tmp_path):
    build_rank(tmp_path, RankSpec(omit=("communication.json",)))
    assert advisor.diagnose(tmp_path).findings[0].id == "communication.exposed_collectives"


def test_real_job_links_from_the_matrix_are_per_pair_and_local_without_group_info():
    links = [f for f in extract_facts(load_profile(REAL)).facts if f.family == "link"]
    assert {(f.rank, f.src_rank, f.dst_rank) for f in links if f.rank == 0} == {(0, 0, d) for d in range(1, 8)}
    assert len(links) == 14 and all(f.transport == "HCCS" and not f.ranks_are_global for f in links)
    first = next(f for f in links if f.rank == 0 and f.dst_rank == 1)
    # rank 0's allreduce '-total' entry for link 0-1 in step 50: 61.21 MB in 3.884 ms (the file's own numbers)
    assert first.size_mb_per_step == pytest.approx(61.210624) and first.time_us_per_step == pytest.approx(3883.93759, rel=1e-6)
    assert first.bandwidth_gbps == pytest.approx(15.76, abs=0.01) and first.utilization == pytest.approx(0.563, abs=0.001)
    assert first.sources == ["rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/communication_matrix.json"
                             "[Transport Type,Transit Size(MB),Transit Time(ms)]"]
    assert all(0.9 < f.median_ratio < 1.1 for f in links)


def test_group_hash_matches_the_files_and_maps_local_links_to_global_ranks(tmp_path):
    from advisor.ingest.groups import group_hash

    assert group_hash("group_name_0") == "5862276093215481612"  # the reference's worked example
    spec = RankSpec(groups={"group_name_0": {"group_name": "dp", "group_rank": 0, "global_ranks": [12, 0, 8, 4]}},
                    matrix_links={"0-1": 20.0, "0-2": 19.5, "0-3": 8.0})
    build_rank(tmp_path, spec)
    report = advisor.diagnose(tmp_path)
    links = {(f["src_rank"], f["dst_rank"]): f for f in report.facts if f["type"] == "link"}
    assert set(links) == {(0, 4), (0, 8), (0, 12)} and all(f["ranks_are_global"] for f in links.values())
    assert links[(0, 12)]["bandwidth_gbps"] == pytest.approx(8.0) and links[(0, 12)]["group"] == "dp"
    (slow,) = [f for f in report.findings if f.id == "communication.slow_link_pair"]
    assert slow.key == "dp 0→12 HCCS"
    assert "from rank 0 to rank 12" in slow.explanation and "8.0 GB/s" in slow.explanation


def test_injected_dp_straggler_is_named_from_the_wait_times(tmp_path):
    groups = {"group_name_0": {"group_name": "dp", "group_rank": 0, "global_ranks": [0, 1, 2]}}
    waits = {0: 0.30, 1: 0.32, 2: 0.01}  # rank 2 arrives last: it barely waits, the others wait for it
    for rank, wait in waits.items():
        build_rank(tmp_path, RankSpec(rank=rank, device_id=rank, rank_id=str(rank), groups=groups,
                                      comm_wait_share=wait, comm_transit_share=0.6))
    report = advisor.diagnose(tmp_path)
    (straggler,) = [f for f in report.facts if f["type"] == "straggler"]
    assert straggler["group"] == "dp" and straggler["rank"] == 2 and straggler["ranks"] == 3
    # each allreduce takes 1987.92 µs; the others wait 31 % of it, rank 2 1 %: 0.30 × 1987.92 µs lost per step
    assert straggler["lost_us"] == pytest.approx(1987.92 * 0.30, rel=1e-6)
    assert straggler["max_wait_rank"] == 1
    (finding,) = [f for f in report.findings if f.id == "cluster.collective_straggler"]
    assert finding.key == "dp: rank 2" and finding.estimated_gain_us == pytest.approx(596.376, rel=1e-4)


def test_notify_waits_name_the_peer_and_ignore_unusable_ones(tmp_path):
    """HCCL Notify_Wait tasks carry the group-local rank they wait for ('dst rank'); a value that is not a rank
    number is ignored, and a trace without them names no peer."""
    import json

    from advisor.ingest.trace import read_trace

    events = [{"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "HCCL"}},
              {"ph": "M", "name": "process_name", "pid": 8, "args": {"name": "Python"}}]
    for ts, peer in ((10.0, 5), (40.0, 5), (70.0, 2), (90.0, "x"), (95.0, -1), (97.0, "3")):
        events.append({"ph": "X", "name": "Notify_Wait", "pid": 7, "tid": 1, "ts": ts, "dur": 20.0,
                       "args": {"task type": "Notify_Wait", "src rank": 0, "dst rank": peer}})
    events.append({"ph": "X", "name": "Notify_Wait", "pid": 8, "tid": 1, "ts": 5.0, "dur": 500.0,
                   "args": {"dst rank": 1}})  # not in the HCCL process
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    notify = read_trace(path, []).notify
    assert sorted(notify["peer"]) == [2, 3, 5, 5]
    from advisor.facts.communication import peer_waits, waited_peer

    named = waited_peer(peer_waits(notify, 2))
    assert named["waited_peer"] == 5 and named["waited_peer_us"] == 20.0 and named["waited_peer_share"] == 0.5
    assert "local rank 5 (20 µs per step, 50%" in named["straggler_hint"]
    assert waited_peer({}) == {}


def test_communication_tables_of_a_real_file_type_their_columns_as_pandas_does():
    files = sorted(REAL.rglob("communication.json"))
    assert files
    for path in files:
        tables = parse_communication(json.loads(path.read_text()), [])
        text = str(pd.DataFrame({"x": ["a"]})["x"].dtype)  # pandas 3: str; 2: object
        dtypes = {name: str(dtype) for name, dtype in tables.ops.dtypes.items()}
        assert dtypes == {"step": "int64", "kind": text, "op_name": text, "group": text, "elapse_ms": "float64",
                          "transit_ms": "float64", "wait_ms": "float64", "synchronization_ms": "float64",
                          "idle_ms": "float64", "start_us": "float64"}
        assert tables.ops["op_name"].tolist() == list(tables.op_columns["op_name"])
        assert str(tables.traffic["size_mb"].dtype) == "float64" and str(tables.traffic["transport"].dtype) == text


def test_rdma_traffic_carries_the_traffic_class_and_service_level_the_profiler_recorded(tmp_path):
    """hccl.rdma_slow advised HCCL_RDMA_TC/HCCL_RDMA_SL without reading what the metadata records (issue 31)."""
    from advisor.usercontext import build_context

    rank_dir = build_rank(tmp_path, RankSpec(comm_transport="RDMA", comm_transit_share=0.3))

    def rdma(context=None) -> TransportFact:
        return next(f for f in extract_facts(load_profile(tmp_path), context).of(TransportFact) if f.transport == "RDMA")

    assert (rdma().rdma_tc, rdma().rdma_sl) == (None, None)  # not recorded
    metadata = rank_dir / "profiler_metadata.json"
    recorded = json.loads(metadata.read_text())
    recorded["ENV_VARIABLES"] |= {"HCCL_RDMA_TC": "", "HCCL_RDMA_SL": "3"}
    metadata.write_text(json.dumps(recorded))
    fact = rdma()
    assert (fact.rdma_tc, fact.rdma_sl) == (132, 3)  # unset: HCCL's default
    assert any("profiler_metadata.json[ENV_VARIABLES]" in s for s in fact.sources)
    assert rdma(build_context(["HCCL_RDMA_TC=100"], [], None)).rdma_tc == 100  # --env wins


def test_largest_collective_tensor_and_the_hccl_buffer_it_needs_on_real_captures(tmp_path):
    """HCCL_BUFFSIZE from the profile (issue 31, item 2): the largest tensor a collective carries, from what it sent.
    The 2-rank sample records its communicator (parallel_group_info): the 32 MiB all-reduce is exact. The Level1
    capture does not: its 264 MB all-reduce in a communicator the links show at least 8 ranks of carries 132–151 MB."""
    from advisor.usercontext import build_context

    sample = next(f for f in extract_facts(load_profile(SAMPLE_CLUSTER)).of(CommunicationFact) if f.kind == "collective")
    assert sample.largest_tensor_mb == pytest.approx(2**25 / 1e6)
    assert (sample.largest_tensor_buffsize_mb, sample.hccl_buffsize_mb, sample.largest_tensor_rounds) == (32, 200, 1)
    assert (sample.largest_tensor_op, sample.largest_tensor_kind) == ("hcom_allReduce__612_0_1", "all_reduce")
    assert sample.largest_tensor_max_mb == sample.largest_tensor_mb  # parallel_group_info records the communicator

    def level1(context=None) -> CommunicationFact:
        return next(f for f in extract_facts(load_profile(REAL), context).of(CommunicationFact) if f.kind == "collective")

    fact = level1()
    assert fact.largest_tensor_mb == pytest.approx(264.241152 / 2, rel=1e-3)
    assert fact.largest_tensor_buffsize_mb == 144  # 264.24 × 8/14 MB in MiB, rounded up: holds it at any size
    assert fact.largest_tensor_sent_mb == pytest.approx(264.241152, rel=1e-3)
    assert fact.largest_tensor_max_mb == pytest.approx(264.241152 * 8 / 14, rel=1e-3)  # at least 8 members
    assert fact.largest_tensor_rounds == 1
    small = level1(build_context(["HCCL_BUFFSIZE=100"], [], None))
    assert (small.hccl_buffsize_mb, small.largest_tensor_rounds) == (100, 2)


def test_hccl_buffsize_is_raised_for_a_split_tensor_and_lowered_on_a_full_device():
    def rules_fired(root, **settings) -> set[str]:
        return {f.id for f in advisor.diagnose(root, **settings).findings}

    assert not {"hccl.buffsize_exceeded", "hccl.buffsize_given_exceeded"} & rules_fired(REAL)  # 132–151 MB fits 200 MiB
    given = rules_fired(REAL, env={"HCCL_BUFFSIZE": "100"})
    assert "hccl.buffsize_given_exceeded" in given and "hccl.buffsize_exceeded" not in given
    # the sample peaks at 11.9 GB of a 12.5 GB device, 1.2 GB of it HCCL's, for a 32 MiB largest tensor
    assert "hccl.buffsize_lower" in rules_fired(SAMPLE_CLUSTER, context={"device_memory_gb": 12.5})
    assert "hccl.buffsize_lower" not in rules_fired(SAMPLE_CLUSTER)


def test_hccl_buffsize_is_lowered_from_the_profile_alone_when_the_allocator_runs_out(tmp_path):
    """Issue 31 (seed 003, HCCL_BUFFSIZE): without the device's capacity, the allocator giving its cache back inside
    steps shows the device full; the buffers of a 33.5 MB largest tensor at the default 200 MiB return 336 MiB."""
    fired = {f.id: f for f in advisor.diagnose(build_rank(tmp_path / "full", RankSpec(reserved_drops_per_step=2))).findings}
    finding = fired["hccl.buffsize_lower_reorganising"]
    assert "HCCL_BUFFSIZE=32 returns about 336 MiB" in finding.explanation and finding.estimated_gain_us is None
    assert [p.id for p in finding.prescriptions] == ["hccl.buffsize_largest_tensor"]
    assert "hccl.buffsize_lower_reorganising" not in {f.id for f in advisor.diagnose(build_rank(tmp_path / "ok", RankSpec())).findings}
    with_capacity = {f.id for f in advisor.diagnose(tmp_path / "full", context={"device_memory_gb": 64}).findings}
    assert "hccl.buffsize_lower_reorganising" not in with_capacity  # the capacity known: the peak decides (hccl.buffsize_lower)


@pytest.mark.parametrize(("rule", "name", "peer", "transport", "fires", "seen", "prescribed"), [
    ("parallel.tp_links_cross_nodes", "tp", 8, "RDMA", True, "from rank 0 to rank 8 over RDMA", "parallel.tp_within_node"),
    ("parallel.tp_links_cross_nodes", "dp", 8, "RDMA", False, None, None),
    ("parallel.tp_links_cross_nodes", "tp", 8, "HCCS", False, None, None),
    ("parallel.pp_within_node", "pp", 4, "HCCS", True, "from rank 0 to rank 4 over HCCS", "parallel.layout_plan"),
    ("parallel.pp_within_node", "pp", 4, "RDMA", False, None, None),
    ("parallel.pp_within_node", "dp", 4, "HCCS", False, None, None),
])
def test_a_parallel_groups_links_say_where_its_members_sit(tmp_path, rule, name, peer, transport, fires, seen, prescribed):
    """From the profile alone, without --context: a tp communicator's matrix links over RDMA say TP spans servers
    (issue 31, item 3); a pp communicator's links inside a server (HCCS) put two pipeline stages on one server, so TP
    stopped short of the server's cards (seed 003, parallel strategy item 2: PP across servers only once TP is at its
    maximum)."""
    spec = RankSpec(groups={"group_name_0": {"group_name": name, "group_rank": 0, "global_ranks": [0, peer]}},
                    matrix_links={"0-1": 16.0}, comm_transport=transport)
    build_rank(tmp_path, spec)
    found = [f for f in advisor.diagnose(tmp_path).findings if f.id == rule]
    assert bool(found) is fires
    if fires:
        assert found[0].key == name and seen in found[0].explanation
        assert found[0].prescriptions[0].id == prescribed
