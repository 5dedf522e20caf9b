"""Check that two checkouts give byte-identical reports: ``advisor diagnose`` (JSON on standard output, standard error
and exit code) of every trace-bearing Ascend case of the hardening corpus and of the profiles given.

    git worktree add /tmp/trace-before HEAD~3
    .venv/bin/python bench/same_reports.py /tmp/trace-before . ../shared/data/real/ascend-level1-2ranks …

Each corpus case is built once (from this checkout's tests/corpus) and run by both checkouts (PYTHONPATH first), in
fresh processes, as tests/test_corpus.py runs it (its own arguments; LANG=C.UTF-8, COLUMNS=100). A case counts as
trace-bearing when its directory holds a trace_view.json (or .json.gz). The checkout's own path, where a message
names it (a library warning raised in its code), is replaced by ``<checkout>`` in both. The profiles given are run with
``-f json``, with ADVISOR_JOBS=1 and with both cores (a large trace is then read in pieces). Prints each difference
and a summary; exits 1 when any output differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(tree: Path, arguments: list[str], jobs: str | None) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "LANG": "C.UTF-8", "COLUMNS": "100"}
    env.pop("ADVISOR_JOBS", None)
    if jobs is not None:
        env["ADVISOR_JOBS"] = jobs
    done = subprocess.run([sys.executable, "-m", "advisor", *arguments], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tempfile.gettempdir(), check=False)
    # a warning raised in the checkout's own code names its path: the same message in both
    return done.returncode, done.stdout.replace(str(tree), "<checkout>"), done.stderr.replace(str(tree), "<checkout>")


def compare(before: Path, after: Path, arguments: list[str], label: str, jobs: str | None = None) -> bool:
    old, new = run(before, arguments, jobs), run(after, arguments, jobs)
    if old == new:
        return True
    what = [name for name, a, b in zip(("exit code", "stdout", "stderr"), old, new) if a != b]
    print(f"DIFFERS {label}: {', '.join(what)} (exit {old[0]} / {new[0]})")
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("profiles", type=Path, nargs="*")
    parser.add_argument("--no-corpus", action="store_true")
    args = parser.parse_args()
    before, after = args.before.resolve(), args.after.resolve()
    same = differ = 0
    if not args.no_corpus:
        sys.path.insert(0, str(ROOT / "tests"))
        from corpus.cases import all_cases

        for case in all_cases():
            if case.command != ("diagnose",) or case.base in ("db", "kineto"):
                continue
            with tempfile.TemporaryDirectory() as scratch:
                directory = Path(scratch) / "case"
                arguments = case.build(directory)
                try:
                    traces = list(directory.rglob("trace_view.json*"))
                except OSError:
                    traces = []
                if traces:
                    ok = compare(before, after, arguments, f"corpus {case.name}")
                    same, differ = same + ok, differ + (not ok)
                for path in directory.rglob("*"):  # what a case made unreadable
                    if not path.is_symlink():
                        path.chmod(0o755)
    for profile in args.profiles:
        for jobs in ("1", None):
            ok = compare(before, after, ["diagnose", str(profile.resolve()), "-f", "json"],
                         f"{profile} (ADVISOR_JOBS={jobs or 'unset'})", jobs)
            same, differ = same + ok, differ + (not ok)
    print(f"{same} identical, {differ} different")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
