"""Check a prescription's preconditions (applies_to) against what the profile and --context say, and its
presuppositions (presupposes) against the facts.

Each requirement is *met*, *unmet* or *unknown*; unknown says what to check instead of guessing. The
chip comes from the DB export's NPU_INFO, else from --context ``chip``, else from the profile's PMU columns (which
cannot tell Atlas A2 from A3); versions from profiler_info (CANN, torch_npu); the framework from the export format;
the execution mode from --context ``execution_mode``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from advisor.engine.evaluate import holds
from advisor.engine.spec import FactCondition
from advisor.facts.models import Fact
from advisor.knowledge import AppliesTo, Presupposition
from advisor.text import Text

Status = Literal["met", "unmet", "unknown"]
_FRAMEWORK_OF_FORMAT = {"ascend-pytorch": {"torch_npu", "pytorch"}, "ascend-mindspore": {"mindspore"},
                        "pytorch-kineto": {"pytorch"}}
_MODES = {
    "eager": "eager",
    "torch-compile": "torch.compile",
    "torchair-reduce-overhead": "torchair reduce-overhead",
    "torchair-max-autotune": "torchair max-autotune",
    "ge-graph": "ge graph",
}
_RANGE = re.compile(r"^\s*(>=|<=|==|>|<)?\s*(\S+)\s*$")


@dataclass(frozen=True)
class Known:
    """What is known about the job: the inputs of every check."""

    chip: str | None = None
    chip_source: str = "--context chip"  # or the profile's NPU_INFO (DB export)
    hardware: str | None = None
    format: str | None = None
    versions: dict[str, str | None] | None = None
    execution_mode: str | None = None
    compute_capability: str | None = None  # a GPU's, e.g. "7.0"


@dataclass(frozen=True)
class Check:
    requirement: str
    status: Status
    detail: str
    kind: Literal["hardware", "framework", "version", "mode"] = "version"


def check_preconditions(applies: AppliesTo, known: Known) -> list[Check]:
    """One check per stated precondition (hardware, framework, version range, mode)."""
    checks: list[Check] = []
    if applies.hardware:
        checks.append(_hardware(applies.hardware, known))
    if applies.compute_capability:
        checks.append(_compute_capability(applies.compute_capability, known))
    if applies.frameworks:
        checks.append(_framework(applies.frameworks, known))
    for component, requirement in applies.versions.items():
        checks.append(_version(component, requirement, (known.versions or {}).get(component.lower())))
    for mode in applies.modes:
        checks.append(_mode(mode, known))
    return checks


def _hardware(required: list[str], known: Known) -> Check:
    wanted = ", ".join(required)
    if known.chip and known.chip != "other":
        met = known.chip in required
        return Check(wanted, "met" if met else "unmet", f"{known.chip_source}: {known.chip}", "hardware")
    if not known.hardware:
        return Check(wanted, "unknown", "the profile does not show the chip; pass --context chip", "hardware")
    families = set(re.findall(r"A\d", known.hardware))
    allowed = {family for name in required for family in re.findall(r"A\d", name)}
    if families and families <= allowed:
        return Check(wanted, "met", f"profile: {known.hardware}", "hardware")
    if families and not families & allowed:
        return Check(wanted, "unmet", f"profile: {known.hardware}", "hardware")
    return Check(wanted, "unknown", f"profile: {known.hardware}; check which one it is, or pass --context chip", "hardware")


def _compute_capability(requirement: str, known: Known) -> Check:
    """A GPU's CUDA compute capability against a range such as '>=8.0' (the trace's deviceProperties)."""
    check = _version("compute capability", requirement, known.compute_capability)
    if check.status == "unknown" and known.compute_capability is None:
        return Check(check.requirement, "unknown", "the trace does not record the GPU's compute capability; check it "
                                                   "(nvidia-smi --query-gpu=compute_cap --format=csv)", "hardware")
    gpu = f"{known.hardware} ({check.detail})" if known.hardware else check.detail
    return Check(check.requirement, check.status, gpu, "hardware")


def _framework(required: list[str], known: Known) -> Check:
    wanted = ", ".join(required)
    required_lower = {name.lower() for name in required}
    frameworks = _FRAMEWORK_OF_FORMAT.get(known.format or "")
    if frameworks is None or not required_lower & {"torch_npu", "pytorch", "mindspore"}:
        return Check(wanted, "unknown", f"check that the job uses {wanted}", "framework")
    met = bool(required_lower & frameworks)
    return Check(wanted, "met" if met else "unmet", f"profile format: {known.format}", "framework")


def _version(component: str, requirement: str, actual: str | None) -> Check:
    wanted = f"{component} {requirement}"
    match = _RANGE.match(requirement)
    if actual is None:
        return Check(wanted, "unknown", f"the profile does not record the {component} version; check it")
    if match is None:
        return Check(wanted, "unknown", f"{component} {actual}")
    op, bound = match.group(1) or "==", match.group(2)
    left, right = version_key(actual), version_key(bound)
    met = {">=": left >= right, "<=": left <= right, ">": left > right, "<": left < right, "==": left == right}[op]
    return Check(wanted, "met" if met else "unmet", f"{component} {actual}")


def _mode(mode: str, known: Known) -> Check:
    if known.execution_mode is None:
        return Check(mode, "unknown", "the profile does not show the execution mode; pass --context execution_mode", "mode")
    shown = _MODES.get(known.execution_mode, known.execution_mode)
    if not any(word in mode.lower() for word in ("eager", "compile", "torchair", "ge graph", "autotune", "overhead")):
        return Check(mode, "unknown", f"execution mode {shown}; check it", "mode")
    return Check(mode, "met" if shown in mode.lower() else "unmet", f"--context execution_mode: {known.execution_mode}",
                 "mode")


def version_key(text: str) -> tuple:
    """An orderable key for versions like 2.7.1, 8.0.RC2, 8.3.RC1.alpha001: a release candidate sorts before its release."""
    key: list[tuple[int, int]] = []
    for token in re.findall(r"\d+|[A-Za-z]+\d*", text):
        if token.isdigit():
            key.append((1, int(token)))
        else:
            number = re.search(r"\d+", token)
            rank = {"rc": -1, "beta": -2, "alpha": -3}.get(re.sub(r"\d", "", token).lower(), -4)
            key.append((0, rank * 1000 + (int(number.group()) if number else 0)))
    return (*key, (0, 0))  # the end sorts after any pre-release suffix and before any further number


PresumedStatus = Literal["met", "contradicted", "unknown"]


@dataclass(frozen=True)
class Presumed:
    """A presupposition of a prescription (or action) checked against the facts of the ranks a finding is about."""

    requirement: Text
    status: PresumedStatus
    detail: str


def check_presuppositions(presuppositions: Sequence[Presupposition], facts: Mapping[str, Sequence[Fact]],
                          ranks: Sequence[int]) -> list[Presumed]:
    """Each presupposition against ``facts`` (by family): contradicted when, for every rank of ``ranks`` (or the whole
    profile when empty), a fact of that rank or of no rank matches its ``contradicted_by``; met when facts of the
    family exist and that is not so; unknown when none exists."""
    return [_presumed(p, facts.get(p.contradicted_by.fact, ()), ranks) for p in presuppositions]


def _presumed(presupposition: Presupposition, facts: Sequence[Fact], ranks: Sequence[int]) -> Presumed:
    condition = presupposition.contradicted_by
    relevant = [f for f in facts if not ranks or getattr(f, "rank", None) is None or f.rank in ranks]
    if not relevant:
        return Presumed(presupposition.requirement, "unknown", f"the profile has no {condition.fact} fact to check it against")
    matching = [f for f in relevant if _matches(condition, f)]
    covered = {getattr(f, "rank", None) for f in matching}
    contradicted = bool(matching) and (None in covered or not ranks or set(ranks) <= covered)
    if contradicted:
        shown = "; ".join(f"{fact.id}: " + ", ".join(f"{name} = {_shown(getattr(fact, name, None))}"
                                                     for name in condition.where) for fact in matching[:3])
        return Presumed(presupposition.requirement, "contradicted", shown)
    return Presumed(presupposition.requirement, "met", f"checked against {len(relevant)} {condition.fact} fact(s)")


def _matches(condition: FactCondition, fact: Fact) -> bool:
    return all(holds(op, getattr(fact, name, None), operand)
               for name, predicate in condition.where.items() for op, operand in predicate.comparisons())


def _shown(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
