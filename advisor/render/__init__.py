"""Render one Report four ways: terminal, Markdown, HTML and JSON."""

from __future__ import annotations

import json

from advisor.render.documents import render_html, render_markdown
from advisor.render.terminal import render_terminal
from advisor.report import Report

__all__ = ["render_html", "render_json", "render_markdown", "render_terminal"]


def render_json(report: Report) -> str:
    """The JSON report (design §4.3): same input, byte-identical output."""
    return json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
