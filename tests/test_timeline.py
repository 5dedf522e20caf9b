"""Timeline links (issue 29, item 5): findings name the time ranges their gain lies in, and ``advisor diagnose
--annotate`` writes them as a Chrome trace over the original events (advisor/render/timeline.py), on the real
Ascend two-rank capture and the PyTorch tutorial's ResNet-50 trace."""

from __future__ import annotations

import gzip
import json
from numbers import Number
from pathlib import Path

import pytest
from conftest import FIXTURES, REAL, SAMPLE_SINGLE
from typer.testing import CliRunner

from advisor.cli import app
from advisor.render.timeline import ANNOTATION_PROCESS, with_free_pids

TUTORIAL = FIXTURES / "pytorch-tutorial-resnet50" / "num_workers_4"
METADATA = {"process_name", "process_sort_index", "process_labels", "thread_name", "thread_sort_index"}


def _annotate(profile: Path, tmp_path: Path) -> tuple[dict, dict, str]:
    """The JSON report and the annotated trace of ``profile``, and standard error."""
    report, trace = tmp_path / "report.json", tmp_path / "timeline.json"
    done = CliRunner().invoke(app, ["diagnose", str(profile), "-o", str(report), "--annotate", str(trace)],
                              env={"LANG": "C.UTF-8"})
    assert done.exit_code in (0, 3), done.output
    return json.loads(report.read_text()), json.loads(trace.read_bytes()), done.stderr


def check_chrome_trace(trace: dict) -> None:
    """The JSON Object Format of the Trace Event Format, as Perfetto's and chrome://tracing's importers read it: a
    list of events, each with a phase; complete events with a name, numeric ts and dur ≥ 0, and their pid and tid;
    metadata events naming processes and threads."""
    assert set(trace) == {"traceEvents", "displayTimeUnit"} and trace["displayTimeUnit"] in ("ms", "ns")
    assert isinstance(trace["traceEvents"], list)
    for event in trace["traceEvents"]:
        assert isinstance(event, dict) and isinstance(event.get("ph"), str)
        if event.get("cat") == "advisor":
            assert event["ph"] == "X" and isinstance(event["name"], str) and event["name"]
            assert isinstance(event["ts"], Number) and isinstance(event["dur"], Number) and event["dur"] >= 0
            assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "M" and event["name"] in METADATA:
            assert "pid" in event and isinstance(event.get("args"), dict)
    json.loads(json.dumps(trace))  # plain JSON: no NaN or infinity


def _annotations(trace: dict) -> tuple[int, dict[int, str], list[dict]]:
    """The annotation process: its pid, its threads' names by tid, and its ranges."""
    events = trace["traceEvents"]
    (pid,) = [e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"
              and e["args"]["name"] == ANNOTATION_PROCESS]
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid}
    return pid, threads, [e for e in events if e.get("cat") == "advisor"]


def _check_one_named_range_per_range(report: dict, trace: dict) -> list[dict]:
    """Every range of every finding is one X event on the finding's thread, named after it, at the range's times."""
    _, threads, ranges = _annotations(trace)
    expected = [(number, finding, r) for number, finding in enumerate(report["findings"], 1) for r in finding["ranges"]]
    assert len(ranges) == len(expected) > 0
    for event, (number, finding, r) in zip(ranges, expected):
        assert event["tid"] == number and threads[number].startswith(f"{number}. {finding['title']}")
        assert event["name"].startswith(finding["title"]) and event["args"]["finding"] == finding["id"]
        assert (event["ts"], event["ts"] + event["dur"]) == pytest.approx((r["start_us"], r["end_us"]))
        assert (event["args"]["rank"], event["args"]["file"], event["args"]["field"]) == (r["rank"], r["file"], r["field"])
    return ranges


def _events(path: Path) -> list[dict]:
    raw = path.read_bytes()
    data = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    return data["traceEvents"] if isinstance(data, dict) else data


def _span(event: dict) -> tuple[float, float]:
    start = float(event["ts"])
    return start, start + float(event.get("dur", 0))


