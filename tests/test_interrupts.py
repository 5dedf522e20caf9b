"""Ctrl-C and a dying parent with forked workers (advisor/parallel.py, cli.main, errors.quiet_interrupt_while_starting).

Workers ignore SIGINT and die with their parent; an interrupted run kills its workers and exits 130 with
one line on standard error, even while workers are busy; Ctrl-C while the program is still importing
prints no traceback. The deadlines below only bound how long a test may wait for something that must
happen (a run that does not end is a hang); none of them measures speed.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor import parallel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers are Linux only")

CLUSTER = Path(__file__).parent / "fixtures" / "samples" / "cluster_2ranks"
SINGLE = Path(__file__).parent / "fixtures" / "samples" / "single_rank"
ROOT = Path(__file__).resolve().parents[1]

# Diagnoses a two-rank cluster with two processes; the worker, reading rank 1, writes its pid and sleeps.
_SLOW_WORKER = """
import dataclasses, os, sys, time
from advisor import parallel
from advisor.ingest import formats

pids, profile = sys.argv[1], sys.argv[2]
ascend = formats.FORMATS[0]

def slow(rank, base, coverage, survey):
    if parallel.in_worker():
        with open(pids, "a") as handle:
            handle.write(f"{os.getpid()}\\n")
        time.sleep(600)
    return ascend.read(rank, base, coverage, survey)

formats.FORMATS[0] = dataclasses.replace(ascend, read=slow)
from advisor.cli import main
sys.argv = ["advisor", "diagnose", profile, "-f", "json", "--jobs", "2"]
main()
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has died; only its parent has not collected it


def _wait_for(condition, deadline: float) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _start_slow_run(tmp_path: Path, **options) -> tuple[subprocess.Popen, Path]:
    pids = tmp_path / "worker-pids"
    process = subprocess.Popen([sys.executable, "-c", _SLOW_WORKER, str(pids), str(CLUSTER)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)
    assert _wait_for(lambda: pids.exists() and pids.read_text().strip(), 120), "no worker started"
    return process, pids


def _workers(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()]


def _kill_leftovers(process: subprocess.Popen, pids: Path) -> None:
    for pid in [process.pid, *(_workers(pids) if pids.exists() else [])]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.communicate()


def test_workers_ignore_sigint(monkeypatch):
    monkeypatch.setenv("ADVISOR_JOBS", "2")
    handlers = parallel.fork_map(lambda _item: (parallel.in_worker(), signal.getsignal(signal.SIGINT) == signal.SIG_IGN),
                                 [0, 1])
    assert handlers == [(False, False), (True, True)]


def test_a_daemonic_process_does_not_fork():
    context = multiprocessing.get_context("fork")
    answers = context.SimpleQueue()
    child = context.Process(target=lambda: answers.put(parallel.can_fork()), daemon=True)
    child.start()
    child.join(60)
    assert answers.get() is False
    assert parallel.can_fork()


def test_an_interrupted_run_kills_its_busy_workers_and_exits_130(tmp_path):
    process, pids = _start_slow_run(tmp_path)
    try:
        os.kill(process.pid, signal.SIGINT)  # the parent only: its worker sleeps on
        try:
            _stdout, stderr = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the interrupted run waited for its worker instead of ending")
        assert process.returncode == 130, stderr
        assert "advisor: error: interrupted" in stderr and "Traceback" not in stderr
        assert _wait_for(lambda: not any(_alive(pid) for pid in _workers(pids)), 60), "a worker outlived the run"
    finally:
        _kill_leftovers(process, pids)


def test_ctrl_c_in_a_terminal_reaches_every_process_and_still_exits_130(tmp_path):
    process, pids = _start_slow_run(tmp_path, start_new_session=True)
    try:
        os.killpg(process.pid, signal.SIGINT)  # what a terminal does: the whole process group
        try:
            _stdout, stderr = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the run did not end after Ctrl-C")
        assert process.returncode == 130, stderr
        assert "Traceback" not in stderr
        assert _wait_for(lambda: not any(_alive(pid) for pid in _workers(pids)), 60)
    finally:
        _kill_leftovers(process, pids)


def test_workers_die_with_their_parent(tmp_path):
    process, pids = _start_slow_run(tmp_path)
    try:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        assert _wait_for(lambda: not any(_alive(pid) for pid in _workers(pids)), 60), \
            "the workers of a killed run kept running"
    finally:
        _kill_leftovers(process, pids)


# Sends SIGINT to itself while advisor's dependencies are being imported, as an early Ctrl-C would.
_INTERRUPTED_IMPORT = """
import os, signal, sys

class InterruptOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptOnImport())
sys.argv = [os.path.join(os.path.dirname(sys.executable), "advisor"), "diagnose", sys.argv[1]]
from advisor.cli import main
main()
"""


def test_ctrl_c_while_importing_prints_one_line_and_no_traceback():
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_IMPORT, str(SINGLE)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "advisor: error: interrupted\n"


@pytest.mark.parametrize("loaded", ["numpy", "pyarrow", "durable_rules", "msgspec"])
def test_ctrl_c_at_any_moment_of_a_real_run_prints_no_traceback(loaded):
    """SIGINT once the run has loaded a given library: while importing (numpy comes first) or later, reading."""
    process = subprocess.Popen([sys.executable, "-m", "advisor", "diagnose", str(SINGLE), "-f", "json"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def has_loaded() -> bool:
        try:
            return loaded in Path(f"/proc/{process.pid}/maps").read_text()
        except OSError:
            return True  # it has ended

    _wait_for(has_loaded, 120)
    process.send_signal(signal.SIGINT)
    try:
        _stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("the run did not end after Ctrl-C")
    assert "Traceback" not in stderr
    assert process.returncode in (130, 0), stderr  # 0: it was done before the signal came
    if process.returncode == 130:
        assert stderr.endswith("advisor: error: interrupted\n"), stderr


def test_importing_advisor_as_a_library_leaves_sigint_alone():
    done = subprocess.run([sys.executable, "-c", "import signal, advisor; "
                           "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip() == "True", done.stderr
