"""The same input gives byte-identical reports: no timestamps, no set or dict order, no hash seeds inside.

Each report is produced by separate processes with different ``PYTHONHASHSEED`` values (set and dict
iteration orders then differ), from the profile copied to two different directories.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from builders import EVERY_CATEGORY_CONTEXT, EVERY_CATEGORY_ENV, build_every_category
from conftest import REAL, SAMPLE_CLUSTER


def _report(path, fmt: str, seed: str, extra: list[str]) -> bytes:
    environment = {**os.environ, "PYTHONHASHSEED": seed, "LANG": "C.UTF-8"}
    result = subprocess.run([sys.executable, "-m", "advisor", "diagnose", path.name, "-f", fmt, *extra],
                            capture_output=True, env=environment, timeout=300, cwd=path.parent)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
@pytest.mark.parametrize("profile", ["real", "cluster", "every-category"])
def test_reports_are_byte_identical_across_runs(tmp_path, profile, fmt):
    extra: list[str] = []
    copies = []
    for name in ("first", "second"):
        target = tmp_path / name / "prof"
        if profile == "every-category":
            target.mkdir(parents=True)
            build_every_category(target)
            context = tmp_path / name / "model.yaml"
            context.write_text(EVERY_CATEGORY_CONTEXT)
            extra = ["--context", "model.yaml", *(a for env in EVERY_CATEGORY_ENV for a in ("--env", env))]
        else:
            shutil.copytree(REAL if profile == "real" else SAMPLE_CLUSTER, target)
        copies.append(target)
    first = _report(copies[0], fmt, "1", extra)
    second = _report(copies[1], fmt, "2", extra)
    assert first, "empty report"
    assert first == second
