"""Inputs that are no profile are refused with what they hold (issue 29, item 7), and the terminal report keeps the
commands it gives whole and one unit per table.

* A file that is no trace (valid JSON of another shape, CSV, an image, random bytes, an empty file) is an input error
  (exit 2) naming what it holds, with no report — while real traces, CPU-only traces and traces with only some
  sections are diagnosed as before (every trace file under tests/fixtures passes the check).
* Archives of a profile are refused before anything is extracted, hostile ones included.
* An empty directory and a directory of unrelated files are told apart.
* The terminal never wraps a command to copy, its ranking legend is one line, and a table's durations share one unit.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import FIXTURES
from rich.console import Console

import advisor
from advisor.errors import InputError
from advisor.ingest.discover import discover
from advisor.ingest.kinetoformat import KINETO
from advisor.ingest.sniff import trace_problem
from advisor.render import View, render_document, render_terminal

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ascend-level1-2ranks"
RESNET = FIXTURES / "pytorch-tutorial-resnet50" / "num_workers_0"
CPU_ONLY = FIXTURES / "torch-cpu"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"


def run(*args: str, cwd: Path | None = None, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=cwd)


# name, content → what the message says the file holds
NOT_TRACES = [
    ("config.pt.trace.json", b'{"model": "resnet", "lr": 0.1}',
     "a JSON object with the keys model, lr; a trace has traceEvents"),
    ("events.pt.trace.json", b'{"traceEvents": 5}', "a JSON object whose traceEvents is a number, not a list of events"),
    ("numbers.pt.trace.json", b"[1, 2, 3]", "a JSON array of numbers, not of trace events"),
    ("empty-array.pt.trace.json", b"[]", "an empty JSON array"),
    ("table.pt.trace.json", b"name,dur\nkernel,3\n", "CSV text, not JSON, whose first line is 'name,dur'"),
    ("notes.pt.trace.json", b"hello\nworld\n", "text that is not JSON, whose first line is 'hello'"),
    ("image.pt.trace.json", PNG, "a PNG image"),
    ("random.pt.trace.json", bytes(range(256))[::-1] * 4, "binary data, starting with the bytes ff fe fd fc"),
    ("empty.pt.trace.json", b"", "the file is empty"),
    ("blank.pt.trace.json", b" \n\t\n", "the file holds only whitespace"),
    ("plain.pt.trace.json.gz", b'{"traceEvents": []}', "named .gz but not gzip-compressed: a JSON object"),
    ("zipped-csv.pt.trace.json.gz", gzip.compress(b"a,b\n1,2\n"), "CSV text, not JSON, whose first line is 'a,b'"),
    ("bom.pt.trace.json", b'\xef\xbb\xbf{"traceEvents": []}', "a UTF-8 byte order mark"),
]


@pytest.mark.parametrize(("name", "content", "holds"), NOT_TRACES, ids=[case[0] for case in NOT_TRACES])
def test_a_file_named_as_a_trace_that_is_none_is_refused_with_what_it_holds(tmp_path, name, content, holds):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError) as raised:
        discover(path)
    assert str(raised.value).startswith(f"{path}: is not a PyTorch profiler trace (")
    assert holds in str(raised.value)


@pytest.mark.parametrize(("name", "content", "holds"), [
    ("settings.json", b'{"model": "resnet"}', "a JSON object with the key model; a trace has traceEvents"),
    ("kernels.csv", b"name,dur\nkernel,3\n", "CSV text, not JSON"),
    ("chart.png", PNG, "a PNG image"),
    ("blob.bin", os.urandom(0) + b"\x00\x01\x02\x03binary", "binary data"),
])
def test_a_file_no_format_reads_says_what_it_holds(tmp_path, name, content, holds):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError, match=re.escape(f"{path}: is not a PyTorch profiler trace ({holds}")):
        discover(path)


def test_the_command_line_gives_no_report_for_a_file_that_is_no_trace(tmp_path):
    """Before: 'The PyTorch trace holds no GPU activity … Record GPU activity' for a config file, exit 0."""
    path = tmp_path / "config.pt.trace.json"
    path.write_text('{"model": "resnet", "lr": 0.1}')
    for args in (["diagnose", str(path)], ["diagnose", str(path), "-f", "json"], ["compare", str(path), str(RESNET)]):
        result = run(*args)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        assert result.stderr == (f"advisor: error: {path}: is not a PyTorch profiler trace (a JSON object with the "
                                 "keys model, lr; a trace has traceEvents)\n")


def test_every_trace_under_the_fixtures_is_a_trace():
    """The check refuses no real trace: every file under tests/fixtures the trace format claims passes it."""
    claimed = [path for path in sorted(FIXTURES.rglob("*")) if path.is_file() and KINETO.rank_at(path, False)]
    assert len(claimed) >= 10
    assert {path: trace_problem(path) for path in claimed} == {path: None for path in claimed}


@pytest.mark.parametrize(("name", "content"), [
    ("cpu-only.pt.trace.json", b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",'
                               b' "ts": 1, "dur": 5, "tid": 1, "pid": 1}]}'),
    ("no-events.pt.trace.json", b'{"schemaVersion": 1, "traceEvents": []}'),
    ("header-only.pt.trace.json", b'{"schemaVersion": 1, "deviceProperties": []}'),
    ("cut-before-events.pt.trace.json", b'{"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEve'),
    ("legacy.pt.trace.json", b'[{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2, "pid": "CPU functions"}]'),
    ("cut-in-events.pt.trace.json", b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2'),
])
def test_traces_that_lack_parts_are_still_traces(tmp_path, name, content):
    """A trace with no GPU activity, no events or only its header is diagnosed (exit 4: nothing to diagnose, with
    what to record), not refused as no trace."""
    path = tmp_path / name
    path.write_bytes(content)
    assert trace_problem(path) is None
    result = run("diagnose", str(path), "-f", "json")
    assert result.returncode == 4 and result.stdout.startswith("{"), result.stderr


def test_the_real_cpu_only_trace_is_diagnosed_as_before():
    result = run("diagnose", str(CPU_ONLY), "-f", "json")
    assert result.returncode == 4 and '"gpu.no_gpu_activity"' in result.stdout, result.stderr


def test_a_directory_whose_traces_are_all_no_trace_is_refused(tmp_path):
    (tmp_path / "rank0.pt.trace.json").write_bytes(b"")
    (tmp_path / "rank1.pt.trace.json").write_bytes(PNG)
    with pytest.raises(InputError) as raised:
        discover(tmp_path)
    assert str(raised.value) == (f"{tmp_path}: holds no profile: none of the 2 files named as PyTorch trace(s) is one "
                                 "(rank0.pt.trace.json: is not a PyTorch profiler trace (the file is empty))")


def test_a_trace_that_is_none_beside_a_real_one_is_skipped_and_the_real_one_diagnosed(tmp_path):
    shutil.copy(next(RESNET.iterdir()), tmp_path / "rank0.pt.trace.json.gz")
    (tmp_path / "rank1.pt.trace.json").write_bytes(PNG)
    result = run("diagnose", str(tmp_path), "-f", "json")
    assert result.returncode == 3, result.stderr
    assert "skipped rank1.pt.trace.json: is not a PyTorch profiler trace (a PNG image)" in result.stderr
    assert '"gpu.slow_dataloader"' in result.stdout


# --- directories -------------------------------------------------------------------------------------------------

def test_an_empty_directory_and_one_of_unrelated_files_are_told_apart(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError) as raised:
        discover(empty)
    assert str(raised.value) == f"{empty}: is empty"
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    for name in ("a.txt", "b.png", "c.csv", "d.log", "e.md", "f.yaml"):
        (unrelated / name).write_text("x")
    with pytest.raises(InputError) as raised:
        discover(unrelated)
    assert str(raised.value) == (
        f"{unrelated}: holds no profile (found 6 files: a.txt, b.png, c.csv, d.log, e.md, …; expected *_ascend_pt or "
        "*_ascend_ms directories, *.pt.trace.json[.gz] files, or msServiceProfiler's request.csv and batch.csv)")


def test_a_directory_of_empty_directories_names_them(tmp_path):
    (tmp_path / "logs" / "run1").mkdir(parents=True)
    with pytest.raises(InputError, match=re.escape("holds no profile (found no file, only 2 directories: logs/, "
                                                   "logs/run1/;")):
        discover(tmp_path)


def test_a_profile_too_deep_is_said_to_be_too_deep(tmp_path):
    deep = tmp_path / "a" / "b" / "c" / "d" / "e"
    shutil.copytree(RESNET, deep / "run")
    with pytest.raises(InputError, match="directories deeper than 4 levels are not searched"):
        discover(tmp_path)
    assert discover(deep).ranks  # the same profile, given closer


def test_the_command_line_says_a_directory_is_empty(tmp_path):
    result = run("diagnose", str(tmp_path))
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"advisor: error: {tmp_path}: is empty\n")


# --- archives ----------------------------------------------------------------------------------------------------

def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def packed(tmp_path):
    """The real ResNet-50 trace packed as .tar.gz, .tgz and .zip (and a zip under another name)."""
    source = RESNET
    with tarfile.open(tmp_path / "profile.tar.gz", "w:gz") as tar:
        tar.add(source, arcname="num_workers_0")
    shutil.copy(tmp_path / "profile.tar.gz", tmp_path / "profile.tgz")
    with zipfile.ZipFile(tmp_path / "profile.zip", "w") as archive:
        for path in source.rglob("*"):
            archive.write(path, f"num_workers_0/{path.relative_to(source)}")
    shutil.copy(tmp_path / "profile.zip", tmp_path / "profile.download")
    with tarfile.open(tmp_path / "profile.tar.gz") as tar, zipfile.ZipFile(tmp_path / "profile.zip") as archive:
        assert [n for n in tar.getnames() if n.endswith(".pt.trace.json.gz")] == [
            n for n in archive.namelist() if n.endswith(".pt.trace.json.gz")] != []
    return tmp_path


@pytest.mark.parametrize(("name", "command"), [
    ("profile.tar.gz", "tar -xzf"), ("profile.tgz", "tar -xzf"), ("profile.zip", "unzip"),
    ("profile.download", "unzip"),  # a zip told by its content
])
def test_an_archive_of_a_real_profile_is_refused_with_how_to_extract_it(packed, name, command):
    before = _listing(packed)
    path = packed / name
    result = run("diagnose", str(path), cwd=packed)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    what = {"tar.gz": "a .tar.gz archive", "tgz": "a .tgz archive"}.get(name.split(".", 1)[1], "a zip archive")
    assert result.stderr == (f"advisor: error: {path}: is {what}; advisor does not read archives: extract it first "
                             f"({command} {name}) and diagnose the directory it holds\n")
    assert _listing(packed) == before  # nothing was extracted


def _hostile_tar(path: Path) -> None:
    """Members that would escape (../, an absolute path, a link out) and one declaring 1 TiB: a few KiB on disk."""
    with tarfile.open(path, "w:gz") as tar:
        for name in ("../escaped.txt", "/tmp/advisor-absolute-escape.txt"):
            info = tarfile.TarInfo(name)
            info.size = 5
            tar.addfile(info, io.BytesIO(b"owned"))
        link = tarfile.TarInfo("prof/passwd")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    header = tarfile.TarInfo("huge.bin")
    header.size = 1 << 40
    with gzip.open(path.with_name("huge.tar.gz"), "wb") as out:
        out.write(header.tobuf() + b"\0" * 1024)  # the header alone: the data it declares is not there


def _hostile_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("../escaped.txt", "owned")
        archive.writestr("/tmp/advisor-absolute-escape.txt", "owned")
        archive.writestr("prof/zeros.pt.trace.json", b"\0" * (8 << 20))  # 8 MiB from ~8 KiB
        link = zipfile.ZipInfo("prof/passwd")
        link.external_attr = 0o120777 << 16  # a symbolic link
        archive.writestr(link, "/etc/passwd")


@pytest.mark.parametrize("name", ["hostile.tar.gz", "huge.tar.gz", "hostile.zip"])
def test_a_hostile_archive_is_refused_before_anything_is_written(tmp_path, name):
    work = tmp_path / "work"
    work.mkdir()
    _hostile_tar(work / "hostile.tar.gz")
    _hostile_zip(work / "hostile.zip")
    assert all(p.stat().st_size < 64 << 10 for p in work.iterdir())  # tiny test files
    before = _listing(tmp_path)
    result = run("diagnose", str(work / name), cwd=work)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert "advisor does not read archives: extract it first" in result.stderr
    assert _listing(tmp_path) == before and not Path("/tmp/advisor-absolute-escape.txt").exists()


def test_an_archive_in_a_directory_is_named_in_the_message(packed):
    directory = packed / "downloads"
    directory.mkdir()
    shutil.move(str(packed / "profile.tar.gz"), directory)
    (directory / "README.txt").write_text("the profile")
    with pytest.raises(InputError) as raised:
        discover(directory)
    assert str(raised.value).endswith("; archives are not read: extract profile.tar.gz first)")
    assert "found 2 files: README.txt, profile.tar.gz;" in str(raised.value)


def test_a_tar_named_as_a_trace_is_no_trace(packed):
    path = packed / "profile.pt.trace.json"
    with gzip.open(packed / "profile.tar.gz") as unpacked:
        path.write_bytes(unpacked.read())
    assert trace_problem(path) == "is not a PyTorch profiler trace (a tar archive)"


# --- the terminal ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def example():
    return advisor.diagnose(EXAMPLE)


def _terminal(report, width: int = 80, view: View | None = None) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True)
    if view is None:
        render_terminal(report, console)
    else:
        render_terminal(report, console, view=view)
    return buffer.getvalue()


def test_commands_to_copy_are_never_wrapped_on_a_narrow_terminal(example):
    text = _terminal(example)
    lines = [line.strip() for line in text.splitlines()]
    commands = [c for f in example.findings for p in f.prescriptions[:1] for c in re.findall(r"`(export [^`]+)`", p.actions[0])]
    commands += [c for f in example.findings for c in re.findall(r"`(export [^`]+|advisor [^`]+)`", f.explanation)]
    assert commands, "the example gives a command to copy"
    for command in commands:
        assert command in lines, f"{command!r} is not on a line of its own:\n{text}"


def test_the_brief_command_and_legend_are_one_line_each_however_long_the_path(example):
    long_path = "/" + "/".join(["a-rather-long-directory-name"] * 5) + "/ascend-level1-2ranks"
    report = example.model_copy(update={"input": example.input.model_copy(update={"path": long_path})})
    text = _terminal(report, view=View("brief"))
    lines = text.splitlines()
    assert f"  advisor diagnose {long_path} --detail full" in lines  # longer than 80 columns, and whole
    legend = [line for line in lines if line.startswith("Ordered by severity")]
    assert legend == ["Ordered by severity, then by time saved; an assumed gain counts half."]
    assert not any("counts half" in line for line in lines if line not in legend)


def test_the_command_line_prints_the_brief_legend_on_one_line_at_80_columns():
    result = run("diagnose", str(EXAMPLE), columns=80)
    assert result.returncode == 0, result.stderr
    assert "\nOrdered by severity, then by time saved; an assumed gain counts half.\n" in result.stdout
    assert "\n  advisor diagnose " in result.stdout and " --detail full\n" in result.stdout


def test_top_actions_give_a_millisecond_or_more_in_ms(example):
    """Before: the brief report's top actions read '96.53 ms' above '8,818.9 µs' (issue 29, item 7): µs only below 1 ms."""
    for name in ("markdown", "html"):
        text = render_document(example, name, View(detail="brief"))
        text = re.sub(r'<ul class="note ranges">.*?</ul>', "", text, flags=re.S)  # positions on the trace's clock
        assert "6.63 ms" in text and not re.search(r"\d,\d{3}\.\d µs", text), name


def test_the_findings_table_gives_its_gains_in_one_unit(example):
    """Before: '96.53 ms (62.9%)' above '8,818.9 µs (5.7%)' in the same column."""
    gains = sorted(f.estimated_gain_us for f in example.findings if f.estimated_gain_us)
    assert gains[0] < 1_000 < 10_000 < gains[-1]  # the column spans µs and ms values
    text = _terminal(example, width=100)
    table = text[text.index("Findings"):text.index("1. HIGH")]
    assert "Estimated gain, ms" in table
    rows = [line for line in table.splitlines() if re.match(r"^│\s+\d+ │", line)]
    assert len(rows) >= len(example.findings) and not [row for row in rows if re.search(r"\d (µs|ms|s)\b", row)]
    for gain in gains:
        assert re.search(rf"│\s+{re.escape(f'{gain / 1000:,.2f}')} \(", table), gain
