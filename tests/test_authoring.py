"""Rule authoring: docs/authoring.md runs as written, lint catches every error class, packs load safely."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.diagnose import diagnose
from advisor.ingest.kept import API_OPS
from advisor.lint import lint
from advisor.rulebook import load_rulebook
from advisor.ruledocs import rule_docs

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "ascend-level1-2ranks"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def _cli_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "LC_ALL": "C.UTF-8",
            "COLUMNS": "200"}


def _check_output(command: str, expected: list[str], result: subprocess.CompletedProcess) -> None:
    output = (result.stdout + result.stderr).splitlines()
    exit_code = next((int(m.group(1)) for line in expected if (m := re.fullmatch(r"\[exit (\d+)\]", line))), 0)
    assert result.returncode == exit_code, f"$ {command}\nexit {result.returncode}, expected {exit_code}\n" + "\n".join(output)
    position = 0
    for line in expected:
        if line == "..." or line.startswith("[exit"):
            continue
        found = next((i for i in range(position, len(output)) if _line_matches(line, output[i])), None)
        assert found is not None, f"$ {command}\nexpected line not found (in order): {line!r}\n" + "\n".join(output)
        position = found + 1


def _line_matches(expected: str, actual: str) -> bool:
    """A substring match, where '…' inside an expected line stands for any text (counts that change)."""
    if "…" not in expected:
        return expected in actual
    return re.search(".*".join(re.escape(part) for part in expected.split("…")), actual) is not None


def test_the_authoring_walkthrough_runs_as_written(tmp_path):
    """Every file in docs/authoring.md is written and every console command runs with the output shown."""
    (tmp_path / "tests" / "fixtures").mkdir(parents=True)
    (tmp_path / "tests" / "fixtures" / FIXTURE.name).symlink_to(FIXTURE)
    commands = 0
    for language, body in _BLOCK.findall((ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")):
        if language == "yaml" and body.startswith("# file: "):
            header, content = body.split("\n", 1)
            target = tmp_path / header.removeprefix("# file: ").strip()
            target.write_text(content, encoding="utf-8")
        elif language == "console":
            for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
                command, *expected = chunk.rstrip("\n").split("\n")
                result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=_cli_env(), capture_output=True,
                                        text=True, timeout=120)
                _check_output(command, [line.strip() for line in expected if line.strip()], result)
                commands += 1
    assert commands >= 10


# ---- lint: one test per error class ----

GOOD_RULE = """\
id: team.idle
title: {en: Idle device, zh: 设备空闲}
category: host-dispatch
when:
  all:
    - fact: breakdown
      as: b
      where: {scope: rank, free_ratio: {gte: 0.2}}
then:
  recommend: [host.device_idle]
  gain_us: b.free_us
explain: {en: "idle {b.free_ratio:.0%}", zh: "空闲 {b.free_ratio:.0%}"}
tests:
  - name: fires
    facts: [{fact: breakdown, scope: rank, rank: 0, free_us: 300.0, free_ratio: 0.3}]
    expect: fire
  - name: quiet
    facts: [{fact: breakdown, scope: rank, rank: 0, free_us: 10.0, free_ratio: 0.01}]
    expect: quiet
