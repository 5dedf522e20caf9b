"""What the MCP server's tools return, sized for an assistant's context: the brief diagnosis (verdict, step time,
its split and the top findings, each in one line), one finding in full, a page of facts, the top operators, the
step table and the brief comparison — JSON-ready dicts made from a Report or a Comparison — with the models that
describe them (the tools' output schemas). advisor/mcp.py serves them; docs/mcp.md measures them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from advisor import errors
from advisor.vocabulary import SEVERITIES, SEVERITY_ORDER, Severity

if TYPE_CHECKING:
    from advisor.comparison import Comparison
    from advisor.report import Finding, Report

BRIEF_FINDINGS = 10  # findings in a brief result unless max_findings says otherwise
FACTS_SHOWN = 10  # facts per page unless limit says otherwise
ROWS_SHOWN = 10  # operators, steps and ranks unless limit says otherwise
FINDING_FACTS = 10  # the facts a finding matched, shown with it
WARNINGS_SHOWN, WARNING_CHARS = 5, 300  # of a brief result's warnings, and of each
OPERATOR_FIELDS = ("rank", "op_type", "accelerator_core", "count_per_step", "total_us_per_step", "mean_us", "max_us",
                   "share_of_compute", "share_of_step")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BriefFinding(_Out):
    """One finding in a line: what it is, what fixing it saves per step, and the first fix."""

    id: str = Field(description="The rule id: give it (with key) to the finding tool for the whole finding.")
    key: str | None = Field(description="What the finding is about when its rule fires on several subjects.")
    severity: Severity
    title: str
    gain_us: float | None = Field(description="Estimated gain per step, µs (mean over the ranks); null when not estimated.")
    gain_share: float | None = Field(description="gain_us / step time.")
    gain_basis: Literal["measured", "assumed"] | None = Field(
        description="measured: time the profile shows would disappear; assumed: a planning factor.")
    fix: str | None = Field(description="The first prescription's title.")


class Breakdown(_Out):
    compute: float | None
    communication: float | None = Field(description="Not-overlapped communication / step time.")
    free: float | None


class BriefDiagnosis(_Out):
    """``diagnose`` with detail 'brief' (the default)."""

    detail: Literal["brief"] = "brief"
    analysis: str = Field(description="This analysis's id: the report resource is advisor://report/{analysis}.md "
                                      "(or .html) while the server keeps it.")
    path: str
    status: Literal["complete", "partial", "empty"]
    format: str
    ranks: int
    steps: int = Field(description="Profiled steps (0 when the capture marks none).")
    verdict: str = Field(description="compute, communication, host, io, … ('unknown' without a step breakdown).")
    verdict_text: str = Field(description="The report's one-sentence verdict.")
    step_time_us: float | None = Field(description="Mean device step time over ranks, µs.")
    breakdown: Breakdown = Field(description="The step's split, as shares of it.")
    findings: list[BriefFinding] = Field(description="Ranked by severity, then gain.")
    findings_total: int = Field(description="Findings before max_findings and min_severity.")
    severity_counts: dict[str, int]
    withheld: list[str] = Field(description="Rules that fired but whose prescriptions the facts contradict.")
    skipped_files: int
    warnings: list[str] = Field(description=f"The first {WARNINGS_SHOWN} of the coverage warnings, each cut at "
                                            f"{WARNING_CHARS} characters.")
    warnings_total: int
    more: str = Field(description="Which tools give more.")


class FindingDetail(_Out):
    analysis: str
    finding: dict[str, Any] = Field(description="The finding as in the JSON report (docs/report.md): explanation, "
                                                "evidence, gain, prescriptions (actions, env, code, references), trace.")
    facts: list[dict[str, Any]] = Field(description=f"The facts it matched (the first {FINDING_FACTS}).")
    facts_total: int


class FactsPage(_Out):
    analysis: str
    family: str | None
    rank: int | None
    count: int = Field(description="Facts of the family (and rank).")
    facts: list[dict[str, Any]] = Field(description="The first `limit` of them, as `advisor facts --json` gives them.")


class Catalogue(_Out):
    families: list[dict[str, Any]] = Field(description="The fact families, each with its fields (advisor facts --list).")


class OperatorsPage(_Out):
    analysis: str
    rank: int | None
    count: int
    operators: list[dict[str, Any]] = Field(description="Top operator types by device time per step: op_type, "
                                                        "accelerator_core, count_per_step, total_us_per_step, "
                                                        "share_of_compute (mean over ranks unless rank is given).")


class StepsPage(_Out):
    analysis: str
    ranks_total: int
    per_rank: list[dict[str, Any]] = Field(description="Each rank's mean step, slowest first: step_time_us and its "
                                                       "split (compute_us, comm_not_overlapped_us, free_us), the "
                                                       "ratios and the rank's bottleneck.")
    steps_total: int
    steps: list[dict[str, Any]] = Field(description="Step facts (one per step and rank), slowest first.")


class BriefSide(_Out):
    path: str
    platform: str
    ranks: int
    steps: int
    step_time_us: float | None


class BriefComparison(_Out):
    """``compare`` with detail 'brief' (the default)."""

    detail: Literal["brief"] = "brief"
    analysis: str
    headline: str
    comparable: bool
    not_comparable_because: list[str]
    base: BriefSide
    target: BriefSide
    breakdown: list[dict[str, Any]] = Field(description="Rows: name, base, target, diff, ratio (per step).")
    operators: list[dict[str, Any]]
    operators_total: int
    collectives: list[dict[str, Any]]
    apis: list[dict[str, Any]] = Field(description="Framework ops whose host time per step changed most (detail: calls "
                                       "per step on each side).")
    apis_total: int
    operator_shapes: list[dict[str, Any]] = Field(description="Operators matched by type and input shapes (detail: the "
                                                  "shapes) whose time per step changed most.")
    operator_shapes_total: int
    operator_shapes_note: str | None = Field(description="Why operator_shapes is empty (a side records no shapes).")
    memory: list[dict[str, Any]]
    operator_memory: list[dict[str, Any]] = Field(description="MB allocated per step by each operator (detail: "
                                                  "allocations per step on each side), the largest growth first.")
    operator_memory_total: int
    serving: list[dict[str, Any]]
    findings: list[BriefFinding]
    findings_total: int
    changes: list[dict[str, Any]] = Field(description="Findings resolved, new or persisting from BASE to TARGET.")
    changes_total: int
    gain_check: dict[str, Any] | None
    warnings: list[str]
    warnings_total: int


def output_schema(*models: Any) -> dict[str, Any]:
    """The JSON schema of a result that is any of ``models`` (pydantic models or types), with an object root."""
    adapter = TypeAdapter(models[0] if len(models) == 1 else _union(models))
    schema = adapter.json_schema(mode="serialization")
    if "$ref" in schema:  # one model: inline it
        name = schema.pop("$ref").rsplit("/", 1)[-1]
        schema = {**schema["$defs"].pop(name), **schema}
    return {"type": "object", **schema}


def _union(models: tuple[Any, ...]) -> Any:
    from typing import Union

    return Union[models]  # noqa: UP007 (a runtime tuple of types)


# --- the views ---


def check_severity(min_severity: str | None) -> None:
    if min_severity is not None and min_severity not in SEVERITIES:
        raise errors.InputError(f"min_severity is one of {', '.join(SEVERITIES)}, not {min_severity!r}")


def kept(findings: list[Finding], max_findings: int | None, min_severity: str | None) -> list[Finding]:
    """The findings at ``min_severity`` or above, the first ``max_findings`` of them, in the report's order."""
    check_severity(min_severity)
    if min_severity is not None:
        findings = [f for f in findings if SEVERITY_ORDER[f.severity] <= SEVERITY_ORDER[min_severity]]
    return list(findings if max_findings is None else findings[:max_findings])


