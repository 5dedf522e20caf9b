"""Where the MCP server's work runs, and the analyses it keeps (advisor/mcp.py serves them).

Analyses run one at a time, each in a process forked for it (on Linux) whose outcome comes back pickled, killed
with its workers when the client cancels the call; other work runs on a thread of the server, one at a time. The
last few analyses (``Recent``) are kept by what they were made of — the profile's path and files, the options —
so the drill-down tools and the report resources read them without analysing the profile again.
"""

import json
import os
import pickle
import signal
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from advisor import errors
from advisor.parallel import die_with_parent

if TYPE_CHECKING:
    import anyio

# --- where the tools' work runs ---


class Outcome(NamedTuple):
    """What a tool's work gave — its JSON, or what an analysis made (a Report, a Comparison) — or the message of an
    error, with what the server's log gets for a bug."""

    value: Any
    error: bool = False
    log: str | None = None


def outcome(work: Callable[[], Any]) -> Outcome:
    """Run ``work``: what it gives; the command line's message for the user's mistake; one line, and the traceback
    for the log, for a bug."""
    try:
        return Outcome(work())
    except errors.AdvisorError as exc:
        return Outcome(str(exc), error=True)
    except Exception as exc:
        return Outcome(f"internal error: {type(exc).__name__}: {exc}", error=True, log=traceback.format_exc())


async def on_thread(work: Callable[[], Any], here: "anyio.Lock") -> Outcome:
    """``work`` on a thread of this process, holding the lock ``here``: the rule engine and the caches are not shared
    across threads, and a fork must not copy a thread half-way through an import or a cache."""
    import anyio

    async with here:
        return await anyio.to_thread.run_sync(outcome, work)


async def in_process(work: Callable[[], Any], here: "anyio.Lock") -> Outcome:
    """``work`` in a process forked for it, whose outcome comes back pickled through a pipe. When the call is
    cancelled (or the server stops) the process is killed, with the workers it forked (advisor.parallel), so the
    work stops at once and leaves nothing behind; the SDK sends no result for a cancelled call."""
    import anyio

    async with here:
        await anyio.to_thread.run_sync(_warm_up)
        pid, pipe = _fork(work)
    try:
        data = await anyio.to_thread.run_sync(_read_all, pipe, abandon_on_cancel=True)
    except BaseException:  # cancelled: the thread left reading ends when the killed process's pipe closes
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        with anyio.CancelScope(shield=True):
            code = await anyio.to_thread.run_sync(_reap, pid)
    if code == 0:
        return pickle.loads(data)
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    message = f"internal error: the analysis process ended without a result ({how})"
    return Outcome(message, error=True, log=message)


def _warm_up() -> None:
    """Import the analysis and load the built-in rules in the server, once, so that every analysis process inherits
    them; a failure is left to the analysis to report."""
    try:
        from advisor.diagnose import default_rulebook

        default_rulebook()
    except Exception:  # noqa: BLE001 (the analysis process meets it again and reports it)
        pass


