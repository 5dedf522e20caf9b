"""What a file holds, told from its first bytes: whether a file named as a PyTorch profiler trace is one, what an
input that is no profile is (text, CSV, an image, an archive …), for the messages that refuse it.

What makes a trace (``trace_problem``): a JSON object with a ``traceEvents`` key whose value is a list (empty or not),
or one of Kineto's top-level keys (``schemaVersion``, ``deviceProperties``, ``distributedInfo``: a trace cut off
before its events still has them); or a JSON array of Chrome trace events (objects with ``ph``, as the legacy
autograd profiler writes). A trace with no GPU activity, only CPU ops, or only some of its sections is a trace: the
readers say what it lacks. Anything else — an empty file, text or CSV, an image, binary data, JSON of another shape —
is not, and a path that is one is refused before anything is diagnosed. Only what the first bytes show for certain
refuses a file: a file whose first bytes leave it open is left to the reader.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import zlib
from pathlib import Path

from advisor.ingest.model import FileProblem

_BLOCK = 64 << 10
_MAX_SCAN = 64 << 20  # as far as the trace reader looks for traceEvents
_KINETO_KEYS = ("schemaVersion", "deviceProperties", "distributedInfo")
_TRACE_SIGNS = (b'"traceEvents"', *(f'"{key}"'.encode() for key in _KINETO_KEYS))
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
          (b"%PDF-", "a PDF document"), (b"SQLite format 3\x00", "an SQLite database"), (b"\x7fELF", "an executable"),
          (b"PK\x03\x04", "a zip archive"), (b"PK\x05\x06", "a zip archive"), (b"\x1f\x8b", "gzip-compressed data"),
          (b"BZh", "bzip2-compressed data"), (b"\xfd7zXZ\x00", "xz-compressed data"),
          (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"), (b"Rar!\x1a\x07", "a RAR archive"),
          (b"\x80\x02", "a Python pickle"), (b"\x80\x04", "a Python pickle"), (b"\x93NUMPY", "a NumPy array"))

# archive suffixes → (what it is, the command that extracts it, {name} the quoted file name)
ARCHIVES = {
    ".tar.gz": ("a .tar.gz archive", "tar -xzf {name}"), ".tgz": ("a .tgz archive", "tar -xzf {name}"),
    ".tar.bz2": ("a .tar.bz2 archive", "tar -xjf {name}"), ".tbz2": ("a .tbz2 archive", "tar -xjf {name}"),
    ".tar.xz": ("a .tar.xz archive", "tar -xJf {name}"), ".txz": ("a .txz archive", "tar -xJf {name}"),
    ".tar": ("a .tar archive", "tar -xf {name}"), ".zip": ("a zip archive", "unzip {name}"),
    ".7z": ("a 7-Zip archive", "7z x {name}"), ".rar": ("a RAR archive", "unrar x {name}"),
}


def archive_refusal(path: Path) -> str | None:
    """Why ``path`` (a file) is refused as an archive — by its suffix, or a zip or tar by its content — else None.

    Archives are not read: a profile is extracted by the user (``tar``/``unzip`` apply their own limits and show
    what they write), so no member path (``../``, absolute, a link out), size or count from the archive reaches
    the disk through advisor."""
    name = path.name.lower()
    suffix = next((s for s in sorted(ARCHIVES, key=len, reverse=True) if name.endswith(s)), None)
    if suffix is None:
        head = _raw_head(path, 512)
        if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
            suffix = ".zip"
        elif head[257:262] == b"ustar":
            suffix = ".tar"
        else:
            return None
    what, command = ARCHIVES[suffix]
    return (f"is {what}; advisor does not read archives: extract it first ({command.format(name=shlex.quote(path.name))})"
            " and diagnose the directory it holds")


ASCEND_MARK = b'"Ascend Hardware"'  # the device process of torch_npu's trace_view.json


def ascend_trace_alone(path: Path) -> str | None:
    """What to say of a torch_npu trace_view.json read on its own, away from the rest of its rank (it holds an Ascend
    Hardware process); None for any other file."""
    if not path.name.startswith("trace_view.json") or not _holds(path, ASCEND_MARK):
        return None
    return ("is the Ascend profiler's trace_view.json (it has an Ascend Hardware process) outside its "
            "ASCEND_PROFILER_OUTPUT directory, which holds the rest of the rank: give that directory, or the "
            "*_ascend_pt directory above it")


def _holds(path: Path, mark: bytes, block: int = 1 << 24) -> bool:
    """Whether the file's bytes contain ``mark``, read in blocks (a mark across two blocks is found too)."""
    try:
        with path.open("rb") as handle:
            tail = b""
            while chunk := handle.read(block):
                if mark in tail + chunk:
                    return True
                tail = chunk[-len(mark):]
    except OSError:
        return False
    return False


