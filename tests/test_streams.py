"""Exit codes when standard output or error misbehave: a reader that goes away (`| head -1`) is not an error (0,
never --fail-on's 1); a full or closed standard output is exit 2 with a message, never 70; a full standard
error does not change the exit code of a clean run. Run as real processes: these are properties of file
descriptors, which an in-process runner does not have."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLE_SINGLE
from typer.testing import CliRunner

from advisor.cli import app

ROOT = Path(__file__).resolve().parents[1]
PROFILE = str(SAMPLE_SINGLE.parent)
ADVISOR = [sys.executable, "-m", "advisor"]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses Linux pipes and /dev/full")


def _reader_gone(arguments: list[str]) -> subprocess.CompletedProcess:
    """Like ``advisor … | head -1`` once head has exited: standard output is a pipe whose reader is gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([*ADVISOR, *arguments], cwd=ROOT, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=300, check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("arguments", [
    ["diagnose", PROFILE, "-f", "json"],
    ["diagnose", PROFILE],
    ["diagnose", PROFILE, "-f", "md", "--fail-on", "low"],
    ["compare", PROFILE, PROFILE],
    ["facts", PROFILE, "--json"],
    ["rules", "list"],
    ["rules", "show", "host.device_idle"],  # small: it sits in the buffer until Python flushes it at exit
    ["--version"],
], ids=["json", "terminal", "md-fail-on", "compare-terminal", "facts", "rules-list", "rules-show", "version"])
def test_a_reader_that_goes_away_is_not_an_error(arguments):
    done = _reader_gone(arguments)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def _run(arguments: list[str], **streams) -> subprocess.CompletedProcess:
    return subprocess.run([*ADVISOR, *arguments], cwd=ROOT, capture_output=not streams, text=True, timeout=300,
                          check=False, **streams)


@pytest.mark.parametrize("fmt", ["json", "md", "terminal"])
def test_a_full_standard_output_is_exit_2_with_a_message(fmt, tmp_path):
    errors = tmp_path / "stderr"
    with open("/dev/full", "w") as full, errors.open("w") as stderr:
        done = _run(["diagnose", PROFILE, "-f", fmt], stdout=full, stderr=stderr)
    text = errors.read_text()
    assert done.returncode == 2, text
    assert "advisor: error: standard output: cannot write the report (No space left on device)" in text
    assert "Traceback" not in text and "Exception ignored" not in text


def test_a_closed_standard_output_is_exit_2_with_a_message():
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *ADVISOR, "diagnose", PROFILE, "-f", "json"], cwd=ROOT,
                          stderr=subprocess.PIPE, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    assert "advisor: error: standard output is closed" in done.stderr


def test_a_full_standard_error_does_not_fail_a_clean_run(tmp_path):
    report = tmp_path / "report.md"
    with open("/dev/full", "w") as full:
        done = _run(["diagnose", PROFILE, "-o", str(report)], stdout=subprocess.DEVNULL, stderr=full)
    assert done.returncode == 0
    assert report.read_text().startswith("# ")


def test_a_closed_standard_error_does_not_fail_a_clean_run(tmp_path):
    report = tmp_path / "report.md"
    done = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", *ADVISOR, "diagnose", PROFILE, "-o", str(report)],
                          cwd=ROOT, stdout=subprocess.DEVNULL, timeout=300, check=False)
    assert done.returncode == 0 and report.read_text().startswith("# ")


@pytest.mark.parametrize("command", ["diagnose", "compare"])
def test_a_terminal_report_to_an_unwritable_file_is_exit_2(tmp_path, command):
    target = [PROFILE] if command == "diagnose" else [PROFILE, PROFILE]
    result = CliRunner().invoke(app, [command, *target, "-f", "terminal", "-o", str(tmp_path / "no" / "such" / "r.txt")])
    assert result.exit_code == 2, result.stderr
    assert "cannot write the report" in result.stderr