def brief_finding(finding: Finding) -> dict[str, Any]:
    return {
        "id": finding.id,
        "key": finding.key,
        "severity": finding.severity,
        "title": finding.title,
        "gain_us": _us(finding.estimated_gain_us),
        "gain_share": _share(finding.estimated_gain_ratio),
        "gain_basis": finding.gain_basis,
        "fix": finding.prescriptions[0].title if finding.prescriptions else None,
    }


def brief_report(report: Report, analysis: str, max_findings: int | None, min_severity: str | None) -> dict[str, Any]:
    """The brief diagnosis: BriefDiagnosis as a dict."""
    from advisor.render.common import report_labels, verdict_sentence

    summary = report.summary
    shown = kept(report.findings, BRIEF_FINDINGS if max_findings is None else max_findings, min_severity)
    warnings = report.coverage.warnings
    return {
        "detail": "brief",
        "analysis": analysis,
        "path": report.input.path,
        "status": report.status,
        "format": report.input.format,
        "ranks": len(report.input.ranks),
        "steps": len(report.input.steps),
        "verdict": summary.bottleneck,
        "verdict_text": verdict_sentence(report, report_labels(report)),
        "step_time_us": _us(summary.step_time_us),
        "breakdown": {"compute": _share(summary.compute_ratio), "communication": _share(summary.communication_ratio),
                      "free": _share(summary.free_ratio)},
        "findings": [brief_finding(f) for f in shown],
        "findings_total": len(report.findings),
        "severity_counts": {s: sum(f.severity == s for f in report.findings) for s in SEVERITIES},
        "withheld": [w.id for w in report.withheld],
        "skipped_files": len(report.coverage.skipped),
        "warnings": [_cut(w) for w in warnings[:WARNINGS_SHOWN]],
        "warnings_total": len(warnings),
        "more": "finding (id, key): one finding in full; facts (family): the measured facts; operators; steps; "
                "explain (rule id): why a rule fired or not; diagnose with detail 'full': the whole JSON report; "
                f"the resource advisor://report/{analysis}.md: the Markdown report.",
    }


