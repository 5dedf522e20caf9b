"""communication_matrix.json in each layout torch_npu and msprof write, and CommAnalyzerMatrix: each link's traffic once.

torch_npu writes per op type and group ranked single ops (``allreduce-top1``, ``-middle``, ``-bottom1..3``) and their
sum (``allreduce-total``); older torch_npu (``SERVER``, a real rank of a multi-node job) one entry per op
(``hcom_allGather__483_3@<group>``) with no total; the msprof command line the same per-op entries without steps.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest
from builders import RankSpec, build_rank_db
from conftest import FIXTURES

import advisor
from advisor.facts import extract_facts
from advisor.ingest import load_profile
from advisor.ingest.ascend import read_rank
from advisor.ingest.columns import frame_of
from advisor.ingest.communication import parse_matrix
from advisor.ingest.model import Coverage

SERVER = FIXTURES / "ascend-more" / "server-rank0"
SERVER_OUTPUT = SERVER / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
GROUP = "5862276093215481612"


def _link(transport: str, size: float, time: float) -> dict:
    return {"Transport Type": transport, "Transit Size(MB)": size, "Transit Time(ms)": time,
            "Bandwidth(GB/s)": round(size / time, 4)}


# Two AllReduces in step 7 of a 4-rank group, as one op each: 0-1 over HCCS, 0-2 over RDMA, 0-0 on the chip.
OPS = {f"hcom_allReduce__612_{i}_1": {"0-0": _link("LOCAL", 4.0 * (i + 1), 0.01), "0-1": _link("HCCS", 30.0 * (i + 1), 2.0),
                                       "0-2": _link("RDMA", 10.0 * (i + 1), 1.0)} for i in range(2)}
TOTALS = {pair: _link(OPS["hcom_allReduce__612_0_1"][pair]["Transport Type"],
                      sum(op[pair]["Transit Size(MB)"] for op in OPS.values()),
                      sum(op[pair]["Transit Time(ms)"] for op in OPS.values())) for pair in ("0-0", "0-1", "0-2")}
RANKED = {f"allreduce-{stat}@{GROUP}": {pair: {**link, "Op Name": name} for pair, link in OPS[name].items()}
          for stat, name in (("top1", "hcom_allReduce__612_1_1"), ("middle", "hcom_allReduce__612_1_1"),
                             ("bottom1", "hcom_allReduce__612_0_1"), ("bottom2", "hcom_allReduce__612_0_1"))}
PER_OP = {f"{name}@{GROUP}": links for name, links in OPS.items()}
EXPECTED = {(0, 0, "LOCAL", "MB"): 12.0, (0, 0, "LOCAL", "ms"): 0.02, (0, 1, "HCCS", "MB"): 90.0,
            (0, 1, "HCCS", "ms"): 4.0, (0, 2, "RDMA", "MB"): 30.0, (0, 2, "RDMA", "ms"): 2.0}

LAYOUTS = {
    "torch_npu": {"step7": {"p2p": {}, "collective": {**RANKED, f"allreduce-total@{GROUP}": TOTALS}}},
    "older torch_npu": {"step7": {"p2p": {}, "collective": {**PER_OP, "Total Op Info": TOTALS}}},
    "msprof": {**PER_OP, "total": TOTALS},
    "per-op and total": {"step7": {"p2p": {}, "collective": {**PER_OP, f"allreduce-total@{GROUP}": TOTALS}}},
}


def _links(columns) -> dict[tuple[int, int, str, str], float]:
    """The MB and ms of each (src, dst, transport) link, over every step, op type and group."""
    summed = frame_of(columns).groupby(["src", "dst", "transport"])[["size_mb", "time_ms"]].sum()
    return {(*key, unit): float(row[column]) for key, row in summed.iterrows()
            for unit, column in (("MB", "size_mb"), ("ms", "time_ms"))}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_gives_each_links_traffic_once(layout):
    warnings: list[str] = []
    columns = parse_matrix(json.loads(json.dumps(LAYOUTS[layout])), warnings)
    assert _links(columns) == pytest.approx(EXPECTED) and not warnings
    assert set(frame_of(columns)["op_type"]) == {"allreduce"} and set(frame_of(columns)["group"]) == {GROUP}


def test_ranked_entries_without_their_total_are_not_counted():
    """A ``-top1`` entry is one op, and the same op may be ``-middle`` too: without the total they say nothing whole."""
    document = {"step7": {"p2p": {}, "collective": {**RANKED, **PER_OP}}}
    assert _links(parse_matrix(document, [])) == pytest.approx(EXPECTED)  # the per-op entries only


def _server_per_op() -> list[tuple[str, str, str, dict]]:
    """The server rank's matrix entries: (kind, op, group, links), its CANN total ("Total Op Info") left out."""
    document = json.loads((SERVER_OUTPUT / "communication_matrix.json").read_text())
    return [(kind, *key.split("@"), links) for kind, ops in document["step2"].items() for key, links in ops.items()
            if key != "Total Op Info"]


