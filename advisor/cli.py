"""The ``advisor`` command line.

Exit codes: 0 ok · 1 a finding at or above ``--fail-on`` · 2 usage or input error · 3 partial (input
files skipped) · 4 nothing could be diagnosed · 70 internal error. See docs/errors.md.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional, TypeVar

import typer
from typer.core import TyperCommand

from advisor import errors

# Everything else is imported where it is used: `advisor --version`, `--help` and the rules commands start without
# pandas, pyarrow or matplotlib (bench/startup.py measures it; tests/test_startup.py checks it).
if TYPE_CHECKING:
    from rich.console import Console

    from advisor.render.common import View
    from advisor.report import Report
    from advisor.usercontext import UserContext

T = TypeVar("T")


class Command(TyperCommand):
    """A command whose help reads like its peers': arguments and option values by what they are (PATH, FILE,
    KEY=VALUE), never by a Python type (``<path>``, ``<list[str]>``), in the usage line too."""

    def collect_usage_pieces(self, ctx) -> list[str]:  # noqa: ANN001 (click's Context)
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(_argument_name(param))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx, formatter) -> None:  # noqa: ANN001 (click's Context and HelpFormatter)
        arguments, options = [], []
        for param in self.get_params(ctx):
            if getattr(param, "hidden", False):
                continue
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), getattr(param, "help", None) or ""))
            else:
                record = param.get_help_record(ctx)
                if record is not None:
                    options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _argument_name(param) -> str:  # noqa: ANN001
    name = param.metavar or param.name.upper()
    return name if param.required or name.startswith("[") else f"[{name}]"


app = typer.Typer(
    name="advisor",
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def command(app_: typer.Typer, name: str):  # noqa: ANN201 (typer's decorator)
    """``app_.command(name)`` with the help layout of Command."""
    return app_.command(name, cls=Command)


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


class Detail(str, Enum):
    brief = "brief"
    full = "full"


_SUFFIX_FORMATS = {".md": OutputFormat.md, ".markdown": OutputFormat.md, ".html": OutputFormat.html,
                   ".htm": OutputFormat.html, ".json": OutputFormat.json, ".txt": OutputFormat.terminal}
_SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2}


EnvOption = Annotated[Optional[list[str]], typer.Option(
    "--env", metavar="KEY=VALUE", help="A variable of the job's environment that the profile does not record (repeatable).")]
EnvFileOption = Annotated[Optional[list[Path]], typer.Option(
    "--env-file", metavar="FILE", help="A file of KEY=VALUE lines, `export` allowed (repeatable).")]
ContextOption = Annotated[Optional[Path], typer.Option(
    "--context", metavar="FILE", help="YAML of model settings (micro_batch_size, tensor_parallel, …).")]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")]
FormatOption = Annotated[Optional[OutputFormat], typer.Option(
    "--format", "-f", metavar="[terminal|md|html|json]",
    help="Format of the report on standard output (or of the one -o file); default: terminal, or -o's suffix.")]
OutputOption = Annotated[Optional[list[Path]], typer.Option(
    "--output", "-o", metavar="FILE",
    help="Write the report to FILE, its format from the suffix: .md, .html, .json, .txt (terminal text). "
         "Repeat it to write several formats from one analysis.")]
LangOption = Annotated[Optional[Language], typer.Option(
    "--lang", metavar="[en|zh]", help="Report language; default: from the locale.")]
FailOnOption = Annotated[Optional[FailOn], typer.Option(
    "--fail-on", metavar="[high|medium|low]", help="Exit 1 when a finding of this severity or higher exists (every "
                                                   "finding counts, whatever --max-findings and --min-severity show).")]
DetailOption = Annotated[Optional[Detail], typer.Option(
    "--detail", metavar="[brief|full]",
    help="Terminal and Markdown: brief (the default: verdict, top actions, per-rank table) or full (every finding with "
         "its prescriptions, evidence and rule trace, operators, coverage). HTML and JSON are always full.")]
MaxFindingsOption = Annotated[Optional[int], typer.Option(
    "--max-findings", metavar="N", help="Show at most N findings, the highest ranked (every format, JSON too).")]
MinSeverityOption = Annotated[Optional[FailOn], typer.Option(
    "--min-severity", metavar="[high|medium|low]", help="Show only findings of this severity or higher (every format, JSON too).")]


def _max_file_size(value: Optional[str]) -> Optional[str]:
    from advisor.ingest.limits import DEFAULT_MAX_FILE_BYTES, MAX_FILE_BYTES, parse_size

    try:
        MAX_FILE_BYTES.set(DEFAULT_MAX_FILE_BYTES if value is None else parse_size(value))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


MaxFileSizeOption = Annotated[
    Optional[str],
    typer.Option("--max-file-size", callback=_max_file_size, metavar="SIZE",
                 help="Skip input files larger than this (default 4G; e.g. 16G)."),
]


def _jobs(value: Optional[int]) -> Optional[int]:
    from advisor.parallel import JOBS

    JOBS.set(value)
    return value


JobsOption = Annotated[
    Optional[int],
    typer.Option("--jobs", "-j", callback=_jobs, min=1, metavar="N",
                 help="Processes to read and analyse with (default: $ADVISOR_JOBS, else the usable cores, at most 8)."),
]


class Deep(str, Enum):
    auto = "auto"
    all = "all"


SchedulerOption = Annotated[Optional[str], typer.Option(
    "--scheduler", metavar="ADDRESS",
    help="Analyse the ranks on Dask: 'local' (a LocalCluster on this machine) or a scheduler address "
         "(tcp://host:8786) whose workers see PATH (default: $ADVISOR_SCHEDULER, else the built-in process pool; "
         "needs advisor[dask]).")]
DeepOption = Annotated[Optional[Deep], typer.Option(
    "--deep", metavar="[auto|all]",
    help="auto (the default, or $ADVISOR_DEEP): above 64 ranks, read every rank's cluster-level files and analyse "
         "the outlier, straggler and typical ranks in depth; all: analyse every rank in depth.")]


def _complete_rule_id(incomplete: str) -> list[str]:
    """Shell completion of a rule id: the file names of the built-in rules (a rule's file is named by its id)."""
    from advisor.resources import data_dir

    return sorted(p.stem for p in data_dir("rules").rglob("*.yaml") if p.stem.startswith(incomplete))


RulesOption = Annotated[
    Optional[list[Path]],
    typer.Option("--rules", metavar="DIR", help="A rule pack directory (rules/, knowledge/, pack.yaml) to add (repeatable)."),
]
RuleIdArgument = Annotated[str, typer.Argument(metavar="RULE_ID", autocompletion=_complete_rule_id,
                                               help="A rule id (see `advisor rules list`).")]


def _version(value: bool) -> None:
    if value:
        from advisor.version import VERSION

        typer.echo(f"advisor {VERSION}")
        raise typer.Exit()


@app.callback(epilog="Run `advisor COMMAND --help` for a command's options and examples.")
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """Diagnose AI training and inference profiles and prescribe ranked fixes.

    \b
    Examples:
      advisor diagnose ./prof                         brief report in the terminal
      advisor diagnose ./prof -o report.html -o report.md -o report.json
      advisor compare before/ after/                  did the fix deliver?
      advisor --install-completion                    tab completion for your shell
    """


@command(app, "diagnose")
def diagnose_command(
    path: Annotated[
        Path, typer.Argument(metavar="PATH", help="A *_ascend_pt directory, a directory of them (cluster), "
                             "ASCEND_PROFILER_OUTPUT, or PyTorch traces (*.pt.trace.json[.gz], a file or a directory).")
    ],
    output_format: FormatOption = None,
    output: OutputOption = None,
    detail: DetailOption = None,
    max_findings: MaxFindingsOption = None,
    min_severity: MinSeverityOption = None,
    lang: LangOption = None,
    fail_on: FailOnOption = None,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    rules: RulesOption = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="In the terminal report, show every finding with its conditions and fact values.")
    ] = False,
    max_file_size: MaxFileSizeOption = None,  # noqa: ARG001 (applied by its callback)
    jobs: JobsOption = None,  # noqa: ARG001 (applied by its callback)
    scheduler: SchedulerOption = None,
    deep: DeepOption = None,
    debug: DebugOption = False,
) -> None:
    """Diagnose a profile and print or write the action plan.

    The terminal and Markdown reports are brief unless --detail full: the verdict, the top actions with their
    gains (measured or assumed), the per-rank table and how to get the rest. The HTML report has everything,
    with charts.

    \b
    Examples:
      advisor diagnose ./prof
      advisor diagnose ./prof --detail full --explain
      advisor diagnose ./prof -o report.html -o report.md -o report.json
      advisor diagnose ./prof -f json --fail-on high --max-findings 10
      advisor diagnose ./traces --lang zh --env TASK_QUEUE_ENABLE=1 --context model.yaml
      advisor diagnose /shared/cluster-prof --scheduler tcp://scheduler:8786 --deep all
    """
    with _guard(debug):
        from advisor.diagnose import diagnose
        from advisor.usercontext import build_context

        targets = _targets(output_format, output)
        _refuse_overwriting(output, [path, *(env_file or []), *([context] if context else []), *(rules or [])])
        view = _view(detail, max_findings, min_severity, explain)
        user = build_context(env or [], env_file or [], context)
        book = _rulebook(rules, skip_broken=True)
        language = lang.value if lang else _locale_language()
        report = _with_progress(f"Diagnosing {path}", lambda: _without_failing_packs(
            book, lambda rules: diagnose(path, lang=language, context=user, rulebook=rules, scheduler=scheduler,
                                         deep=deep.value if deep else None)))
        _refuse_overwriting(output, _files_read(path, report.coverage))
        for fmt, target in targets:
            _write(report, fmt, target, explain, view)
        _note_coverage(report.coverage)
        if report.status == "empty":
            _note("nothing could be diagnosed: no step or operator data was readable", level="error")
        raise typer.Exit(_exit_code(report, fail_on))


