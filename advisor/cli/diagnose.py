"""``advisor diagnose``, ``facts`` and ``explain``: the commands that read one profile."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from advisor import errors
from advisor.cli.options import (
    ContextOption,
    DebugOption,
    DeepOption,
    DetailOption,
    EnvFileOption,
    EnvOption,
    FailOnOption,
    FormatOption,
    JobsOption,
    LangOption,
    MaxFileSizeOption,
    MaxFindingsOption,
    MinSeverityOption,
    OutputOption,
    RuleIdArgument,
    RulesOption,
    SchedulerOption,
    language,
    report_view,
    run_options,
    user_context,
)
from advisor.cli.output import (
    exit_code,
    files_read,
    guard,
    note,
    note_coverage,
    output_targets,
    refuse_overwriting,
    with_progress,
    write_atomically,
    write_report,
)
from advisor.cli.packs import find_rule, load_book, without_failing_packs

if TYPE_CHECKING:
    from advisor.runoptions import RunOptions
    from advisor.usercontext import UserContext


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
    annotate: Annotated[Optional[Path], typer.Option(
        "--annotate", metavar="FILE", help="Also write FILE: the traces the findings' time ranges are on, with one named "
        "range per range (Chrome trace JSON: open it in ui.perfetto.dev or chrome://tracing).")] = None,
    max_file_size: MaxFileSizeOption = None,
    jobs: JobsOption = None,
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
      advisor diagnose ./prof -o findings.csv -o report.xlsx
      advisor diagnose ./prof -o report.html --annotate timeline.json
      advisor diagnose ./prof -f json --fail-on high --max-findings 10
      advisor diagnose ./traces --lang zh --env TASK_QUEUE_ENABLE=1 --context model.yaml
      advisor diagnose /shared/cluster-prof --scheduler tcp://scheduler:8786 --deep all
    """
    with guard(debug):
        from advisor.diagnose import diagnose
        from advisor.render import render_document, render_terminal

        targets = output_targets(output_format, output)
        if annotate is not None and os.path.realpath(annotate) in {os.path.realpath(o) for o in output or []}:
            raise errors.InputError(f"{annotate}: is also a report given to -o; give --annotate a file of its own")
        written = [*(output or []), *([annotate] if annotate else [])]
        refuse_overwriting(written, [path, *(env_file or []), *([context] if context else []), *(rules or [])])
        view = report_view(detail, max_findings, min_severity, explain)
        user = user_context(env, env_file, context)
        book = load_book(rules, skip_broken=True)
        options = run_options(max_file_size, jobs, scheduler, deep)
        report = with_progress(f"Diagnosing {path}", options, lambda options: without_failing_packs(
            book, lambda rules: diagnose(path, lang=language(lang), context=user, rulebook=rules, options=options)))
        refuse_overwriting(written, files_read(path, report.coverage))
        for fmt, target in targets:
            write_report(fmt, target, lambda console: render_terminal(report, console, explain, view),
                         lambda name: render_document(report, name, view))
        if annotate is not None:  # the findings the reports show (--max-findings, --min-severity)
            from advisor.render.common import filtered_report

            write_annotation(filtered_report(report, view), path, annotate)
        note_coverage(report.coverage)
        if report.status == "empty":
            note("nothing could be diagnosed: no step or operator data was readable", level="error")
        raise typer.Exit(exit_code([report.status], report.findings, fail_on))


def write_annotation(report, path: Path, target: Path) -> None:
    """Write the Chrome trace of the report's time ranges (``render.timeline``) to ``target`` and say what it holds."""
    from advisor.render.timeline import annotate, locator, trace_json

    annotation = annotate(report, locator(path))
    for name, why in annotation.unread.items():
        note(f"{name}: its events are not in the annotated trace, only its findings' ranges: {why}", level="warning")
    try:
        write_atomically(target, trace_json(annotation))
    except OSError as exc:
        raise errors.InputError(f"{target}: cannot write the annotated trace ({exc.strerror or exc})") from exc
    if not annotation.ranges:
        note(f"annotated trace written to {target}: no finding has a time range, so it holds no range")
    else:
        files = ", ".join(annotation.merged) or "none"
        note(f"annotated trace written to {target}: {annotation.ranges} time range(s) of {annotation.findings} "
             f"finding(s), over the events of {files}")