def finding_detail(report: Report, analysis: str, finding_id: str, key: str | None) -> dict[str, Any]:
    """One finding in full, with the facts it matched."""
    import difflib

    mine = [f for f in report.findings if f.id == finding_id]
    if not mine:
        ids = list(dict.fromkeys(f.id for f in report.findings))
        close = difflib.get_close_matches(finding_id, ids, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; its findings are {', '.join(ids) or 'none'}"
        raise errors.InputError(f"no finding {finding_id!r} in this diagnosis{hint}")
    if key is not None:
        mine = [f for f in mine if f.key == key]
        if not mine:
            raise errors.InputError(f"{finding_id} has no finding with the key {key!r} here")
    elif len(mine) > 1:
        keys = ", ".join(repr(f.key) for f in mine)
        raise errors.InputError(f"{finding_id} is found for several keys ({keys}); give one as key")
    finding = mine[0]
    ids = set(finding.trace.facts)
    matched = [f for f in report.facts if f.get("id") in ids]
    return {"analysis": analysis, "finding": finding.model_dump(mode="json"), "facts": matched[:FINDING_FACTS],
            "facts_total": len(matched)}


def facts_page(report: Report, analysis: str, family: str | None, rank: int | None, limit: int | None) -> dict[str, Any]:
    facts = [f for f in report.facts if family in (None, f["type"]) and rank in (None, f.get("rank"))]
    return {"analysis": analysis, "family": family, "rank": rank, "count": len(facts),
            "facts": facts[:FACTS_SHOWN if limit is None else limit]}


def operators_page(report: Report, analysis: str, rank: int | None, limit: int | None) -> dict[str, Any]:
    limit = ROWS_SHOWN if limit is None else limit
    if rank is None:
        rows = [o.model_dump(mode="json") for o in report.summary.top_operators]
    else:
        mine = [f for f in report.facts if f["type"] == "operator" and f.get("rank") == rank]
        if not mine and rank not in report.input.ranks:
            raise errors.InputError(f"no rank {rank} in this profile; its ranks are {_ranks(report.input.ranks)}")
        mine.sort(key=lambda f: -(f.get("total_us_per_step") or 0))
        rows = [{k: f.get(k) for k in OPERATOR_FIELDS} for f in mine]
    return {"analysis": analysis, "rank": rank, "count": len(rows), "operators": rows[:limit]}


def steps_page(report: Report, analysis: str, limit: int | None) -> dict[str, Any]:
    limit = ROWS_SHOWN if limit is None else limit
    ranks = sorted(report.summary.per_rank, key=lambda r: -r.step_time_us)
    steps = sorted((f for f in report.facts if f["type"] == "step"), key=lambda f: -(f.get("step_time_us") or 0))
    return {"analysis": analysis, "ranks_total": len(ranks), "per_rank": [r.model_dump(mode="json") for r in ranks[:limit]],
            "steps_total": len(steps), "steps": [{k: v for k, v in f.items() if k != "sources"} for f in steps[:limit]]}


def brief_comparison(comparison: Comparison, analysis: str, max_findings: int | None, min_severity: str | None,
                     limit: int | None) -> dict[str, Any]:
    """The brief comparison: BriefComparison as a dict."""
    limit = ROWS_SHOWN if limit is None else limit
    shown = kept(comparison.findings, BRIEF_FINDINGS if max_findings is None else max_findings, min_severity)
    rows = lambda found: [r.model_dump(mode="json") for r in found[:limit]]  # noqa: E731
    return {
        "detail": "brief",
        "analysis": analysis,
        "headline": comparison.headline,
        "comparable": comparison.comparable,
        "not_comparable_because": [i.message for i in comparison.not_comparable_because],
        "base": _side(comparison.base),
        "target": _side(comparison.target),
        "breakdown": rows(comparison.breakdown),
        "operators": rows(comparison.operators),
        "operators_total": len(comparison.operators),
        "collectives": rows(comparison.collectives),
        "apis": rows(comparison.apis),
        "apis_total": len(comparison.apis),
        "operator_shapes": rows(comparison.operator_shapes),
        "operator_shapes_total": len(comparison.operator_shapes),
        "operator_shapes_note": comparison.operator_shapes_note,
        "memory": rows(comparison.memory),
        "operator_memory": rows(comparison.operator_memory),
        "operator_memory_total": len(comparison.operator_memory),
        "serving": rows(comparison.serving),
        "findings": [brief_finding(f) for f in shown],
        "findings_total": len(comparison.findings),
        "changes": [c.model_dump(mode="json") for c in comparison.changes[:limit]],
        "changes_total": len(comparison.changes),
        "gain_check": comparison.gain_check.model_dump(mode="json") if comparison.gain_check else None,
        "warnings": [_cut(w) for w in comparison.warnings[:WARNINGS_SHOWN]],
        "warnings_total": len(comparison.warnings),
    }


def _side(side) -> dict[str, Any]:  # noqa: ANN001 (a comparison.Side)
    return {"path": side.path, "platform": side.platform, "ranks": len(side.ranks), "steps": len(side.steps),
            "step_time_us": _us(side.step_time_us)}


def _us(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _share(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _cut(text: str) -> str:
    return text if len(text) <= WARNING_CHARS else text[: WARNING_CHARS - 1] + "…"


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:16])) + (", …" if len(ranks) > 16 else "")