def _fork(work: Callable[[], Any]) -> tuple[int, int]:
    """Fork a process that runs ``work`` and sends its Outcome through a pipe: its pid and the pipe's read end.

    Called on the event loop's thread, which lives as long as the server: the parent-death signal the process
    asks for follows the thread that forked it."""
    parent = os.getpid()
    read_end, write_end = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns whenever the process has other threads: here the SDK's, blocked reading standard
            # input or writing standard output, and idle thread-pool workers, none of which the analysis touches
            warnings.filterwarnings("ignore", message=r"This process .* is multi-threaded", category=DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        raise
    if pid == 0:
        _analysis_process(work, read_end, write_end, parent)
    os.close(write_end)
    return pid, read_end


def _analysis_process(work: Callable[[], Any], read_end: int, write_end: int, parent: int) -> NoReturn:
    """The forked process: run ``work``, send its outcome, exit — never back into the server's event loop. It exits
    with 0 only when the whole outcome was sent."""
    code = 1
    try:
        os.close(read_end)
        _detach(parent)
        with open(write_end, "wb") as pipe:
            pickle.dump(outcome(work), pipe, pickle.HIGHEST_PROTOCOL)
        code = 0
    finally:
        os._exit(code)


def _detach(parent: int) -> None:
    """In the analysis process: killed when the server dies, deaf to Ctrl-C (the server decides), and with streams of
    its own: standard output is the MCP channel, and the server's stream objects may be locked by a thread the fork
    did not copy."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if os.getppid() != parent:  # the server died before the parent-death signal was set
        os._exit(1)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the process)
    os.dup2(sys.stdout.fileno(), 1)


def _read_all(pipe: int) -> bytes:
    with open(pipe, "rb") as reader:
        return reader.read()


def _reap(pid: int) -> int:
    """Wait for the child ``pid`` to end: its exit code, or minus the signal that killed it."""
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


# --- the recent analyses, which the drill-down tools and the report resources reuse ---


class Key(NamedTuple):
    """What an analysis was made of: its kind ('report' or 'comparison'), the profiles' paths as given and what
    their files were (fingerprint), the options (env, context, rule packs) as JSON, and the language ('' for
    any)."""

    kind: str
    paths: tuple[str, ...]
    prints: tuple[Any, ...]
    options: str
    lang: str


def analysis_key(kind: str, paths: tuple[str, ...], options: tuple[Any, ...], lang: str | None) -> Key:
    rules = options[-1] or []
    prints = tuple(fingerprint(p) for p in (*paths, *rules))
    return Key(kind, paths, prints, json.dumps(options, sort_keys=True, default=str), lang or "")


def fingerprint(text: str) -> Any:
    """What the files at ``text`` are now — each one's path, size and modification time, hashed — so that an
    analysis is reused only while its profile is unchanged; None when it cannot be read (the analysis says why)."""
    import hashlib

    top = Path(os.path.expanduser(text))
    try:
        if not top.is_dir():
            info = top.stat()
            return (str(top.resolve()), info.st_size, info.st_mtime_ns)
        digest = hashlib.blake2b(str(top.resolve()).encode(), digest_size=16)
        for root, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                try:
                    info = os.stat(os.path.join(root, name))
                except OSError:  # a dangling link: the analysis skips it too
                    continue
                digest.update(f"{root}/{name}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
        return digest.hexdigest()
    except OSError:
        return None


class Recent:
    """The last few analyses (Reports, Comparisons, facts included), by key and by id, the least recently used
    forgotten first."""

    def __init__(self, size: int) -> None:
        from collections import OrderedDict

        self.size = size
        self.entries: OrderedDict[Key, tuple[str, Any]] = OrderedDict()

    def get(self, key: Key) -> tuple[str, Any] | None:
        """(id, analysis) made for ``key``; one in any language when ``key.lang`` is ''."""
        for known in reversed(self.entries):
            if known == key or (not key.lang and known._replace(lang="") == key):
                self.entries.move_to_end(known)
                return self.entries[known]
        return None

    def put(self, key: Key, value: Any) -> tuple[str, Any]:
        """Keep ``value``, made for ``key``, under a new random id: (id, value)."""
        found = (os.urandom(6).hex(), value)
        self.entries[key] = found
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return found

    def by_id(self, analysis_id: str) -> Any:
        return next((value for aid, value in self.entries.values() if aid == analysis_id), None)


def render_document(found: Any, form: str) -> str:
    """The Markdown or HTML report of an analysis: a Report's (the full one), or a Comparison's."""
    from advisor.comparison import Comparison

    if isinstance(found, Comparison):
        from advisor.render.comparison import render_comparison_html, render_comparison_markdown

        return (render_comparison_markdown if form == "md" else render_comparison_html)(found)
    from advisor.render import render_html, render_markdown

    return (render_markdown if form == "md" else render_html)(found)