"""

GOOD_KNOWLEDGE = """\
id: team.entry
title: {en: Do it, zh: 这样做}
category: host-dispatch
problem: {en: Slow., zh: 慢。}
actions: [{en: Act., zh: 行动。}]
gain: {model: {en: All of it., zh: 全部。}}
"""


def _pack(tmp_path: Path, rule: str = GOOD_RULE, knowledge: str | None = None, manifest: str | None = None,
          rule_id: str = "team.idle") -> Path:
    pack = tmp_path / "pack"
    (pack / "rules").mkdir(parents=True, exist_ok=True)
    (pack / "rules" / f"{rule_id}.yaml").write_text(rule, encoding="utf-8")
    if knowledge is not None:
        (pack / "knowledge").mkdir(exist_ok=True)
        (pack / "knowledge" / "team.entry.yaml").write_text(knowledge, encoding="utf-8")
    if manifest is not None:
        (pack / "pack.yaml").write_text(manifest, encoding="utf-8")
    return pack


def test_a_good_pack_lints_clean(tmp_path):
    result = lint([_pack(tmp_path, knowledge=GOOD_KNOWLEDGE)])
    assert result.problems == [] and result.rules == 1 and result.knowledge == 1


@pytest.mark.parametrize(
    ("change", "message", "line"),
    [
        (("category: host-dispatch", "category: hosting"), "category: 'hosting' is not one of parallel-strategy, io,", 3),
        (("fact: breakdown", "fact: breakdowns"), "unknown fact family 'breakdowns'", 6),
        (("free_ratio: {gte", "free_share: {gte"), "breakdown has no field 'free_share'", 8),
        (("{scope: rank,", "{scope: {matches: '^rank'},"), "uses the anchor '^'", 8),
        (("gte: 0.2", "gt: 1"), "can never be true", 8),
        (("[host.device_idle]", "[team.nothing]"), "then.recommend: unknown knowledge id 'team.nothing'", 10),
        (("  - name: quiet\n", "  - name: quiet too\n"), None, None),
        (("    expect: quiet\n", "    expect: fire\n"), "no test case with 'expect: quiet'", 14),
        (("    expect: fire\n", "    expect: quiet\n"), "no test case with 'expect: fire'", 14),
        (("title: {en: Idle device, zh: 设备空闲}", "title: Idle device"), "title has no Chinese text", 2),
        (("free_us: 300.0,", "free_us: -3.0,"), "test 'fires': breakdown.free_us: Input should be greater than or equal to 0", 15),
        (("id: team.idle", "id: team.idle\nid: again"), "duplicate key 'id' (also on line 1)", 2),
        (("id: team.idle", "id: !!python/object/apply:os.system ['true']"), "invalid YAML", 1),
    ],
    ids=["schema", "family", "field", "regex", "never-true", "knowledge-id", "control", "no-quiet", "no-fire",
         "language", "case-fact", "duplicate-key", "yaml-tag"],
)
def test_lint_catches_each_error_class(tmp_path, change, message, line):
    pack = _pack(tmp_path, GOOD_RULE.replace(*change))
    problems = lint([pack]).problems
    if message is None:
        assert problems == []
        return
    path = pack / "rules" / "team.idle.yaml"
    assert any(message in p and p.startswith(f"{path}:{line}:") for p in problems), problems


def test_lint_warns_of_an_api_name_a_platform_never_keeps(tmp_path):
    """The readers keep the framework's ops (ingest.kept): a PyTorch trace every aten:: op, the Ascend readers torch_npu's
    npu:: ops too. A rule on npu::npu_fusion_attention can fire on Ascend profiles but never on GPU traces, and lint says
    so for gpu only."""
    both = "category: host-dispatch\nplatforms: [ascend, gpu]\n"
    rule = GOOD_RULE.replace("category: host-dispatch\n", both).replace("[host.device_idle]", "[team.entry]").replace(
        "      where: {scope: rank, free_ratio: {gte: 0.2}}\n",
        "      where: {scope: rank, free_ratio: {gte: 0.2}}\n    - fact: api\n      where: {name: npu::npu_fusion_attention}\n")
    knowledge = GOOD_KNOWLEDGE.replace("category: host-dispatch\n", both)
    pack = _pack(tmp_path, rule, knowledge)
    problems = lint([pack]).problems
    path = pack / "rules" / "team.idle.yaml"
    assert [p for p in problems if "npu_fusion_attention" in p] == [
        f"{path}:11:21: api name 'npu::npu_fusion_attention' is never kept by the gpu readers, so this condition never "
        f"holds there (they keep {API_OPS['gpu'].pattern})"]
    assert not lint([_pack(tmp_path / "kept", rule.replace("npu::npu_fusion_attention", "aten::item"), knowledge)]).problems


def test_lint_catches_duplicate_ids_missing_languages_and_unknown_disables(tmp_path):
    pack = _pack(tmp_path, knowledge=GOOD_KNOWLEDGE.replace("zh: 慢。", "zh2: 慢。"), manifest="disable: [no.such_rule]\n")
    (pack / "rules" / "copy").mkdir()
    (pack / "rules" / "copy" / "team.idle.yaml").write_text(GOOD_RULE, encoding="utf-8")
    problems = "\n".join(lint([pack]).problems)
    assert "duplicate rule id 'team.idle'" in problems
    assert "knowledge/team.entry.yaml:4:1: problem: 'zh' is required (every text here is given in English and Chinese" in problems
    assert "disables unknown rule id(s) no.such_rule" in problems


def test_lint_of_one_file_reports_only_that_file(tmp_path):
    pack = _pack(tmp_path, GOOD_RULE.replace("title: {en: Idle device, zh: 设备空闲}", "title: Idle"),
                 knowledge=GOOD_KNOWLEDGE.replace("Do it", "TODO"))
    assert len(lint([pack]).problems) == 2
    only = lint([pack / "knowledge" / "team.entry.yaml"]).problems
    assert len(only) == 1 and "title is unfinished" in only[0]


def test_lint_cli_exit_codes(tmp_path):
    pack = _pack(tmp_path, GOOD_RULE.replace("fact: breakdown", "fact: nothing"))
    bad = subprocess.run(["advisor", "rules", "lint", str(pack)], env=_cli_env(), capture_output=True, text=True)
    assert bad.returncode == 1 and "unknown fact family 'nothing'" in bad.stdout
    builtin = subprocess.run(["advisor", "rules", "lint"], env=_cli_env(), capture_output=True, text=True)
    assert builtin.returncode == 0 and builtin.stdout.startswith("0 problem(s)")


# ---- packs: override, disable, broken, installed ----


def test_a_pack_overrides_and_disables_built_in_rules(tmp_path):
    override = (ROOT / "rules" / "host-dispatch" / "host.device_idle.yaml").read_text(encoding="utf-8")
    override = override.replace("{gte: 0.1}", "{gte: 0.5}")
    pack = _pack(tmp_path, override, manifest="name: team\ndisable: [host.item_reads]\n", rule_id="host.device_idle")
    book = load_rulebook([pack], installed=False)
    assert "host.item_reads" not in book.rules and book.rules["host.device_idle"].pack == "team"
    report = diagnose(FIXTURE, rulebook=book)
    ids = {f.id for f in report.findings}
    assert "host.item_reads" not in ids and "host.device_idle" not in ids  # 20 % free < the team's 50 %
    assert report.tool.packs[1].model_dump() == {
        "name": "team", "path": str(pack), "rules": 1, "knowledge": 0,
        "overrides": ["host.device_idle"], "disabled": ["host.item_reads"],
    }
    assert "host.item_reads" in {f.id for f in diagnose(FIXTURE).findings}


def test_a_broken_pack_is_skipped_with_a_message_and_a_partial_exit(tmp_path):
    """A problem of the pack as a whole (its pack.yaml) leaves the pack out; a broken rule only that rule
    (tests/test_packs.py)."""
    pack = _pack(tmp_path, GOOD_RULE, manifest="name: [unclosed\n")
    result = subprocess.run(["advisor", "diagnose", str(FIXTURE), "--rules", str(pack), "-f", "json"],
                            env=_cli_env(), capture_output=True, text=True)
    assert result.returncode == 3, result.stderr
    assert f"skipped {pack}: rule pack not loaded" in result.stderr and "pack.yaml:2:1: invalid YAML" in result.stderr
    assert "Traceback" not in result.stderr
    import json

    report = json.loads(result.stdout)
    assert report["status"] == "partial" and report["findings"]  # the built-in rules still ran
    assert report["coverage"]["skipped"][-1]["file"] == str(pack)


def test_an_installed_pack_loads_through_its_entry_point_without_running_code(tmp_path, monkeypatch):
    site = tmp_path / "site"
    package = site / "team_pack"
    (package / "pack" / "rules").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('a pack must not be imported')\n")
    (package / "pack" / "rules" / "team.idle.yaml").write_text(GOOD_RULE, encoding="utf-8")
    dist = site / "team_pack-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: team-pack\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[advisor.rule_packs]\nteam = team_pack.pack\n")
    monkeypatch.syspath_prepend(str(site))
    book = load_rulebook()
    assert book.rules["team.idle"].pack == "pack" and [p.name for p in book.packs] == ["built-in", "pack"]
    result = subprocess.run(["advisor", "rules", "list", "--category", "host-dispatch"], capture_output=True, text=True,
                            env={**_cli_env(), "PYTHONPATH": str(site)})
    assert result.returncode == 0 and re.search(r"^team\.idle +host-dispatch +pack +Idle device$", result.stdout, re.M)


# ---- explain ----


def test_the_python_evaluation_agrees_with_the_engine_on_every_rule():
    """explain_rule finds a satisfying binding exactly for the rules the engine fired on the fixture."""
    from advisor.diagnose import analyse, default_rulebook
    from advisor.engine.evaluate import explain_rule

    book = default_rulebook()
    analysis = analyse(FIXTURE, book)
    fired = {f.rule_id for f in analysis.firings}
    for rule in book.rules.values():
        if analysis.profile.platform not in rule.spec.platforms:
            continue
        holds = any(group.holds for group in explain_rule(rule.spec, analysis.all_facts))
        assert holds == (rule.id in fired), rule.id


def test_every_finding_explains_its_conditions_with_values_and_sources():
    report = diagnose(FIXTURE)
    for finding in report.findings:
        assert finding.trace.conditions, finding.id
        for condition in finding.trace.conditions:
            assert condition.negated or (condition.fact in finding.trace.facts and condition.sources)
            assert all(check.holds for check in condition.checks), finding.id
    reads = next(f for f in report.findings if f.id == "host.item_reads")
    assert any(c.test == "item_sync_calls_per_step gte 1" and c.actual == 5.0 for c in reads.trace.conditions[0].checks)


def test_explain_says_which_condition_failed_and_the_value(tmp_path):
    result = subprocess.run(["advisor", "explain", "memory.near_capacity", str(FIXTURE)], env=_cli_env(),
                            capture_output=True, text=True)
    assert result.returncode == 0
    assert "DID NOT FIRE" in result.stdout and "✗ peak_share_of_capacity gte 0.9  (value: unknown)" in result.stdout
    unknown = subprocess.run(["advisor", "explain", "memory.near_capacty", str(FIXTURE)], env=_cli_env(),
                             capture_output=True, text=True)
    assert unknown.returncode == 2 and "did you mean memory.near_capacity" in unknown.stderr


def test_diagnose_explain_shows_conditions_in_the_terminal():
    result = subprocess.run(["advisor", "diagnose", str(FIXTURE), "--explain"], env=_cli_env(), capture_output=True, text=True)
    assert "Why it fired: host.item_reads (built-in" in result.stdout
    assert "✓ item_sync_calls_per_step gte 1  (5.00)" in result.stdout


# ---- show, list, docs ----


def test_rules_show_prints_conditions_recommendation_and_cases():
    result = subprocess.run(["advisor", "rules", "show", "host.online_compilation"], env=_cli_env(), capture_output=True, text=True)
    assert result.returncode == 0
    for expected in ("category: host-dispatch", "compile_calls_per_step: {gte: 1}", "recommends host.online_compilation",
                     "1. At the top of the entry script", "quiet quiet on the real job"):
        assert expected in result.stdout


def test_the_committed_rule_catalogue_is_current():
    expected = rule_docs(load_rulebook(installed=False))
    docs = ROOT / "docs" / "rules"
    committed = {p.relative_to(docs).as_posix(): p.read_text(encoding="utf-8") for p in docs.rglob("*.md")}
    assert committed.keys() == expected.keys(), "run `make docs`"
    for name, text in expected.items():
        assert committed[name] == text, f"docs/rules/{name} is out of date; run `make docs`"


def test_scaffold_refuses_bad_ids_categories_and_overwrites(tmp_path):
    from advisor.errors import InputError
    from advisor.scaffold import scaffold

    scaffold("team.one", "io", tmp_path)
    with pytest.raises(InputError, match="already exists"):
        scaffold("team.one", "io", tmp_path)
    with pytest.raises(InputError, match="is not a rule id"):
        scaffold("Team One", "io", tmp_path)
    with pytest.raises(InputError, match="unknown category 'disk'"):
        scaffold("team.two", "disk", tmp_path)


SELF_NEGATING_RULE = """\
id: team.unfused_optimizer
title: {en: Optimizer not fused, zh: 优化器未融合}
category: fused-optimizer
severity: medium
severity_reason: A team rule of thumb.
description: {en: Many optimizer kernels and no foreach kernels., zh: 优化器 kernel 多且没有 foreach kernel。}
when:
  all:
    - fact: host
      as: h
      where: {optimizer_kernels_per_step: {gt: 50}}
    - not:
        fact: host
        where: {optimizer_foreach_kernels_per_step: {gt: 0}}
