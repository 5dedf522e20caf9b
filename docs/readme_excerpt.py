"""Rewrite the README's quoted report excerpt (the brief Markdown report of the bundled example) from today's code.

Run by ``make docs``; tests/test_docs.py checks that the excerpt matches what the code prints.
"""

from __future__ import annotations

from pathlib import Path

from advisor.diagnose import diagnose
from advisor.render import View, render_markdown

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/ascend-level1-2ranks"


def excerpt() -> str:
    """The brief Markdown report of the example, as the README quotes it (with the path the command line gives)."""
    report = diagnose(ROOT / EXAMPLE)
    report = report.model_copy(update={"input": report.input.model_copy(update={"path": EXAMPLE})})
    text = render_markdown(report, View("brief")).rstrip("\n")
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.splitlines()) + "\n"


def main() -> None:
    readme = ROOT / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("> # Performance diagnosis"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith(">")), len(lines))
    readme.write_text("".join(lines[:start]) + excerpt() + "".join(lines[end:]), encoding="utf-8")


if __name__ == "__main__":
    main()
