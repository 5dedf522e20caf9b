"""What a command prints and writes, and how it ends: a report on standard output or in files (written whole or
not at all), one line per note on standard error, progress on a terminal, and the exit code (docs/errors.md)."""

from __future__ import annotations

import errno
import gc
import os
import re
import signal
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from advisor import errors
from advisor.cli.options import FailOn, OutputFormat
from advisor.vocabulary import SEVERITY_ORDER

if TYPE_CHECKING:
    from rich.console import Console

    from advisor.runoptions import RunOptions

T = TypeVar("T")

_SUFFIX_FORMATS = {".md": OutputFormat.md, ".markdown": OutputFormat.md, ".html": OutputFormat.html,
                   ".htm": OutputFormat.html, ".json": OutputFormat.json, ".txt": OutputFormat.terminal,
                   ".csv": OutputFormat.csv, ".xlsx": OutputFormat.xlsx}
# the renderers' names of the document formats (advisor.render.DOCUMENTS and BINARY_DOCUMENTS, and the comparison's)
_DOCUMENTS = {OutputFormat.md: "markdown", OutputFormat.html: "html", OutputFormat.json: "json",
              OutputFormat.csv: "csv", OutputFormat.xlsx: "xlsx"}
_CLOSED_STREAMS: set[str] = set()  # standard streams that were closed when the program started
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def reserve_standard_streams() -> None:
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
    """The console of a report on standard output; a broken pipe is left to guard (rich would exit 1, --fail-on's code)."""
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
        note(f"standard output: cannot write the output ({exc.strerror or exc})", level="error")
        return errors.EXIT_USAGE
    return None


def with_progress(what: str, options: RunOptions, work: Callable[[RunOptions], T]) -> T:
    """Run ``work`` with the run's ``options``; on a terminal, with a progress listener added to them that shows which
    file is being read (never on a pipe, so JSON stays clean).

    The objects made before ``work`` (the imported modules, mostly) are frozen out of the cyclic collector's passes
    until the command ends (``guard`` unfreezes them, so a process that runs several commands, tests or a notebook,
    can still collect them): scanning them again in each pass cost about 8 % of a 512-rank run's CPU, and unfreezing
    them before the report is written another 5 %."""
    from dataclasses import replace

    from rich.console import Console
    from rich.text import Text

    from advisor.render.common import strip_control

    gc.freeze()
    stderr = Console(stderr=True)
    if not stderr.is_terminal:
        return work(options)
    read = {"files": 0, "bytes": 0}
    # Text, not a str: paths and file names are shown as written, never read as rich markup ('[/bad]', '[link=…]')
    with stderr.status(Text(strip_control(f"{what} …"))) as status:

        def show(file: str, size: int) -> None:
            read["files"] += 1
            read["bytes"] += size
            status.update(Text(strip_control(
                f"Reading {file} ({size / 1e6:,.1f} MB; file {read['files']}, {read['bytes'] / 1e6:,.0f} MB so far) …")))

        return work(replace(options, progress=show))


def output_targets(fmt: OutputFormat | None, outputs: list[Path] | None) -> list[tuple[OutputFormat, Path | None]]:
    """(format, file) for each report to write: standard output (None) when no -o is given, else each -o file in
    the format of its suffix (or of --format, for one file)."""
    fmt = OutputFormat.md if fmt is OutputFormat.markdown else fmt
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
            known = ", ".join(_SUFFIX_FORMATS)
            raise errors.InputError(f"{output}: cannot tell the format from the suffix (known: {known}); "
                                    "pass --format md|html|json|csv|xlsx")
        targets.append((suffix_format, output))
    resolved = [os.path.realpath(output) for output in outputs]
    if len(set(resolved)) < len(resolved):
        raise errors.InputError(f"the same file is given to -o twice ({', '.join(map(str, outputs))})")
    return targets


def write_report(fmt: OutputFormat, output: Path | None, terminal: Callable[[Console], None],
                 document: Callable[[str], str | bytes]) -> None:
    """Print a report on standard output (``output`` None) or write it to a file: in the terminal format,
    ``terminal`` draws it on a console; in the others, ``document`` renders it (text, or bytes for a workbook) by
    the renderers' name of ``fmt``."""
    if fmt is OutputFormat.terminal:
        if output is not None:
            _emit(_terminal_text(terminal), output)
        else:
            _to_stdout(lambda: terminal(_stdout_console()))
    else:
        _emit(document(_DOCUMENTS[fmt]), output)


def _emit(content: str | bytes, output: Path | None) -> None:
    """Print a rendered document, or write it to ``output`` (see write_atomically). A binary one (a workbook) is never
    printed on a terminal, where it would be noise."""
    if output is None:
        if isinstance(content, bytes):
            if sys.stdout.isatty():
                raise errors.InputError("a workbook is binary and is not printed on a terminal; pass -o FILE.xlsx, "
                                        "or redirect standard output to a file")
            _to_stdout(lambda: sys.stdout.buffer.write(content))
        else:
            _to_stdout(lambda: sys.stdout.write(content))
        return
    try:
        write_atomically(output, content)
    except OSError as exc:
        raise errors.InputError(f"{output}: cannot write the report ({exc.strerror or exc})") from exc
    note(f"report written to {output}")


