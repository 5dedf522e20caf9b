"""Cluster scale (issue 17): one task per rank then a reduce, triage of large clusters, and Dask.

The JSON report must not depend on where the rank tasks ran: the built-in process pool, a Dask LocalCluster, an
existing Dask cluster reached by address, or the old whole-profile path (every rank's tables in this process).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import distributed  # a dev dependency (ascend-perf-advisor[dask]): these tests run in CI, never skipped
import pytest
from builders import GpuJob, build_cluster, write_gpu_job
from conftest import REAL

import advisor.cluster as cluster
from advisor.diagnose import analyse, build_report, default_rulebook, diagnose
from advisor.errors import InputError
from advisor.facts import extract_facts
from advisor.ingest import load_profile
from advisor.render import render_json


@pytest.fixture(scope="module")
def dask_cluster():
    local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = distributed.Client(local)
    yield local, client
    client.close()
    local.close()


@pytest.fixture(scope="module")
def cluster32(tmp_path_factory) -> Path:
    return build_cluster(tmp_path_factory.mktemp("cluster32"), ranks=32)


def _json(path: Path, **options) -> str:
    return render_json(diagnose(path, **options))


def test_a_32_rank_cluster_on_a_dask_local_cluster_gives_the_pools_report_byte_for_byte(cluster32, dask_cluster,
                                                                                       monkeypatch):
    monkeypatch.delenv("ADVISOR_SCHEDULER", raising=False)
    pool = _json(cluster32)
    _local, client = dask_cluster
    on_dask = _json(cluster32, scheduler=client)
    assert on_dask == pool
    report = json.loads(pool)
    assert report["input"]["ranks"] == list(range(32)) and "triage" not in report["input"]
    assert {f["rank"] for f in report["facts"] if f["type"] == "operator"} == set(range(32))


def test_an_address_in_advisor_scheduler_runs_the_tasks_on_that_cluster(cluster32, dask_cluster, monkeypatch):
    local, _client = dask_cluster
    monkeypatch.delenv("ADVISOR_SCHEDULER", raising=False)
    pool = _json(cluster32)
    monkeypatch.setenv("ADVISOR_SCHEDULER", local.scheduler_address)
    assert _json(cluster32) == pool
    monkeypatch.setenv("ADVISOR_SCHEDULER", "pool")  # the built-in pool whatever the environment says
    assert _json(cluster32) == pool


def test_the_reduce_gives_the_facts_of_the_whole_profile_path(cluster32, monkeypatch):
    monkeypatch.delenv("ADVISOR_SCHEDULER", raising=False)
    book = default_rulebook()
    whole = build_report(analyse(cluster32, book, tables=True), book, "en", str(cluster32))
    tasks = build_report(analyse(cluster32, book, tables=False), book, "en", str(cluster32))
    assert render_json(tasks) == render_json(whole)
    _profile, facts = cluster.run(cluster32)
    assert [f.model_dump() for f in facts.facts] == [f.model_dump() for f in extract_facts(load_profile(cluster32)).facts]


def test_a_big_trace_is_read_inside_a_dask_worker(tmp_path, dask_cluster):
    """A trace_view.json over 32 MB is decoded in pieces on several cores by the pool; a Dask worker (a daemonic
    process, running tasks in threads) reads it whole, and the report is the same."""
    rank = shutil.copytree(REAL / "rank0_ascend_pt", tmp_path / "prof" / "rank0_ascend_pt")
    trace = rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = trace.read_bytes().strip()[1:-1]
    trace.write_bytes(b"[" + b",".join([events] * 16) + b"]")
    assert trace.stat().st_size >= 32 << 20
    _local, client = dask_cluster
    assert _json(tmp_path / "prof", scheduler=client) == _json(tmp_path / "prof", scheduler="pool")


def test_triage_analyses_the_outliers_and_a_sample_in_depth_and_every_rank_at_cluster_level(cluster32, monkeypatch):
    monkeypatch.setattr(cluster, "TRIAGE_ABOVE", 8)
    monkeypatch.delenv("ADVISOR_DEEP", raising=False)
    report = diagnose(cluster32)
    triage = report.input.triage
    assert triage is not None and triage.ranks == 32 and triage.threshold == 8
    why = {d.rank: d.reasons for d in triage.deep}
    slow, idle = 32 * 3 // 7, 32 // 5
    assert "most compute" in why[slow] and any(r.startswith("straggler of communicator dp") for r in why[slow])
    assert "most free (idle) time" in why[idle]
    assert sum("typical (step time near the median)" in r for r in why.values()) == cluster.TYPICAL_IN_DEPTH
    assert len(why) < 32
    facts = report.facts
    assert {f["rank"] for f in facts if f["type"] == "operator"} == set(why)
    assert {f["rank"] for f in facts if f["type"] == "breakdown" and f.get("rank") is not None} == set(range(32))
    assert {f["rank"] for f in facts if f["type"] == "communication"} == set(range(32))
    assert {f["rank"] for f in facts if f["type"] == "straggler"} >= {slow}
    (note,) = [w for w in report.coverage.warnings if w.startswith("triage:")]
    assert f"; {slow} (" in note and "most compute" in note and "--deep all" in note
    assert "cluster.collective_straggler" in {f.id for f in report.findings}
    # --deep all, or ADVISOR_DEEP=all: every rank in depth, the report of an untriaged run
    everything = diagnose(cluster32, deep="all")
    assert everything.input.triage is None
    assert {f["rank"] for f in everything.facts if f["type"] == "operator"} == set(range(32))
    monkeypatch.setenv("ADVISOR_DEEP", "all")
    assert render_json(diagnose(cluster32)) == render_json(everything)
    monkeypatch.setenv("ADVISOR_DEEP", "some")
    with pytest.raises(InputError, match="ADVISOR_DEEP"):
        diagnose(cluster32)
    with pytest.raises(InputError, match="deep"):
        diagnose(cluster32, deep="most")


def test_the_deep_facts_of_a_triaged_rank_are_those_of_a_full_run(cluster32, monkeypatch):
    monkeypatch.setattr(cluster, "TRIAGE_ABOVE", 8)
    triaged = diagnose(cluster32)
    full = diagnose(cluster32, deep="all")
    deep = {d.rank for d in triaged.input.triage.deep}
    per_rank = {"operator", "sequence", "memory", "host", "idle", "allocation", "step", "breakdown", "communication"}

    def of(report, ranks):
        return [f for f in report.facts if f["type"] in per_rank and f.get("rank") in ranks]

    assert of(triaged, deep) == of(full, deep)
    shallow = set(range(32)) - deep
    kept = {"step", "breakdown", "communication", "transport"}
    assert of(triaged, shallow) == [f for f in of(full, shallow) if f["type"] in kept]


def test_gpu_traces_numbered_from_their_full_read_match_the_whole_profile_path(tmp_path, monkeypatch):
    """Trace a records rank 2 after its traceEvents (its head says nothing), b no rank, c rank 0: planned from the
    heads as 1, 2, 0, they are numbered 2, 1, 0 once read, and analysed again under those numbers."""
    monkeypatch.delenv("ADVISOR_SCHEDULER", raising=False)
    written = write_gpu_job(tmp_path / "job", GpuJob(ranks=3, nccl_us=1500.0, slow_rank=2, slow_extra_us=800.0))
    documents = [json.loads(path.read_text()) for path in written]
    for path in written:
        path.unlink()
    late = {k: v for k, v in documents[2].items() if k != "distributedInfo"}
    late["distributedInfo"] = {**documents[2]["distributedInfo"], "rank": 2}  # now after traceEvents
    unranked = {k: v for k, v in documents[1].items() if k != "distributedInfo"}
    for name, document in (("a.pt.trace.json", late), ("b.pt.trace.json", unranked), ("c.pt.trace.json", documents[0])):
        (tmp_path / "job" / name).write_text(json.dumps(document))
    book = default_rulebook()
    whole = build_report(analyse(tmp_path / "job", book, tables=True), book, "en", "job")
    tasks = build_report(analyse(tmp_path / "job", book, tables=False), book, "en", "job")
    assert render_json(tasks) == render_json(whole)
    assert any("b.pt.trace.json: records no rank" in w for w in tasks.coverage.warnings)
    assert {f["rank"] for f in tasks.facts if f["type"] == "communication"} == {0, 1, 2}


def test_a_scheduler_without_dask_installed_says_how_to_get_it(cluster32, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(InputError, match=r"advisor\[dask\]"):
        diagnose(cluster32, scheduler="local")


def test_an_unreachable_scheduler_fails_in_seconds_and_a_tls_address_is_refused(cluster32):
    import time

    started = time.monotonic()
    with pytest.raises(InputError, match=r"scheduler 'tcp://127\.0\.0\.1:9': cannot connect to the Dask scheduler"):
        diagnose(cluster32, scheduler="tcp://127.0.0.1:9")
    assert time.monotonic() - started < 15  # was 30 s and more
    with pytest.raises(InputError, match=r"a TLS address needs certificates advisor does not take"):
        diagnose(cluster32, scheduler="tls://127.0.0.1:9")


def test_a_scheduler_that_is_neither_an_address_nor_a_client_is_refused(cluster32):
    with pytest.raises(InputError, match="not 'local'"):
        diagnose(cluster32, scheduler=42)


def test_the_command_line_takes_the_scheduler_and_the_depth(cluster32, dask_cluster, monkeypatch):
    from typer.testing import CliRunner

    from advisor.cli import app

    local, _client = dask_cluster
    monkeypatch.setattr(cluster, "TRIAGE_ABOVE", 8)
    monkeypatch.delenv("ADVISOR_SCHEDULER", raising=False)
    monkeypatch.delenv("ADVISOR_DEEP", raising=False)
    runner = CliRunner()

    def run(*options: str) -> dict:
        result = runner.invoke(app, ["diagnose", str(cluster32), "-f", "json", *options])
        assert result.exit_code in (0, 3), result.output
        return json.loads(result.stdout)

    triaged = run()
    assert triaged["input"]["triage"]["ranks"] == 32
    deep_on_dask = run("--scheduler", local.scheduler_address, "--deep", "all")
    assert "triage" not in deep_on_dask["input"]
    assert deep_on_dask == json.loads(_json(cluster32, deep="all"))
    refused = runner.invoke(app, ["diagnose", str(cluster32), "--deep", "most"])
    assert refused.exit_code == 2 and "--deep" in refused.output


@pytest.fixture()
def own_cluster(tmp_path):
    """A Dask scheduler and one worker (no nanny: a killed worker stays dead) as processes of their own, so a test
    can kill either mid-run; yields (address, scheduler process, worker process)."""
    import subprocess
    import time

    dask = str(Path(sys.executable).with_name("dask"))
    found = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([dask, "scheduler", "--scheduler-file", str(found), "--port", "0",
                                  "--dashboard-address", ":0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not found.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = subprocess.Popen([dask, "worker", "--scheduler-file", str(found), "--no-nanny", "--nthreads", "1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        address = json.loads(found.read_text())["address"]
        with distributed.Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
        yield address, scheduler, worker
    finally:
        for process in (worker, scheduler):
            if process is not None:
                process.kill()
                process.wait()


def _kill_once_running(address: str, process) -> None:
    """Kill ``process`` as soon as the cluster at ``address`` is running one of the run's tasks (from a thread)."""
    import threading
    import time

    def watch() -> None:
        with distributed.Client(address, timeout=30) as client:
            deadline = time.monotonic() + 60
            while not any(client.processing().values()) and time.monotonic() < deadline:
                time.sleep(0.02)
            process.kill()

    threading.Thread(target=watch, daemon=True).start()


