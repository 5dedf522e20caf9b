"""Parsed YAML documents kept between runs, so an unchanged rule book loads without parsing its YAML again.

PyYAML builds about 18 000 Python objects for the bundled rules and knowledge, a quarter of a second on
every run. This cache maps the SHA-256 of a file's text to its parsed document and keeps the documents of
the last load in one JSON file (reading JSON back runs no code and takes milliseconds) under
``ADVISOR_CACHE_DIR``, else ``$XDG_CACHE_HOME/advisor``, else ``~/.cache/advisor``; setting
``ADVISOR_CACHE_DIR`` to an empty value turns it off. Only documents that survive a JSON round trip
unchanged are kept (no dates, non-string keys or NaN), so a cached document is always the parsed one. A
missing, corrupt or unwritable cache is ignored: it can only save time.

The cache is never trusted blindly. Each entry holds its document with a digest of the source text's hash
and the document; an entry whose digest does not match (the file was edited, or damaged), whose words
are not all words of the source text (a document that this text cannot have produced), or whose document
does not validate as the model the caller expects (see ``rulebook``) is dropped and the YAML parsed again.
The cache file is read only when it is a regular file of at most MAX_CACHE_BYTES (a FIFO there is never
waited on). Someone who can rewrite the user's files can still craft a matching entry from words of the
source; they could equally rewrite the rule files themselves.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from advisor.ingest.limits import read_bounded
from advisor.ingest.model import FileProblem

CACHE_VARIABLE = "ADVISOR_CACHE_DIR"
MAX_CACHE_BYTES = 64 << 20
_FILE_NAME = "parsed-yaml.json"
_FORMAT = 2
_WORD = re.compile(r"\w+")


class ParsedYaml:
    """Documents by text hash: those stored by the previous load, and those used by this one."""

    def __init__(self, directory: Path | None) -> None:
        self.file = directory / _FILE_NAME if directory is not None else None
        self.stored: dict[str, Any] | None = None  # text hash -> [digest, document]
        self.used: dict[str, Any] = {}  # text hash -> [digest, document]
        self.from_cache: set[str] = set()  # hashes whose document this load took from the cache

    def load(self, text: str, parse: Callable[[str], Any]) -> Any:
        """The document of ``text``: from the cache when known and valid, else ``parse(text)`` (which may raise)."""
        key = _key(text)
        entry = self._stored().get(key)
        if _valid(key, entry, text):
            self.from_cache.add(key)
            self.used[key] = entry
            return entry[1]
        return self._parsed(key, text, parse)

    def reparse(self, text: str, parse: Callable[[str], Any]) -> Any | None:
        """``parse(text)`` when the last document of ``text`` came from the cache (None otherwise): the caller found
        it unusable, so the entry is replaced."""
        key = _key(text)
        if key not in self.from_cache:
            return None
        self.from_cache.discard(key)
        self.used.pop(key, None)
        if self.stored is not None:
            self.stored.pop(key, None)
        return self._parsed(key, text, parse)

    def _parsed(self, key: str, text: str, parse: Callable[[str], Any]) -> Any:
        document = parse(text)
        if _round_trips(document):
            self.used[key] = [_digest(key, document), document]
        return document

    def save(self) -> None:
        """Write the documents used since the last save, when they differ from the stored ones."""
        if self.file is None or self.used == self._stored():
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=self.file.parent, prefix=".parsed-yaml.", delete=False) as handle:
                try:
                    handle.write(msgspec.json.encode({"format": _FORMAT, "entries": self.used}))
                except BaseException:
                    os.unlink(handle.name)
                    raise
            os.replace(handle.name, self.file)
        except OSError:
            return
        self.stored, self.used = self.used, {}

    def _stored(self) -> dict[str, Any]:
        if self.stored is None:
            self.stored = {}
            if self.file is not None:
                try:
                    stored = msgspec.json.decode(read_bounded(self.file, MAX_CACHE_BYTES))
                except (OSError, FileProblem, msgspec.DecodeError):
                    stored = None
                if isinstance(stored, dict) and stored.get("format") == _FORMAT and isinstance(stored.get("entries"), dict):
                    self.stored = stored["entries"]
        return self.stored


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _digest(key: str, document: Any) -> str:
    return hashlib.sha256(key.encode() + b"\0" + msgspec.json.encode(document)).hexdigest()


def _valid(key: str, entry: Any, text: str) -> bool:
    """Whether a stored entry is ``[digest, document]`` for this text: its digest matches, and every word of its
    document (keys and strings) is a word of the text."""
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
        return False
    try:
        if entry[0] != _digest(key, entry[1]):
            return False
    except (TypeError, ValueError, msgspec.EncodeError):
        return False
    words = set(_WORD.findall(text))
    return all(set(_WORD.findall(value)) <= words for value in _strings(entry[1]))


def _strings(document: Any) -> list[str]:
    found, pending = [], [document]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            found.extend(k for k in value if isinstance(k, str))
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return found


def cache_directory() -> Path | None:
    """Where the cache lives (None: turned off)."""
    configured = os.environ.get(CACHE_VARIABLE)
    if configured is not None:
        return Path(configured) if configured.strip() else None
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:  # no home directory
        return None
    return Path(base) / "advisor"


def _round_trips(document: Any) -> bool:
    try:
        return msgspec.json.decode(msgspec.json.encode(document)) == document
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError, msgspec.DecodeError):
        return False
