"""Render one Report: terminal, Markdown, HTML, JSON, CSV (the findings) and an Excel workbook.

Each takes a ``View`` (advisor.render.common): ``detail`` brief or full for the terminal and Markdown (full by
default here; the command line's default is brief), and the findings to keep (``max_findings``, ``min_severity``)
for every format.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from advisor.jsontext import json_text
from advisor.render.common import FULL, View, filtered_report
from advisor.render.documents import render_html, render_markdown
from advisor.render.spreadsheets import render_csv, render_xlsx
from advisor.render.terminal import render_terminal

if TYPE_CHECKING:
    from advisor.report import Report

__all__ = ["BINARY_DOCUMENTS", "DOCUMENTS", "View", "render_csv", "render_document", "render_html", "render_json",
           "render_markdown", "render_terminal", "render_xlsx"]


def render_json(report: Report, view: View = FULL) -> str:
    """The JSON report (design §4.3), with the findings ``view`` keeps: same input, byte-identical output."""
    document = filtered_report(report, view).model_dump(mode="json")
    return json_text(document)


# The document formats by name: where a renderer of a Report is registered (``advisor.render`` and the command
# line's -f/-o look it up here; the terminal renderer draws on a console and is called directly).
DOCUMENTS: dict[str, Callable[[Report, View], str]] = {"markdown": render_markdown, "html": render_html,
                                                       "json": render_json, "csv": render_csv}
# The formats that are bytes, not text: written to a file by the command line, never returned by ``advisor.render``.
BINARY_DOCUMENTS: dict[str, Callable[[Report, View], bytes]] = {"xlsx": render_xlsx}


def render_document(report: Report, name: str, view: View = FULL) -> str | bytes:
    """The document format ``name`` (of DOCUMENTS or BINARY_DOCUMENTS) of ``report``."""
    binary = BINARY_DOCUMENTS.get(name)
    return binary(report, view) if binary is not None else DOCUMENTS[name](report, view)