def _view(detail: Detail | None, max_findings: int | None, min_severity: FailOn | None, explain: bool = False) -> View:
    """What the reports show: brief unless --detail full (or --explain, which shows every finding)."""
    from advisor.render.common import View

    chosen = detail.value if detail is not None else "full" if explain else "brief"
    if max_findings is not None and max_findings < 0:
        raise errors.InputError(f"--max-findings is a number of findings, 0 or more, not {max_findings}")
    return View(chosen, max_findings, min_severity.value if min_severity else None)


@command(app, "facts")
def facts_command(
    path: Annotated[Optional[Path], typer.Argument(metavar="[PATH]", help="A profile to extract the facts of.")] = None,
    list_families: Annotated[bool, typer.Option("--list", help="Document every fact family and field.")] = False,
    family: Annotated[Optional[str], typer.Option("--family", metavar="FAMILY", help="Only this fact family (see --list).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts as JSON.")] = False,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    max_file_size: MaxFileSizeOption = None,  # noqa: ARG001 (applied by its callback)
    jobs: JobsOption = None,  # noqa: ARG001 (applied by its callback)
    scheduler: SchedulerOption = None,
    deep: DeepOption = None,
    debug: DebugOption = False,
) -> None:
    """Print the facts extracted from a profile, or (--list) the catalogue rule conditions are written against.

    \b
    Examples:
      advisor facts ./prof --family communication
      advisor facts ./prof --json > facts.json
      advisor facts --list --family idle
    """
    with _guard(debug):
        from advisor.facts import FACT_FAMILIES
        from advisor.usercontext import build_context

        if family is not None and family not in FACT_FAMILIES:
            raise errors.InputError(f"unknown fact family {family!r}; known: {', '.join(FACT_FAMILIES)}")
        if list_families:
            _print_catalogue(family)
        elif path is None:
            raise errors.InputError("give a profile PATH, or --list for the catalogue")
        else:
            _print_facts(path, family, as_json, build_context(env or [], env_file or [], context), scheduler,
                         deep.value if deep else None)


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


