"""The ``advisor`` command line.

Exit codes: 0 ok · 1 a finding at or above ``--fail-on`` · 2 usage or input error · 3 partial (input
files skipped) · 4 nothing could be diagnosed · 70 internal error. See docs/errors.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from advisor import errors
from advisor.diagnose import diagnose
from advisor.report import Report
from advisor.usercontext import UserContext, build_context
from advisor.version import VERSION

app = typer.Typer(
    name="advisor",
    help="Diagnose AI training and inference profiles and prescribe ranked fixes.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class OutputFormat(str, Enum):
    terminal = "terminal"
    md = "md"
    html = "html"
    json = "json"


class Language(str, Enum):
    en = "en"
    zh = "zh"


class FailOn(str, Enum):
    high = "high"
    medium = "medium"
    low = "low"


_SUFFIX_FORMATS = {".md": OutputFormat.md, ".markdown": OutputFormat.md, ".html": OutputFormat.html,
                   ".htm": OutputFormat.html, ".json": OutputFormat.json}
_SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2}


EnvOption = Annotated[Optional[list[str]], typer.Option("--env", help="KEY=VALUE of the job's environment (repeatable).")]
EnvFileOption = Annotated[Optional[list[Path]], typer.Option("--env-file", help="A file of KEY=VALUE lines (repeatable).")]
ContextOption = Annotated[
    Optional[Path], typer.Option("--context", help="YAML of model settings (micro_batch_size, tensor_parallel, …).")
]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"advisor {VERSION}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """Diagnose AI training and inference profiles and prescribe ranked fixes."""


@app.command("diagnose")
def diagnose_command(
    path: Annotated[
        Path, typer.Argument(metavar="PATH", help="A *_ascend_pt directory, a directory of them (cluster), or ASCEND_PROFILER_OUTPUT.")
    ],
    output_format: Annotated[
        Optional[OutputFormat], typer.Option("--format", "-f", help="Output format; default: from -o's suffix, else terminal.")
    ] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the report to this file.")] = None,
    lang: Annotated[Optional[Language], typer.Option("--lang", help="Report language; default: from the locale.")] = None,
    fail_on: Annotated[
        Optional[FailOn], typer.Option("--fail-on", help="Exit 1 when a finding of this severity or higher exists.")
    ] = None,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    debug: DebugOption = False,
) -> None:
    """Diagnose a profile and print or write the action plan."""
    with _guard(debug):
        fmt = _resolve_format(output_format, output)
        user = build_context(env or [], env_file or [], context)
        report = _run_with_progress(path, (lang.value if lang else _locale_language()), user)
        _write(report, fmt, output)
        raise typer.Exit(_exit_code(report, fail_on))


@app.command("facts")
def facts_command(
    path: Annotated[Optional[Path], typer.Argument(metavar="[PATH]", help="A profile to extract the facts of.")] = None,
    list_families: Annotated[bool, typer.Option("--list", help="Document every fact family and field.")] = False,
    family: Annotated[Optional[str], typer.Option("--family", help="Only this fact family.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts as JSON.")] = False,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    debug: DebugOption = False,
) -> None:
    """Print the facts extracted from a profile, or (--list) the catalogue rule conditions are written against."""
    from advisor.facts import FACT_FAMILIES

    with _guard(debug):
        if family is not None and family not in FACT_FAMILIES:
            raise errors.InputError(f"unknown fact family {family!r}; known: {', '.join(FACT_FAMILIES)}")
        if list_families:
            _print_catalogue(family)
        elif path is None:
            raise errors.InputError("give a profile PATH, or --list for the catalogue")
        else:
            _print_facts(path, family, as_json, build_context(env or [], env_file or [], context))


def _print_catalogue(family: str | None) -> None:
    from advisor.facts import FACT_FAMILIES
    from advisor.facts.catalogue import field_rows

    for name, model in FACT_FAMILIES.items():
        if family not in (None, name):
            continue
        kind = "derived by rules" if model.derived else "measured"
        typer.echo(f"{name} ({kind}): {' '.join((model.__doc__ or '').split())}")
        typer.echo(f"  source: {model.source}")
        for field_name, field_type, unit, meaning in field_rows(model):
            typer.echo(f"  {field_name:<26} {field_type:<7} {unit:<6} {meaning}")
        typer.echo("")


def _print_facts(path: Path, family: str | None, as_json: bool, user: UserContext) -> None:
    import json

    report = _run_with_progress(path, "en", user)
    facts = [f for f in report.facts if family in (None, f["type"])]
    if as_json:
        sys.stdout.write(json.dumps(facts, indent=2, ensure_ascii=False) + "\n")
        return
    for fact in facts:
        typer.echo(f"{fact['type']} {fact['id']}")
        for key, value in fact.items():
            if key not in ("type", "id", "sources") and value not in (None, []):
                typer.echo(f"    {key}: {json.dumps(value, ensure_ascii=False) if isinstance(value, str) else value}")
        typer.echo(f"    sources: {'; '.join(fact['sources'])}")
    for skipped in report.coverage.skipped:
        _note(f"skipped {skipped.file}: {skipped.reason}", level="warning")


rules_app = typer.Typer(help="Work with rule files.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")


@rules_app.command("test")
def rules_test_command(
    select: Annotated[Optional[str], typer.Option("-k", help="Only cases whose rule id or name contains this text.")] = None,
) -> None:
    """Run the test cases embedded in the rule files and show each result."""
    from advisor.diagnose import default_rulebook
    from advisor.ruletests import run_rule_tests

    with _guard(False):
        results = run_rule_tests(default_rulebook(), select)
        for result in results:
            mark = "PASS" if result.passed else "FAIL"
            typer.echo(f"{mark} {result.rule_id}: {result.name} (expect {result.expect}; {result.detail})")
        failed = sum(not r.passed for r in results)
        typer.echo(f"{len(results) - failed} passed, {failed} failed")
        if not results:
            raise errors.InputError(f"no rule test case matches {select!r}")
        raise typer.Exit(1 if failed else 0)


def main() -> None:
    """Console-script entry point."""
    app()


def _run_with_progress(path: Path, lang: str, user: UserContext) -> Report:
    stderr = Console(stderr=True)
    if stderr.is_terminal:
        with stderr.status(f"Diagnosing {path} …"):
            return diagnose(path, lang=lang, context=user)
    return diagnose(path, lang=lang, context=user)


def _resolve_format(fmt: OutputFormat | None, output: Path | None) -> OutputFormat:
    if fmt is not None:
        return fmt
    if output is None:
        return OutputFormat.terminal
    suffix_format = _SUFFIX_FORMATS.get(output.suffix.lower())
    if suffix_format is None:
        raise errors.InputError(f"{output}: cannot tell the format from the suffix; pass --format md|html|json")
    return suffix_format


def _write(report: Report, fmt: OutputFormat, output: Path | None) -> None:
    from advisor.render import render_html, render_json, render_markdown, render_terminal

    if fmt is OutputFormat.terminal:
        if output is not None:
            with output.open("w", encoding="utf-8") as handle:
                render_terminal(report, Console(file=handle, width=100, no_color=True))
        else:
            render_terminal(report, Console(width=min(Console().width, 120)))
    else:
        text = {OutputFormat.md: render_markdown, OutputFormat.html: render_html, OutputFormat.json: render_json}[fmt](report)
        if output is None:
            sys.stdout.write(text)
        else:
            try:
                output.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise errors.InputError(f"{output}: cannot write the report ({exc.strerror or exc})") from exc
            _note(f"report written to {output}")
    for skipped in report.coverage.skipped:
        _note(f"skipped {skipped.file}: {skipped.reason}", level="warning")
    if report.status == "empty":
        _note("nothing could be diagnosed: no step or operator data was readable", level="error")


def _exit_code(report: Report, fail_on: FailOn | None) -> int:
    if report.status == "empty":
        return errors.EXIT_NOTHING_DIAGNOSED
    if fail_on is not None and any(_SEVERITY_RANK[f.severity] <= _SEVERITY_RANK[fail_on.value] for f in report.findings):
        return errors.EXIT_FAIL_ON
    if report.status == "partial":
        return errors.EXIT_PARTIAL
    return errors.EXIT_OK


def _locale_language() -> str:
    for variable in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(variable, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def _note(message: str, level: str = "note") -> None:
    typer.echo(f"advisor: {level}: {message}", err=True)


@contextmanager
def _guard(debug: bool) -> Iterator[None]:
    """Turn errors into one clear line on stderr and the documented exit code (a traceback with --debug)."""
    try:
        yield
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except errors.AdvisorError as exc:
        if debug:
            raise
        _note(str(exc), level="error")
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        _note("interrupted", level="error")
        raise typer.Exit(130) from None
    except Exception as exc:  # a bug: say so, and how to get the details
        if debug:
            raise
        _note(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", level="error")
        raise typer.Exit(errors.EXIT_INTERNAL) from None
