#!/usr/bin/env python3
"""Build the patched durable-rules wheel for the Python running this script.

    python third_party/durable-rules/build_wheel.py [--wheel-dir build/wheels] [--sdist FILE] [--force]

1. Takes the released sdist of durable-rules 2.0.28: FILE if given, else the copy kept in the wheel
   directory from an earlier run, else `pip download --no-binary :all: --no-deps` from the package index.
   Its sha256 must be the one pinned below, whichever way it came.
2. Unpacks it into a temporary directory and applies durable-rules-2.0.28-py313.patch (beside this
   script) exactly: every hunk must match at its line, no offset, no fuzz, or the build stops.
3. `pip wheel --no-deps` builds it (pip fetches setuptools into an isolated build environment; gcc and
   the Python headers compile the engine) and the wheel goes into the wheel directory, replacing an
   older durable-rules wheel for the same interpreter.

A record of the inputs (sdist and patch sha256) is kept beside the wheel; a second run with the same
inputs and interpreter does nothing. Install with `pip install --find-links <wheel dir> ...`: the wheel's
version, 2.0.28+advisor.1, satisfies `durable-rules==2.0.28` and is preferred to PyPI's sdist.
Standard library only, so it runs with any interpreter that has pip.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAME = "durable-rules"
VERSION = "2.0.28"
SDIST = f"durable_rules-{VERSION}.tar.gz"
SDIST_SHA256 = "053b26f5e48d312d4fa27995243f954671be6eece477f150c059c364eb4d7d61"
PATCH = HERE / "durable-rules-2.0.28-py313.patch"
PATCHED_VERSION = "2.0.28+advisor.1"


class BuildError(Exception):
    """A step failed; the message says which and why."""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_sdist(wheel_dir: Path, given: Path | None = None) -> Path:
    """The verified sdist, kept in ``wheel_dir`` (downloaded once from the package index if needed)."""
    kept = wheel_dir / SDIST
    if given is not None:
        source = given
    elif kept.is_file() and sha256(kept) == SDIST_SHA256:
        return kept
    else:
        download = Path(tempfile.mkdtemp(prefix="durable-rules-sdist-"))
        try:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
                   "--dest", str(download), f"{NAME}=={VERSION}"]
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise BuildError(f"could not download the {NAME} {VERSION} sdist:\n{result.stdout}{result.stderr}")
            found = list(download.glob(SDIST))
            if not found:
                raise BuildError(f"pip download did not produce {SDIST}: {sorted(p.name for p in download.iterdir())}")
            wheel_dir.mkdir(parents=True, exist_ok=True)
            shutil.move(str(found[0]), kept.with_suffix(".part"))
            source = kept.with_suffix(".part")
        finally:
            shutil.rmtree(download, ignore_errors=True)
    digest = sha256(source)
    if digest != SDIST_SHA256:
        raise BuildError(f"{source}: sha256 {digest}, expected {SDIST_SHA256} (the released {SDIST})")
    if source != kept:
        wheel_dir.mkdir(parents=True, exist_ok=True)
        if source.suffix == ".part":
            source.replace(kept)
        else:
            shutil.copyfile(source, kept)
    return kept


def unpack(sdist: Path, dest: Path) -> Path:
    """Unpack the sdist into ``dest``; returns its top directory."""
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - Python without the extraction filters (before 3.11.4)
            for member in tar.getmembers():
                if member.name.startswith("/") or ".." in Path(member.name).parts:
                    raise BuildError(f"unsafe path in {sdist.name}: {member.name}")
            tar.extractall(dest)  # noqa: S202 - paths checked above
    (top,) = dest.iterdir()
    return top


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_patch(text: str) -> dict[str, list[tuple[int, list[str], list[str]]]]:
    """{path: [(old start line, old lines, new lines)]} of a unified diff (``a/``/``b/`` prefixes)."""
    files: dict[str, list[tuple[int, list[str], list[str]]]] = {}
    lines = text.splitlines()
    i = 0
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            current = lines[i + 1][4:].split("\t")[0].strip()
            current = current[2:] if current.startswith("b/") else current
            files.setdefault(current, [])
            i += 2
            continue
        match = _HUNK.match(line)
        if match and current is not None:
            old_count = int(match.group(2) or 1)
            new_count = int(match.group(4) or 1)
            old: list[str] = []
            new: list[str] = []
            i += 1
            while (len(old) < old_count or len(new) < new_count) and i < len(lines):
                body = lines[i]
                tag, rest = (body[:1], body[1:]) if body else (" ", "")
                if tag == " ":
                    old.append(rest)
                    new.append(rest)
                elif tag == "-":
                    old.append(rest)
                elif tag == "+":
                    new.append(rest)
                elif tag != "\\":
                    raise BuildError(f"malformed hunk line in {PATCH.name}: {body!r}")
                i += 1
            if len(old) != old_count or len(new) != new_count:
                raise BuildError(f"truncated hunk for {current} in {PATCH.name}")
            files[current].append((int(match.group(1)), old, new))
            continue
        i += 1
    if not files or not all(files.values()):
        raise BuildError(f"{PATCH.name} holds no hunks")
    return files


def apply_patch(tree: Path, patch: Path = PATCH) -> list[str]:
    """Apply ``patch`` to the unpacked sdist at ``tree`` exactly; returns the files it changed."""
    changed = []
    for rel, hunks in parse_patch(patch.read_text(encoding="utf-8")).items():
        target = tree / rel
        if not target.is_file():
            raise BuildError(f"{PATCH.name}: {rel} is not in the sdist")
        raw = target.read_bytes().decode("utf-8")
        newline = "\r\n" if "\r\n" in raw else "\n"
        lines = raw.split(newline)
        offset = 0
        for start, old, new in hunks:
            at = start - 1 + offset
            if lines[at:at + len(old)] != old:
                raise BuildError(f"{PATCH.name}: the hunk at {rel}:{start} does not match the sdist (patch stale?)")
            lines[at:at + len(old)] = new
            offset += len(new) - len(old)
        target.write_bytes(newline.join(lines).encode("utf-8"))
        changed.append(rel)
    leftover = [str(p.relative_to(tree)) for p in tree.rglob("*.c") if "PyEval_CallObject" in p.read_text("utf-8")]
    if leftover:
        raise BuildError(f"PyEval_CallObject is still called in {leftover} after the patch")
    return changed


def interpreter_tag() -> str:
    """What identifies the wheel's target: implementation, version and platform (e.g. cpython-313-linux-x86_64)."""
    return f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}".replace(".", "_")