def write_atomically(output: Path, content: str | bytes) -> None:
    """Write ``content`` (text as UTF-8, or bytes) to a new file beside ``output`` and rename it over ``output`` once
    it is complete.

    On a full disk, or any other failure, the previous file is left as it was and no partial file remains.
    A symbolic link is never written through (see refuse_link); a FIFO or device (``/dev/stdout``, ``/dev/null``,
    links to them included) is written directly, as it cannot be replaced.
    """
    refuse_link(output)
    mode, encoding = ("wb", None) if isinstance(content, bytes) else ("w", "utf-8")
    target = Path(os.path.realpath(output.parent)) / output.name if output.name else Path(os.path.realpath(output))
    try:
        status = output.stat()
    except (FileNotFoundError, NotADirectoryError):
        status = None
    if status is not None and not stat.S_ISREG(status.st_mode):
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        with output.open(mode, encoding=encoding) as handle:
            handle.write(content)
        return
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(descriptor, stat.S_IMODE(status.st_mode) if status is not None else 0o666 & ~mask)
        with os.fdopen(descriptor, mode, encoding=encoding) as handle:
            handle.write(content)
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


def files_read(path: Path, coverage) -> list[Path]:
    """The input files a diagnosis of ``path`` read, tried or skipped (coverage names them relative to ``path``)."""
    base = path if path.is_dir() else path.parent
    names = [*coverage.read, *(s.file for s in coverage.skipped), *(s.file for s in coverage.partly_read)]
    return [path, *(base / name for name in names)]


_INPUT_NAME = re.compile(r"^(profiler_info.*\.json|profiler_metadata\.json|.*\.pt\.trace\.json(\.gz)?|.*\.db|info\.json\.\d+)$")


def refuse_link(output: Path) -> None:
    """InputError when ``output`` is a symbolic link to a file, a directory or nothing: a report is never written
    through a link, which would replace (or create) the file it points to — a file that may not be the user's (root
    writing ``-o /tmp/x.json`` over a link planted there). A link to a FIFO or a device (/dev/stdout) is written to."""
    if not output.is_symlink():
        return
    try:
        status = output.stat()
    except OSError:
        status = None
    if status is None or stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode):
        raise errors.InputError(f"{output}: is a symbolic link (to {os.readlink(output)}); a report is never written "
                                "through a link, which would replace the file it points to — give the file's own path")


def refuse_overwriting(outputs: list[Path] | None, inputs: list[Path]) -> None:
    """Refuse an output that is a link to a file (refuse_link) or one of the inputs: a file given, a file read, or a
    profiler file under a directory given."""
    for output in outputs or []:
        refuse_link(output)
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


def exit_code(statuses: Iterable[str], findings: Iterable, fail_on: FailOn | None) -> int:
    """The exit code of a run from the status of each report it made (complete, partial, empty) and the findings
    --fail-on counts."""
    statuses = set(statuses)
    if "empty" in statuses:
        return errors.EXIT_NOTHING_DIAGNOSED
    if fail_on is not None and any(SEVERITY_ORDER[f.severity] <= SEVERITY_ORDER[fail_on.value] for f in findings):
        return errors.EXIT_FAIL_ON
    if "partial" in statuses:
        return errors.EXIT_PARTIAL
    return errors.EXIT_OK


def note_coverage(coverage) -> None:
    """One warning line per input that was skipped, read in part or read with problems (repeats collapsed)."""
    from advisor.ingest.model import coverage_problems
    from advisor.text import collapse_repeats

    for line in collapse_repeats(coverage_problems(coverage)):
        note(line, level="warning")


def note(message: str, level: str = "note") -> None:
    """One line on standard error; a standard error that cannot be written (a full device) is given up on, never
    turned into a failure of the run."""
    from advisor.render.common import strip_control

    try:  # paths and names from the input may hold ANSI/OSC escapes: they are shown, not obeyed
        typer.echo(strip_control(f"advisor: {level}: {message}"), err=True)
    except OSError:
        _silence("stderr")


@contextmanager
def guard(debug: bool) -> Iterator[None]:
    """Turn errors into one clear line on stderr and the documented exit code (a traceback with --debug); at the end,
    unfreeze what the command froze out of the cyclic collector (``with_progress``)."""
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
        note(str(exc), level="error")
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        note("interrupted", level="error")
        raise typer.Exit(130) from None
    except BrokenPipeError:  # the reader went away (`| head`): not an error, and not --fail-on's 1
        _silence("stdout")
        raise typer.Exit(errors.EXIT_OK) from None
    except Exception as exc:  # a bug: say so, and how to get the details
        if debug:
            raise
        if isinstance(exc, OSError) and exc.errno in _OUTPUT_ERRNOS:  # printing on a full or failing standard output
            _silence("stdout")
            note(f"standard output: cannot write the output ({exc.strerror or exc})", level="error")
            raise typer.Exit(errors.EXIT_USAGE) from None
        note(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", level="error")
        raise typer.Exit(errors.EXIT_INTERNAL) from None
    else:
        code = _flushed_stdout()
        if code is not None:
            raise typer.Exit(code)
    finally:
        gc.unfreeze()
