"""A non-editable install works: the wheel carries rules/, knowledge/, reports/ and the report schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import SAMPLE_CLUSTER

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("advisor-*.whl")
    return built


def test_wheel_ships_the_data_directories(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for source in ("rules", "knowledge", "reports"):
        for path in (ROOT / source).rglob("*"):
            if path.is_file():
                assert f"advisor/_data/{path.relative_to(ROOT).as_posix()}" in names
    assert "advisor/schema/report.schema.json" in names
    assert not any(n.startswith(("tests/", "examples/")) for n in names)


def test_installed_wheel_diagnoses_without_the_source_tree(wheel, tmp_path):
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    code = (
        "import json, advisor, advisor.resources as r;"
        "report = advisor.diagnose(__import__('sys').argv[1]);"
        "print(json.dumps({'file': advisor.__file__, 'rules': str(r.data_dir('rules')),"
        " 'bottleneck': report.summary.bottleneck, 'findings': len(report.findings)}))"
    )
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    result = subprocess.run([sys.executable, "-c", code, str(SAMPLE_CLUSTER)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, check=True)
    facts = json.loads(result.stdout)
    assert facts["file"].startswith(str(unpacked))
    assert facts["rules"] == str(unpacked / "advisor" / "_data" / "rules")
    assert facts["bottleneck"] == "communication" and facts["findings"] >= 2


def test_installed_wheel_lints_and_documents_its_own_rules(wheel, tmp_path):
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    lint = subprocess.run([sys.executable, "-m", "advisor", "rules", "lint"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert lint.returncode == 0 and lint.stdout.startswith("0 problem(s) in "), lint.stdout + lint.stderr
    docs = subprocess.run([sys.executable, "-m", "advisor", "rules", "docs", "-o", str(tmp_path / "docs")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, check=False)
    assert docs.returncode == 0, docs.stderr
    assert (tmp_path / "docs" / "rules" / "host.online_compilation.md").read_text(encoding="utf-8") == (
        ROOT / "docs" / "rules" / "rules" / "host.online_compilation.md"
    ).read_text(encoding="utf-8")
