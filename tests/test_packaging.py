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


# --- durable-rules: the engine, built from the released sdist with the patch in third_party/durable-rules ---

DURABLE_RULES = ROOT / "third_party" / "durable-rules"


@pytest.fixture(scope="module")
def build_wheel():
    """third_party/durable-rules/build_wheel.py as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("durable_rules_build_wheel", DURABLE_RULES / "build_wheel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sdist(build_wheel, tmp_path_factory) -> Path:
    """The pinned sdist: the copy `make` keeps in build/wheels, else downloaded (sha256 checked either way)."""
    kept = ROOT / "build" / "wheels" / build_wheel.SDIST
    if kept.is_file():
        return build_wheel.fetch_sdist(tmp_path_factory.mktemp("sdist"), kept)
    return build_wheel.fetch_sdist(tmp_path_factory.mktemp("sdist"))


def test_the_patch_applies_to_the_pinned_sdist_and_replaces_every_removed_call(build_wheel, sdist, tmp_path):
    tree = build_wheel.unpack(sdist, tmp_path)
    source = (tree / "src" / "rulespy" / "rules.c").read_text(encoding="utf-8")
    assert source.count("PyEval_CallObject(") == 5 and "PyObject_CallObject(" not in source
    assert build_wheel.apply_patch(tree) == ["setup.py", "src/rulespy/rules.c"]
    patched = (tree / "src" / "rulespy" / "rules.c").read_text(encoding="utf-8")
    assert "PyEval_CallObject" not in patched and patched.count("PyObject_CallObject(callback, arglist)") == 5
    assert patched.replace("PyObject_CallObject(", "PyEval_CallObject(") == source  # nothing else changed
    assert f"version = '{build_wheel.PATCHED_VERSION}'," in (tree / "setup.py").read_text(encoding="utf-8")


def test_a_patch_that_no_longer_matches_the_sdist_stops_the_build(build_wheel, sdist, tmp_path):
    tree = build_wheel.unpack(sdist, tmp_path)
    rules_c = tree / "src" / "rulespy" / "rules.c"
    rules_c.write_text(rules_c.read_text(encoding="utf-8").replace("(sssIs)", "(sssIz)"), encoding="utf-8")
    with pytest.raises(build_wheel.BuildError, match="does not match the sdist"):
        build_wheel.apply_patch(tree)


def test_an_sdist_with_another_checksum_is_refused(build_wheel, sdist, tmp_path):
    forged = tmp_path / build_wheel.SDIST
    forged.write_bytes(sdist.read_bytes() + b"\0")
    with pytest.raises(build_wheel.BuildError, match="sha256"):
        build_wheel.fetch_sdist(tmp_path / "kept", forged)


def test_the_engine_is_durable_rules_compiled_extension():
    import importlib.machinery
    import importlib.metadata

    import durable_rules_engine

    from advisor.engine import session

    assert session.dre is durable_rules_engine
    assert isinstance(durable_rules_engine.__spec__.loader, importlib.machinery.ExtensionFileLoader)
    assert durable_rules_engine.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    dist = importlib.metadata.distribution("durable_rules")
    assert dist.version.split("+")[0] == "2.0.28"
    shipped = {Path(str(f)).name for f in dist.files or ()}
    assert Path(durable_rules_engine.__file__).name in shipped  # the module comes from that distribution


def test_the_engine_calls_back_into_python():
    """The five calls the patch changes run the store/queue callbacks: two of them, through the engine."""
    import durable_rules_engine as dre

    calls = []

    def store(ruleset, sid, mid, action, content):
        calls.append(("store", ruleset, sid, mid, action))
        return 0

    def idle(ruleset):
        calls.append(("idle", ruleset))
        return 0

    handle = dre.create_ruleset("packaging_callbacks", json.dumps({"r": {"all": [{"m": {"x": 1}}]}}))
    try:
        dre.set_store_message_callback(handle, store)
        dre.set_get_idle_state_callback(handle, idle)
        dre.assert_fact(handle, json.dumps({"id": "f1", "sid": "0", "x": 1}))
        state, matched, _ = dre.start_action(handle)
        assert json.loads(matched) == {"r": {"m": {"id": "f1", "sid": "0", "x": 1}}}
    finally:
        dre.delete_ruleset(handle)
    assert ("store", "packaging_callbacks", "0", "f1", 1) in calls
    assert ("idle", "packaging_callbacks") in calls


def test_the_installed_engine_is_the_patched_build(build_wheel):
    import importlib.metadata

    version = importlib.metadata.version("durable_rules")
    if version == "2.0.28" and sys.version_info < (3, 13):
        pytest.skip("PyPI's unpatched 2.0.28 (it works before Python 3.13); `make` installs the patched build")
    assert version == build_wheel.PATCHED_VERSION