def test_the_older_layout_of_a_real_rank_is_read():
    profile = load_profile(SERVER)
    assert not profile.coverage.skipped and not profile.coverage.warnings[1:]  # a kernel_details row is damaged
    entries = _server_per_op()
    assert len(entries) == 28 and not any(op.endswith("-total") for _kind, op, _group, _links in entries)
    links = _links(profile.ranks[0].matrix)
    assert {transport for _src, _dst, transport, _unit in links} == {"LOCAL", "HCCS", "RDMA"}
    # the file's communication.json: collectives move 1,321 MB over HCCS in 70.2 ms (CANN's own Total Op Info)
    bandwidth = json.loads((SERVER_OUTPUT / "communication.json").read_text())["step2"]["collective"]["Total Op Info"]
    total = bandwidth["Communication Bandwidth Info"]["HCCS"]
    for unit, label in (("MB", "Transit Size(MB)"), ("ms", "Transit Time(ms)")):
        hccs = sum(value for (_src, _dst, transport, of), value in links.items() if (transport, of) == ("HCCS", unit))
        assert hccs == pytest.approx(total[label], rel=1e-5)


def test_the_server_ranks_link_facts():
    links = [f for f in extract_facts(load_profile(SERVER)).facts if f.family == "link"]
    by_group: dict[tuple[str, str], list] = {}
    for fact in links:
        by_group.setdefault((fact.group, fact.transport), []).append(fact)
    # the 8-rank HCCS communicator of the broadcasts, all-gathers and reduce-scatters: 188.76 MB to each of 7 peers
    hccs = by_group[("9350434047717501483", "HCCS")]
    assert sorted(f.dst_rank for f in hccs) == list(range(1, 8)) and not any(f.ranks_are_global for f in hccs)
    assert sum(f.size_mb_per_step for f in hccs) == pytest.approx(1321.32, abs=0.01)
    assert sum(f.time_us_per_step for f in hccs) / 1000 == pytest.approx(70.16, abs=0.01)
    assert all(f.bandwidth_gbps == pytest.approx(18.9, abs=0.9) for f in hccs)
    # the cross-node AllReduce: 131 MB over RDMA to local rank 1, at 24.4 GB/s
    (rdma,) = by_group[("10471851537367425459", "RDMA")]
    assert (rdma.dst_rank, rdma.size_mb_per_step) == (1, pytest.approx(131.072))
    assert rdma.bandwidth_gbps == pytest.approx(24.40, abs=0.01)
    # the send to local rank 8 (p2p) and an all-reduce's 800 bytes (collective) share one link
    (send,) = by_group[("13337953553061386822", "RDMA")]
    assert send.size_mb_per_step == pytest.approx(20.97152 + 0.0008)


def test_the_server_rank_waits_for_the_member_of_its_cross_node_communicator():
    """Its matrix shows the members of each communicator: the AllReduce of the 2-rank RDMA one waits 97 ms for local
    rank 1, which was not profiled (before the matrix was read this was a generic 'waiting, not moving data')."""
    report = advisor.diagnose(SERVER)
    assert report.status == "complete"
    top = report.findings[0]
    assert top.id == "cluster.straggler_outside_capture" and "(local rank 1)" in top.explanation


def test_the_survey_reads_the_older_layout_as_the_full_read():
    rank_dir = SERVER / "rank0_ascend_pt"
    surveyed = read_rank(rank_dir, SERVER_OUTPUT, 0, SERVER, Coverage(), survey=True).matrix
    full = read_rank(rank_dir, SERVER_OUTPUT, 0, SERVER, Coverage()).matrix
    assert surveyed is not None and _links(surveyed) == _links(full)


def test_comm_analyzer_matrix_rows_per_op_count_like_the_json(tmp_path):
    """CommAnalyzerMatrix holds what communication_matrix.json holds, one row per link: the server rank's per-op
    entries written there must give the same links."""
    rank_dir = build_rank_db(tmp_path, RankSpec(matrix_links={"0-1": 20.0}))
    with closing(sqlite3.connect(rank_dir / "ASCEND_PROFILER_OUTPUT" / "analysis.db")) as db:
        db.execute("DELETE FROM CommAnalyzerMatrix")
        db.executemany("INSERT INTO CommAnalyzerMatrix VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
            (op, group, int(pair.split("-")[0]), int(pair.split("-")[1]), link["Transport Type"],
             link["Transit Size(MB)"], link["Transit Time(ms)"], link["Bandwidth(GB/s)"], "step2", kind, op)
            for kind, op, group, links in _server_per_op() for pair, link in links.items()])
        db.commit()
    from_db = load_profile(tmp_path).ranks[0].matrix
    assert _links(from_db) == pytest.approx(_links(load_profile(SERVER).ranks[0].matrix))
