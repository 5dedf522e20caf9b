"""Start-up: the commands that read no profile start without pandas, pyarrow or matplotlib (issue 17, item 5).

Each command runs in a fresh interpreter that reports, as it exits, which heavy libraries it had imported; the
time it takes is measured by bench/startup.py, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("pandas", "pyarrow", "matplotlib", "numpy", "durable_rules")

# Runs the command line as the `advisor` program does, then prints the heavy modules it had loaded.
_PROBE = """
import atexit, json, sys
heavy = {heavy!r}
atexit.register(lambda: sys.__stderr__.write("LOADED " + json.dumps(sorted(m for m in heavy if m in sys.modules)) + "\\n"))
sys.argv = ["advisor", *sys.argv[1:]]
from advisor.cli import main
main()
"""


def loaded_by(*arguments: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    done = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY), *arguments], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "LANG": "C.UTF-8"}, check=False)
    line = next(line for line in done.stderr.splitlines() if line.startswith("LOADED "))
    return done, json.loads(line.removeprefix("LOADED "))


@pytest.mark.parametrize("arguments", [
    ["--version"],
    ["--help"],
    ["diagnose", "--help"],
    ["compare", "--help"],
    ["rules", "--help"],
    ["plan", "mc2", "--m", "4096", "--k", "3072", "--n", "8192", "--matmul-us", "803", "--comm-us", "1071"],
])
def test_commands_that_read_no_profile_start_without_the_heavy_libraries(arguments):
    done, loaded = loaded_by(*arguments)
    assert done.returncode == 0, done.stderr
    assert loaded == [], f"advisor {' '.join(arguments)} imported {loaded}"


@pytest.mark.parametrize("arguments", [["rules", "list"], ["rules", "show", "host.device_idle"]])
def test_rules_commands_start_without_the_heavy_libraries(arguments):
    done, loaded = loaded_by(*arguments)
    assert done.returncode == 0, done.stderr
    assert not set(loaded) & {"pandas", "pyarrow", "matplotlib"}, f"advisor {' '.join(arguments)} imported {loaded}"


def test_version_starts_without_the_command_line_framework_and_says_when_it_cannot_print():
    done = subprocess.run([sys.executable, "-c", _PROBE.replace("heavy = {heavy!r}", "heavy = ('typer', 'click', 'rich')"),
                           "--version"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.startswith("advisor ") and "LOADED []" in done.stderr, done.stderr
    with open("/dev/full", "w") as full:  # a full device: exit 2 and a message, as for a report
        done = subprocess.run([sys.executable, "-c", "from advisor.cli import main; import sys; sys.argv = ['advisor', "
                               "'--version']; main()"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
                              check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "standard output: cannot write the output (No space left on device)" in done.stderr


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a command that reads a profile does load pandas."""
    from conftest import SAMPLE_SINGLE

    done, loaded = loaded_by("diagnose", str(SAMPLE_SINGLE), "-f", "json")
    assert done.returncode == 0, done.stderr
    assert "pandas" in loaded


def test_import_advisor_is_lazy_and_its_names_still_work():
    code = (
        "import sys, advisor\n"
        "assert 'pandas' not in sys.modules and 'advisor.diagnose' not in sys.modules, sorted(sys.modules)\n"
        "import advisor.diagnose as module_or_function\n"  # importing the submodule first ...
        "assert callable(advisor.diagnose) and advisor.diagnose.__module__ == 'advisor.diagnose'\n"  # ... leaves the function
        "from advisor import render, compare, Report, __version__\n"
        "from advisor.render import render_markdown\n"  # the subpackage of the same name is still importable
        "assert render.__module__ == 'advisor.api' and compare.__module__ == 'advisor.api'\n"
        "assert advisor.render is render and Report.__name__ == 'Report' and __version__\n"
        "assert {'diagnose', 'render', 'compare', 'Report'} <= set(dir(advisor))\n"
        "try:\n"
        "    advisor.no_such_name\n"
        "except AttributeError as exc:\n"
        "    print('ok', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok module 'advisor' has no attribute 'no_such_name'")