then:
  recommend: [optimizer.fused_optimizer]
  gain_us: 0
explain: {en: "{h.optimizer_kernels_per_step} optimizer kernels per step", zh: "每步 {h.optimizer_kernels_per_step} 个优化器 kernel"}
tests:
  - name: fires without foreach kernels
    facts:
      - {fact: host, rank: 0, steps: 1, compile_calls_per_step: 0, compile_us_per_step: 0, sync_calls_per_step: 0,
         sync_us_per_step: 0, launch_calls_per_step: 0, gc_calls_per_step: 0, gc_us_per_step: 0,
         optimizer_us_per_step: 0, sync_batch_norm_calls_per_step: 0, optimizer_kernels_per_step: 58,
         optimizer_foreach_kernels_per_step: 0}
    expect: fire
  - name: quiet when the same rank runs foreach kernels
    facts:
      - {fact: host, rank: 0, steps: 1, compile_calls_per_step: 0, compile_us_per_step: 0, sync_calls_per_step: 0,
         sync_us_per_step: 0, launch_calls_per_step: 0, gc_calls_per_step: 0, gc_us_per_step: 0,
         optimizer_us_per_step: 0, sync_batch_norm_calls_per_step: 0, optimizer_kernels_per_step: 58,
         optimizer_foreach_kernels_per_step: 4}
    expect: quiet
