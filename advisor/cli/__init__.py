"""The ``advisor`` command line.

``program.py`` is the program (its commands and entry point); one module per group of commands: ``diagnose.py``
(diagnose, facts, explain), ``compare.py``, ``rules.py``, ``plan.py``; ``options.py`` holds the options they share,
``output.py`` what they print and write and how they exit, ``packs.py`` the rule book they run with. Everything
else is imported where it is used: `advisor --version`, `--help` and the rules commands start without pandas,
pyarrow or matplotlib (bench/startup.py measures it; tests/test_startup.py checks it).

Exit codes: 0 ok · 1 a finding at or above ``--fail-on`` · 2 usage or input error · 3 partial (input
files skipped) · 4 nothing could be diagnosed · 70 internal error. See docs/errors.md.
"""

from advisor.cli.program import app, main

__all__ = ["app", "main"]
