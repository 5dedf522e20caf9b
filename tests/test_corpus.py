"""Run the CLI over the hardening corpus (tests/corpus/cases.py) and check the behaviour of every case.

For each case: the documented exit code; no traceback; every message the case expects on standard error,
each naming the file and the problem; every line on standard error is an ``advisor:`` message; a JSON
report whose status agrees with the exit code and whose coverage lists what was skipped; and every
finding of the intact profile that did not depend on a damaged file is still there.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from corpus.cases import all_cases, make_base
from typer.testing import CliRunner

from advisor.cli import app

CASES = all_cases()
_BASELINES: dict[str, dict] = {}


def _invoke(arguments: list[str]):
    return CliRunner().invoke(app, arguments, env={"LANG": "C.UTF-8", "COLUMNS": "100"})


def _baseline(base: str) -> dict:
    if base not in _BASELINES:
        profile = Path(tempfile.mkdtemp()) / "prof"
        make_base(base, profile)
        result = _invoke(["diagnose", str(profile), "-f", "json"])
        assert result.exit_code == 0, result.stderr
        _BASELINES[base] = json.loads(result.stdout)
    return _BASELINES[base]


def _sources(finding: dict) -> list[str]:
    trace = finding["trace"]
    return [s for c in trace["conditions"] for s in c["sources"]] + [s for link in trace["chain"] for s in link.get("sources", [])]


def test_the_corpus_has_at_least_200_cases():
    print(f"hardening corpus: {len(CASES)} cases")
    assert len(CASES) >= 200


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_case(case, tmp_path):
    directory = tmp_path / "case"
    arguments = case.build(directory)
    try:
        result = _invoke(arguments)
    finally:
        for path in directory.rglob("*"):  # let pytest clean up what a case made unreadable
            if not path.is_symlink():
                path.chmod(0o755)
    stdout, stderr = result.stdout, result.stderr
    assert result.exit_code == case.exit, f"exit {result.exit_code}, expected {case.exit}\n{stderr}"
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in stdout + stderr
    for line in stderr.splitlines():
        assert line.startswith(("advisor: ", "  ")), f"stray output on stderr: {line!r}"
    messages = stderr if case.command == ("diagnose",) else stdout + stderr  # rules lint/test report on stdout
    for pattern in case.messages:
        assert re.search(pattern, messages), f"output lacks /{pattern}/:\n{messages}"
    for check in case.checks:
        check(stdout, stderr, directory)
    if "json" in arguments and case.exit in (0, 1, 3) and case.command == ("diagnose",):
        report = json.loads(stdout)
        assert (report["status"] == "partial") == (case.exit == 3), report["status"]
        if report["coverage"]["skipped"]:
            assert report["status"] != "complete"
        if case.lost is not None and case.base is not None:
            kept = {f["key"] for f in report["findings"]}
            for finding in _baseline(case.base)["findings"]:
                if not any(lost in source for lost in case.lost for source in _sources(finding)):
                    assert finding["key"] in kept, f"lost {finding['key']}, which needs none of {case.lost}"
