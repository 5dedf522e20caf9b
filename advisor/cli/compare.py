"""``advisor compare``: two profiles side by side, and a diagnosis of the difference."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor.cli.options import (
    ContextOption,
    DebugOption,
    EnvFileOption,
    EnvOption,
    FailOnOption,
    FormatOption,
    JobsOption,
    LangOption,
    MaxFileSizeOption,
    OutputOption,
    RulesOption,
    language,
    run_options,
    user_context,
)
from advisor.cli.output import exit_code, guard, note, output_targets, refuse_overwriting, with_progress, write_report
from advisor.cli.packs import load_book, without_failing_packs


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
    max_file_size: MaxFileSizeOption = None,
    jobs: JobsOption = None,
    base_step: Annotated[int | None, typer.Option(
        "--base-step", metavar="N", help="Compare only step N of BASE (N of ProfilerStep#N, the Step of "
        "step_trace_time.csv, the Step Id of kernel_details.csv) instead of the mean of every profiled step; one step "
        "is not diagnosed, only set side by side. Exit 2 when BASE did not profile it.")] = None,
    target_step: Annotated[int | None, typer.Option(
        "--target-step", "--new-step", metavar="N", help="Compare only step N of TARGET (as --base-step).")] = None,
    debug: DebugOption = False,
) -> None:
    """Compare two profiles side by side and diagnose the difference (GPU vs NPU, before vs after).

    \b
    Examples:
      advisor compare gpu_traces/ ./prof -o gap.html
      advisor compare before/ after/ --fail-on high
      advisor compare before/ after/ -o gap.md -o gap.json
      advisor compare before/ after/ -o changes.csv -o gap.xlsx
      advisor compare before/ after/ --base-step 12 --target-step 12
    """
    with guard(debug):
        from advisor.compare import compare
        from advisor.render.comparison import render_comparison_document, render_comparison_terminal
        from advisor.text import collapse_repeats

        targets = output_targets(output_format, output)
        refuse_overwriting(output, [base, target, *(env_file or []), *([context] if context else []), *(rules or [])])
        user = user_context(env, env_file, context)
        book = load_book(rules, skip_broken=True)
        options = run_options(max_file_size, jobs)
        result = with_progress(f"Comparing {base} with {target}", options, lambda options: without_failing_packs(
            book, lambda rules: compare(base, target, rules, lang=language(lang), context=user, options=options,
                                  base_step=base_step, target_step=target_step)))
        for fmt, output_path in targets:
            write_report(fmt, output_path, lambda console: render_comparison_terminal(result, console),
                         lambda name: render_comparison_document(result, name))
        for warning in collapse_repeats(list(dict.fromkeys(result.warnings))):  # each once, as a warning
            note(warning, level="warning")
        raise typer.Exit(exit_code([result.base.status, result.target.status], result.findings, fail_on))
