"""``advisor rules try RULE PATH`` (issue 32, item 2): one rule on one real profile — did it fire, and what finding."""

from __future__ import annotations

from conftest import REAL
from test_cli import advisor


def test_a_rule_that_fires_shows_its_finding_in_both_languages():
    done = advisor("rules", "try", "hccl.buffsize_given_exceeded", str(REAL), "--env", "HCCL_BUFFSIZE=100")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "FIRED 2 time(s)" in out and "✓ largest_tensor_rounds gt 1  (value: 2)" in out
    assert "\nFINDING\n  severity: low\n  key: (none)\n  gain: not estimated\n  ranks: 0, 1\n" in out
    assert "  title (en): A collective carries a tensor larger than the HCCL_BUFFSIZE given" in out
    assert "  title (zh): 集合通信承载的张量大于给定的 HCCL_BUFFSIZE" in out
    assert "Set HCCL_BUFFSIZE=144 (MiB: it holds 151 MB)." in out and "请设置 HCCL_BUFFSIZE=144（单位 MiB：可容纳 151 MB）。" in out


def test_a_rule_that_does_not_fire_says_which_condition_stopped_it():
    done = advisor("rules", "try", "hccl.buffsize_exceeded", str(REAL))
    assert done.returncode == 0, done.stderr
    assert "DID NOT FIRE" in done.stdout and "FINDING" not in done.stdout
    assert "largest_tensor_rounds gt 1" in done.stdout


def test_a_measured_gain_and_the_findings_it_shares_time_with_are_shown():
    done = advisor("rules", "try", "host.device_idle", str(REAL))
    assert done.returncode == 0, done.stderr
    gain = next(line for line in done.stdout.splitlines() if line.startswith("  gain: "))
    assert "µs per step (assumed)" in gain or "µs per step (measured)" in gain


def test_unknown_rule_and_bad_env_are_clear_errors():
    done = advisor("rules", "try", "hccl.no_such_rule", str(REAL))
    assert done.returncode != 0 and "hccl.no_such_rule" in done.stderr and "Traceback" not in done.stderr
    done = advisor("rules", "try", "hccl.buffsize_exceeded", str(REAL), "--env", "NOEQUALS")
    assert done.returncode != 0 and "NOEQUALS" in done.stderr and "Traceback" not in done.stderr


def test_explain_says_a_variable_is_not_in_the_profile_instead_of_showing_another():
    """Issue 32, item 3: explain showed 'e = environment:ACLNN_CACHE_LIMIT … name eq HCCL_ALGO (value:
    ACLNN_CACHE_LIMIT)' — the nearest unrelated variable — for a variable the profiler does not record."""
    done = advisor("explain", "hccl.forced_algorithm", str(REAL))
    assert "✗ e (environment): no variable HCCL_ALGO in this profile" in done.stdout
    assert "pass --env HCCL_ALGO=VALUE" in done.stdout and "ACLNN_CACHE_LIMIT" not in done.stdout
    given = advisor("explain", "hccl.forced_algorithm", str(REAL), "--env", "HCCL_ALGO=")
    assert "e = environment:HCCL_ALGO" in given.stdout and "✗ is_set eq True  (value: False)" in given.stdout


def test_facts_as_test_case_writes_a_case_that_rules_test_passes(tmp_path):
    """Issue 32, item 3: `advisor facts PATH --as-test-case RULE` — real facts as a test case, which a pack's own
    `rules test` runs as written, for a rule that fires and for one that does not."""
    import shutil

    import yaml

    pack = tmp_path / "pack"
    for rule_id, folder, expect in (("host.device_idle", "host-dispatch", "fire"), ("io.slow_dataloader", "io", "quiet")):
        done = advisor("facts", str(REAL), "--as-test-case", rule_id)
        assert done.returncode == 0, done.stderr
        (case,) = yaml.safe_load(done.stdout)
        assert case["expect"] == expect and case["name"] == f"{rule_id} on {REAL.name}"
        assert all("id" not in fact and "sources" not in fact for fact in case["facts"])
        source = next((REAL.parent.parent.parent / "rules").rglob(f"{rule_id}.yaml"))
        rule = yaml.safe_load(source.read_text(encoding="utf-8"))
        rule["id"] = f"team.{rule_id.replace('.', '_')}"
        rule["tests"] = [case]
        (pack / "rules" / folder).mkdir(parents=True, exist_ok=True)
        (pack / "rules" / folder / f"{rule['id']}.yaml").write_text(yaml.safe_dump(rule, allow_unicode=True, sort_keys=False))
    shutil.copytree(REAL.parent.parent.parent / "knowledge", pack / "knowledge")
    (pack / "pack.yaml").write_text("name: team\n")
    done = advisor("rules", "test", str(pack))
    assert "2 passed, 0 failed" in done.stdout, done.stdout + done.stderr