def _print_facts(path: Path, family: str | None, as_json: bool, user: UserContext, scheduler: str | None,
                 deep: str | None) -> None:
    import json

    from advisor.diagnose import diagnose

    report = _with_progress(f"Reading {path}", lambda: diagnose(path, lang="en", context=user, scheduler=scheduler,
                                                                deep=deep))
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
    _note_coverage(report.coverage)


rules_app = typer.Typer(help="""Work with rule files: list, show, lint, test, scaffold and document rules.

\b
Examples:
  advisor rules list --category memory
  advisor rules new team.my_rule --category io --dir team-pack
  advisor rules lint team-pack/ && advisor rules test team-pack/
""", no_args_is_help=True)
app.add_typer(rules_app, name="rules")


@command(rules_app, "list")
def rules_list_command(
    category: Annotated[Optional[str], typer.Option("--category", metavar="CATEGORY", help="Only rules of this category.")] = None,
    rules: RulesOption = None,
) -> None:
    """List the rules (built-in, installed packs and --rules packs): id, category, pack and title.

    \b
    Examples:
      advisor rules list --category communication
      advisor rules list --rules team-pack/
    """
    with _guard(False):
        book = _rulebook(rules)
        selected = [r for r in book.rules.values() if category in (None, r.spec.category)]
        if not selected:
            raise errors.InputError(f"no rule has the category {category!r}")
        for rule in sorted(selected, key=lambda r: (r.spec.category, r.id)):
            typer.echo(f"{rule.id:<38} {rule.spec.category:<18} {rule.pack:<10} {rule.spec.title.en}")
        typer.echo(f"{len(selected)} rule(s)")


@command(rules_app, "show")
def rules_show_command(rule_id: RuleIdArgument, rules: RulesOption = None) -> None:
    """Show a rule: its conditions, what it recommends, its description and its test cases.

    \b
    Example:
      advisor rules show host.device_idle
    """
    from advisor.rulebook import section_text
    from advisor.text import collapse

    with _guard(False):
        book = _rulebook(rules)
        rule = _find_rule(book, rule_id)
        spec = rule.spec
        typer.echo(f"{spec.id}: {spec.title.en}" + (f" / {spec.title.zh}" if spec.title.zh else ""))
        typer.echo(f"category: {spec.category} · platforms: {', '.join(spec.platforms)} · severity: {spec.severity} · "
                   f"pack: {rule.pack} · file: {rule.path}")
        if spec.description:
            typer.echo("\n" + collapse(spec.description.en))
        typer.echo("\n" + section_text(rule.path, "when"))
        typer.echo(section_text(rule.path, "then"))
        for knowledge_id in spec.then.recommend:
            entry = book.knowledge[knowledge_id]
            typer.echo(f"\nrecommends {knowledge_id}: {entry.title.en}")
            for number, action in enumerate(entry.actions, 1):
                typer.echo(f"  {number}. {collapse(action.en)}")
        typer.echo("\ntest cases:")
        for case in spec.tests:
            typer.echo(f"  {case.expect:<5} {case.name}")


@command(rules_app, "lint")
def rules_lint_command(
    paths: Annotated[Optional[list[Path]], typer.Argument(metavar="[PATH]...", help="Pack directories or files in them; default: the built-in pack.")] = None,
) -> None:
    """Check rule packs for every problem a rule author can make; exit 1 when any is found.

    \b
    Examples:
      advisor rules lint team-pack/
      advisor rules lint team-pack/rules/team.my_rule.yaml
    """
    from advisor.lint import lint

    with _guard(False):
        result = lint(paths or [])
        for note in result.notes:
            _note(note)
        for problem in result.problems:
            typer.echo(problem)
        typer.echo(f"{len(result.problems)} problem(s) in {result.rules} rule(s) and {result.knowledge} knowledge entr{'y' if result.knowledge == 1 else 'ies'}")
        raise typer.Exit(1 if result.problems else 0)


