"""Names from the input shown on a terminal: paths with rich markup or escape sequences in the progress line and
in messages on standard error are shown as text, never obeyed (and never a MarkupError: exit 70)."""

from __future__ import annotations

import shutil

import pytest
from conftest import SAMPLE_SINGLE
from typer.testing import CliRunner

from advisor.cli import app
from advisor.render.common import break_autolinks, md_knowledge, md_text

HOSTILE_DIRECTORIES = {
    "closing-tag": ["[", "bad][link=evil.example]x"],  # the path reads …/[/bad][link=evil.example]x/…
    "ansi-and-osc": ["\x1b[31mred\x1b[0m\x1b]8;;evil.example\x07link\x1b]8;;\x07"],
    "unclosed-style": ["[bold red]x[blink]"],
}


@pytest.mark.parametrize("parts", HOSTILE_DIRECTORIES.values(), ids=HOSTILE_DIRECTORIES.keys())
@pytest.mark.parametrize("command", ["diagnose", "facts"])
def test_the_progress_line_on_a_terminal_shows_hostile_paths_as_text(tmp_path, parts, command):
    profile = tmp_path.joinpath(*parts)
    shutil.copytree(SAMPLE_SINGLE.parent, profile)
    (profile / SAMPLE_SINGLE.name / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv").write_bytes(b"\x00")  # a warning
    arguments = [command, str(profile), *(["-f", "json"] if command == "diagnose" else ["--json"])]
    result = CliRunner().invoke(app, arguments, env={"FORCE_COLOR": "1", "TERM": "xterm", "COLUMNS": "100"})
    assert result.exit_code in (0, 3), result.stderr
    assert "internal error" not in result.stderr and "MarkupError" not in result.stderr
    assert "\x1b]8;;evil.example" not in result.stderr, "an OSC 8 link from a path reached the terminal"
    assert "\x1b[31mred" not in result.stderr


def test_messages_on_standard_error_carry_no_escape_sequences(tmp_path):
    profile = tmp_path / "\x1b[2J\x1b]0;title\x07prof"
    shutil.copytree(SAMPLE_SINGLE.parent, profile)
    (profile / SAMPLE_SINGLE.name / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv").write_bytes(b"\x00")
    result = CliRunner().invoke(app, ["diagnose", str(profile), "-o", str(tmp_path / "r.md")])
    assert result.exit_code == 3, result.stderr
    assert "advisor: note: report written to" in result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr


@pytest.mark.parametrize("text, hidden", [
    ("see https://evil.example/x", "https://evil.example"),
    ("HTTP://EVIL.EXAMPLE", "HTTP://EVIL.EXAMPLE"),
    ("go to www.evil.example now", "www.evil.example"),
    ("write to ops@evil.example", "ops@evil.example"),
    ("mailto:ops@evil.example", "mailto:"),
])
def test_bare_urls_from_the_input_do_not_become_links(text, hidden):
    shown = md_text(text)
    assert hidden not in shown
    assert shown.replace("\u200d", "").replace("\\", "") == text  # reads the same


def test_names_that_only_look_like_addresses_are_left_alone():
    assert break_autolinks("AscendCL@aclrtSynchronize") == "AscendCL@aclrtSynchronize"
    assert break_autolinks("aten::index_put_") == "aten::index_put_"


def test_knowledge_keeps_inline_code_and_loses_links_and_images():
    shown = md_knowledge("Set `a[0] = 1`; see ![p](https://t.example/p.png) and [c](javascript:alert(1)) <b>x</b>")
    assert "`a[0] = 1`" in shown
    assert "![p](" not in shown and "[c](" not in shown and "<b>" not in shown