"""


def test_a_rule_that_negates_the_family_it_matches_behaves_as_written(tmp_path):
    """Issue 32's acceptance: durable-rules fired this rule against its own negation — its quiet case failed, and on
    the real Level1 capture's rank 0 (58 optimizer kernels, 4 foreach kernels per step) it reported a finding."""
    from advisor.ruletests import run_rule_tests

    pack = _pack(tmp_path, SELF_NEGATING_RULE, rule_id="team.unfused_optimizer")
    assert lint([pack]).problems == []
    book = load_rulebook([pack], installed=False)
    results = run_rule_tests(book, packs={"pack"})
    assert [(r.name, r.passed) for r in results] == [("fires without foreach kernels", True),
                                                      ("quiet when the same rank runs foreach kernels", True)]
    rank0 = next(FIXTURE.glob("*_ascend_pt"))
    report = diagnose(rank0, rulebook=book)
    host = next(f for f in report.facts if f["id"] == "host:r0")
    assert (host["optimizer_kernels_per_step"], host["optimizer_foreach_kernels_per_step"]) == (58.0, 4.0)
    assert "team.unfused_optimizer" not in {f.id for f in report.findings}


FULL_BREAKDOWN = ("{fact: breakdown, scope: rank, rank: 0, steps: 1, step_time_us: 1000.0, compute_us: 600.0, "
                  "comm_not_overlapped_us: 100.0, free_us: 300.0, free_ratio: 0.3, compute_ratio: 0.6, "
                  "communication_ratio: 0.1, dominant_overhead: free}")


