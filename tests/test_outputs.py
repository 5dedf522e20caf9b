"""Outputs never lose data: reports are written whole or not at all, never over an input, and the rule catalogue
and scaffold never remove or write through what they did not create (advisor/cli/output.py, ruledocs.py, scaffold.py)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLE_SINGLE
from typer.testing import CliRunner

from advisor.cli import app

ROOT = Path(__file__).resolve().parents[1]
PROFILE = SAMPLE_SINGLE.parent


def _invoke(*arguments: str):
    return CliRunner().invoke(app, list(arguments), env={"LANG": "C.UTF-8", "COLUMNS": "100"})


def _small_files_only() -> None:
    """In the child: files may not grow past 4 KiB (as on a full disk: writes fail), and that is not fatal."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


@pytest.mark.parametrize("fmt", ["md", "terminal"])
def test_a_report_that_cannot_be_written_whole_leaves_the_previous_one(tmp_path, fmt):
    report = tmp_path / "report.md"
    report.write_text("the previous report\n")
    done = subprocess.run([sys.executable, "-m", "advisor", "diagnose", str(PROFILE), "-f", fmt, "-o", str(report),
                           "--detail", "full"],  # the full report: more than the 4 KiB the child may write
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          preexec_fn=_small_files_only, env={**os.environ, "ADVISOR_CACHE_DIR": ""})
    assert done.returncode == 2, done.stderr
    assert "cannot write the report" in done.stderr and "Traceback" not in done.stderr
    assert report.read_text() == "the previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"], "a partial file was left behind"


def test_a_report_replaces_the_previous_one_and_keeps_its_permissions(tmp_path):
    report = tmp_path / "report.md"
    report.write_text("old")
    report.chmod(0o640)
    result = _invoke("diagnose", str(PROFILE), "-o", str(report))
    assert result.exit_code == 0, result.stderr
    assert report.read_text().startswith("# ") and oct(report.stat().st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


@pytest.mark.parametrize("existing", [True, False])
def test_a_link_is_never_written_through_and_a_device_is_written_directly(tmp_path, existing):
    """Root writing ``-o /tmp/x.json`` must not replace the file a link planted there points to (nor create the file a
    dangling one names): exit 2 before any work, the link and its target untouched; /dev/null and /dev/stdout (a link
    to a device) are written directly."""
    victim = tmp_path / "victim.conf"
    if existing:
        victim.write_text("keep me\n")
    link = tmp_path / "x.json"
    link.symlink_to(victim)
    result = _invoke("diagnose", str(PROFILE), "-f", "json", "-o", str(link))
    assert result.exit_code == 2
    assert f"{link}: is a symbolic link (to {victim}); a report is never written through a link" in result.stderr
    assert link.is_symlink() and (victim.read_text() == "keep me\n" if existing else not victim.exists())
    assert _invoke("diagnose", str(PROFILE), "-f", "json", "-o", "/dev/null").exit_code == 0
    written = subprocess.run([sys.executable, "-m", "advisor", "diagnose", str(PROFILE), "-f", "json", "-o", "/dev/stdout"],
                             capture_output=True, text=True, cwd=ROOT)
    assert written.returncode == 0 and written.stdout.lstrip().startswith("{")


@pytest.fixture
def profile(tmp_path):
    copy = tmp_path / "prof"
    shutil.copytree(PROFILE, copy)
    return copy


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("target", [
    "*/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "*/ASCEND_PROFILER_OUTPUT/trace_view.json",
    "*/profiler_info_0.json",
    "*/PROF_*/device_0/info.json.0",
])
def test_an_output_that_is_an_input_file_is_refused(profile, target):
    output = next(profile.glob(target))
    before = _snapshot(profile)
    result = _invoke("diagnose", str(profile), "-f", "md", "-o", str(output))
    assert result.exit_code == 2, result.stderr
    assert "is an input of this run" in result.stderr
    assert _snapshot(profile) == before


def test_an_output_that_is_the_trace_or_the_context_is_refused(tmp_path):
    from builders import GpuJob, write_gpu_job

    write_gpu_job(tmp_path / "gpu", GpuJob(ranks=1))
    trace = next((tmp_path / "gpu").glob("*.pt.trace.json"))
    original = trace.read_bytes()
    result = _invoke("diagnose", str(trace), "-f", "json", "-o", str(trace))
    assert result.exit_code == 2 and "is an input of this run" in result.stderr
    assert trace.read_bytes() == original
    context = tmp_path / "model.yaml"
    context.write_text("micro_batch_size: 4\n")
    result = _invoke("diagnose", str(PROFILE), "--context", str(context), "-f", "md", "-o", str(context))
    assert result.exit_code == 2 and context.read_text() == "micro_batch_size: 4\n"
    result = _invoke("compare", str(trace), str(PROFILE), "-f", "json", "-o", str(trace))
    assert result.exit_code == 2 and trace.read_bytes() == original


def test_a_report_inside_the_profile_directory_is_fine(profile):
    output = profile / "report.md"
    output.write_text("old")
    assert _invoke("diagnose", str(profile), "-o", str(output)).exit_code == 0
    assert output.read_text().startswith("# ")


def test_rules_docs_removes_and_replaces_only_its_own_pages(tmp_path):
    out = tmp_path / "docs"
    assert _invoke("rules", "docs", "-o", str(out)).exit_code == 0
    stale = out / "rules" / "team.gone.md"
    stale.write_text((out / "rules" / "host.device_idle.md").read_text().replace("host.device_idle", "team.gone"))
    notes = out / "rules" / "notes.md"
    notes.write_text("my notes on the rules\n")
    knowledge_notes = out / "knowledge" / "reading-list.md"
    knowledge_notes.write_text("- a paper\n")
    assert _invoke("rules", "docs", "-o", str(out)).exit_code == 0
    assert not stale.exists()  # a page it generated, for a rule that is gone
    assert notes.read_text() == "my notes on the rules\n" and knowledge_notes.exists()


def test_rules_docs_does_not_overwrite_a_readme_it_did_not_write(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# My project\n")
    result = _invoke("rules", "docs", "-o", str(tmp_path))
    assert result.exit_code == 2 and "was not written by advisor rules docs; not overwritten" in result.stderr
    assert readme.read_text() == "# My project\n"
    assert not (tmp_path / "rules").exists()


def test_rules_new_does_not_write_through_a_dangling_link(tmp_path):
    pack = tmp_path / "pack"
    (pack / "rules" / "io").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.yaml"
    (pack / "rules" / "io" / "team.slow.yaml").symlink_to(elsewhere)
    result = _invoke("rules", "new", "team.slow", "--category", "io", "--dir", str(pack))
    assert result.exit_code == 2 and "already exists; not overwritten" in result.stderr
    assert not elsewhere.exists()
    assert not (pack / "knowledge").exists()
