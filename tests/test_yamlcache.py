"""The parsed-YAML cache: a second load of the rule book reads no YAML, and a stale or broken cache cannot matter."""

from __future__ import annotations

import json

import pytest

from advisor import rulebook
from advisor.rulebook import load_rulebook
from advisor.yamlcache import ParsedYaml, cache_directory


def _book_summary(book) -> dict:
    return {"rules": {i: r.spec.model_dump() for i, r in book.rules.items()},
            "knowledge": {i: k.model_dump() for i, k in book.knowledge.items()}}


@pytest.fixture
def parses(monkeypatch, tmp_path):
    """Count the YAML parses of rule-book loads that use a fresh cache directory."""
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(tmp_path / "cache"))
    calls = []
    real = rulebook._parse
    monkeypatch.setattr(rulebook, "_parse", lambda text: calls.append(text) or real(text))
    return calls


def test_a_second_load_parses_no_yaml_and_gives_the_same_book(parses, tmp_path):
    first = load_rulebook(installed=False)
    assert len(parses) == len(first.rules) + len(first.knowledge)
    assert (tmp_path / "cache" / "parsed-yaml.json").is_file()
    parses.clear()
    second = load_rulebook(installed=False)
    assert parses == []
    assert _book_summary(second) == _book_summary(first)


def test_a_changed_file_is_parsed_again(parses, tmp_path):
    pack = tmp_path / "pack"
    (pack / "knowledge").mkdir(parents=True)
    name = "fused.rms_norm.yaml"
    entry = (rulebook.data_dir("knowledge") / "fused-operator" / name).read_text(encoding="utf-8")
    (pack / "knowledge" / name).write_text(entry, encoding="utf-8")
    load_rulebook([pack], installed=False)
    parses.clear()
    changed = entry.replace("\n  en: ", "\n  en: Changed — ", 1)
    (pack / "knowledge" / name).write_text(changed, encoding="utf-8")
    book = load_rulebook([pack], installed=False)
    assert parses == [changed]
    assert book.knowledge["fused.rms_norm"].title.en.startswith("Changed —")


@pytest.mark.parametrize("damage", [b"", b"{not json", b"[1, 2]", b'{"0000": '])
def test_a_broken_cache_file_is_ignored_and_rewritten(parses, tmp_path, damage):
    expected = _book_summary(load_rulebook(installed=False))
    (tmp_path / "cache" / "parsed-yaml.json").write_bytes(damage)
    assert _book_summary(load_rulebook(installed=False)) == expected
    parses.clear()
    load_rulebook(installed=False)
    assert parses == []


def test_an_unwritable_or_disabled_cache_only_costs_time(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(blocker / "cache"))
    assert load_rulebook(installed=False).rules
    monkeypatch.setenv("ADVISOR_CACHE_DIR", "")
    assert cache_directory() is None
    assert load_rulebook(installed=False).rules


def test_default_location_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("ADVISOR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_directory() == tmp_path / "advisor"


@pytest.mark.parametrize("text", ["when: 2026-11-22\n", "1: one\n", "x: .nan\n", "raw: !!binary aGk=\n"])
def test_documents_json_cannot_hold_exactly_are_not_cached(tmp_path, text):
    import yaml

    cache = ParsedYaml(tmp_path)
    document = cache.load(text, yaml.safe_load)
    assert cache.used == {}
    cache.save()
    assert not (tmp_path / "parsed-yaml.json").exists()
    assert ParsedYaml(tmp_path).load(text, yaml.safe_load).keys() == document.keys()


def test_the_cache_holds_only_the_last_loads_documents(tmp_path):
    import yaml

    first = ParsedYaml(tmp_path)
    first.load("a: 1\n", yaml.safe_load)
    first.save()
    second = ParsedYaml(tmp_path)
    assert second.load("a: 1\n", lambda text: pytest.fail("parsed again")) == {"a": 1}
    second.load("b: 2\n", yaml.safe_load)
    second.save()
    third = ParsedYaml(tmp_path)
    third.load("b: 2\n", lambda text: pytest.fail("parsed again"))
    entries = json.loads((tmp_path / "parsed-yaml.json").read_bytes())["entries"]
    assert sorted(json.dumps(document) for _digest, document in entries.values()) == ['{"a": 1}', '{"b": 2}']
