"""Rewrite the command outputs quoted in the README and docs/ from today's code (issue 29, item 8).

A quoted output is a fenced block whose first line is ``$ advisor …`` (optionally ending in ``| head -N``): the
command runs from the repository's root in a fresh interpreter, 120 columns wide, and the block's other lines become
what it printed (its first N lines). docs/authoring.md is left out: its commands build on each other and
tests/test_authoring.py runs them. Run by ``make docs``; tests/test_docs.py fails when a quoted output drifts.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUOTING = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "authoring.md")]
COLUMNS = 120
BLOCK = re.compile(r"^```([a-z]*)\n\$ (advisor [^\n]*)\n(.*?)^```$", re.M | re.S)
HEAD = re.compile(r"\s*\|\s*head -(\d+)\s*$")


def output_of(command: str) -> str:
    """What ``command`` (``advisor …``, optionally piped into ``head -N``) prints to its standard output."""
    head = HEAD.search(command)
    words = shlex.split(command[: head.start()] if head else command)
    env = {**os.environ, "COLUMNS": str(COLUMNS), "LANG": "C.UTF-8", "LC_ALL": "", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "advisor", *words[1:]], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    lines = [line.rstrip() for line in done.stdout.splitlines()]
    if not lines:
        raise RuntimeError(f"`{command}` printed nothing (exit {done.returncode}): {done.stderr.strip()[:300]}")
    return "\n".join(lines[: int(head.group(1))] if head else lines) + "\n"


def quoted(text: str) -> list[tuple[str, str]]:
    """The (command, quoted output) pairs of a Markdown text."""
    return [(match.group(2), match.group(3)) for match in BLOCK.finditer(text)]


def rewritten(text: str) -> str:
    """``text`` with every quoted output replaced by what its command prints today."""
    return BLOCK.sub(lambda m: f"```{m.group(1)}\n$ {m.group(2)}\n{output_of(m.group(2))}```", text)


def main() -> None:
    for path in QUOTING:
        text = path.read_text(encoding="utf-8")
        new = rewritten(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote the quoted outputs of {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
