"""The command line, run as users run it (a subprocess): outputs, messages and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from builders import RankSpec, build_rank
from conftest import REAL, SAMPLE_CLUSTER, SAMPLE_SINGLE


def advisor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args], capture_output=True, text=True, env=environment, timeout=120
    )


def test_diagnose_terminal_on_the_real_cluster():
    result = advisor("diagnose", str(REAL))
    assert result.returncode == 0, result.stderr
    assert "communication-bound" in result.stdout
    assert "The profiled ranks wait together for ranks that were not profiled" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(("suffix", "probe"), [(".json", '"schema_version": 1'), (".md", "## Findings"), (".html", "<!DOCTYPE html>")])
def test_output_format_follows_the_file_suffix(tmp_path, suffix, probe):
    target = tmp_path / f"report{suffix}"
    result = advisor("diagnose", str(SAMPLE_CLUSTER), "-o", str(target))
    assert result.returncode == 0, result.stderr
    assert probe in target.read_text(encoding="utf-8")
    assert f"report written to {target}" in result.stderr
    assert result.stdout == ""


def test_json_to_stdout_is_pure_json():
    result = advisor("diagnose", str(SAMPLE_SINGLE), "--format", "json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["summary"]["bottleneck"] == "communication"


def test_language_from_flag_and_from_locale():
    assert "通信瓶颈" in advisor("diagnose", str(SAMPLE_SINGLE), "--lang", "zh").stdout
    assert "通信瓶颈" in advisor("diagnose", str(SAMPLE_SINGLE), env={"LANG": "zh_CN.UTF-8"}).stdout
    assert "communication-bound" in advisor("diagnose", str(SAMPLE_SINGLE), "--lang", "en", env={"LANG": "zh_CN.UTF-8"}).stdout


@pytest.mark.parametrize(("threshold", "code"), [("high", 1), ("medium", 1), ("low", 1)])
def test_fail_on_gates_ci(threshold, code):
    assert advisor("diagnose", str(SAMPLE_SINGLE), "--fail-on", threshold, "-f", "json").returncode == code


def test_fail_on_passes_when_nothing_reaches_the_threshold(tmp_path):
    build_rank(tmp_path, RankSpec(omit=("step_trace_time.csv", "trace_view.json")))  # only a profiling finding
    result = advisor("diagnose", str(tmp_path), "--fail-on", "high", "-f", "json")
    assert result.returncode == 0, result.stderr
    severities = {f["severity"] for f in json.loads(result.stdout)["findings"]}
    assert "high" not in severities


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["diagnose", "/no/such/profile"], "/no/such/profile: no such file or directory"),
        (["diagnose", str(REAL / "rank0_ascend_pt/profiler_info_0.json")], "profiler_info_0.json: is a file"),
        (["diagnose", str(REAL), "-o", "report.pdf"], "report.pdf: cannot tell the format from the suffix"),
        (["diagnose", str(REAL), "--format", "pdf"], "Invalid value for '--format'"),
        (["diagnose"], "Missing argument 'PATH'"),
        (["facts", "--list", "--family", "nope"], "unknown fact family 'nope'"),
        (["facts"], "give a profile PATH, or --list"),
    ],
)
def test_usage_and_input_errors_exit_2_with_one_clear_line(args, message):
    result = advisor(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_empty_directory_is_not_a_profile(tmp_path):
    result = advisor("diagnose", str(tmp_path))
    assert result.returncode == 2 and "no profiler output found" in result.stderr


def test_partial_profile_reports_what_it_could_and_exits_3(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec())
    (rank_dir / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").write_bytes(b"\x00\x00garbage")
    result = advisor("diagnose", str(tmp_path), "-f", "json")
    assert result.returncode == 3
    assert "skipped localhost_2231054_20251127192733120_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv: is binary" in result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "partial"
    assert report["summary"]["bottleneck"] == "communication"  # the readable step trace still diagnosed
    assert report["coverage"]["skipped"][0]["reason"] == "is binary, not CSV text"


def test_nothing_diagnosable_exits_4_but_still_says_what_to_collect(tmp_path):
    build_rank(tmp_path, RankSpec(omit=("step_trace_time.csv", "kernel_details.csv", "op_statistic.csv", "trace_view.json")))
    result = advisor("diagnose", str(tmp_path), "-f", "md")
    assert result.returncode == 4
    assert "nothing could be diagnosed" in result.stderr
    assert "No step-time breakdown in the profile" in result.stdout
    assert "prof.step()" in result.stdout


CRASH = (
    "import sys, advisor.cli as cli\n"
    "def boom(*args, **kwargs):\n"
    "    raise RuntimeError('simulated bug')\n"
    "cli.diagnose = boom\n"
    "sys.argv = ['advisor', *sys.argv[1:]]\n"
    "cli.main()\n"
)


def test_internal_errors_are_one_line_and_exit_70():
    result = subprocess.run([sys.executable, "-c", CRASH, "diagnose", str(REAL)], capture_output=True, text=True)
    assert result.returncode == 70
    assert "internal error: RuntimeError: simulated bug (rerun with --debug for the traceback)" in result.stderr
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback():
    result = subprocess.run([sys.executable, "-c", CRASH, "diagnose", str(REAL), "--debug"], capture_output=True, text=True)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "simulated bug" in result.stderr


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read a file with mode 000")
def test_unreadable_file_is_skipped(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec())
    (rank_dir / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv").chmod(0)
    result = advisor("diagnose", str(tmp_path), "-f", "json")
    assert result.returncode == 3 and "permission denied" in result.stderr


def test_facts_lists_the_catalogue():
    result = advisor("facts", "--list")
    assert result.returncode == 0
    for family in ("context", "step", "breakdown", "operator", "communication", "memory", "bottleneck"):
        assert f"\n{family} (" in "\n" + result.stdout
    assert "share_of_compute" in result.stdout and "source: kernel_details.csv" in result.stdout


def test_facts_of_a_profile_as_text_and_json():
    text = advisor("facts", str(REAL / "rank0_ascend_pt"), "--family", "communication")
    assert text.returncode == 0
    assert text.stdout.startswith("communication communication:r0:collective\n")
    assert "    transit_share: 0.0347" in text.stdout
    assert "sources: rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json[Communication Time Info]" in text.stdout
    facts = json.loads(advisor("facts", str(REAL), "--json").stdout)
    assert {f["type"] for f in facts} >= {"context", "step", "breakdown", "operator", "communication", "transport",
                                          "memory", "allocation", "environment", "spread", "bottleneck"}


def test_version():
    result = advisor("--version")
    assert result.returncode == 0 and result.stdout.startswith("advisor ")


def test_rules_test_runs_every_embedded_case():
    result = advisor("rules", "test")
    assert result.returncode == 0, result.stdout
    assert "PASS operator.dominant_type: fires on FlashAttentionScore" in result.stdout
    assert result.stdout.rstrip().endswith("0 failed")
    selected = advisor("rules", "test", "-k", "bottleneck.host")  # bottleneck.host and bottleneck.host_profile
    assert selected.returncode == 0 and selected.stdout.rstrip().endswith("7 passed, 0 failed")


def test_progress_shows_each_file_on_a_terminal_and_nothing_on_a_pipe(tmp_path):
    import pty

    controller, terminal = pty.openpty()
    environment = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "TERM": "xterm", "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "advisor", "diagnose", str(REAL), "-f", "json"], stdout=subprocess.PIPE,
                            stderr=terminal, env=environment, timeout=120, check=False)
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert result.returncode == 0
    assert re.search(rb"Reading rank\d_ascend_pt/ASCEND_PROFILER_OUTPUT/\S+ \([\d.,]+ MB; file \d+", shown), shown[-500:]
    json.loads(result.stdout)  # the report on stdout is untouched by the progress display
    piped = advisor("diagnose", str(REAL), "-f", "json")
    assert piped.stderr == "" and json.loads(piped.stdout)["schema_version"] == 1