def test_ascend_capture_annotated_over_both_ranks_traces(tmp_path):
    report, trace, stderr = _annotate(REAL, tmp_path)
    check_chrome_trace(trace)
    ranges = _check_one_named_range_per_range(report, trace)
    by_id = {f["id"]: f for f in report["findings"]}
    assert {r["field"] for r in by_id["io.blocking_copies"]["ranges"]} == {"copy_sync_us"}  # the blocking copy's wait
    assert {r["field"] for r in by_id["host.host_work"]["ranges"]} == {"dispatch_us"}
    assert {r["rank"] for r in by_id["io.blocking_copies"]["ranges"]} == {0, 1}
    # the original events of both ranks are there, each process once (pids that clash moved), named with its rank
    files = {r["args"]["file"] for r in ranges}
    originals = {name: _events(REAL / name) for name in files}
    assert len(trace["traceEvents"]) - len(ranges) - 2 - 2 * len({r["tid"] for r in ranges}) == sum(map(len, originals.values()))
    names = [e for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert len({e["pid"] for e in names}) == len(names)
    assert all(e["args"]["name"].endswith(("(rank 0)", "(rank 1)")) for e in names if e["args"]["name"] != ANNOTATION_PROCESS)
    # each idle range is where the original trace says the device idles: inside its rank's ProfilerStep#50, on no compute
    for r in (r for r in ranges if r["args"]["field"] in ("copy_sync_us", "dispatch_us")):
        events = originals[r["args"]["file"]]
        start, end = r["ts"], r["ts"] + r["dur"]
        (step,) = [_span(e) for e in events if e.get("name") == f"ProfilerStep#{r['args']['step']}"]
        assert step[0] <= start < end <= step[1] + 1e-3
        computing = [_span(e) for e in events if e.get("name") == "Computing" and e.get("ph") == "X"]
        assert computing and not any(s < end - 0.5 and start + 0.5 < e for s, e in computing)  # the lanes' own rounding
    assert "annotated trace written to" in stderr and "time range(s) of 3 finding(s)" in stderr


def _step_start(events: list[dict], step: int) -> float:
    """Where a trace's ProfilerStep#N begins (its ts, µs)."""
    (start,) = [float(e["ts"]) for e in events if e.get("name") == f"ProfilerStep#{step}" and e.get("ph") == "X"]
    return start


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_ranges_are_shown_from_the_start_of_their_step(lang):
    """Absolute trace timestamps (1,736,408,883,692,887.0 µs) read as nothing: every range of the real capture's
    findings knows where its ProfilerStep#N begins on its own trace, and Markdown and HTML place it in ms from there,
    the HTML keeping the trace's own µs in the item's hover title."""
    import html as html_text
    import re

    import advisor

    report = advisor.diagnose(REAL, lang=lang)
    ranges = [r for f in report.findings for r in f.ranges]
    assert {r.field for r in ranges} >= {"dispatch_us", "copy_sync_us", "outside_wait_us"}
    markdown, page = advisor.render(report, "md"), html_text.unescape(advisor.render(report, "html"))
    words = {"en": ("rank {rank}, step {step}, {start}–{end} ms into the step", "{a}–{b} µs on the trace's clock"),
             "zh": ("rank {rank}，迭代 {step}，迭代开始后 {start}–{end} ms", "trace 时钟上的 {a}–{b} µs")}[lang]
    for r in ranges:
        assert r.step_start_us == pytest.approx(_step_start(_events(REAL / r.file), r.step))
        placed = words[0].format(rank=r.rank, step=r.step, start=f"{(r.start_us - r.step_start_us) / 1000:,.2f}",
                                 end=f"{(r.end_us - r.step_start_us) / 1000:,.2f}")
        assert placed in markdown.replace("\\_", "_") and placed in page
        title = words[1].format(a=f"{r.start_us:,.1f}", b=f"{r.end_us:,.1f}")
        assert re.search(f'<li title="{re.escape(title)}[^"]*">{re.escape(placed)}', page)
    assert not re.search(r"\d{3},\d{3},\d{3}\.\d µs", markdown)  # no absolute timestamp left


def test_a_range_outside_any_step_keeps_the_traces_clock():
    from advisor.facts.models import TimeRange
    from advisor.render.common import labels
    from advisor.render.documents import range_text

    unplaced = TimeRange(field="idle_us", rank=0, start_us=1_000_000.0, end_us=1_002_500.0, file="t.json")
    assert range_text(unplaced, labels("en")) == "rank 0: idle_us, 1,000,000.0–1,002,500.0 µs (2.50 ms) in t.json"


def test_the_dataloaders_ranges_are_its_longest_calls_and_the_slowest_steps():
    """The tutorial's num_workers=0 run fetches each batch in the step (~69 ms of a ~176 ms step): the DataLoader fact
    names its three longest __next__ calls (us_per_step) and the slowest step's (excess_us_per_step), each the very
    event of the trace, placed from its ProfilerStep#N's start."""
    from advisor.facts import extract_facts
    from advisor.facts.models import DataLoaderFact
    from advisor.ingest import load_profile

    profile = FIXTURES / "pytorch-tutorial-resnet50" / "num_workers_0"
    (loading,) = extract_facts(load_profile(profile)).of(DataLoaderFact)
    (file,) = {r.file for r in loading.ranges}
    events = _events(profile / file)
    calls = sorted((_span(e) for e in events if e.get("name", "").startswith("enumerate(DataLoader)#")),
                   key=lambda span: span[0] - span[1])
    steps = {int(e["name"].split("#")[1]): _span(e) for e in events if e.get("name", "").startswith("ProfilerStep#")}
    fields = {field: [r for r in loading.ranges if r.field == field] for field in ("us_per_step", "excess_us_per_step")}
    assert [(r.start_us, r.end_us) for r in fields["us_per_step"]] == calls[:3]
    (slowest,) = fields["excess_us_per_step"]
    assert slowest.step == loading.slowest_step == 7 and slowest.end_us - slowest.start_us == loading.slowest_step_us
    for r in loading.ranges:
        assert steps[r.step][0] == r.step_start_us <= r.start_us < r.end_us <= steps[r.step][1]


def test_the_gpus_exposed_communication_is_its_nccl_kernels_under_no_compute(tmp_path):
    """HTA's trace_diff control run (rank 3) spends ~14.7 ms of its ~77 ms step in all-to-alls no compute kernel hides:
    gpu.exposed_alltoall names the longest such stretches, each on an NCCL kernel of the trace and beside no other
    kernel, placed from its ProfilerStep#N's start."""
    profile = FIXTURES / "kineto-more" / "hta-trace_diff-control"
    report, trace, _ = _annotate(profile, tmp_path)
    check_chrome_trace(trace)
    _check_one_named_range_per_range(report, trace)
    (finding,) = [f for f in report["findings"] if f["id"] == "gpu.exposed_alltoall"]
    assert finding["ranges"] and {r["field"] for r in finding["ranges"]} == {"comm_not_overlapped_us"}
    events = _events(profile / finding["ranges"][0]["file"])
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    nccl = [_span(e) for e in kernels if e["name"].startswith("nccl")]
    compute = [_span(e) for e in kernels if not e["name"].startswith("nccl")]
    for r in finding["ranges"]:
        start, end = r["start_us"], r["end_us"]
        assert end - start > 5_000 and any(s <= start < e for s, e in nccl)
        assert not any(s < end and start < e for s, e in compute)
        assert r["step_start_us"] == _step_start(events, r["step"])


def _collectives(events: list[dict]) -> dict[str, tuple[float, float]]:
    """A rank trace's collective ops on its HCCL lane by name (hcom_allReduce__586_0_1…): start and end, µs."""
    return {e["name"]: _span(e) for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("hcom_")}


@pytest.mark.parametrize("profile", [REAL, FIXTURES / "ascend-more" / "text-level0-2ranks"], ids=["level1", "level0"])
def test_the_wait_for_members_outside_the_capture_lies_in_each_ranks_collectives(profile, tmp_path):
    """Both profiled ranks wait in their AllReduces for the members not profiled (from communication.json at Level1,
    from the HCCL lane's spans at Level0): each range runs from the last profiled member's arrival — the later start
    of that op on the two ranks' traces — to the op's end on its own rank's trace."""
    report, trace, _ = _annotate(profile, tmp_path)
    check_chrome_trace(trace)
    _check_one_named_range_per_range(report, trace)
    (finding,) = [f for f in report["findings"] if f["id"] == "cluster.straggler_outside_capture"]
    ranges = finding["ranges"]
    assert {r["field"] for r in ranges} == {"outside_wait_us"} and {r["rank"] for r in ranges} == {0, 1}
    ops = {r["rank"]: _collectives(_events(profile / r["file"])) for r in ranges}
    for r in ranges:
        (name,) = [n for n, (s, e) in ops[r["rank"]].items() if s - 0.5 <= r["start_us"] < r["end_us"] <= e + 0.5]
        assert name.startswith("hcom_allReduce") and r["step"] == 50
        last_arrival = max(ops[rank][name][0] for rank in ops)
        assert (r["start_us"], r["end_us"]) == pytest.approx((last_arrival, ops[r["rank"]][name][1]), abs=0.5)
    longest = max(r["end_us"] - r["start_us"] for r in ranges)
    assert longest > 50_000  # the first AllReduce: tens of ms after both ranks arrived


@pytest.mark.parametrize("profile", [REAL, FIXTURES / "ascend-more" / "text-level0-2ranks"], ids=["level1", "level0"])
def test_the_others_wait_for_the_straggler_from_their_arrival_to_its(profile):
    """Rank 1 enters the first AllReduce last (by 5.6 ms at Level1, 16.9 ms at Level0): rank 0's lost_us ranges run
    from its own start of an op to rank 1's start of the same op, as the two traces have them."""
    from advisor.facts import extract_facts
    from advisor.facts.models import StragglerFact
    from advisor.ingest import load_profile

    (straggler,) = extract_facts(load_profile(profile)).of(StragglerFact)
    assert straggler.rank == 1 and straggler.ranges
    ops = {rank: _collectives(_events(profile / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"))
           for rank in (0, 1)}
    for r in straggler.ranges:
        assert (r.field, r.rank, r.step) == ("lost_us", 0, 50) and r.file.startswith("rank0_ascend_pt/")
        (name,) = [n for n, (start, _) in ops[0].items() if start == pytest.approx(r.start_us, abs=0.5)]
        assert ops[1][name][0] == pytest.approx(r.end_us, abs=0.5) and r.end_us <= ops[0][name][1]
    first = min(ops[0], key=lambda name: ops[0][name][0])  # the longest wait: the step's first AllReduce
    longest = straggler.ranges[0]
    assert (longest.start_us, longest.end_us) == pytest.approx((ops[0][first][0], ops[1][first][0]), abs=0.5)
    assert longest.end_us - longest.start_us > 5_000


def test_tutorial_trace_ranges_are_its_blocking_copies_and_zero_grad(tmp_path):
    report, trace, _ = _annotate(TUTORIAL, tmp_path)
    check_chrome_trace(trace)
    ranges = _check_one_named_range_per_range(report, trace)
    (file,) = {r["args"]["file"] for r in ranges}
    events = _events(TUTORIAL / file)
    assert len(trace["traceEvents"]) > len(events)  # the original trace, unchanged, with the annotation added
    assert trace["traceEvents"][:len(events)] == events
    copies = [_span(e) for e in events if e.get("cat") == "Memcpy" and "Pageable" in e["name"]]
    zero_grad = [_span(e) for e in events if e.get("name", "").startswith("Optimizer.zero_grad")]
    checked = set()
    for r in ranges:
        start, end = r["ts"], r["ts"] + r["dur"]
        if r["args"]["field"] == "pageable_copy_us":  # the GPU idles while a copy from pageable memory runs
            assert any(s < end and start < e for s, e in copies)
        elif r["args"]["field"] == "zero_grad_us":  # … while the host is inside zero_grad
            assert any(s <= start and end <= e for s, e in zero_grad)
        checked.add(r["args"]["field"])
    assert {"pageable_copy_us", "zero_grad_us"} <= checked


def test_the_slowest_and_outlier_steps_are_their_step_windows():
    from advisor.facts import IdleFact, extract_facts
    from advisor.ingest import load_profile

    (idle,) = extract_facts(load_profile(TUTORIAL)).of(IdleFact)
    steps = {r.field: r for r in idle.ranges if r.field in ("slowest_step_us", "outlier_excess_us")}
    assert steps["slowest_step_us"].step == idle.slowest_step
    assert steps["slowest_step_us"].end_us - steps["slowest_step_us"].start_us == pytest.approx(idle.slowest_step_us)
    assert steps["outlier_excess_us"].step == int(idle.outlier_steps.split(",")[0])


def test_a_report_without_ranges_gives_a_valid_trace_and_says_so(tmp_path):
    report, trace, stderr = _annotate(SAMPLE_SINGLE, tmp_path)
    check_chrome_trace(trace)
    assert not any(f["ranges"] for f in report["findings"])
    assert _annotations(trace)[2] == [] and "no finding has a time range" in stderr


def test_clashing_process_ids_of_a_second_trace_are_moved():
    taken: set[int] = set()
    first = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}, {"ph": "X", "pid": 0, "ts": 1}]
    assert with_free_pids(first, taken, None) is first and taken == {0}
    second = with_free_pids([dict(e) for e in first], taken, 1)
    assert [e["pid"] for e in second] == [1, 1] and second[0]["args"]["name"] == "GPU 0 (rank 1)" and taken == {0, 1}


def test_the_ranks_flow_arrows_stay_apart_when_their_traces_are_merged(tmp_path):
    """Review: both ranks' traces number their launch → task flows from the same ids (668 clashed), so Perfetto joined
    rank 0's launches to rank 1's tasks; the second trace's ids are moved."""
    _report, trace, _stderr = _annotate(REAL, tmp_path)
    owners: dict[tuple, set[int]] = {}
    for event in trace["traceEvents"]:
        if event.get("ph") in ("s", "t", "f") and "id" in event:
            owners.setdefault((event["ph"], event["id"], event.get("cat")), set()).add(event["pid"])
    assert len(owners) > 1000 and all(len(pids) == 1 for pids in owners.values())


@pytest.mark.parametrize("given", ["rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
                                   "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT", "rank0_ascend_pt"])
def test_a_rank_given_by_any_of_its_paths_is_annotated_over_its_trace(given, tmp_path):
    """Review: given its ASCEND_PROFILER_OUTPUT or its trace_view.json, the annotated trace held none of its events."""
    report, trace, stderr = _annotate(REAL / given, tmp_path)
    ranges = _check_one_named_range_per_range(report, trace)
    assert ranges and "its events are not in the annotated trace" not in stderr
    assert len(trace["traceEvents"]) > len(_events(REAL / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"))


def test_the_annotated_trace_holds_the_findings_the_reports_show(tmp_path):
    """Review: with --max-findings 1 the report had one finding and the annotated trace four."""
    trace_path = tmp_path / "timeline.json"
    done = CliRunner().invoke(app, ["diagnose", str(REAL), "-f", "json", "--max-findings", "1",
                                    "--annotate", str(trace_path)])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    _pid, threads, _ranges = _annotations(json.loads(trace_path.read_bytes()))
    assert len(report["findings"]) == 1 and list(threads.values()) == [f"1. {report['findings'][0]['title']}"]


def test_annotate_refuses_the_file_a_report_goes_to_and_leaves_non_traces_unread(tmp_path):
    report = tmp_path / "r.md"
    done = CliRunner().invoke(app, ["diagnose", str(REAL), "-o", str(report), "--annotate", str(report)])
    assert done.exit_code == 2 and "is also a report given to -o" in done.stderr and not report.exists()
    _report, trace, stderr = _annotate(FIXTURES / "ascend-more" / "server-rank0", tmp_path)  # no trace_view.json
    check_chrome_trace(trace)
    assert "communication.json: its events are not in the annotated trace, only its findings' ranges: it is not a trace" in stderr


def test_ranges_of_a_capture_without_a_trace_are_placed_from_the_steps_first_collective():
    """server-rank0 has communication.json but no trace_view.json: no ProfilerStep window gives its step's start, so
    the outside-wait ranges are placed from the step's first collective — not printed as 1,695,115,378,818,416.8 µs on
    the epoch clock (expert review, 2026-11-28)."""
    from advisor.diagnose import diagnose
    from advisor.render.common import labels
    from advisor.render.documents import range_text

    report = diagnose(Path(__file__).parent / "fixtures" / "ascend-more" / "server-rank0")
    ranges = [r for f in report.findings for r in f.ranges]
    assert ranges and {r.step_start_from for r in ranges} == {"first collective"}
    ops = json.loads((Path(__file__).parent / "fixtures" / "ascend-more" / "server-rank0" / "rank0_ascend_pt"
                      / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    first = min(float(op["Communication Time Info"]["Start Timestamp(us)"])
                for name, op in ops["step2"]["collective"].items() if name != "Total Op Info")
    assert all(r.step_start_us == pytest.approx(first) for r in ranges)
    text = range_text(ranges[0], labels("en"))
    assert "ms after the step's first collective began" in text and "1,695,115" not in text
