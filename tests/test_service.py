"""msServiceProfiler's service-level data (docs/service.md): the reader on the bundled synthetic output and on broken
variants of it, the service facts against what the builder (tests/service_shapes.py) wrote, the three rules on the
fixture and on runs built to make each fire or stay quiet, and the whole diagnosis through the command line — on its
own, and beside a real profile."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, REAL
from service_shapes import EPOCH_MS, ServiceRun, service_span_s, simulate, write_output
from typer.testing import CliRunner

import advisor.ingest.service as service_reader
from advisor import cluster
from advisor.cli import app
from advisor.diagnose import diagnose as advisor_diagnose
from advisor.facts import extract_facts
from advisor.facts.models import ServiceFact
from advisor.ingest import load_profile
from advisor.ingest.discover import discover
from advisor.ingest.model import Coverage
from advisor.runoptions import RunOptions, reading

SERVICE = FIXTURES / "inference" / "msserviceprofiler"
QUEUEING, KV_FULL, DECODE_LOW = "service.queueing_dominates_ttft", "service.kv_cache_full", "service.decode_batch_low"


def _service_fact(path: Path) -> tuple[ServiceFact, Coverage]:
    profile, facts = cluster.run(path)  # the way `advisor diagnose` reads
    (fact,) = facts.of(ServiceFact)
    return fact, profile.coverage


def _read(directory: Path) -> tuple[service_reader.ServiceData | None, Coverage]:
    coverage = Coverage()
    with reading(RunOptions()):
        return service_reader.read_service(directory, directory, coverage), coverage


def _diagnose_json(path: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(app, ["diagnose", str(path), "-f", "json"])
    return result.exit_code, json.loads(result.stdout)


def _fired(report: dict) -> list[str]:
    return [f["id"] for f in report["findings"]]


@pytest.fixture(scope="module")
def run() -> ServiceRun:
    return simulate()  # the run the checked-in fixture was written from


# --- the reader ---------------------------------------------------------------------------------------------------

def test_the_fixture_is_read_by_column_name_into_typed_tables():
    data, coverage = _read(SERVICE)
    assert data is not None and not coverage.skipped and not coverage.warnings
    assert sorted(coverage.read) == ["batch.csv", "batch_summary.csv", "forward.csv", "kvcache.csv", "request.csv",
                                     "request_summary.csv", "service_summary.csv"]
    with (SERVICE / "request.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    request = data.request
    assert request.rows == len(rows) == 300 and request.stride == 1
    assert request.headers["ttft_ms"] == "first_token_latency(ms)" and request.headers["queue_ms"] == "queue_wait_time(ms)"
    np.testing.assert_allclose(request.columns["ttft_ms"], [float(r["first_token_latency(ms)"]) for r in rows])
    np.testing.assert_allclose(request.columns["output_tokens"], [float(r["reply_token_size"]) for r in rows])
    with (SERVICE / "batch.csv").open(newline="") as handle:
        batches = list(csv.DictReader(handle))
    assert data.batch.rows == len(batches)
    assert list(data.batch.columns["phase"]) == [b["batch_type"] for b in batches]
    np.testing.assert_allclose(data.batch.columns["kv_usage"], [float(b["kvcache_usage_rate"]) for b in batches])
    summaries = {s.path.name: s for s in data.summaries}
    assert summaries["request_summary.csv"].metrics["subsequent_token_latency"]["p90"] == pytest.approx(29.592)
    assert summaries["service_summary.csv"].metrics["max_batch_size"] == {"value": 200.0}


BROKEN = {  # request.csv content → the reason it is skipped
    "empty": (b"", "is empty"),
    "blank lines": (b"\n \n\n", "is empty"),
    "header only": (b"http_rid,first_token_latency(ms),queue_wait_time(ms)\n", "has a header and no rows"),
    "binary": (bytes(range(256)) * 8, "is binary, not CSV text"),
    "not UTF-8": (b"first_token_latency(ms),\xff\xfe\n1,2\n", "header is not UTF-8 text (byte 24)"),
    "another tool's CSV": (b"name,age\nada,36\n", "has none of the columns advisor reads"),
    "one endless line": (b"first_token_latency(ms)," + b"9" * (1 << 21), "has no line break in its first MiB"),
    "a unit no one uses": (b"first_token_latency(fortnights)\n1\n", "has none of the columns advisor reads in a unit it knows"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_file_is_skipped_with_its_name_and_the_problem(tmp_path, case):
    content, reason = BROKEN[case]
    shutil.copytree(SERVICE, tmp_path / "svc")
    (tmp_path / "svc" / "request.csv").write_bytes(content)
    data, coverage = _read(tmp_path / "svc")
    (skipped,) = coverage.skipped
    assert skipped.file == "request.csv" and skipped.reason.startswith(reason)
    assert data.request is None and data.batch is not None  # the other files are still read


def test_damaged_rows_and_cells_are_warnings_naming_the_file_and_column(tmp_path):
    (tmp_path / "request.csv").write_bytes(
        b"first_token_latency(ms),queue_wait_time(ms)\n"
        b"100,40\n"  # fine
        b"200\n"  # a field short: skipped
        b"abc,50\n"  # not a number: missing
        b"-3,4\n"  # negative: missing
        b"inf,5\n"  # infinite: missing
        b" 300 ,\t60\t\n"  # spaces and the TAB CANN leaves: read
        b"400,70,9\n"  # a field too many: skipped
        b"500,")  # cut off mid-row: its empty cell is missing
    data, coverage = _read(tmp_path)
    table = data.request
    assert table.rows == 6
    np.testing.assert_array_equal(table.columns["ttft_ms"], [100, np.nan, np.nan, np.nan, 300, 500])
    np.testing.assert_array_equal(table.columns["queue_ms"], [40, 50, 4, 5, 60, np.nan])
    assert coverage.warnings == [
        "request.csv: 2 row(s) with the wrong number of fields were skipped (line 3, 8)",
        "request.csv: 1 non-numeric value(s) in column 'first_token_latency(ms)' were treated as missing",
        "request.csv: 1 infinite value(s) in column 'first_token_latency(ms)' were treated as missing",
        "request.csv: 1 negative value(s) in column 'first_token_latency(ms)' were treated as missing",
    ]


def test_a_file_damaged_part_way_is_read_up_to_the_damage(tmp_path, monkeypatch):
    monkeypatch.setattr(service_reader, "_BLOCK_BYTES", 4096)  # so that the damage lies in a later block
    rows = "".join(f"{i},{i * 2}\n" for i in range(2000))
    damaged = '"' + "x\n" * 6000 + '",1\n'  # a quoted cell of lines longer than a block: damage, or a hostile file
    (tmp_path / "request.csv").write_text(f"first_token_latency(ms),queue_wait_time(ms)\n{rows}{damaged}" + "3,4\n" * 100)
    data, coverage = _read(tmp_path)
    (partly,) = coverage.partly_read
    assert partly.file == "request.csv"
    assert partly.reason.startswith("it cannot be parsed past row 2,000 (straddling object straddles two block")
    assert data.request.rows == 2000 and np.array_equal(data.request.columns["ttft_ms"], np.arange(2000))


def test_hostile_entries_under_service_names_are_skipped_never_opened_blocking(tmp_path):
    os.mkfifo(tmp_path / "request.csv")  # a FIFO with no writer would block a plain open()
    (tmp_path / "batch.csv").mkdir()
    (tmp_path / "kvcache.csv").symlink_to(tmp_path / "nowhere")
    (tmp_path / "forward.csv").write_text("batch_type,batch_size\ndecode,3\nprefill,1\n")
    (tmp_path / "huge_summary.csv").write_bytes(b"Metric,Value\n" + b"a,1\n" * 300_000)
    (tmp_path / "odd_summary.csv").write_text("no,numbers\nat,all\n")
    data, coverage = _read(tmp_path)
    reasons = {s.file: s.reason for s in coverage.skipped}
    assert reasons == {
        "request.csv": "is not a regular file", "batch.csv": "is not a regular file",
        "kvcache.csv": f"is a symbolic link that leads nowhere (to {tmp_path / 'nowhere'})",
        "huge_summary.csv": "is 1.1 MiB, over the 1.0 MiB this file can have",
        "odd_summary.csv": "holds no metric with a number"}
    assert data.forward.rows == 2 and list(data.forward.columns["phase"]) == ["decode", "prefill"]


def test_a_huge_file_is_read_whole_in_bounded_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(service_reader, "MAX_KEPT_ROWS", 1000)
    monkeypatch.setattr(service_reader, "_BLOCK_BYTES", 16 << 10)  # many blocks: the sample spans them
    rows = 25_013
    usage = (np.arange(rows) % 100) / 100
    (tmp_path / "kvcache.csv").write_text("rid,timestamp(ms),kvcache_usage_rate\n"
                                          + "".join(f"{i},{i * 1.5:.1f},{u:.2f}\n" for i, u in enumerate(usage)))
    data, coverage = _read(tmp_path)
    table = data.kvcache
    assert table.rows == rows  # counted exactly
    assert table.stride == 32 and len(table.columns["kv_usage"]) <= 1000  # held: every 32nd row
    np.testing.assert_allclose(table.columns["time_ms"], np.arange(0, rows, 32) * 1.5)  # evenly spaced, aligned
    np.testing.assert_allclose(table.columns["kv_usage"], usage[::32])
    assert coverage.warnings == ["kvcache.csv: 25,013 rows: percentiles and shares come from every 32th row "
                                 "(782 rows) to bound memory; counts are exact"]


# --- the facts ------------------------------------------------------------------------------------------------------

def test_the_facts_are_the_numbers_the_builder_wrote(run):
    fact, coverage = _service_fact(SERVICE)
    ttft, queue = run.column("ttft_ms"), run.column("queue_ms")
    near = {"rel": 1e-6, "abs": 2e-3}  # the files hold times to the µs
    assert fact.request_count == 300
    for q, got in ((50, fact.ttft_p50_ms), (90, fact.ttft_p90_ms), (99, fact.ttft_p99_ms)):
        assert got == pytest.approx(np.percentile(ttft, q), **near)
    assert fact.queue_wait_p50_ms == pytest.approx(np.percentile(queue, 50), **near)
    assert fact.queue_wait_p90_ms == pytest.approx(np.percentile(queue, 90), **near)
    assert fact.queue_share_of_ttft == pytest.approx(queue.sum() / ttft.sum(), rel=1e-5)
    gaps = run.token_gaps()
    assert fact.tpot_from == "summary"
    assert fact.tpot_p50_ms == pytest.approx(np.percentile(gaps, 50), abs=1e-3)
    assert fact.tpot_p90_ms == pytest.approx(np.percentile(gaps, 90), abs=1e-3)
    span = service_span_s(run)
    tokens = sum(len(r.token_ms) for r in run.requests)
    assert fact.output_tokens_per_s == pytest.approx(tokens / span, abs=1e-4)
    assert fact.requests_per_s == pytest.approx(300 / span, abs=1e-4)
    assert fact.duration_s == pytest.approx((max(r.arrival_ms + r.e2e_ms for r in run.requests)
                                             - min(r.arrival_ms for r in run.requests)) / 1000, abs=1e-5)
    prefill = np.array([b.prefill for b in run.batches if b.prefill], dtype=float)
    decode = np.array([b.decode for b in run.batches if b.decode], dtype=float)
    assert (fact.batches, fact.batch_source) == (len(run.batches), "batch")
    assert fact.prefill_batch_mean == pytest.approx(prefill.mean())
    assert fact.prefill_batch_p90 == pytest.approx(np.percentile(prefill, 90))
    assert fact.prefill_batch_max == prefill.max()
    assert fact.decode_batch_mean == pytest.approx(decode.mean())
    assert fact.decode_batch_p90 == pytest.approx(np.percentile(decode, 90))
    assert fact.decode_batch_max == decode.max()
    assert fact.max_batch_size == 200 and fact.decode_batch_fill == pytest.approx(decode.mean() / 200)
    usage = np.array([b.kv_usage for b in run.batches])
    assert fact.kv_usage_source == "batch"
    assert fact.kv_usage_p50 == pytest.approx(np.percentile(usage, 50), abs=1e-6)
    assert fact.kv_usage_p90 == pytest.approx(np.percentile(usage, 90), abs=1e-6)
    assert fact.kv_usage_max == pytest.approx(usage.max(), abs=1e-6)
    assert fact.kv_full_share == pytest.approx(np.mean(np.round(usage, 6) >= 0.95))
    assert "request.csv[first_token_latency(ms), queue_wait_time(ms), start_time(ms), execution_time(ms)]" in fact.sources
    assert "batch.csv[kvcache_usage_rate]" in fact.sources and "service_summary.csv[max_batch_size]" in fact.sources
    assert coverage.warnings == []


def test_both_readings_of_a_profile_give_the_same_service_fact():
    """load_profile + extract_facts (advisor compare's way) and cluster.run (advisor diagnose's)."""
    (whole,) = extract_facts(load_profile(SERVICE)).of(ServiceFact)
    assert whole == _service_fact(SERVICE)[0]


def test_without_summaries_time_per_token_and_throughput_come_from_the_requests(tmp_path, run):
    directory = write_output(tmp_path / "svc", run)
    for summary in directory.glob("*summary.csv"):
        summary.unlink()
    fact, _ = _service_fact(directory)
    tokens = run.column("output_tokens")
    per_request = (run.column("e2e_ms") - run.column("ttft_ms")) / (tokens - 1)
    assert fact.tpot_from == "requests"
    assert fact.tpot_p50_ms == pytest.approx(np.percentile(per_request, 50), rel=1e-5)
    assert fact.tpot_p90_ms == pytest.approx(np.percentile(per_request, 90), rel=1e-5)
    assert fact.output_tokens_per_s == pytest.approx(tokens.sum() / service_span_s(run), rel=1e-6)
    assert fact.max_batch_size is None and fact.decode_batch_fill is None  # the limit was in the summary


def test_another_versions_names_units_and_layout_give_the_same_facts(tmp_path, run):
    """Columns renamed and reordered, times in µs, usage in percent, the limit as a batch.csv column, the batches from
    forward.csv's batch_size by type and the KV usage from kvcache.csv."""
    reference, _ = _service_fact(SERVICE)
    directory = tmp_path / "svc"
    directory.mkdir()
    rows = [[f"{(EPOCH_MS + r.arrival_ms) * 1000:.0f}", f"{r.ttft_ms * 1000:.0f}", f"{r.queue_ms * 1000:.0f}",
             f"{r.e2e_ms * 1000:.0f}", len(r.token_ms), r.rid] for r in run.requests]
    _write(directory / "Request.CSV", ["Start Time (us)", "First Token Latency (us)", "Queue Wait Time (us)",
                                       "E2E Time (us)", "Output Token Num", "RID"], rows)
    _write(directory / "forward.csv", ["forward_iter", "batch_size", "batch_type", "maxBatchSize"],
           [[i, b.prefill + b.decode, b.phase.capitalize(), run.max_batch_size] for i, b in enumerate(run.batches)])
    _write(directory / "kvcache.csv", ["rid", "timestamp(ms)", "kvcache_usage_rate"],
           [[b.start_ms, b.start_ms, f"{b.kv_usage * 100:.4f}"] for b in run.batches])
    fact, coverage = _service_fact(directory)
    assert coverage.warnings == []
    assert (fact.batch_source, fact.kv_usage_source, fact.tpot_from) == ("forward", "kvcache", "requests")
    for name in ("request_count", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "queue_wait_p50_ms", "queue_wait_p90_ms",
                 "queue_share_of_ttft", "batches", "prefill_batch_mean", "prefill_batch_p90", "prefill_batch_max",
                 "decode_batch_mean", "decode_batch_p90", "decode_batch_max", "max_batch_size", "decode_batch_fill",
                 "kv_usage_p50", "kv_usage_p90", "kv_usage_max", "kv_full_share", "duration_s"):
        assert getattr(fact, name) == pytest.approx(getattr(reference, name), rel=1e-5, abs=1e-3), name