@command(rules_app, "test")
def rules_test_command(
    paths: Annotated[Optional[list[Path]], typer.Argument(metavar="[PATH]...", help="Pack directories; default: the built-in and installed rules.")] = None,
    select: Annotated[Optional[str], typer.Option("-k", metavar="TEXT", help="Only cases whose rule id or name contains TEXT.")] = None,
) -> None:
    """Run the test cases embedded in the rule files and show each result; exit 1 when one fails.

    \b
    Examples:
      advisor rules test team-pack/
      advisor rules test -k host.device_idle
    """
    from advisor.rulebook import load_rulebook
    from advisor.ruletests import run_rule_tests

    with _guard(False):
        if paths:
            book = load_rulebook(paths, installed=False)
            results = run_rule_tests(book, select, packs={p.name for p in book.packs[1:]})
        else:
            results = run_rule_tests(_rulebook(None), select)
        for result in results:
            mark = "PASS" if result.passed else "FAIL"
            typer.echo(f"{mark} {result.rule_id}: {result.name} (expect {result.expect}; {result.detail})")
        failed = sum(not r.passed for r in results)
        typer.echo(f"{len(results) - failed} passed, {failed} failed")
        if not results:
            raise errors.InputError(f"no rule test case matches {select!r}" if select else "no rule test cases found")
        raise typer.Exit(1 if failed else 0)


@command(rules_app, "new")
def rules_new_command(
    rule_id: Annotated[str, typer.Argument(metavar="RULE_ID", help="Dotted lower-case id, e.g. team.slow_embedding.")],
    category: Annotated[str, typer.Option("--category", metavar="CATEGORY", help="The rule's category (see docs/rule-format.md).")],
    directory: Annotated[Path, typer.Option("--dir", metavar="DIR", help="The pack directory to write into.")] = Path("."),
) -> None:
    """Scaffold a rule and its knowledge entry, with passing example cases and TODO texts for lint to flag.

    \b
    Example:
      advisor rules new team.slow_embedding --category affinity-operator --dir team-pack
    """
    from advisor.scaffold import scaffold

    with _guard(False):
        for path in scaffold(rule_id, category, directory):
            typer.echo(f"created {path}")


@command(rules_app, "docs")
def rules_docs_command(
    output: Annotated[Path, typer.Option("--output", "-o", metavar="DIR", help="Directory to write the catalogue into.")],
    rules: RulesOption = None,
) -> None:
    """Write a Markdown catalogue: an index and one page per rule and per knowledge entry.

    \b
    Example:
      advisor rules docs -o docs/rules --rules team-pack/
    """
    from advisor.rulebook import load_rulebook
    from advisor.ruledocs import write_rule_docs

    with _guard(False):
        try:
            written = write_rule_docs(load_rulebook(rules or [], installed=False), output)
        except OSError as exc:
            raise errors.InputError(f"{output}: cannot write the catalogue ({exc.strerror or exc})") from exc
        typer.echo(f"wrote {len(written)} page(s) to {output}")


@command(app, "explain")
def explain_command(
    rule_id: RuleIdArgument,
    path: Annotated[Path, typer.Argument(metavar="PATH", help="The profile to explain the rule on.")],
    rules: RulesOption = None,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    max_file_size: MaxFileSizeOption = None,  # noqa: ARG001 (applied by its callback)
    jobs: JobsOption = None,  # noqa: ARG001 (applied by its callback)
    debug: DebugOption = False,
) -> None:
    """Show why a rule fired on a profile (each condition with its fact values), or why it did not.

    \b
    Example:
      advisor explain host.device_idle ./prof
    """
    with _guard(debug):
        from advisor.diagnose import analyse
        from advisor.explain import explain_lines
        from advisor.usercontext import build_context

        book = _rulebook(rules)
        rule = _find_rule(book, rule_id)
        analysis = analyse(path, book, build_context(env or [], env_file or [], context))
        for line in explain_lines(rule, analysis.firings, analysis.all_facts, analysis.profile.platform):
            typer.echo(line)


@command(app, "compare")
def compare_command(
    base: Annotated[Path, typer.Argument(metavar="BASE", help="The reference profile: a GPU trace, an Ascend directory or a cluster.")],
    target: Annotated[Path, typer.Argument(metavar="TARGET", help="The profile compared with it (e.g. the NPU run, or the run after a fix).")],
    output_format: FormatOption = None,
    output: OutputOption = None,
    lang: LangOption = None,
    fail_on: FailOnOption = None,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    rules: RulesOption = None,
    max_file_size: MaxFileSizeOption = None,  # noqa: ARG001 (applied by its callback)
    jobs: JobsOption = None,  # noqa: ARG001 (applied by its callback)
    debug: DebugOption = False,
) -> None:
    """Compare two profiles side by side and diagnose the difference (GPU vs NPU, before vs after).

    \b
    Examples:
      advisor compare gpu_traces/ ./prof -o gap.html
      advisor compare before/ after/ --fail-on high
      advisor compare before/ after/ -o gap.md -o gap.json
    """
    with _guard(debug):
        from advisor.compare import compare
        from advisor.text import collapse_repeats
        from advisor.usercontext import build_context

        targets = _targets(output_format, output)
        _refuse_overwriting(output, [base, target, *(env_file or []), *([context] if context else []), *(rules or [])])
        user = build_context(env or [], env_file or [], context)
        book = _rulebook(rules, skip_broken=True)
        language = lang.value if lang else _locale_language()
        result = _with_progress(f"Comparing {base} with {target}", lambda: _without_failing_packs(
            book, lambda rules: compare(base, target, rules, lang=language, context=user)))
        for fmt, output_path in targets:
            _write_comparison(result, fmt, output_path)
        for warning in collapse_repeats(list(result.warnings)):
            _note(warning)
        raise typer.Exit(_compare_exit_code(result, fail_on))


