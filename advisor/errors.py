"""Exceptions the tool raises on purpose, and the exit codes the CLI maps them to.

Exit codes (also documented in docs/errors.md):

* 0 — diagnosis complete, every input that was present could be read.
* 1 — a finding at or above the ``--fail-on`` severity exists.
* 2 — usage or input error: bad arguments, the path does not exist or holds no profile.
* 3 — partial diagnosis: some input files were skipped (malformed or unreadable); the report says which.
* 4 — a profile was found but nothing could be diagnosed from it.
* 70 — internal error (a bug); rerun with ``--debug`` for the traceback.
"""

from __future__ import annotations

import os
import signal
import sys

EXIT_OK = 0
EXIT_FAIL_ON = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_NOTHING_DIAGNOSED = 4
EXIT_UNAVAILABLE = 69  # sysexits' EX_UNAVAILABLE: a service the run was given went away
EXIT_INTERNAL = 70


class AdvisorError(Exception):
    """An error with a message meant for the user; ``exit_code`` says how the CLI ends."""

    exit_code = EXIT_USAGE


class InputError(AdvisorError):
    """The given path cannot be used as a profile (missing, unreadable, not a profiler output)."""


class NothingToDiagnose(AdvisorError):
    """A profile was found but none of its files gave usable data."""

    exit_code = EXIT_NOTHING_DIAGNOSED


class RuleError(AdvisorError):
    """A rule or knowledge file is invalid (schema, unknown fact field, unsupported regex, …)."""


class ClusterGone(AdvisorError):
    """The Dask scheduler or every worker the run was given went away while it ran: no report."""

    exit_code = EXIT_UNAVAILABLE


class EngineError(AdvisorError):
    """The rule engine rejected a ruleset or a fact, or a rule's action failed while it ran."""

    exit_code = EXIT_INTERNAL


def quiet_interrupt_while_starting() -> None:
    """When this process is the ``advisor`` program: until the command line takes over (``cli.main``), Ctrl-C
    ends it at once with exit 130 and one line on standard error, instead of a traceback from an import.

    Imported as a library, advisor leaves the signal handlers alone.
    """
    if _is_the_program():
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def _is_the_program() -> bool:
    if os.path.basename(sys.argv[0]).removesuffix(".exe") == "advisor":  # the console script
        return True
    argv = list(getattr(sys, "orig_argv", []))
    index = 1
    while index < len(argv):  # python [options] -m advisor …
        argument = argv[index]
        if argument == "-m":
            return argv[index + 1 : index + 2] == ["advisor"]
        if argument.startswith("-m"):
            return argument == "-madvisor"
        if argument == "-c" or not argument.startswith("-"):  # code or a script: not advisor
            return False
        index += 2 if argument in ("-X", "-W") else 1
    return False


def _interrupted_while_starting(_signum: int, _frame: object) -> None:
    try:
        os.write(2, b"advisor: error: interrupted\n")
    finally:
        os._exit(130)


def is_starting_handler(handler: object) -> bool:
    return handler is _interrupted_while_starting