def trace_problem(path: Path) -> str | None:
    """'is not a PyTorch profiler trace (WHAT IT HOLDS)' when the file at ``path``, named as a trace, is certainly
    not one (see the module's docstring); None when it is one, or may be (the reader decides)."""
    alone = ascend_trace_alone(path)
    if alone is not None:
        return alone
    if path.name.endswith(".gz"):
        raw = _raw_head(path, 2)
        if raw and not raw.startswith(b"\x1f\x8b"):
            raw = _raw_head(path, _BLOCK)
            return f"is not a PyTorch profiler trace (named .gz but not gzip-compressed: {describe(raw, len(raw) < _BLOCK)})"
        if not raw:
            return "is not a PyTorch profiler trace (the file is empty)"
    try:
        head, whole = _head(path)
    except FileProblem:  # a damaged or bomb-like .gz: the reader says so
        return None
    why = _not_a_trace(head, whole)
    return None if why is None else f"is not a PyTorch profiler trace ({why})"


def _head(path: Path) -> tuple[bytes, bool]:
    """The file's first bytes (decompressed for .gz), read until they show a trace's keys, or the end, or _MAX_SCAN;
    and whether they are the whole file."""
    from advisor.ingest.limits import open_binary

    chunks: list[bytes] = []
    size = 0
    try:
        with open_binary(path) as handle:
            while size < _MAX_SCAN:
                block = handle.read(_BLOCK)
                if not block:
                    return b"".join(chunks), True
                chunks.append(block)
                size += len(block)
                head = b"".join(chunks) if len(chunks) > 1 else block
                start = head.lstrip()[:1]
                if start not in (b"{", b"[") or _signs(head, start):
                    return head, not handle.read(1)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        pass
    return b"".join(chunks), False


def _signs(head: bytes, start: bytes) -> bool:
    """Whether the start of a JSON object or array shows a trace's keys (an object) or a trace event (an array)."""
    if start == b"{":
        return any(sign in head for sign in _TRACE_SIGNS)
    return b'"ph"' in head


def _not_a_trace(head: bytes, whole: bool) -> str | None:
    start = head.lstrip()
    if start[:1] not in (b"{", b"["):
        return describe(head, whole)
    if _signs(head, start[:1]):
        if start[:1] == b"{" and whole and b'"traceEvents"' in head:
            return _events_not_a_list(head)
        return None
    if not whole:
        return (f"a JSON {'object' if start[:1] == b'{' else 'array'} with no trace event or trace key in its first "
                f"{_MAX_SCAN >> 20} MiB") if len(head) >= _MAX_SCAN else None
    return describe(head, whole)


def _events_not_a_list(head: bytes) -> str | None:
    """For a whole file holding "traceEvents": what its value is when not a list (None: a list, or not valid JSON —
    a trace cut off, which the reader reads up to the cut)."""
    try:
        value = json.loads(head)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict) and "traceEvents" in value and not isinstance(value["traceEvents"], list):
        return f"a JSON object whose traceEvents is {_json_kind(value['traceEvents'])}, not a list of events"
    return None


def describe(head: bytes, whole: bool) -> str:
    """What the bytes at the start of a file are, in a few words: 'the file is empty', 'a PNG image', 'CSV text, not
    JSON, whose first line is …', 'a JSON object with the keys a, b, c', …"""
    start = head.lstrip()
    if not start:
        return "the file is empty" if not head else "the file holds only whitespace"
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if len(head) > 262 and head[257:262] == b"ustar":
        return "a tar archive"
    text = _text(head)
    if text is None:
        return f"binary data, starting with the bytes {head[:8].hex(' ')}"
    if start[:1] in (b"{", b"[") and whole:
        try:
            return _json_shape(json.loads(text))
        except (ValueError, RecursionError):
            pass
    if text.startswith("\ufeff"):
        return "text that starts with a UTF-8 byte order mark, which JSON does not allow (save the file without it)"
    first = _first_line(text)
    if start[:1] in (b"{", b"["):
        return f"text that starts like JSON but is not valid JSON, whose first line is {first}"
    if first.count(",") >= 1 or "\t" in text.split("\n", 1)[0]:
        return f"CSV text, not JSON, whose first line is {first}"
    return f"text that is not JSON, whose first line is {first}"


def _text(head: bytes) -> str | None:
    """``head`` as UTF-8 text (a character cut at its end forgiven), or None for binary data."""
    if b"\x00" in head[:4096]:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 3:
            return head[:exc.start].decode("utf-8")
        return None


_UNPRINTABLE = re.compile(r"[^\S ]|[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _first_line(text: str, limit: int = 60) -> str:
    line = text.lstrip().split("\n", 1)[0].rstrip("\r")
    line = _UNPRINTABLE.sub("?", line)
    return repr(line if len(line) <= limit else line[:limit] + "…")


def _json_kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), "a value")


def _json_shape(value: object) -> str:
    if isinstance(value, dict):
        if not value:
            return "an empty JSON object"
        keys = [_UNPRINTABLE.sub("?", str(k))[:40] for k in list(value)[:6]]
        more = ", …" if len(value) > 6 else ""
        return f"a JSON object with the key{'s' if len(value) > 1 else ''} {', '.join(keys)}{more}; a trace has traceEvents"
    if isinstance(value, list):
        if not value:
            return "an empty JSON array"
        kinds = sorted({_json_kind(item).split(" ", 1)[-1] for item in value[:100]})
        return f"a JSON array of {', '.join(k + 's' if k != 'null' else k for k in kinds)}, not of trace events"
    return f"a JSON value ({_json_kind(value)}), not an object of trace events"


def _raw_head(path: Path, size: int) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(size)
    except OSError:
        return b""
