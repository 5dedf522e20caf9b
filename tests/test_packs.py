"""Packs as products (issue 32, items 5 and 6): a broken rule is left out of its pack and the rest loads; a pack's
catalogue holds its own pages; pack.yaml states a version and the advisor it needs; `rules package` builds a wheel
that installs the pack; schema errors are said in advisor's words, with file:line:column and a did-you-mean."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_authoring import FIXTURE, GOOD_KNOWLEDGE, GOOD_RULE, ROOT, _cli_env

from advisor.budget import CHILD_BUCKETS, bucket_problem
from advisor.diagnose import diagnose
from advisor.errors import RuleError
from advisor.facts.models import IdleFact
from advisor.lint import lint
from advisor.rulebook import load_rulebook, satisfies, version_key
from advisor.version import VERSION
from advisor.vocabulary import PLATFORMS

OPERATORS = "(operators: eq, ne, gt, gte, lt, lte, matches, imatches, exists, in)"
TEAM_RULE = GOOD_RULE.replace("[host.device_idle]", "[team.entry]")
BAD_RULE = TEAM_RULE.replace("id: team.idle", "id: team.bad").replace("{gte: 0.2}", "{ge: 0.2}")


def _advisor(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["advisor", *args], cwd=cwd, env=env or _cli_env(), capture_output=True, text=True, timeout=300)


def _pack(root: Path, rules: dict[str, str], knowledge: dict[str, str] | None = None, manifest: str | None = None) -> Path:
    for kind, files in (("rules", rules), ("knowledge", knowledge or {"team.entry": GOOD_KNOWLEDGE})):
        (root / kind).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (root / kind / f"{name}.yaml").write_text(text, encoding="utf-8")
    if manifest is not None:
        (root / "pack.yaml").write_text(manifest, encoding="utf-8")
    return root


# ---- 5a: a broken rule is left out, the rest of its pack loads ----


def test_a_broken_rule_is_left_out_and_the_rest_of_its_pack_loads(tmp_path):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE, "team.bad": BAD_RULE}, manifest="name: team\n")
    bad = pack / "rules" / "team.bad.yaml"
    problem = f"{bad}:8:41: when: b.free_ratio: unknown operator 'ge' — did you mean 'gte'? {OPERATORS}"
    book = load_rulebook([pack], installed=False, skip_broken=True)
    assert "team.idle" in book.rules and "team.bad" not in book.rules and not book.skipped
    assert [(s.pack, s.file, s.problems) for s in book.skipped_files] == [("team", str(bad), [problem])]
    with pytest.raises(RuleError, match="unknown operator 'ge'"):  # without skip_broken (rules test, docs): refused
        load_rulebook([pack], installed=False)
    linted = _advisor("rules", "lint", str(pack))
    assert linted.returncode == 1 and linted.stdout.splitlines() == [problem, "1 problem(s) in 1 rule(s) and 1 knowledge entry"]


def test_diagnose_warns_of_the_broken_rule_and_runs_the_others(tmp_path):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE, "team.bad": BAD_RULE}, manifest="name: team\n")
    bad = pack / "rules" / "team.bad.yaml"
    result = _advisor("diagnose", str(FIXTURE), "--rules", str(pack), "-f", "json", "--detail", "full")
    assert result.returncode == 3, result.stderr
    assert (f"advisor: warning: skipped {bad}: rule file left out of rule pack 'team', whose other files were loaded: 1 "
            f"problem(s), first: {bad}:8:41: when: b.free_ratio: unknown operator 'ge' — did you mean 'gte'?") in result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "partial" and "team.idle" in {f["id"] for f in report["findings"]}
    assert [s["file"] for s in report["coverage"]["skipped"]] == [str(bad)]
    assert report["tool"]["packs"][1] == {"name": "team", "path": str(pack), "rules": 1, "knowledge": 1, "overrides": [],
                                          "disabled": []}  # no version stated: none shown


def test_a_rule_recommending_a_broken_entry_is_left_out_with_the_reason(tmp_path):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE},
                 knowledge={"team.entry": GOOD_KNOWLEDGE.replace("zh: 慢。", "zh2: 慢。")})
    book = load_rulebook([pack], installed=False, skip_broken=True)
    assert "team.idle" not in book.rules and "team.entry" not in book.knowledge
    problems = {Path(s.file).name: s.problems for s in book.skipped_files}
    assert problems == {
        "team.entry.yaml": [f"{pack}/knowledge/team.entry.yaml:4:1: problem: 'zh' is required (every text here is given "
                            "in English and Chinese: {en: …, zh: …})",
                            f"{pack}/knowledge/team.entry.yaml:4:22: problem: unknown key 'zh2' — did you mean 'zh'? "
                            "(keys: en, zh)"],
        "team.idle.yaml": [f"{pack}/rules/team.idle.yaml:10:15: then.recommend: unknown knowledge id 'team.entry' (its "
                           "file in this pack has problems of its own, so it was not loaded)"],
    }


# ---- 5b: the catalogue of one pack ----


def test_rules_docs_of_a_pack_writes_that_packs_pages_only(tmp_path):
    rule = GOOD_RULE.replace("[host.device_idle]", "[host.device_idle, team.entry]")
    pack = _pack(tmp_path / "team", {"team.idle": rule}, manifest="name: team\n")
    result = _advisor("rules", "docs", "-o", str(tmp_path / "out"), "--rules", str(pack))
    assert result.returncode == 0 and result.stdout == f"wrote 3 page(s) to {tmp_path / 'out'}\n", result.stderr
    written = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.md"))
    assert written == ["README.md", "knowledge/team.entry.md", "rules/team.idle.md"]
    page = (tmp_path / "out" / "rules" / "team.idle.md").read_text(encoding="utf-8")
    assert "**[Do it](../knowledge/team.entry.md)**" in page
    assert "(`host.device_idle`, from another pack)" in page and "../knowledge/host.device_idle.md" not in page
    index = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "of the rule pack(s) team" in index and "`host.device_idle`, [team.entry](knowledge/team.entry.md)" in index
    unknown = _advisor("rules", "docs", "-o", str(tmp_path / "other"), "--pack", "nobody")
    assert unknown.returncode == 2
    assert "no rule pack named 'nobody'; the packs loaded: built-in" in unknown.stderr


# ---- 5c: version and requires_advisor ----


def test_a_pack_needing_a_newer_advisor_is_refused_naming_pack_and_versions(tmp_path):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE},
                 manifest='name: team\nversion: "2.0.0"\nrequires_advisor: ">=99.0"\n')
    message = (f"{pack}/pack.yaml:3:1: rule pack 'team' 2.0.0 requires advisor >=99.0, but this is advisor {VERSION}: "
               f"upgrade advisor, or use a version of the pack made for advisor {VERSION}")
    book = load_rulebook([pack], installed=False, skip_broken=True)
    assert "team.idle" not in book.rules and [(s.root, s.problems) for s in book.skipped] == [(str(pack), [message])]
    linted = _advisor("rules", "lint", str(pack))
    assert linted.returncode == 1 and message in linted.stdout.splitlines()
    tested = _advisor("rules", "test", str(pack))
    assert tested.returncode == 2 and message in tested.stderr


def test_a_packs_version_shows_in_the_reports_packs(tmp_path):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE},
                 manifest=f'name: team\nversion: "1.2.0"\nrequires_advisor: ">={VERSION}, <99"\n')
    report = diagnose(FIXTURE, rulebook=load_rulebook([pack], installed=False))
    dumped = report.model_dump(mode="json")["tool"]["packs"]
    assert dumped[1]["version"] == "1.2.0" and "version" not in dumped[0]  # the built-in pack states none


@pytest.mark.parametrize(("manifest", "message"), [
    ("version: 1.10\n", 'version: write the version as text in quotes (version: "1.1"): YAML reads 1.1 as a number, and '
                        "1.10 as 1.1"),
    ('version: "one"\n', "version: 'one' is not a version: numbers and dots, e.g. 1.2.0 (also 1.3.0rc1, 1.2.0.post1)"),
    ('requires_advisor: "0.1"\n', "requires_advisor: '0.1' is not a version requirement: write one or more of >=, >, <=, "
                                  "<, ==, != and a version, separated by commas (e.g. '>=0.1' or '>=0.1, <0.3')"),
    ("versoin: 1\n", "unknown key 'versoin' — did you mean 'version'? (keys: name, description, version, "
                     "requires_advisor, disable)"),
])
def test_pack_yaml_mistakes_are_said_plainly(tmp_path, manifest, message):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE}, manifest=manifest)
    assert lint([pack]).problems == [f"{pack}/pack.yaml:1:1: {message}"]


def test_advisor_version_requirements():
    assert satisfies("0.1.0", ">=0.1") and satisfies("0.1.0", "==0.1") and not satisfies("0.1.0", ">0.1")
    assert satisfies("0.2.5", ">=0.1, <0.3") and not satisfies("0.3.0", ">=0.1, <0.3")
    assert version_key("1.3.0rc1") < version_key("1.3.0") < version_key("1.3.0.post1") < version_key("1.10")
    assert version_key("1.3.0.dev1") < version_key("1.3.0a1")


# ---- 5d: platforms ----


def test_platforms_both_is_refused_listing_the_accepted_values(tmp_path):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE.replace("category: host-dispatch\n",
                                                                   "category: host-dispatch\nplatforms: [both]\n")})
    assert lint([pack]).problems == [
        f"{pack}/rules/team.idle.yaml:4:13: platforms[0]: 'both' is not one of ascend, gpu (a rule or entry for both "
        "platforms lists both: platforms: [ascend, gpu])"]


def test_the_documented_platforms_are_the_accepted_ones():
    """docs/rule-format.md said `platforms: … both`, which loading refused: every `platforms:` the docs and the
    scaffold write lists accepted values, and their comments show the list for both."""
    from advisor.scaffold import _KNOWLEDGE, _RULE

    texts = {"docs/rule-format.md": (ROOT / "docs" / "rule-format.md").read_text(encoding="utf-8"),
             "docs/authoring.md": (ROOT / "docs" / "authoring.md").read_text(encoding="utf-8"),
             "scaffold rule": _RULE, "scaffold knowledge": _KNOWLEDGE}
    for where, text in texts.items():
        for values, comment in re.findall(r"^\s*platforms: \[([^\]]*)\]\s*(#.*)?$", text, re.M):
            assert {v.strip() for v in values.split(",")} <= set(PLATFORMS), where
            assert not comment or "[ascend, gpu]" in comment, (where, comment)
            assert not re.search(r"\bboth\b(?! \()", comment.replace("for both", "")), (where, comment)


# ---- 5e: rules package ----


def test_rules_package_builds_a_wheel_that_installs_the_pack(tmp_path):
    pack = _pack(tmp_path / "team-pack", {"team.idle": TEAM_RULE},
                 manifest='name: team\ndescription: Our budget.\nversion: "1.2.0"\nrequires_advisor: ">=0.1"\n')
    result = _advisor("rules", "package", str(pack), "-o", str(tmp_path / "dist"))
    wheel = tmp_path / "dist" / "advisor_pack_team-1.2.0-py3-none-any.whl"
    assert result.returncode == 0 and result.stdout == f"built {wheel}\n", result.stderr
    archive = zipfile.ZipFile(wheel)
    assert sorted(n for n in archive.namelist() if not n.startswith("advisor_pack_team-1.2.0.dist-info/")) == [
        "advisor_pack_team/__init__.py", "advisor_pack_team/knowledge/team.entry.yaml", "advisor_pack_team/pack.yaml",
        "advisor_pack_team/rules/team.idle.yaml"]
    info = "advisor_pack_team-1.2.0.dist-info/"
    assert archive.read(info + "entry_points.txt").decode().split() == ["[advisor.rule_packs]", "team", "=",
                                                                        "advisor_pack_team"]
    metadata = archive.read(info + "METADATA").decode()
    assert "Name: advisor-pack-team\n" in metadata and "Requires-Dist: ascend-perf-advisor>=0.1\n" in metadata
    assert archive.read("advisor_pack_team/rules/team.idle.yaml").decode() == TEAM_RULE
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    listed = _advisor("rules", "list", "--category", "host-dispatch", env={**_cli_env(), "PYTHONPATH": str(site)})
    assert listed.returncode == 0 and re.search(r"^team\.idle +host-dispatch +team +Idle device$", listed.stdout, re.M)
    docs = _advisor("rules", "docs", "-o", str(tmp_path / "docs"), "--pack", "team",
                    env={**_cli_env(), "PYTHONPATH": str(site)})
    assert docs.returncode == 0 and (tmp_path / "docs" / "rules" / "team.idle.md").is_file()


def test_rules_package_refuses_a_pack_without_a_version_or_with_a_problem(tmp_path):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE}, manifest="name: team\n")
    unversioned = _advisor("rules", "package", str(pack), "-o", str(tmp_path / "dist"))
    assert unversioned.returncode == 2
    assert (f"{pack}/pack.yaml: states no version; give the pack one to package it (version: \"1.0.0\")"
            in unversioned.stderr)
    (pack / "pack.yaml").write_text('name: team\nversion: "1.0.0"\n', encoding="utf-8")
    (pack / "rules" / "team.bad.yaml").write_text(BAD_RULE, encoding="utf-8")
    broken = _advisor("rules", "package", str(pack), "-o", str(tmp_path / "dist"))
    assert broken.returncode == 2 and f"{pack}: not packaged, it has 1 problem(s) (`advisor rules lint {pack}` lists " \
        f"them), first: {pack}/rules/team.bad.yaml:8:41: when: b.free_ratio: unknown operator 'ge'" in broken.stderr
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())


def test_rules_test_runs_a_packs_cases(tmp_path):
    pack = _pack(tmp_path / "team", {"team.idle": TEAM_RULE}, manifest='name: team\nversion: "1.0.0"\n')
    result = _advisor("rules", "test", str(pack))
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "2 passed, 0 failed"


# ---- 6: messages in advisor's words ----


@pytest.mark.parametrize(("change", "message"), [
    (("{gte: 0.2}", "{ge: 0.2}"), f"8:41: when: b.free_ratio: unknown operator 'ge' — did you mean 'gte'? {OPERATORS}"),
    (("{gte: 0.2}", "{'>=': 0.2}"), f"8:41: when: b.free_ratio: unknown operator '>=' — did you mean 'gte'? {OPERATORS}"),
    (("free_ratio: {gte", "free_ratoi: {gte"), "8:28: when: b.free_ratoi: breakdown has no field 'free_ratoi' — did "
                                               "you mean 'free_ratio'? (fields: id, rank, "),
    (("fact: breakdown", "fact: breakdwn"), "6:7: when: b: unknown fact family 'breakdwn' — did you mean 'breakdown'? "
                                            "(known: "),
    (("[host.device_idle]", "[host.device_idel]"), "10:15: then.recommend: unknown knowledge id 'host.device_idel' — "
                                                   "did you mean 'host.device_idle'?"),
    (("  gain_us: b.free_us\n", "  gain_us: b.free_us\n  charged: idle\n"),
     "12:3: then: unknown key 'charged' — did you mean 'charged_to'? (keys: recommend, gain_us, gain_basis, charged_to, "
     "key, assert)"),
    (("category: host-dispatch", "category: host-dispath"), "3:1: category: 'host-dispath' is not one of "),
    (("    expect: quiet\n", "    expect: queit\n"), "19:5: tests[1].expect: 'queit' is not one of fire, quiet — did you "
                                                   "mean 'quiet'?"),
    (("where: {scope: rank, free_ratio: {gte: 0.2}}", "where: {scope: rank, free_ratio: [0.2, 0.3]}"),
     "8:28: when: b.free_ratio: expected {ref: alias.field}, true or false, a number or text, got a list ([0.2, 0.3]) "
     "(for one of several values: {in: [a, b]})"),
    (("explain: {en:", "explain: {fr: x, en:"), "12:11: explain: unknown key 'fr' (keys: en, zh)"),
], ids=["operator", "operator-symbol", "field", "family", "knowledge-id", "key", "category", "expect", "operand-list",
        "language"])
def test_schema_and_catalogue_errors_are_said_in_advisors_words(tmp_path, change, message):
    pack = _pack(tmp_path / "team", {"team.idle": GOOD_RULE.replace(*change)})
    problems = lint([pack]).problems
    path = pack / "rules" / "team.idle.yaml"
    assert len(problems) == 1 and problems[0].startswith(f"{path}:{message}"), problems
    assert not re.search(r"FactCondition|NotCondition|Extra inputs|Input should|Field required", problems[0])


def test_the_category_error_names_every_category(tmp_path):
    from advisor.vocabulary import CATEGORIES

    pack = _pack(tmp_path / "team", {"team.idle": GOOD_RULE.replace("category: host-dispatch", "category: host-dispath")})
    (problem,) = lint([pack]).problems
    assert problem == (f"{pack}/rules/team.idle.yaml:3:1: category: 'host-dispath' is not one of {', '.join(CATEGORIES)}"
                       " — did you mean 'host-dispatch'?")


def test_a_condition_mistake_gives_one_line_not_one_per_union_member(tmp_path):
    """pydantic tries every shape a condition can have (a fact condition, `not`, an `all` group): its errors for the
    shapes the item was not meant as are left out."""
    where = "      where: {scope: rank, free_ratio: {gte: 0.2}}\n"
    rule = GOOD_RULE.replace(where, where + "    - not: {fact: memory, wher: {}}\n")
    pack = _pack(tmp_path / "team", {"team.idle": rule})
    assert lint([pack]).problems == [
        f"{pack}/rules/team.idle.yaml:9:27: when: memory: unknown key 'wher' — did you mean 'where'? (keys: fact, as, "
        "where)"]


# ---- 6: the idle/optimizer bucket ----


def test_every_idle_bucket_is_a_part_the_idle_facts_measure_and_is_documented():
    doc = (ROOT / "docs" / "rule-format.md").read_text(encoding="utf-8")
    for part in CHILD_BUCKETS["idle"]:
        assert f"{part}_us" in IdleFact.model_fields, part
        assert f"`idle/{part}`" in doc, part
        assert bucket_problem(f"idle/{part}") is None
    assert bucket_problem("idle/optimiser") == ("'idle/optimiser': idle has no part 'optimiser' (parts: "
                                                + ", ".join(f"idle/{p}" for p in CHILD_BUCKETS["idle"]) + ")")


def test_a_rule_charged_to_idle_optimizer_loads(tmp_path):
    rule = GOOD_RULE.replace("  gain_us: b.free_us\n", "  gain_us: b.free_us\n  charged_to: idle/optimizer\n")
    book = load_rulebook([_pack(tmp_path / "team", {"team.idle": rule})], installed=False)
    assert book.rules["team.idle"].spec.then.charged_to == "idle/optimizer"
