"""The installed version of advisor."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("advisor")
except PackageNotFoundError:  # running from a source tree that was never installed
    VERSION = "0+unknown"
