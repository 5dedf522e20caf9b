"""Parsed YAML documents kept between runs, so an unchanged rule book loads without parsing its YAML again.

PyYAML builds about 18 000 Python objects for the bundled rules and knowledge, a quarter of a second on
every run. This cache maps the SHA-256 of a file's text to its parsed document and keeps the documents of
the last load in one JSON file (reading JSON back runs no code and takes milliseconds) under
``ADVISOR_CACHE_DIR``, else ``$XDG_CACHE_HOME/advisor``, else ``~/.cache/advisor``; setting
``ADVISOR_CACHE_DIR`` to an empty value turns it off. Only documents that survive a JSON round trip
unchanged are kept (no dates, non-string keys or NaN), so a cached document is always the parsed one. A
missing, corrupt or unwritable cache is ignored: it can only save time.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

CACHE_VARIABLE = "ADVISOR_CACHE_DIR"
_FILE_NAME = "parsed-yaml.json"


class ParsedYaml:
    """Documents by text hash: those stored by the previous load, and those used by this one."""

    def __init__(self, directory: Path | None) -> None:
        self.file = directory / _FILE_NAME if directory is not None else None
        self.stored: dict[str, Any] | None = None
        self.used: dict[str, Any] = {}

    def load(self, text: str, parse: Callable[[str], Any]) -> Any:
        """The document of ``text``: from the cache when known, else ``parse(text)`` (which may raise)."""
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        stored = self._stored()
        if key in stored:
            document = stored[key]
        else:
            document = parse(text)
            if not _round_trips(document):
                return document
        self.used[key] = document
        return document

    def save(self) -> None:
        """Write the documents used since the last save, when they differ from the stored ones."""
        if self.file is None or self.used.keys() == self._stored().keys():
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=self.file.parent, delete=False) as handle:
                handle.write(msgspec.json.encode(self.used))
            os.replace(handle.name, self.file)
        except OSError:
            return
        self.stored, self.used = self.used, {}

    def _stored(self) -> dict[str, Any]:
        if self.stored is None:
            self.stored = {}
            if self.file is not None:
                try:
                    stored = msgspec.json.decode(self.file.read_bytes())
                except (OSError, msgspec.DecodeError):
                    stored = None
                if isinstance(stored, dict):
                    self.stored = stored
        return self.stored


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