def _write_comparison(result, fmt: OutputFormat, output: Path | None) -> None:  # noqa: ANN001 (a Comparison)
    from advisor.render.comparison import (
        render_comparison_html,
        render_comparison_json,
        render_comparison_markdown,
        render_comparison_terminal,
    )

    if fmt is OutputFormat.terminal:
        if output is not None:
            _emit(_terminal_text(lambda console: render_comparison_terminal(result, console)), output)
        else:
            _to_stdout(lambda: render_comparison_terminal(result, _stdout_console()))
    else:
        _emit({OutputFormat.md: render_comparison_markdown, OutputFormat.html: render_comparison_html,
               OutputFormat.json: render_comparison_json}[fmt](result), output)


def _compare_exit_code(result, fail_on: FailOn | None) -> int:
    if "empty" in (result.base.status, result.target.status):
        return errors.EXIT_NOTHING_DIAGNOSED
    if fail_on is not None and any(_SEVERITY_RANK[f.severity] <= _SEVERITY_RANK[fail_on.value] for f in result.findings):
        return errors.EXIT_FAIL_ON
    if "partial" in (result.base.status, result.target.status):
        return errors.EXIT_PARTIAL
    return errors.EXIT_OK


@command(app, "mcp")
def mcp_command(debug: DebugOption = False) -> None:
    """Serve the advisor to AI assistants over MCP on stdin/stdout (tools: diagnose, facts, explain, compare,
    rules_list); needs `pip install 'advisor[mcp]'`. See docs/mcp.md.

    \b
    Example (register it with an MCP client, e.g. Claude Code):
      claude mcp add advisor -- advisor mcp
    """
    with _guard(debug):
        from advisor.mcp import serve

        serve()


plan_app = typer.Typer(help="""Planners: concrete settings computed from shapes, sizes and measured times.

\b
Examples:
  advisor plan mc2 --m 4096 --k 3072 --n 8192 --matmul-us 803 --comm-us 1071
  advisor plan hccl-buffsize --micro-batch 4 --seq-len 8192 --hidden 8192
  advisor plan parallel --params-b 70 --memory-gb 64 --nodes 4
""", no_args_is_help=True)
app.add_typer(plan_app, name="plan")
JsonOption = Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")]


