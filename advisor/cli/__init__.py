"""The ``advisor`` command line.

``program.py`` is the program (its commands and entry point); one module per group of commands: ``diagnose.py``
(diagnose, facts, explain), ``compare.py``, ``rules.py``, ``plan.py``; ``options.py`` holds the options they share,
``output.py`` what they print and write and how they exit, ``packs.py`` the rule book they run with. Everything
else is imported where it is used: `advisor --version`, `--help` and the rules commands start without pandas,
pyarrow or matplotlib, and `advisor --version` without the command-line framework either (bench/startup.py
measures it; tests/test_startup.py checks it).

Exit codes: 0 ok · 1 a finding at or above ``--fail-on`` · 2 usage or input error · 3 partial (input
files skipped) · 4 nothing could be diagnosed · 70 internal error. See docs/errors.md.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point: ``advisor --version`` is answered at once; everything else runs the program
    (``program.main``), which also reports a standard output that cannot be written."""
    if sys.argv[1:] == ["--version"] and sys.stdout is not None:
        from advisor.version import VERSION

        try:
            print(f"advisor {VERSION}", flush=True)
            return
        except BrokenPipeError:  # the reader went away: not an error, as for every command
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return
        except OSError as exc:  # a full device: exit 2 with what every command says
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            try:
                sys.stderr.write(f"advisor: error: standard output: cannot write the output ({exc.strerror or exc})\n")
            except OSError:
                pass
            raise SystemExit(2) from None
    from advisor.cli.program import main as run

    try:
        run()
    finally:  # the process ends here: its last, full collection need not scan every object the command made (0.1 s
        gc.freeze()  # after a 512-rank diagnosis)


def __getattr__(name: str) -> Any:
    """``app``, the typer application, built on first use."""
    if name == "app":
        from advisor.cli.program import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