def _write(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


# --- the rules ------------------------------------------------------------------------------------------------------

def test_on_the_fixture_queueing_and_a_full_kv_cache_fire_and_the_low_decode_batch_is_left_to_them():
    code, report = _diagnose_json(SERVICE)
    assert code == 0 and report["status"] == "complete"
    assert _fired(report) == [QUEUEING, KV_FULL]  # the decode batch is 12 % of its limit, but the cache caps it
    assert report["input"]["format"] == "msserviceprofiler" and report["summary"]["bottleneck"] == "unknown"
    queueing = report["findings"][0]
    assert queueing["severity"] == "high" and queueing["estimated_gain_us"] is None
    assert "81% of the summed time to first token is queue wait, most of it in the slowest requests" in queueing["explanation"]


def test_service_data_alone_has_a_verdict_of_what_the_requests_saw():
    """No device profile, so no step breakdown: the verdict says what the service-level data does (requests, TTFT and
    its queueing, TPOT, the decode batch against its limit, the KV cache), not 'no verdict'."""
    from advisor.render.common import report_labels, verdict_sentence

    report = advisor_diagnose(SERVICE)
    sentence = verdict_sentence(report, report_labels(report))
    assert sentence.startswith("Service-level data only, no device profile")
    for part in ("300 requests", "TTFT median 111.0 ms", "81.4% of the summed TTFT queueing", "TPOT median 28.0 ms",
                 "decode batch 24.7 on average of a limit of 200", "KV cache up to 100.0% used"):
        assert part in sentence


@pytest.mark.parametrize(("settings", "fired"), [
    # light traffic on a large cache: decode batches of 15 (at most 30) of the 200 allowed, the cache 11 % used at p90
    ({"rate_per_s": 2.2, "total_blocks": 2000}, [DECODE_LOW]),
    # a batch limit of 16 binds before the cache (5 % used at p90): requests queue, the decode batch is at its limit
    ({"rate_per_s": 3.3, "total_blocks": 4000, "max_batch_size": 16}, [QUEUEING]),
    # short prompts, long answers: requests are admitted at once (p90 wait 23 ms), then their growing sequences fill the
    # cache (13 % of batches at 95 % or more, 56 preemptions)
    ({"rate_per_s": 1.1, "total_blocks": 80, "input_median": 64, "output_median": 600, "requests": 150}, [KV_FULL]),
])
def test_each_rule_fires_on_the_run_built_for_it_and_only_there(tmp_path, settings, fired):
    directory = write_output(tmp_path / "svc", simulate(**settings))
    code, report = _diagnose_json(directory)
    assert code == 0
    assert _fired(report) == fired, report["facts"][-1]


# --- end to end -----------------------------------------------------------------------------------------------------

def test_the_command_line_diagnoses_the_fixture():
    done = subprocess.run([sys.executable, "-m", "advisor", "diagnose", str(SERVICE)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 0 and done.stderr == ""
    out = done.stdout
    assert "Format: msserviceprofiler" in out
    assert "Verdict: Service-level data only, no device profile" in out
    first, second = (out.index(t) for t in ("HIGH Queue waits make most of the time to first token, in the slowest requests",
                                            "MEDIUM The KV cache runs full"))
    assert first < second
    assert "Give the service more capacity" in out and "Give the KV cache more room" in out


def test_a_service_directory_whose_files_are_all_broken_exits_4_naming_them(tmp_path):
    (tmp_path / "request.csv").write_bytes(b"")
    (tmp_path / "batch.csv").write_text("name,age\nada,36\n")
    done = subprocess.run([sys.executable, "-m", "advisor", "diagnose", str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 4, done.stderr
    assert "skipped request.csv: is empty" in done.stderr
    assert "skipped batch.csv: has none of the columns advisor reads" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_a_service_file_given_directly_diagnoses_its_directory(tmp_path):
    layout = discover(SERVICE / "request.csv")
    assert (layout.format, layout.service, [r.rank for r in layout.ranks]) == ("msserviceprofiler", SERVICE, [0])


def test_two_service_directories_read_the_first_and_name_the_other(tmp_path):
    for name in ("a", "b"):
        shutil.copytree(SERVICE, tmp_path / name)
    layout = discover(tmp_path)
    assert layout.service == tmp_path / "a"
    assert layout.warnings == ["msServiceProfiler output in 1 more directory was not read (e.g. b); diagnose each on "
                               "its own"]


@pytest.fixture(scope="module")
def plain_report() -> dict:
    return _diagnose_json(REAL)[1]


@pytest.mark.parametrize("where", [".", "service"])
def test_beside_a_profile_the_service_facts_join_it(tmp_path, plain_report, where):
    profile = tmp_path / "prof"
    shutil.copytree(REAL, profile)
    for name in (n for n in os.listdir(SERVICE) if n.endswith(".csv")):
        (profile / where).mkdir(exist_ok=True)
        shutil.copy(SERVICE / name, profile / where / name)
    code, report = _diagnose_json(profile)
    assert code == 0 and report["status"] == "complete"
    assert report["input"]["format"] == "ascend-pytorch" and report["input"]["ranks"] == [0, 1]
    assert report["summary"] == plain_report["summary"]  # the profile's own diagnosis is unchanged
    prefix = "" if where == "." else f"{where}/"
    assert f"{prefix}request.csv" in report["coverage"]["read"]
    (service,) = [f for f in report["facts"] if f["type"] == "service"]
    assert service["request_count"] == 300 and service["queue_share_of_ttft"] == pytest.approx(0.8144, abs=1e-4)
    fired = _fired(report)
    # the profile's own findings keep their order; the service's rank among them by their gains
    assert [f for f in fired if f not in (QUEUEING, KV_FULL)] == _fired(plain_report) and {QUEUEING, KV_FULL} <= set(fired)
    assert set(fired) - {QUEUEING, KV_FULL} == set(_fired(plain_report))
    assert not any("msServiceProfiler" in w for w in report["coverage"]["warnings"])


def test_a_rank_directory_given_directly_reads_the_service_files_inside_it(tmp_path):
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(REAL / "rank0_ascend_pt", rank)
    shutil.copy(SERVICE / "request.csv", rank / "request.csv")
    layout = discover(rank)
    assert (layout.format, layout.service) == ("ascend-pytorch", rank)
    assert discover(REAL / "rank0_ascend_pt").service is None