@command(plan_app, "mc2")
def plan_mc2_command(
    m: Annotated[int, typer.Option("--m", metavar="ROWS", help="Rows of the left matrix [M, K].")],
    k: Annotated[int, typer.Option("--k", metavar="K", help="The shared axis K.")],
    n: Annotated[int, typer.Option("--n", metavar="COLS", help="Columns of the right matrix [K, N].")],
    matmul_us: Annotated[float, typer.Option("--matmul-us", metavar="US", help="Measured un-fused MatMul time, µs.")],
    comm_us: Annotated[Optional[float], typer.Option("--comm-us", metavar="US", help="Measured un-fused AllReduce time, µs.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", metavar="DTYPE", help="fp16, bf16, fp32 or int8.")] = "fp16",
    ranks: Annotated[int, typer.Option("--ranks", metavar="N", help="Ranks in the communication group.")] = 8,
    factor: Annotated[float, typer.Option("--factor", metavar="X", help="Contention factor on the short block's times.")] = 1.15,
    short: Annotated[Optional[int], typer.Option("--short", metavar="ROWS", help="Override the short block length.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Tile a MatmulAllReduce along M so MatMul and AllReduce overlap (the tiling procedure of Ascend's MC²
    best-practice guide).

    \b
    Example:
      advisor plan mc2 --m 4096 --k 3072 --n 8192 --matmul-us 803 --comm-us 1071
    """
    with _guard(False):
        from advisor.planners.mc2 import plan_mc2

        plan = _planned(lambda: plan_mc2(m, k, n, dtype=dtype, ranks=ranks, matmul_us=matmul_us, comm_us=comm_us,
                                         factor=factor, short=short))
        if as_json:
            _print_json({**_fields(plan), "predicted_gain_us": plan.predicted_gain_us, "predicted_gain_ratio": plan.predicted_gain_ratio})
            return
        typer.echo(f"bound: {plan.bound} (MatMul {matmul_us:,.0f} µs, AllReduce {plan.serial_us - matmul_us:,.0f} µs)")
        typer.echo("short-block candidates: " + ", ".join(f"{k}={v}" for k, v in plan.candidates.items())
                   + f" → {plan.short_initial}")
        typer.echo(f"short block: AllReduce {plan.short_comm_us:,.1f} µs, MatMul {plan.short_mm_us:,.1f} µs (×{factor})")
        typer.echo(f"long block before alignment: {plan.long_exact:,.1f} rows")
        typer.echo(f"tiles: {{{', '.join(map(str, plan.tiles))}}}")
        typer.echo(f"predicted fused time: {plan.predicted_fused_us:,.0f} µs of {plan.serial_us:,.0f} µs serial "
                   f"(gain {plan.predicted_gain_us:,.0f} µs, {plan.predicted_gain_ratio:.1%}); measure it, splitting inflates chunks")
        for note in plan.notes:
            typer.echo(f"note: {note}")


@command(plan_app, "hccl-buffsize")
def plan_hccl_command(
    micro_batch: Annotated[int, typer.Option("--micro-batch", metavar="N", help="Samples per micro-batch per card.")],
    sequence_length: Annotated[int, typer.Option("--seq-len", metavar="N", help="Tokens per sample.")],
    hidden_size: Annotated[int, typer.Option("--hidden", metavar="N", help="Hidden size.")],
    dtype: Annotated[str, typer.Option("--dtype", metavar="DTYPE", help="fp16, bf16, fp32, fp8 or int8.")] = "bf16",
    current: Annotated[int, typer.Option("--current", metavar="MB", help="The HCCL_BUFFSIZE in use, MB.")] = 200,
    communicators: Annotated[Optional[int], typer.Option("--communicators", metavar="N", help="Communication groups per rank.")] = None,
    as_json: JsonOption = False,
) -> None:
    """HCCL_BUFFSIZE from the size of one micro-batch activation.

    \b
    Example:
      advisor plan hccl-buffsize --micro-batch 4 --seq-len 8192 --hidden 8192
    """
    with _guard(False):
        from advisor.planners.hccl import DTYPE_BYTES, plan_buffsize

        if dtype not in DTYPE_BYTES:
            raise errors.InputError(f"unknown dtype {dtype!r}; one of {', '.join(DTYPE_BYTES)}")
        plan = _planned(lambda: plan_buffsize(micro_batch, sequence_length, hidden_size, DTYPE_BYTES[dtype], current, communicators))
        if as_json:
            _print_json(_fields(plan))
            return
        typer.echo(f"HCCL_BUFFSIZE={plan.recommended_mb}")
        typer.echo(plan.explain())


@command(plan_app, "parallel")
def plan_parallel_command(
    params_b: Annotated[float, typer.Option("--params-b", metavar="BILLIONS", help="Model parameters, billions.")],
    memory_gb: Annotated[float, typer.Option("--memory-gb", metavar="GB", help="Device memory per card, GB.")],
    cards_per_node: Annotated[int, typer.Option("--cards-per-node", metavar="N", help="NPUs per server.")] = 8,
    nodes: Annotated[int, typer.Option("--nodes", metavar="N", help="Servers available.")] = 1,
    activation_gb: Annotated[float, typer.Option("--activation-gb", metavar="GB", help="Activations of one micro-batch without parallelism, GB.")] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """TP, PP, DP, ZeRO-1 and recomputation from model size and hardware: tensor parallelism within a server
    first, then pipeline stages across servers, data parallelism with what is left.

    \b
    Example:
      advisor plan parallel --params-b 70 --memory-gb 64 --nodes 4
    """
    with _guard(False):
        from advisor.planners.parallel import plan_parallel

        plan = _planned(lambda: plan_parallel(params_b, memory_gb, cards_per_node, nodes, activation_gb))
        if as_json:
            _print_json({**_fields(plan), "layout": _fields(plan.layout)})
            return
        layout = plan.layout
        typer.echo(f"TP={layout.tp} PP={layout.pp} DP={layout.dp} ZeRO-1={'on' if layout.zero1 else 'off'} "
                   f"recompute={'on' if layout.recompute else 'off'}: {plan.per_card_gb:,.1f} GB per card of "
                   f"{plan.usable_gb:,.1f} GB usable{'' if plan.fits else ' (does not fit)'}")
        for reason in plan.reasons:
            typer.echo(f"- {reason}")


def _planned(build):
    try:
        return build()
    except ValueError as exc:
        raise errors.InputError(str(exc)) from exc


def _fields(value) -> dict:
    import dataclasses

    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def _print_json(data: dict) -> None:
    import json

    typer.echo(json.dumps(data, indent=2, default=lambda v: _fields(v), ensure_ascii=False))


def _rulebook(packs: list[Path] | None, skip_broken: bool = False):
    """The built-in and installed rules (broken installed packs skipped), plus ``packs`` (broken ones skipped, or an
    error). Loaded here rather than through advisor.diagnose, so the rules commands need no pandas."""
    from advisor.rulebook import load_rulebook

    return load_rulebook(packs, skip_broken=skip_broken) if packs else load_rulebook(skip_broken=True)


def _without_failing_packs(book, run: Callable[[object], T]) -> T:
    """``run(book)``; when a rule of a pack other than the built-in one fails while it runs, the run is done
    again without that pack (or, when the failure names no rule, without every such pack), which the report
    lists as skipped (exit 3). A failure of the built-in rules stays an internal error."""
    from advisor.rulebook import packs_to_blame, without_packs

    while True:
        try:
            return run(book)
        except Exception as exc:
            if isinstance(exc, errors.AdvisorError) and not isinstance(exc, errors.EngineError):
                raise
            culprits = packs_to_blame(book, exc)
            if not culprits:
                raise
            book = without_packs(book, culprits, f"a rule failed while the diagnosis ran ({type(exc).__name__}: {exc}); "
                                                 "the diagnosis was made without this pack")


def _find_rule(book, rule_id: str):
    import difflib

    rule = book.rules.get(rule_id)
    if rule is None:
        close = difflib.get_close_matches(rule_id, list(book.rules), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `advisor rules list` shows them"
        raise errors.InputError(f"no rule {rule_id!r}{hint}")
    return rule


def main() -> None:
    """Console-script entry point.

    Once a command starts (``_guard``), Ctrl-C becomes KeyboardInterrupt again (see
    errors.quiet_interrupt_while_starting), which the command turns into ``advisor: error: interrupted`` and exit
    130. Until then — while the command line is parsed, and its option callbacks import what they need — the
    starting handler says the same and ends the program (typer would end a KeyboardInterrupt there with a silent
    130).
    """
    try:
        _reserve_standard_streams()
        app(prog_name="advisor")  # also under `python -m advisor`: usage lines and completion name the program
    except KeyboardInterrupt:  # outside a command's own handling (parsing the command line, say)
        _note("interrupted", level="error")
        raise SystemExit(130) from None
    except SystemExit as exc:
        if exc.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            raise SystemExit(errors.EXIT_OK) from None  # typer's exit on a broken pipe outside a command (--version, --help)
        raise
    finally:  # the command has finished: a Ctrl-C while Python shuts down must not print a traceback
        signal.signal(signal.SIGINT, signal.SIG_IGN)


_CLOSED_STREAMS: set[str] = set()  # standard streams that were closed when the program started
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _reserve_standard_streams() -> None:
    """Put /dev/null on a standard output or error that was closed at start (``>&-``): no file opened later may
    take its descriptor, and a report meant for it is refused (exit 2) instead of vanishing."""
    for descriptor, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(descriptor)
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != descriptor:
                os.dup2(null, descriptor)
                os.close(null)
            setattr(sys, name, open(descriptor, "w", closefd=False))  # noqa: SIM115 (the process's stream)
            _CLOSED_STREAMS.add(name)


def _silence(name: str) -> None:
    """Send what is left of a broken standard stream to /dev/null, so that nothing fails when Python flushes it at exit."""
    stream = getattr(sys, name)
    try:
        descriptor = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, descriptor)
        os.close(null)
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): replace the object
        setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 (lives as long as the process)


def _to_stdout(write: Callable[[], None]) -> None:
    """Run ``write`` (which prints the report on standard output) and flush it: a closed or failing standard
    output is an error that names it (exit 2); a reader that went away (``| head``) is not an error."""
    if "stdout" in _CLOSED_STREAMS:
        raise errors.InputError("standard output is closed; pass -o FILE to write the report to a file")
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        _silence("stdout")
        raise errors.InputError(f"standard output: cannot write the report ({exc.strerror or exc})") from None


def _stdout_console() -> Console:
    """The console of a report on standard output; a broken pipe is left to _guard (rich would exit 1, --fail-on's code)."""
    from rich.console import Console

    console = Console(width=min(Console().width, 120))

    def broken_pipe() -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    console.on_broken_pipe = broken_pipe  # type: ignore[method-assign]
    return console


def _flushed_stdout() -> int | None:
    """Flush standard output before the command ends; the exit code to end with instead when that fails."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _silence("stdout")
        return errors.EXIT_OK
    except OSError as exc:
        _silence("stdout")
        _note(f"standard output: cannot write the output ({exc.strerror or exc})", level="error")
        return errors.EXIT_USAGE
    return None


def _with_progress(what: str, work: Callable[[], T]) -> T:
    """Run ``work``; on a terminal, show which file is being read (never on a pipe, so JSON stays clean)."""
    from rich.console import Console
    from rich.text import Text

    from advisor.ingest.ascend import PROGRESS
    from advisor.render.common import strip_control

    stderr = Console(stderr=True)
    if not stderr.is_terminal:
        return work()
    read = {"files": 0, "bytes": 0}
    # Text, not a str: paths and file names are shown as written, never read as rich markup ('[/bad]', '[link=…]')
    with stderr.status(Text(strip_control(f"{what} …"))) as status:

        def show(file: str, size: int) -> None:
            read["files"] += 1
            read["bytes"] += size
            status.update(Text(strip_control(
                f"Reading {file} ({size / 1e6:,.1f} MB; file {read['files']}, {read['bytes'] / 1e6:,.0f} MB so far) …")))

        token = PROGRESS.set(show)
        try:
            return work()
        finally:
            PROGRESS.reset(token)


def _targets(fmt: OutputFormat | None, outputs: list[Path] | None) -> list[tuple[OutputFormat, Path | None]]:
    """(format, file) for each report to write: standard output (None) when no -o is given, else each -o file in
    the format of its suffix (or of --format, for one file)."""
    if not outputs:
        return [(fmt or OutputFormat.terminal, None)]
    if fmt is not None:
        if len(outputs) > 1:
            raise errors.InputError("--format applies to one output; with several -o each file's suffix gives its format")
        return [(fmt, outputs[0])]
    targets = []
    for output in outputs:
        suffix_format = _SUFFIX_FORMATS.get(output.suffix.lower())
        if suffix_format is None:
            raise errors.InputError(f"{output}: cannot tell the format from the suffix; pass --format md|html|json")
        targets.append((suffix_format, output))
    resolved = [os.path.realpath(output) for output in outputs]
    if len(set(resolved)) < len(resolved):
        raise errors.InputError(f"the same file is given to -o twice ({', '.join(map(str, outputs))})")
    return targets


def _write(report: Report, fmt: OutputFormat, output: Path | None, explain: bool, view: View) -> None:
    """Print the report on standard output (``output`` None) or write it to a file, in ``fmt`` at ``view``."""
    from advisor.render import render_html, render_json, render_markdown, render_terminal

    if fmt is OutputFormat.terminal:
        if output is not None:
            _emit(_terminal_text(lambda console: render_terminal(report, console, explain, view)), output)
        else:
            _to_stdout(lambda: render_terminal(report, _stdout_console(), explain, view))
    else:
        document = {OutputFormat.md: render_markdown, OutputFormat.html: render_html, OutputFormat.json: render_json}[fmt]
        _emit(document(report, view), output)


def _emit(text: str, output: Path | None) -> None:
    """Print a rendered document, or write it to ``output`` (see write_atomically)."""
    if output is None:
        _to_stdout(lambda: sys.stdout.write(text))
        return
    try:
        write_atomically(output, text)
    except OSError as exc:
        raise errors.InputError(f"{output}: cannot write the report ({exc.strerror or exc})") from exc
    _note(f"report written to {output}")


def write_atomically(output: Path, text: str) -> None:
    """Write ``text`` to a new file beside ``output`` and rename it over ``output`` once it is complete.

    On a full disk, or any other failure, the previous file is left as it was and no partial file remains.
    A symbolic link is followed (the file it points to is replaced); a FIFO or device (``/dev/stdout``) is
    written directly, as it cannot be replaced.
    """
    target = Path(os.path.realpath(output))
    try:
        status = target.stat()
    except FileNotFoundError:
        status = None
    if status is not None and not stat.S_ISREG(status.st_mode):
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        with target.open("w", encoding="utf-8") as handle:
            handle.write(text)
        return
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(descriptor, stat.S_IMODE(status.st_mode) if status is not None else 0o666 & ~mask)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _terminal_text(render: Callable[[Console], None]) -> str:
    """What a terminal report looks like in a file: 100 columns, no colour."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    render(Console(file=buffer, width=100, no_color=True, force_terminal=False))
    return buffer.getvalue()


def _files_read(path: Path, coverage) -> list[Path]:
    """The input files a diagnosis of ``path`` read, tried or skipped (coverage names them relative to ``path``)."""
    base = path if path.is_dir() else path.parent
    names = [*coverage.read, *(s.file for s in coverage.skipped), *(s.file for s in coverage.partly_read)]
    return [path, *(base / name for name in names)]


_INPUT_NAME = re.compile(r"^(profiler_info.*\.json|profiler_metadata\.json|.*\.pt\.trace\.json(\.gz)?|.*\.db|info\.json\.\d+)$")


def _refuse_overwriting(outputs: list[Path] | None, inputs: list[Path]) -> None:
    """Refuse an output that is one of the inputs: a file given, a file read, or a profiler file under a directory given."""
    for output in outputs or []:
        if output.exists():
            _refuse_overwriting_one(output, inputs)


def _refuse_overwriting_one(output: Path, inputs: list[Path]) -> None:
    for given in inputs:
        try:
            same = os.path.samefile(output, given)
        except OSError:
            same = False
        if not same and given.is_dir() and output.is_file():
            inside = Path(os.path.realpath(output)).is_relative_to(os.path.realpath(given))
            same = inside and (_INPUT_NAME.match(output.name) is not None or "ASCEND_PROFILER_OUTPUT" in output.resolve().parts)
        if same:
            raise errors.InputError(f"{output}: is an input of this run ({given}); the report would overwrite it — "
                                    "write it elsewhere")


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


def _note_coverage(coverage) -> None:
    """One warning line per input that was skipped, read in part or read with problems (repeats collapsed)."""
    lines = [f"skipped {skipped.file}: {skipped.reason}" for skipped in coverage.skipped]
    lines += [f"read only part of {partial.file}: {partial.reason}" for partial in coverage.partly_read]
    from advisor.text import collapse_repeats

    for line in collapse_repeats([*lines, *coverage.warnings]):
        _note(line, level="warning")


def _note(message: str, level: str = "note") -> None:
    """One line on standard error; a standard error that cannot be written (a full device) is given up on, never
    turned into a failure of the run."""
    from advisor.render.common import strip_control

    try:  # paths and names from the input may hold ANSI/OSC escapes: they are shown, not obeyed
        typer.echo(strip_control(f"advisor: {level}: {message}"), err=True)
    except OSError:
        _silence("stderr")


@contextmanager
def _guard(debug: bool) -> Iterator[None]:
    """Turn errors into one clear line on stderr and the documented exit code (a traceback with --debug)."""
    if errors.is_starting_handler(signal.getsignal(signal.SIGINT)):  # the command takes over Ctrl-C
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    except (typer.Exit, typer.Abort, SystemExit):
        code = _flushed_stdout()
        if code is not None:
            raise typer.Exit(code) from None
        raise
    except errors.AdvisorError as exc:
        if debug:
            raise
        _note(str(exc), level="error")
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        _note("interrupted", level="error")
        raise typer.Exit(130) from None
    except BrokenPipeError:  # the reader went away (`| head`): not an error, and not --fail-on's 1
        _silence("stdout")
        raise typer.Exit(errors.EXIT_OK) from None
    except Exception as exc:  # a bug: say so, and how to get the details
        if debug:
            raise
        if isinstance(exc, OSError) and exc.errno in _OUTPUT_ERRNOS:  # printing on a full or failing standard output
            _silence("stdout")
            _note(f"standard output: cannot write the output ({exc.strerror or exc})", level="error")
            raise typer.Exit(errors.EXIT_USAGE) from None
        _note(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", level="error")
        raise typer.Exit(errors.EXIT_INTERNAL) from None
    else:
        code = _flushed_stdout()
        if code is not None:
            raise typer.Exit(code)
