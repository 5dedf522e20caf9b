"""Prescription preconditions are checked against the profile and --context: met, unmet, or what to check."""

from __future__ import annotations

from advisor.gates import Known, check_preconditions, version_key
from advisor.knowledge import AppliesTo


def test_versions_order_release_candidates_before_releases():
    assert version_key("8.0.RC2") < version_key("8.0.0") < version_key("8.3.RC1") < version_key("8.3.0")
    assert version_key("2.1") < version_key("2.7.1") and version_key("7.0.RC1") < version_key("8.0.RC2")
    assert version_key("8.3.RC1.alpha001") < version_key("8.3.RC1")


def test_each_kind_of_precondition():
    applies = AppliesTo(hardware=["Atlas A3"], frameworks=["torch_npu"], versions={"CANN": ">=8.0.RC2"},
                        modes=["TorchAir max-autotune"])
    known = Known(hardware="Atlas A2/A3 (Ascend 910B/910C)", format="ascend-pytorch",
                  versions={"cann": "8.3.RC1", "torch_npu": "2.7.1"})
    statuses = {c.requirement: (c.status, c.detail) for c in check_preconditions(applies, known)}
    assert statuses["Atlas A3"][0] == "unknown" and "pass --context chip" in statuses["Atlas A3"][1]
    assert statuses["torch_npu"] == ("met", "profile format: ascend-pytorch")
    assert statuses["CANN >=8.0.RC2"] == ("met", "CANN 8.3.RC1")
    assert statuses["TorchAir max-autotune"][0] == "unknown"
    told = Known(chip="Atlas A2", format="ascend-mindspore", versions={"cann": "7.0.RC1"}, execution_mode="torchair-max-autotune")
    statuses = {c.requirement: c.status for c in check_preconditions(applies, told)}
    assert statuses == {"Atlas A3": "unmet", "torch_npu": "unmet", "CANN >=8.0.RC2": "unmet", "TorchAir max-autotune": "met"}
    assert check_preconditions(AppliesTo(versions={"CANN": ">=8.0.RC2"}), Known())[0].status == "unknown"


def test_findings_carry_the_checked_preconditions(tmp_path):
    from builders import Kernel, RankSpec, StepRow, build_rank

    from advisor.diagnose import diagnose

    kernels = [Kernel(s, n, t, c, d, shapes=sh) for s in (5, 6) for n, t, c, d, sh in [
        ("MatMulV2_out", "MatMulV2", "AI_CORE", 803.0, "4096,3072;3072,8192"),
        ("hcom_allReduce__1", "hcom_allReduce_", "COMMUNICATION", 1071.0, "4096,8192")]]
    build_rank(tmp_path, RankSpec(steps=[StepRow(s, 803.0, 1071.0, 150.0) for s in (5, 6)], kernels=kernels,
                                  syncs_per_step=0, dataloader_us=50.0, comm_size_mb=64.0))  # the AllReduce carries the 64 MiB output
    report = diagnose(tmp_path)
    mc2 = next(f for f in report.findings if f.id == "mc2.matmul_all_reduce").prescriptions[0]
    assert {c.requirement: c.status for c in mc2.preconditions} == {
        "Atlas A2, Atlas A3": "met", "torch_npu": "met", "CANN >=8.0.RC2": "met"}


def test_the_gpu_generation_picks_the_mixed_precision_prescription():
    from advisor.findings import applicable
    from advisor.rulebook import load_rulebook

    knowledge = load_rulebook(installed=False).knowledge
    both = [knowledge["gpu.amp"], knowledge["gpu.amp_fp16"]]
    chosen = {cc: [e.id for e in applicable(both, Known(compute_capability=cc))] for cc in ("7.0", "7.5", "8.0", "9.0", None)}
    assert chosen == {"7.0": ["gpu.amp_fp16"], "7.5": ["gpu.amp_fp16"], "8.0": ["gpu.amp"], "9.0": ["gpu.amp"],
                      None: ["gpu.amp", "gpu.amp_fp16"]}  # unknown: both, each with its check to make
    (check,) = check_preconditions(AppliesTo(compute_capability=">=8.0"), Known(compute_capability=None))
    assert check.status == "unknown" and "nvidia-smi" in check.detail
    # an unmet version is no reason to leave a prescription out: an upgrade meets it
    versioned = knowledge["gpu.amp"].model_copy(update={"applies_to": AppliesTo(versions={"torch": ">=9.0"})})
    kept = applicable([versioned, knowledge["gpu.amp_fp16"]], Known(versions={"torch": "2.5"}, compute_capability="7.0"))
    assert [e.id for e in kept] == ["gpu.amp", "gpu.amp_fp16"]
