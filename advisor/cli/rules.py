"""``advisor rules``: list, show, lint, test, scaffold, document and package rules."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import errors
from advisor.cli.options import (
    ContextOption,
    DebugOption,
    EnvFileOption,
    EnvOption,
    JobsOption,
    MaxFileSizeOption,
    RuleIdArgument,
    RulesOption,
    command,
)
from advisor.cli.output import guard, note
from advisor.cli.packs import find_rule, load_book

rules_app = typer.Typer(help="""Work with rule files: list, show, lint, test, scaffold and document rules.

\b
Examples:
  advisor rules list --category memory
  advisor rules new team.my_rule --category io --dir team-pack
  advisor rules lint team-pack/ && advisor rules test team-pack/
""", no_args_is_help=True)


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
    with guard(False):
        book = load_book(rules)
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

    with guard(False):
        book = load_book(rules)
        rule = find_rule(book, rule_id)
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

    with guard(False):
        result = lint(paths or [])
        for message in result.notes:
            note(message)
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

    with guard(False):
        if paths:
            book = load_rulebook(paths, installed=False)
            results = run_rule_tests(book, select, packs={p.name for p in book.packs[1:]})
        else:
            results = run_rule_tests(load_book(None), select)
        for result in results:
            mark = "PASS" if result.passed else "FAIL"
            typer.echo(f"{mark} {result.rule_id}: {result.name} (expect {result.expect}; {result.detail})")
        failed = sum(not r.passed for r in results)
        typer.echo(f"{len(results) - failed} passed, {failed} failed")
        if not results:
            raise errors.InputError(f"no rule test case matches {select!r}" if select else "no rule test cases found")
        raise typer.Exit(1 if failed else 0)


@command(rules_app, "try")
def rules_try_command(
    rule_id: RuleIdArgument,
    path: Annotated[Path, typer.Argument(metavar="PATH", help="The profile to run the rule on.")],
    rules: RulesOption = None,
    env: EnvOption = None,
    env_file: EnvFileOption = None,
    context: ContextOption = None,
    max_file_size: MaxFileSizeOption = None,
    jobs: JobsOption = None,
    debug: DebugOption = False,
) -> None:
    """Run a rule on one profile: whether it fired (each condition with its fact values, as `advisor explain`) and the
    finding it gives — severity, key, gain, and title and explanation in English and Chinese.

    \b
    Example:
      advisor rules try team.slow_embedding ./prof --rules team-pack/
    """
    from advisor.cli.diagnose import print_explanation

    print_explanation(rule_id, path, rules, (env, env_file, context), (max_file_size, jobs), debug, with_finding=True)


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

    with guard(False):
        for path in scaffold(rule_id, category, directory):
            typer.echo(f"created {path}")


@command(rules_app, "docs")
def rules_docs_command(
    output: Annotated[Path, typer.Option("--output", "-o", metavar="DIR", help="Directory to write the catalogue into.")],
    rules: RulesOption = None,
    pack_names: Annotated[Optional[list[str]], typer.Option("--pack", metavar="NAME", help="Document only this loaded pack (an installed one, or built-in; repeatable).")] = None,
) -> None:
    """Write a Markdown catalogue: an index and one page per rule and per knowledge entry.

    Without options: the built-in rules. With --rules: the pages of those packs only; with --pack: of the packs of
    that name (installed packs included).

    \b
    Examples:
      advisor rules docs -o team-docs --rules team-pack/
      advisor rules docs -o docs/rules
    """
    from advisor.rulebook import load_rulebook
    from advisor.ruledocs import write_rule_docs

    with guard(False):
        book = load_rulebook(rules or [], installed=bool(pack_names))
        loaded = [pack.name for pack in book.packs]
        if pack_names:
            unknown = [name for name in pack_names if name not in loaded]
            if unknown:
                raise errors.InputError(f"no rule pack named {unknown[0]!r}; the packs loaded: {', '.join(loaded)}")
            chosen: set[str] | None = set(pack_names)
        elif rules:
            chosen = {pack.name for pack in book.packs[1:]}
        else:
            chosen = None
        try:
            written = write_rule_docs(book, output, chosen)
        except OSError as exc:
            raise errors.InputError(f"{output}: cannot write the catalogue ({exc.strerror or exc})") from exc
        typer.echo(f"wrote {len(written)} page(s) to {output}")


@command(rules_app, "package")
def rules_package_command(
    pack: Annotated[Path, typer.Argument(metavar="PACK_DIR", help="The rule pack directory (rules/, knowledge/, pack.yaml).")],
    output: Annotated[Path, typer.Option("--output", "-o", metavar="DIST_DIR", help="Directory to write the wheel into.")] = Path("dist"),
) -> None:
    """Build a wheel of a rule pack: `pip install` it, and every advisor in that environment loads the pack.

    The pack must load without a problem and its pack.yaml must state a version; requires_advisor becomes the
    wheel's requirement on advisor.

    \b
    Example:
      advisor rules package team-pack/ -o dist/ && pip install dist/advisor_pack_team-1.0.0-py3-none-any.whl
    """
    from advisor.packbuild import package_pack

    with guard(False):
        wheel = package_pack(pack, output)
        typer.echo(f"built {wheel}")