def facts_command(
    path: Annotated[Optional[Path], typer.Argument(metavar="[PATH]", help="A profile to extract the facts of.")] = None,
    list_families: Annotated[bool, typer.Option("--list", help="Document every fact family and field.")] = False,
    family: Annotated[Optional[str], typer.Option("--family", metavar="FAMILY", help="Only this fact family (see --list).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts as JSON.")] = False,
    as_test_case: Annotated[Optional[str], typer.Option(
        "--as-test-case", metavar="RULE_ID", help="Print a test case for RULE_ID made of this profile's facts (YAML for its tests:).")] = None,
    rules: RulesOption = None,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    max_file_size: MaxFileSizeOption = None,
    jobs: JobsOption = None,
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
      advisor facts ./prof --as-test-case host.device_idle >> case.yaml
    """
    with guard(debug):
        from advisor.facts import FACT_FAMILIES

        if family is not None and family not in FACT_FAMILIES:
            raise errors.InputError(f"unknown fact family {family!r}; known: {', '.join(FACT_FAMILIES)}")
        if list_families:
            _print_catalogue(family)
        elif path is None:
            raise errors.InputError("give a profile PATH, or --list for the catalogue")
        elif as_test_case is not None:
            from advisor.diagnose import analyse
            from advisor.ruletests import case_from_profile

            book = load_book(rules)
            rule = find_rule(book, as_test_case)
            analysis = analyse(path, book, user_context(env, env_file, context),
                               options=run_options(max_file_size, jobs, scheduler, deep))
            typer.echo(case_from_profile(rule, analysis.firings, analysis.all_facts, f"{rule.id} on {path.name}"), nl=False)
        else:
            _print_facts(path, family, as_json, user_context(env, env_file, context),
                         run_options(max_file_size, jobs, scheduler, deep))


def _print_catalogue(family: str | None) -> None:
    from advisor.facts import FACT_FAMILIES
    from advisor.facts.catalogue import field_rows

    for name, model in FACT_FAMILIES.items():
        if family not in (None, name):
            continue
        kind = "derived by rules" if model.derived else "measured"
        typer.echo(f"{name} ({kind}): {' '.join((model.__doc__ or '').split())}")
        typer.echo(f"  source: {model.source}")
        for field_name, field_type, unit, meaning, seen in field_rows(model):
            typer.echo(f"  {field_name:<26} {field_type:<7} {unit:<6} {meaning}" + (f" [real profiles: {seen}]" if seen else ""))
        typer.echo("")


def _print_facts(path: Path, family: str | None, as_json: bool, user: UserContext, options: RunOptions) -> None:
    import json

    from advisor.diagnose import diagnose
    from advisor.jsontext import json_text

    report = with_progress(f"Reading {path}", options,
                           lambda options: diagnose(path, lang="en", context=user, options=options))
    facts = [f for f in report.facts if family in (None, f["type"])]
    if as_json:
        sys.stdout.write(json_text(facts))
        return
    for fact in facts:
        typer.echo(f"{fact['type']} {fact['id']}")
        for key, value in fact.items():
            if key not in ("type", "id", "sources") and value not in (None, []):
                typer.echo(f"    {key}: {json.dumps(value, ensure_ascii=False) if isinstance(value, str) else value}")
        typer.echo(f"    sources: {'; '.join(fact['sources'])}")
    note_coverage(report.coverage)


def explain_command(
    rule_id: RuleIdArgument,
    path: Annotated[Path, typer.Argument(metavar="PATH", help="The profile to explain the rule on.")],
    rules: RulesOption = None,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    max_file_size: MaxFileSizeOption = None,
    jobs: JobsOption = None,
    debug: DebugOption = False,
) -> None:
    """Show why a rule fired on a profile (each condition with its fact values), or why it did not.

    \b
    Example:
      advisor explain host.device_idle ./prof
    """
    print_explanation(rule_id, path, rules, (env, env_file, context), (max_file_size, jobs), debug, with_finding=False)


def print_explanation(rule_id: str, path: Path, rules: list[Path] | None, context: tuple, options: tuple, debug: bool,
                      with_finding: bool) -> None:
    """Analyse ``path`` (``context``: the --env, --env-file and --context values; ``options``: --max-file-size and
    --jobs) and print why ``rule_id`` fired or not (``explain``), and with ``with_finding`` the finding it gives in
    both languages (``rules try``)."""
    with guard(debug):
        from advisor.diagnose import analyse
        from advisor.explain import explain_lines, try_lines

        book = load_book(rules)
        rule = find_rule(book, rule_id)
        analysis = analyse(path, book, user_context(*context), options=run_options(*options))
        platform = analysis.profile.platform
        lines = (try_lines(rule, book, analysis.firings, analysis.all_facts, platform) if with_finding else
                 explain_lines(rule, analysis.firings, analysis.all_facts, platform))
        for line in lines:
            typer.echo(line)
