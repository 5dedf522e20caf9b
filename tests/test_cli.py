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
    assert "bound by ranks waiting for each other" in result.stdout
    assert "Collectives wait for communicator members that were not profiled" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(("suffix", "probe"), [(".json", '"schema_version": 1'), (".md", "## Top actions"), (".html", "<!DOCTYPE html>"),
                                             (".txt", "Top actions")])
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
    assert "通信瓶颈" in advisor("diagnose", str(SAMPLE_SINGLE), "--lang", "zh").stdout  # collectives moving data
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
        (["diagnose", str(REAL.parent / "ascend-level1-2rank")],  # a typo: the directory beside it is suggested
         f"ascend-level1-2rank: no such file or directory; did you mean {REAL}?"),
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


def test_markdown_is_a_format_name_as_in_the_api():
    result = advisor("diagnose", str(REAL), "-f", "markdown")
    assert result.returncode == 0 and result.stdout.startswith("# Performance diagnosis"), result.stderr


def test_empty_directory_is_not_a_profile(tmp_path):
    result = advisor("diagnose", str(tmp_path))
    assert result.returncode == 2 and result.stderr == f"advisor: error: {tmp_path}: is empty\n"


def test_partial_profile_reports_what_it_could_and_exits_3(tmp_path):
    rank_dir = build_rank(tmp_path, RankSpec())
    (rank_dir / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").write_bytes(b"\x00\x00garbage")
    result = advisor("diagnose", str(tmp_path), "-f", "json")
    assert result.returncode == 3
    assert "skipped localhost_2231054_20251127192733120_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv: is binary" in result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "partial"
    assert report["summary"]["bottleneck"] == "host"  # the readable step trace still diagnosed (2 ms of Preparing)
    assert report["coverage"]["skipped"][0]["reason"] == "is binary, not CSV text"


def test_nothing_diagnosable_exits_4_but_still_says_what_to_collect(tmp_path):
    build_rank(tmp_path, RankSpec(omit=("step_trace_time.csv", "kernel_details.csv", "op_statistic.csv", "trace_view.json")))
    result = advisor("diagnose", str(tmp_path), "-f", "md")
    assert result.returncode == 4
    assert "nothing could be diagnosed" in result.stderr
    assert "No step-time breakdown in the profile" in result.stdout
    assert "prof.step()" in result.stdout


CRASH = (
    "import sys, advisor.cli as cli, advisor.diagnose\n"
    "def boom(*args, **kwargs):\n"
    "    raise RuntimeError('simulated bug')\n"
    "sys.modules['advisor.diagnose'].diagnose = boom\n"
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


# --- brief reports, several -o, filters, help and completion (issue 19, items 2 and 5) ---

EXAMPLE = REAL.parent.parent.parent / "examples" / "ascend-level1-2ranks"

# Counts the diagnoses a command runs (written to stderr when it exits).
COUNTING = (
    "import atexit, sys, advisor.cli as cli, advisor.diagnose\n"
    "module = sys.modules['advisor.diagnose']\n"
    "original, calls = module.diagnose, []\n"
    "def counted(*args, **kwargs):\n"
    "    calls.append(1)\n"
    "    return original(*args, **kwargs)\n"
    "module.diagnose = counted\n"
    "atexit.register(lambda: sys.__stderr__.write(f'DIAGNOSES {len(calls)}\\n'))\n"
    "sys.argv = ['advisor', *sys.argv[1:]]\n"
    "cli.main()\n"
)


def test_markdown_and_terminal_are_brief_by_default_and_full_on_request():
    brief = advisor("diagnose", str(EXAMPLE), "-f", "md")
    assert brief.returncode == 0, brief.stderr
    assert len(brief.stdout.splitlines()) <= 60 and "## Top actions" in brief.stdout and "## Findings" not in brief.stdout
    assert "`advisor diagnose " + str(EXAMPLE) + " --detail full`" in brief.stdout
    full = advisor("diagnose", str(EXAMPLE), "-f", "md", "--detail", "full")
    assert "## Findings" in full.stdout and len(full.stdout) > 30 * len(brief.stdout) / 2
    terminal = advisor("diagnose", str(EXAMPLE))
    assert len(terminal.stdout.splitlines()) <= 60 and "Top actions" in terminal.stdout
    explained = advisor("diagnose", str(EXAMPLE), "--explain")  # --explain shows every finding
    assert "Why it fired" in explained.stdout and len(explained.stdout.splitlines()) > 100


def test_several_outputs_are_written_from_one_analysis(tmp_path):
    outputs = [tmp_path / name for name in ("r.html", "r.md", "r.json", "r.txt")]
    arguments = ["diagnose", str(SAMPLE_CLUSTER), *[a for o in outputs for a in ("-o", str(o))]]
    done = subprocess.run([sys.executable, "-c", COUNTING, *arguments], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "DIAGNOSES 1" in done.stderr and done.stdout == ""
    for output in outputs:
        assert f"report written to {output}" in done.stderr
    assert outputs[0].read_text().startswith("<!DOCTYPE html>") and "## Top actions" in outputs[1].read_text()
    assert "Top actions" in outputs[3].read_text() and "<" not in outputs[3].read_text()[:40]
    single = tmp_path / "single.json"
    assert advisor("diagnose", str(SAMPLE_CLUSTER), "-o", str(single)).returncode == 0
    assert outputs[2].read_text() == single.read_text()  # the same JSON as a run of its own


@pytest.mark.parametrize(("args", "message"), [
    (["-f", "md", "-o", "a.md", "-o", "b.html"], "--format applies to one output"),
    (["-o", "same.md", "-o", "./same.md"], "the same file is given to -o twice"),
    (["--max-findings", "-1"], "--max-findings is a number of findings, 0 or more"),
    (["--detail", "some"], "Invalid value for '--detail'"),
])
def test_output_and_filter_mistakes_exit_2(tmp_path, args, message):
    done = subprocess.run([sys.executable, "-m", "advisor", "diagnose", str(SAMPLE_SINGLE), *args], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not list(tmp_path.iterdir())


def test_filters_apply_to_json_and_fail_on_sees_every_finding():
    everything = json.loads(advisor("diagnose", str(EXAMPLE), "-f", "json").stdout)["findings"]
    assert {f["severity"] for f in everything} >= {"high", "low"}
    two = advisor("diagnose", str(EXAMPLE), "-f", "json", "--max-findings", "2")
    assert [f["id"] for f in json.loads(two.stdout)["findings"]] == [f["id"] for f in everything[:2]]
    low_hidden = advisor("diagnose", str(EXAMPLE), "-f", "json", "--min-severity", "medium", "--fail-on", "low")
    assert "low" not in {f["severity"] for f in json.loads(low_hidden.stdout)["findings"]}
    assert low_hidden.returncode == 1  # the low findings still count for --fail-on


def _commands(group=None, prefix=()):
    from typer.main import get_command

    from advisor.cli import app

    group = group or get_command(app)
    for name, command in sorted(getattr(group, "commands", {}).items()):
        yield (*prefix, name)
        yield from _commands(command, (*prefix, name))


def test_every_command_has_an_example_and_clean_metavars():
    commands = list(_commands())
    assert len(commands) >= 15 and ("rules", "lint") in commands and ("plan", "mc2") in commands
    for command in [(), *commands]:
        done = advisor(*command, "--help")
        assert done.returncode == 0, (command, done.stderr)
        text = done.stdout
        assert re.search(r"\n  Examples?\b.*:\n    advisor ", text) or (command == ("mcp",) and "advisor mcp" in text), command
        assert not re.search(r"<[a-z][\w\[\], |]*>|\{[A-Z]+\}", text), (command, re.findall(r"<[^>]+>|\{[A-Z]+\}", text))
        assert "seed" not in text.lower(), command


def test_shell_completion():
    assert re.search(r"\n  --install-completion +Install completion for the current shell", advisor("--help").stdout)
    script = advisor("--show-completion", "bash")
    assert script.returncode == 0 and "_advisor_completion" in script.stdout
    env = {"_ADVISOR_COMPLETE": "complete_bash", "COMP_WORDS": "advisor dia", "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['advisor']; from advisor.cli import main; main()"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert done.stdout.split() == ["diagnose"]
    env.update(COMP_WORDS="advisor explain host.device_id", COMP_CWORD="2")
    done = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['advisor']; from advisor.cli import main; main()"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert done.stdout.split() == ["host.device_idle"]


def test_a_command_unfreezes_what_it_froze_out_of_the_collector():
    """with_progress freezes the objects made before the work (fewer collector passes) and the command's guard
    unfreezes them when it ends, so a process that runs several commands (tests, a notebook) can still collect them."""
    import gc

    from advisor.cli.output import guard, with_progress
    from advisor.runoptions import RunOptions

    before = gc.get_freeze_count()
    with guard(debug=False):
        during = with_progress("Working", RunOptions(), lambda options: gc.get_freeze_count())
        assert during > before
    assert gc.get_freeze_count() == before