def _with_finding(finding: str) -> str:
    return (GOOD_RULE.replace("[{fact: breakdown, scope: rank, rank: 0, free_us: 300.0, free_ratio: 0.3}]",
                              f"[{FULL_BREAKDOWN}]")
            .replace("    expect: fire\n", f"    expect: fire\n    finding: {finding}\n", 1))


@pytest.mark.parametrize(("finding", "mismatch"), [
    ("{gain_us: 300, severity: high, key: null, explanation: {en: {contains: 'idle 30%'}, zh: {equals: '空闲 30%'}}}",
     None),
    ("{gain_us: 1350}", "has a gain of 300.0 µs, not 1,350.0 µs (± 1%)"),  # issue 32: passed when the gain was off
    ("{gain_us: 310, gain_tolerance: 0.05}", None),
    ("{gain_us: unknown}", "has a gain of 300.0 µs, not 'unknown'"),
    ("{severity: low}", "has severity 'high', not 'low'"),
    ("{key: rank 0}", "has key None, not 'rank 0'"),
    ("{title: {zh: {contains: 空闲}}, explanation: {en: {equals: 'idle 30% of the step'}}}",
     "explanation (en) is not 'idle 30% of the step': 'idle 30%'"),
])
def test_a_case_checks_the_gain_severity_key_and_texts_of_its_finding(tmp_path, finding, mismatch):
    from advisor.ruletests import run_rule_tests

    book = load_rulebook([_pack(tmp_path, _with_finding(finding))], installed=False)
    fired = next(r for r in run_rule_tests(book, packs={"pack"}) if r.expect == "fire")
    assert fired.passed == (mismatch is None), fired.detail
    assert mismatch is None or mismatch in fired.detail