def build(wheel_dir: Path, sdist: Path | None = None, force: bool = False) -> Path:
    """Build (or reuse) the patched wheel for this interpreter in ``wheel_dir``; returns its path."""
    wheel_dir = wheel_dir.resolve()
    record = wheel_dir / f"durable_rules-{interpreter_tag()}.json"
    inputs = {"sdist_sha256": SDIST_SHA256, "patch_sha256": sha256(PATCH), "version": PATCHED_VERSION}
    if not force and record.is_file():
        kept = json.loads(record.read_text(encoding="utf-8"))
        wheel = wheel_dir / kept.get("wheel", "")
        if kept.get("inputs") == inputs and wheel.is_file():
            print(f"{wheel.name} is up to date in {wheel_dir}")
            return wheel
    source = fetch_sdist(wheel_dir, sdist)
    with tempfile.TemporaryDirectory(prefix="durable-rules-build-") as tmp:
        tree = unpack(source, Path(tmp) / "src")
        apply_patch(tree)
        out = Path(tmp) / "wheel"
        cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-cache-dir", "--wheel-dir", str(out),
               str(tree)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BuildError(f"building the patched {NAME} failed (a C compiler and the Python headers are needed):\n"
                             f"{result.stdout}{result.stderr}")
        (built,) = out.glob("durable_rules-*.whl")
        if not built.name.startswith(f"durable_rules-{PATCHED_VERSION}-"):
            raise BuildError(f"unexpected wheel {built.name}: the patch should set version {PATCHED_VERSION}")
        wheel_dir.mkdir(parents=True, exist_ok=True)
        old = record.is_file() and json.loads(record.read_text(encoding="utf-8")).get("wheel")
        if old and old != built.name:
            (wheel_dir / old).unlink(missing_ok=True)
        wheel = wheel_dir / built.name
        shutil.copyfile(built, wheel)
    record.write_text(json.dumps({"inputs": inputs, "wheel": wheel.name}, indent=1) + "\n", encoding="utf-8")
    print(f"built {wheel}")
    return wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel-dir", type=Path, default=Path("build/wheels"),
                        help="where the wheel (and the verified sdist) go (default: build/wheels)")
    parser.add_argument("--sdist", type=Path, help=f"use this {SDIST} instead of downloading it")
    parser.add_argument("--force", action="store_true", help="rebuild even if an up-to-date wheel is there")
    args = parser.parse_args(argv)
    try:
        build(args.wheel_dir, args.sdist, args.force)
    except BuildError as exc:
        print(f"build_wheel.py: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
