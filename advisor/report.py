"""The report: the one structure every renderer reads, and the stable JSON contract (design §4.3).

``SCHEMA_VERSION`` changes only when a field is removed or changes meaning; new fields may be added.
The JSON Schema shipped in ``advisor/schema/report.schema.json`` is generated from these models
(``make schema`` rewrites it; a test checks it is current).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("schema") / "report.schema.json"

Severity = Literal["high", "medium", "low"]
Verdict = Literal["compute", "communication", "host", "io", "memory", "balanced", "unknown"]
Scalar = bool | int | float | str | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ToolInfo(_Model):
    name: Literal["advisor"] = "advisor"
    version: str


class InputInfo(_Model):
    path: str = Field(description="The path given on the command line.")
    format: str = Field(description="ascend-pytorch, ascend-mindspore, …")
    ranks: list[int]
    steps: list[int] = Field(description="Profiled step numbers (empty when the capture has no step info).")
    profiler_level: str | None
    hardware: str | None
    torch_npu_version: str | None = None
    cann_version: str | None = None


class RankSummary(_Model):
    rank: int
    steps: int
    step_time_us: float
    compute_us: float
    comm_not_overlapped_us: float
    free_us: float
    compute_ratio: float = Field(ge=0, le=1)
    communication_ratio: float = Field(ge=0, le=1)
    free_ratio: float = Field(ge=0, le=1)
    bottleneck: Verdict


class OperatorSummary(_Model):
    op_type: str
    accelerator_core: str | None
    ranks: list[int]
    count_per_step: float
    total_us_per_step: float = Field(description="Mean over the ranks listed.")
    share_of_compute: float = Field(ge=0, le=1, description="Mean over the ranks listed.")


class Summary(_Model):
    step_time_us: float | None = Field(description="Mean device step span over ranks (compute + exposed comm + free).")
    compute_ratio: float | None = Field(ge=0, le=1)
    communication_ratio: float | None = Field(ge=0, le=1, description="Not-overlapped communication / step time.")
    free_ratio: float | None = Field(ge=0, le=1)
    bottleneck: Verdict = Field(description="'unknown' when the profile has no step breakdown.")
    per_rank: list[RankSummary] = Field(default_factory=list)
    top_operators: list[OperatorSummary] = Field(default_factory=list)


class CodeChange(_Model):
    before: str
    after: str
    language: str = "python"


class Prescription(_Model):
    id: str
    title: str
    problem: str
    actions: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    code: CodeChange | None = None
    gain_model: str
    stated_gain: str | None = None
    caveats: list[str] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)


class Trace(_Model):
    """Why the finding exists: the rule, the facts it matched, the rules that derived those facts."""

    rule: str
    rule_file: str
    facts: list[str] = Field(description="Ids of the facts the rule matched (see 'facts').")
    derived_by: list[str] = Field(default_factory=list, description="Rules that derived matched facts.")


class Finding(_Model):
    id: str = Field(description="The rule id.")
    key: str | None = Field(None, description="What the finding is about when a rule fires on several subjects.")
    category: str
    severity: Severity
    title: str
    explanation: str
    evidence: dict[str, Scalar]
    ranks: list[int]
    estimated_gain_us: float | None = Field(description="Per step; mean over the ranks listed.")
    estimated_gain_ratio: float | None = Field(ge=0, le=1, description="estimated_gain_us / step time.")
    prescriptions: list[Prescription]
    trace: Trace


class SkippedFile(_Model):
    file: str
    reason: str


class CoverageInfo(_Model):
    read: list[str]
    missing: list[str]
    skipped: list[SkippedFile]
    warnings: list[str]


class Report(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    tool: ToolInfo
    lang: Literal["en", "zh"]
    status: Literal["complete", "partial", "empty"] = Field(
        description="'partial' when input files were skipped; 'empty' when no step or operator data could be read."
    )
    input: InputInfo
    summary: Summary
    findings: list[Finding]
    facts: list[dict[str, Any]] = Field(description="Every fact, as {'type': family, …fields}.")
    coverage: CoverageInfo


def report_schema() -> dict[str, Any]:
    """The JSON Schema of a report."""
    schema = Report.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://advisor.invalid/report.schema.v{SCHEMA_VERSION}.json"
    return schema


def write_schema(path: Path = SCHEMA_PATH) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report_schema(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
