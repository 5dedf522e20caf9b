"""The ``advisor`` program: its commands, in the order its help lists them, and its entry point."""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer

from advisor import errors
from advisor.cli.compare import compare_command
from advisor.cli.diagnose import diagnose_command, explain_command, facts_command
from advisor.cli.options import DebugOption, command
from advisor.cli.output import guard, note, reserve_standard_streams
from advisor.cli.plan import plan_app
from advisor.cli.rules import rules_app

app = typer.Typer(
    name="advisor",
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


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


def mcp_command(debug: DebugOption = False) -> None:
    """Serve the advisor to AI assistants over MCP on stdin/stdout (tools: diagnose, facts, explain, compare,
    rules_list); needs `pip install 'ascend-perf-advisor[mcp]'`. See docs/mcp.md.

    \b
    Example (register it with an MCP client, e.g. Claude Code):
      claude mcp add advisor -- advisor mcp
    """
    with guard(debug):
        from advisor.mcp import serve

        serve()


command(app, "diagnose")(diagnose_command)
command(app, "facts")(facts_command)
app.add_typer(rules_app, name="rules")
command(app, "explain")(explain_command)
command(app, "compare")(compare_command)
command(app, "mcp")(mcp_command)
app.add_typer(plan_app, name="plan")


def main() -> None:
    """Console-script entry point.

    Once a command starts (``guard``), Ctrl-C becomes KeyboardInterrupt again (see
    errors.quiet_interrupt_while_starting), which the command turns into ``advisor: error: interrupted`` and exit
    130. Until then — while the command line is parsed, and its option callbacks import what they need — the
    starting handler says the same and ends the program (typer would end a KeyboardInterrupt there with a silent
    130).
    """
    try:
        reserve_standard_streams()
        app(prog_name="advisor")  # also under `python -m advisor`: usage lines and completion name the program
    except KeyboardInterrupt:  # outside a command's own handling (parsing the command line, say)
        note("interrupted", level="error")
        raise SystemExit(130) from None
    except SystemExit as exc:
        if exc.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            raise SystemExit(errors.EXIT_OK) from None  # typer's exit on a broken pipe outside a command (--version, --help)
        raise
    finally:  # the command has finished: a Ctrl-C while Python shuts down must not print a traceback
        signal.signal(signal.SIGINT, signal.SIG_IGN)
