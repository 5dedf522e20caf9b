"""The options and arguments the commands share, what their values mean, and the help layout of every command."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from typer.core import TyperCommand

from advisor import errors
from advisor.vocabulary import SEVERITIES

if TYPE_CHECKING:
    from advisor.render.common import View
    from advisor.runoptions import RunOptions
    from advisor.usercontext import UserContext


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


def command(app_: typer.Typer, name: str):  # noqa: ANN201 (typer's decorator)
    """``app_.command(name)`` with the help layout of Command."""
    return app_.command(name, cls=Command)


class OutputFormat(str, Enum):
    terminal = "terminal"
    md = "md"
    markdown = "markdown"  # the Python API's name for md: the same format (output.output_targets)
    html = "html"
    json = "json"
    csv = "csv"
    xlsx = "xlsx"


class Language(str, Enum):
    en = "en"
    zh = "zh"


FailOn = Enum("FailOn", [(severity, severity) for severity in SEVERITIES], type=str)  # --fail-on, --min-severity


class Detail(str, Enum):
    brief = "brief"
    full = "full"


EnvOption = Annotated[Optional[list[str]], typer.Option(
    "--env", metavar="KEY=VALUE", help="A variable of the job's environment that the profile does not record (repeatable).")]
EnvFileOption = Annotated[Optional[list[Path]], typer.Option(
    "--env-file", metavar="FILE", help="A file of KEY=VALUE lines, `export` allowed (repeatable).")]
ContextOption = Annotated[Optional[Path], typer.Option(
    "--context", metavar="FILE", help="YAML of model settings (micro_batch_size, tensor_parallel, …).")]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")]
FormatOption = Annotated[Optional[OutputFormat], typer.Option(
    "--format", "-f", metavar="[terminal|md|html|json|csv|xlsx]",
    help="Format of the report on standard output (or of the one -o file); default: terminal, or -o's suffix.")]
OutputOption = Annotated[Optional[list[Path]], typer.Option(
    "--output", "-o", metavar="FILE",
    help="Write the report to FILE, its format from the suffix: .md, .html, .json, .txt (terminal text), .csv (the "
         "findings), .xlsx (findings, steps, operators). "
         "Repeat it to write several formats from one analysis.")]
LangOption = Annotated[Optional[Language], typer.Option(
    "--lang", metavar="[en|zh]", help="Report language; default: from the locale.")]
FailOnOption = Annotated[Optional[FailOn], typer.Option(
    "--fail-on", metavar=f"[{'|'.join(SEVERITIES)}]", help="Exit 1 when a finding of this severity or higher exists (every "
                                                   "finding counts, whatever --max-findings and --min-severity show).")]
DetailOption = Annotated[Optional[Detail], typer.Option(
    "--detail", metavar="[brief|full]",
    help="Terminal and Markdown: brief (the default: verdict, top actions, per-rank table) or full (every finding with "
         "its prescriptions, evidence and rule trace, operators, coverage). HTML and JSON are always full.")]
MaxFindingsOption = Annotated[Optional[int], typer.Option(
    "--max-findings", metavar="N", help="Show at most N findings, the highest ranked (every format, JSON too).")]
MinSeverityOption = Annotated[Optional[FailOn], typer.Option(
    "--min-severity", metavar=f"[{'|'.join(SEVERITIES)}]", help="Show only findings of this severity or higher (every format, JSON too).")]


def _max_file_size(value: Optional[str]) -> Optional[str]:
    """Refuse a size that does not parse when the options are parsed (``run_options`` reads it)."""
    from advisor.ingest.limits import parse_size

    if value is not None:
        try:
            parse_size(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


MaxFileSizeOption = Annotated[
    Optional[str],
    typer.Option("--max-file-size", callback=_max_file_size, metavar="SIZE",
                 help="Skip input files larger than this (default 4G; e.g. 16G)."),
]


JobsOption = Annotated[
    Optional[int],
    typer.Option("--jobs", "-j", min=1, metavar="N",
                 help="Processes to read and analyse with (default: $ADVISOR_JOBS, else the usable cores, at most 8)."),
]


class Deep(str, Enum):
    auto = "auto"
    all = "all"


SchedulerOption = Annotated[Optional[str], typer.Option(
    "--scheduler", metavar="ADDRESS",
    help="Analyse the ranks on Dask: 'local' (a LocalCluster on this machine) or a scheduler address "
         "(tcp://host:8786) whose workers see PATH (default: $ADVISOR_SCHEDULER, else the built-in process pool; "
         "needs ascend-perf-advisor[dask]).")]
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


def run_options(max_file_size: str | None, jobs: int | None, scheduler: str | None = None,
                deep: Deep | None = None) -> RunOptions:
    """The run's settings from --max-file-size, --jobs, --scheduler and --deep (the progress listener is added on a
    terminal by ``output.with_progress``)."""
    from advisor.ingest.limits import parse_size
    from advisor.parallel import JOBS_VARIABLE
    from advisor.runoptions import DEFAULT_MAX_FILE_BYTES, RunOptions

    text = os.environ.get(JOBS_VARIABLE, "").strip()
    if text and not (text.isdigit() and int(text) > 0):
        raise errors.InputError(f"{JOBS_VARIABLE}={text!r} is not a number of processes (1 or more): unset it, or set "
                                f"e.g. {JOBS_VARIABLE}=2 (1 turns parallel work off)")
    return RunOptions(jobs=jobs, max_file_bytes=DEFAULT_MAX_FILE_BYTES if max_file_size is None else parse_size(max_file_size),
                      scheduler=scheduler, deep=deep.value if deep else None)


def report_view(detail: Detail | None, max_findings: int | None, min_severity: FailOn | None, explain: bool = False) -> View:
    """What the reports show: brief unless --detail full (or --explain, which shows every finding)."""
    from advisor.render.common import View

    chosen = detail.value if detail is not None else "full" if explain else "brief"
    if max_findings is not None and max_findings < 0:
        raise errors.InputError(f"--max-findings is a number of findings, 0 or more, not {max_findings}")
    return View(chosen, max_findings, min_severity.value if min_severity else None)


def language(lang: Language | None) -> str:
    """The report's language: --lang, else the locale's."""
    return lang.value if lang else _locale_language()


def _locale_language() -> str:
    for variable in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(variable, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def user_context(env: list[str] | None, env_file: list[Path] | None, context: Path | None) -> UserContext:
    """What --env, --env-file and --context tell of the job."""
    from advisor.usercontext import build_context

    return build_context(env or [], env_file or [], context)