class FullReport(BaseModel):
    """``diagnose`` with detail 'full': the JSON report of ``advisor diagnose PATH -f json``, whose every field
    docs/report.md describes (its JSON schema: advisor/schema/report.schema.json)."""

    model_config = ConfigDict(extra="allow")
    schema_version: Literal[1]
    status: Literal["complete", "partial", "empty"]
    input: dict[str, Any]
    summary: dict[str, Any]
    findings: list[dict[str, Any]]
    withheld: list[dict[str, Any]]
    facts: list[dict[str, Any]] = Field(description="Empty unless include_facts.")
    coverage: dict[str, Any]


class FullComparison(BaseModel):
    """``compare`` with detail 'full': the JSON of ``advisor compare BASE TARGET -f json`` (docs/report.md)."""

    model_config = ConfigDict(extra="allow")
    schema_version: Literal["advisor-compare/1"]
    headline: str
    base: dict[str, Any]
    target: dict[str, Any]
    findings: list[dict[str, Any]]
    changes: list[dict[str, Any]]
    facts: list[dict[str, Any]] = Field(description="Empty unless include_facts.")


class Explanation(_Out):
    """``explain``: why a rule fired on a profile, or did not."""

    rule: str
    title: str
    pack: str
    file: str
    platforms: list[str]
    profile_platform: str
    status: Literal["fired", "did_not_fire", "not_run"] = Field(description="not_run: the rule is for another platform.")
    firing_count: int
    firings: list[dict[str, Any]] = Field(description="The first 5 firings: their conditions (fact, sources, checks "
                                                      "with expected, actual, holds) and the derived facts they used.")
    alternatives: list[dict[str, Any]] = Field(description="When it did not fire: each alternative's conditions, as far "
                                                           "as they held.")
    text: str = Field(description="What advisor explain ID PATH prints.")


class RuleRow(_Out):
    id: str
    category: str
    pack: str
    title: str
    platforms: list[str]
    severity: str
    recommends: list[str]
    file: str


class RuleList(_Out):
    rules: list[RuleRow]
    count: int
