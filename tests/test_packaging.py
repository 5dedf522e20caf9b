"""A non-editable install works: the wheel carries rules/, knowledge/, reports/ and the report schema, and installs
by the distribution's name (not `advisor`, which is another project's on PyPI) with the patched engine."""

from __future__ import annotations

import email.parser
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import SAMPLE_CLUSTER

ROOT = Path(__file__).resolve().parent.parent
# The distribution's name; the command and the import package are `advisor`. PyPI's `advisor` is an unrelated
# hyper-parameter tuner (2018): `pip install advisor` must never be what the documentation says.
DIST = "ascend-perf-advisor"
WHEELS = ROOT / "build" / "wheels"  # the patched durable-rules wheel (`make`, `make wheels`)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob(f"{DIST.replace('-', '_')}-*.whl")
    return built


def test_the_wheel_is_named_for_the_distribution_not_for_pypis_advisor(wheel):
    archive = zipfile.ZipFile(wheel)
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    fields = email.parser.HeaderParser().parsestr(archive.read(metadata).decode("utf-8"))
    assert fields["Name"] == DIST
    assert {"mcp", "dask"} <= set(fields.get_all("Provides-Extra"))
    (points,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "advisor = advisor.cli:main" in archive.read(points).decode("utf-8")  # the command keeps its name


def _site_without(excluded: re.Pattern, into: Path) -> Path:
    """This environment's site-packages as links, less the entries matching ``excluded``: a clean venv sees the
    third-party dependencies through it (no index needed) but neither advisor nor the engine."""
    into.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not excluded.match(entry.name):
            (into / entry.name).symlink_to(entry)
    return into


def test_the_wheel_installs_by_its_name_in_a_clean_venv_with_the_patched_engine(wheel, tmp_path):
    """`pip install --no-index --find-links build/wheels --find-links DIR ascend-perf-advisor`, as the README's
    users would (the index is left out: the other dependencies come from this environment, seen through a .pth)."""
    engines = sorted(WHEELS.glob(f"durable_rules-*-cp{sys.version_info[0]}{sys.version_info[1]}-*.whl"))
    if not engines:
        pytest.skip(f"no patched durable-rules wheel for this interpreter in {WHEELS} (`make wheels` builds it)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing but the venv's own site-packages
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  env=env, check=True, capture_output=True, text=True).stdout.strip())
    # everything but advisor (its package, metadata and editable hook) and durable-rules (to come from WHEELS)
    others = _site_without(re.compile(r"(advisor|_?ascend_perf_advisor|_editable_impl_|__editable__|durable)",
                                      re.IGNORECASE), tmp_path / "others")
    (purelib / "others.pth").write_text(f"{others}\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
                           "--find-links", str(WHEELS), "--find-links", str(wheel.parent), DIST],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"Successfully installed .*\b{re.escape(DIST)}-", done.stdout), done.stdout
    assert "durable-rules-2.0.28" in done.stdout or "durable_rules-2.0.28" in done.stdout, done.stdout
    version = subprocess.run([venv / "bin" / "advisor", "--version"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, check=False)
    assert version.returncode == 0 and version.stdout.startswith("advisor "), version.stdout + version.stderr
    code = ("import importlib.metadata as m, advisor, durable_rules_engine;"
            f"print(m.version({DIST!r}), m.version('durable_rules'), advisor.__file__, durable_rules_engine.__file__)")
    found = subprocess.run([python, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    dist_version, engine_version, package, engine = found.stdout.split()
    assert version.stdout.split() == ["advisor", dist_version]
    assert engine_version == engines[-1].name.split("-")[1]  # the build from WHEELS, not PyPI's
    assert package.startswith(str(purelib)) and engine.startswith(str(purelib))


# Any way of telling users to install the distribution as `advisor`: `pip install advisor`, `-U advisor`,
# `'advisor[mcp]'`, `advisor==0.1`, ... (`ascend-perf-advisor`, paths and `-e .` are not matched).
_PIP_ADVISOR = re.compile(r"pip3?\s+install\b[^\n`]*?(?<![\w./-])['\"]?advisor(?:\[[^\]]*\])?(?:[=<>~!]=?[\w.*]+)?"
                          r"['\"]?(?![\w./-])")
_WARNING = "installs a different project"  # the README's sentence saying not to


def test_no_document_says_pip_install_advisor():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "bench").rglob("*.md")),
                 *sorted((ROOT / "third_party").rglob("*.md")), *sorted((ROOT / "advisor").rglob("*.py"))]
    wrong, warned = [], 0
    for path in documents:
        text = path.read_text(encoding="utf-8")
        for match in _PIP_ADVISOR.finditer(text):
            if " ".join(text[match.end():match.end() + 40].split()).lstrip("` ").startswith(_WARNING):
                warned += 1
                continue
            line = text.count("\n", 0, match.start()) + 1
            wrong.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)}")
    assert not wrong, f"the distribution is {DIST}; `advisor` on PyPI is another project:\n" + "\n".join(wrong)
    assert warned == 1  # the README says, once, that `pip install advisor` is a different project
    assert _PIP_ADVISOR.search("pip install -U advisor") and _PIP_ADVISOR.search("pip install 'advisor[mcp]'")
    assert not _PIP_ADVISOR.search(f"pip install '{DIST}[mcp]'") and not _PIP_ADVISOR.search("pip install -e .")


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