@pytest.mark.parametrize(("finding", "message"), [
    ("{gain: 300}", "tests[0].finding: unknown key 'gain' — did you mean 'gain_us'?"),
    ("{title: {en: {contains: a, equals: b}}}", "give exactly one of 'contains' or 'equals'"),
    ("{severity: urgent}", "finding.severity"),
])
def test_a_malformed_finding_expectation_is_a_lint_error(tmp_path, finding, message):
    problems = lint([_pack(tmp_path, _with_finding(finding))]).problems
    assert any(message in p for p in problems), problems


def test_a_quiet_case_cannot_expect_a_finding(tmp_path):
    rule = GOOD_RULE.replace("    expect: quiet\n", "    expect: quiet\n    finding: {gain_us: 1}\n")
    assert any("it needs 'expect: fire'" in p for p in lint([_pack(tmp_path, rule)]).problems)


def test_a_case_whose_facts_cannot_size_the_finding_names_the_fields_to_give(tmp_path):
    from advisor.ruletests import run_rule_tests

    rule = GOOD_RULE.replace("    expect: fire\n", "    expect: fire\n    finding: {gain_us: 300}\n", 1)
    book = load_rulebook([_pack(tmp_path, rule)], installed=False)
    fired = next(r for r in run_rule_tests(book, packs={"pack"}) if r.expect == "fire")
    assert not fired.passed and "so give breakdown: step_time_us, compute_us" in fired.detail
