"""Reports are byte for byte the golden files in tests/golden/: a refactoring changes no report.

Each case runs the command line once (``python -m advisor``, from the repository root or the built profile's
parent, with a relative input path, so no absolute path enters a report) and writes the JSON, full Markdown and
HTML reports. A change of behaviour that is meant regenerates the files, to be reviewed in the diff::

    ADVISOR_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -n 0 tests/test_byte_identical.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import EVERY_CATEGORY_CONTEXT, EVERY_CATEGORY_ENV, build_every_category

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("ADVISOR_UPDATE_GOLDEN") == "1"
SUFFIXES = ("json", "md", "html")
RESNET = "tests/fixtures/pytorch-tutorial-resnet50"
EXAMPLE_ASCEND = "examples/ascend-level1-2ranks"  # the same files as tests/fixtures/ascend-level1-2ranks
EXAMPLE_GPU = "examples/gpu-synthetic-2ranks"

# case name -> the command's arguments before the output options (paths relative to the repository root)
CASES: dict[str, list[str]] = {
    "ascend-level1-2ranks": ["diagnose", EXAMPLE_ASCEND],
    "ascend-level1-2ranks.zh": ["diagnose", EXAMPLE_ASCEND, "--lang", "zh"],
    "gpu-synthetic-2ranks": ["diagnose", EXAMPLE_GPU],
    "resnet50-num-workers-0": ["diagnose", f"{RESNET}/num_workers_0"],
    "resnet50-num-workers-4": ["diagnose", f"{RESNET}/num_workers_4"],
    "sample-single-rank": ["diagnose", "tests/fixtures/samples/single_rank"],
    "sample-cluster-2ranks": ["diagnose", "tests/fixtures/samples/cluster_2ranks"],
    "compare-gpu-ascend": ["compare", EXAMPLE_GPU, EXAMPLE_ASCEND],
    "every-category": [],  # built by tests/builders.py, diagnosed with its --env and --context
}


def _reports(name: str, args: list[str], tmp_path: Path) -> dict[str, bytes]:
    cwd = ROOT
    if name == "every-category":
        cwd = tmp_path / "build"
        (cwd / "prof").mkdir(parents=True)
        build_every_category(cwd / "prof")
        (cwd / "model.yaml").write_text(EVERY_CATEGORY_CONTEXT)
        args = ["diagnose", "prof", "--context", "model.yaml",
                *(a for env in EVERY_CATEGORY_ENV for a in ("--env", env))]
    if args[0] == "diagnose":
        args = [*args, "--detail", "full"]
    if "--lang" not in args:
        args = [*args, "--lang", "en"]
    outputs = {suffix: tmp_path / f"report.{suffix}" for suffix in SUFFIXES}
    command = [sys.executable, "-m", "advisor", *args, *(a for p in outputs.values() for a in ("-o", str(p)))]
    result = subprocess.run(command, capture_output=True, cwd=cwd, timeout=300,
                            env={**os.environ, "LANG": "C.UTF-8", "COLUMNS": "100"})
    assert result.returncode == 0, result.stderr.decode()
    return {suffix: path.read_bytes() for suffix, path in outputs.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_reports_match_the_golden_files(tmp_path, name):
    reports = _reports(name, CASES[name], tmp_path)
    for suffix, content in reports.items():
        assert str(ROOT).encode() not in content and str(tmp_path).encode() not in content, "an absolute path"
        golden = GOLDEN / f"{name}.{suffix}"
        if UPDATE:
            GOLDEN.mkdir(exist_ok=True)
            golden.write_bytes(content)
        assert golden.exists(), f"{golden} is missing: ADVISOR_UPDATE_GOLDEN=1 writes it"
        assert content == golden.read_bytes(), f"{name}.{suffix} differs from {golden.relative_to(ROOT)}"