def test_a_scheduler_that_dies_mid_run_ends_it_with_one_line_and_no_report(cluster32, own_cluster, tmp_path):
    """It was exit 70 after distributed's reconnection tracebacks on standard error."""
    import subprocess

    address, scheduler, _worker = own_cluster
    run = subprocess.Popen([sys.executable, "-m", "advisor", "diagnose", str(cluster32), "--scheduler", address, "-f",
                            "json", "-o", str(tmp_path / "out.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    _kill_once_running(address, scheduler)
    _stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 69, stderr
    assert stderr.splitlines() == [f"advisor: error: the Dask scheduler at {address} went away during the run; no "
                                   "report was written (restart the cluster, or run without a scheduler to use the "
                                   "built-in process pool)"]
    assert not (tmp_path / "out.json").exists()


def test_a_cluster_left_without_workers_gives_up_after_a_bounded_wait(cluster32, own_cluster, monkeypatch, capfd):
    import time

    import advisor.distributed as on_dask
    from advisor.errors import ClusterGone

    monkeypatch.setattr(on_dask, "WORKERLESS_WAIT_S", 3)
    address, _scheduler, worker = own_cluster
    _kill_once_running(address, worker)
    started = time.monotonic()
    with pytest.raises(ClusterGone, match=rf"the Dask scheduler at {address} has had no workers for 3 s; no report"):
        diagnose(cluster32, scheduler=address)
    assert time.monotonic() - started < 60
    assert "distributed" not in capfd.readouterr().err  # no Dask log lines or tracebacks
