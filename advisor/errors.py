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

EXIT_OK = 0
EXIT_FAIL_ON = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_NOTHING_DIAGNOSED = 4
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


class EngineError(AdvisorError):
    """The rule engine rejected a ruleset or a fact, or a rule's action failed while it ran."""

    exit_code = EXIT_INTERNAL
