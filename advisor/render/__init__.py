"""Render one Report four ways: terminal, Markdown, HTML and JSON.

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
from advisor.render.terminal import render_terminal

if TYPE_CHECKING:
    from advisor.report import Report

__all__ = ["DOCUMENTS", "View", "render_html", "render_json", "render_markdown", "render_terminal"]


def render_json(report: Report, view: View = FULL) -> str:
    """The JSON report (design §4.3), with the findings ``view`` keeps: same input, byte-identical output."""
    document = filtered_report(report, view).model_dump(mode="json")
    return json_text(document)


# The document formats by name: where a renderer of a Report is registered (``advisor.render`` and the command
# line's -f/-o look it up here; the terminal renderer draws on a console and is called directly).
DOCUMENTS: dict[str, Callable[[Report, View], str]] = {"markdown": render_markdown, "html": render_html,
                                                       "json": render_json}
