"""The report: the one structure every renderer reads, and the stable JSON contract (design §4.3).

``SCHEMA_VERSION`` changes only when a field is removed or changes meaning; new fields may be added.
The JSON Schema shipped in ``advisor/schema/report.schema.json`` is generated from these models
(``make schema`` rewrites it; a test checks it is current).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from advisor.facts.models import TimeRange
from advisor.vocabulary import Micros, Severity, Verdict

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("schema") / "report.schema.json"

Scalar = bool | int | float | str | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class PackUsed(_Model):
    """A rule pack the diagnosis ran with."""

    name: str
    path: str | None = Field(None, description="Where the pack was read from (null for the built-in pack).")
    rules: int
    knowledge: int
    overrides: list[str] = Field(default_factory=list, description="Ids of earlier rules/knowledge it replaced.")
    disabled: list[str] = Field(default_factory=list, description="Ids of earlier rules it switched off.")
    version: str | None = Field(None, description="The version its pack.yaml states (absent when it states none).")

    @model_serializer(mode="wrap")
    def _stated_version_only(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if data.get("version") is None:
            data.pop("version", None)
        return data


class ToolInfo(_Model):
    name: Literal["advisor"] = "advisor"
    version: str
    packs: list[PackUsed] = Field(default_factory=list, description="Rule packs in load order, built-in first.")


class DeepRank(_Model):
    rank: int
    reasons: list[str] = Field(description="Why triage chose it: an extreme (slowest step, most compute, …), a "
                                           "communicator's straggler, a typical rank, or no step breakdown.")


class TriageInfo(_Model):
    """A cluster larger than the triage threshold: every rank's cluster-level files were read (step breakdown,
    communication, matrix), and the deep analysis (operators, kernel sequences, memory, host, idle) ran on some ranks."""

    ranks: int = Field(description="Ranks in the profile.")
    threshold: int = Field(description="Triage applies above this many ranks (deep analysis of all: --deep all).")
    deep: list[DeepRank] = Field(description="The ranks analysed in depth, and why.")


class InputInfo(_Model):
    path: str = Field(description="The path given on the command line.")
    format: str = Field(description="ascend-pytorch, ascend-mindspore, …")
    ranks: list[int]
    steps: list[int] = Field(description="Profiled step numbers (empty when the capture has no step info).")
    steps_marked_by: str | None = Field(None, description="What marks those steps, in words: ProfilerStep#N markers, a "
                                        "serving engine's iterations, Optimizer.step events (None without steps).")
    profiler_level: str | None
    hardware: str | None
    torch_npu_version: str | None = None
    cann_version: str | None = None
    triage: TriageInfo | None = Field(None, description="Present only when triage chose which ranks to analyse in "
                                                        "depth (absent: every rank was).")

    @model_serializer(mode="wrap")
    def _without_absent_triage(self, handler):  # an absent triage is left out, not written as null
        data = handler(self)
        if self.triage is None:
            data.pop("triage", None)
        return data


class RankSummary(_Model):
    rank: int
    steps: int
    step_time_us: Micros
    compute_us: Micros
    comm_not_overlapped_us: Micros
    free_us: Micros
    compute_ratio: float = Field(ge=0, le=1)
    communication_ratio: float = Field(ge=0, le=1)
    free_ratio: float = Field(ge=0, le=1)
    bottleneck: Verdict


class OperatorSummary(_Model):
    op_type: str
    accelerator_core: str | None
    ranks: list[int]
    count_per_step: float
    total_us_per_step: Micros = Field(description="Mean over the ranks listed.")
    share_of_compute: float = Field(ge=0, le=1, description="Mean over the ranks listed.")


class PhaseSummary(_Model):
    """One phase of a serving run (means over the ranks that run it, of each rank's PhaseFact)."""

    phase: Literal["prefill", "decode", "mixed"]
    ranks: list[int]
    iterations: int = Field(description="Iterations of the phase on the first rank listed.")
    covered_by_breakdown: bool = Field(description="Whether the step breakdown and the verdict are this phase's.")
    duration_us: Micros = Field(description="Median iteration duration.")
    first_duration_us: Micros = Field(description="The first iteration's duration: for prefill, a TTFT proxy (no "
                                      "queueing).")
    start_to_start_us: Micros | None = Field(description="Median start-to-start time: for decode, TPOT.")
    tokens_per_iteration: float | None = Field(description="Median tokens per iteration: for decode, the batch.")
    tokens_per_s: float | None
    busy_share: float = Field(ge=0, le=1, description="Median share of an iteration the device is busy.")
    graph_mode: str = Field(description="graphs, piecewise graphs or eager.")
    weight_read_share_of_peak: float | None = Field(None, description="Decode: the weights' read bandwidth over the "
                                                    "device's peak (needs the model's size from --context).")


class Summary(_Model):
    step_time_us: Micros | None = Field(description="Mean device step span over ranks (compute + exposed comm + free).")
    compute_ratio: float | None = Field(ge=0, le=1)
    communication_ratio: float | None = Field(ge=0, le=1, description="Not-overlapped communication / step time.")
    free_ratio: float | None = Field(ge=0, le=1)
    bottleneck: Verdict = Field(description="'unknown' when the profile has no step breakdown.")
    per_rank: list[RankSummary] = Field(default_factory=list)
    top_operators: list[OperatorSummary] = Field(default_factory=list)
    phases: list[PhaseSummary] = Field(default_factory=list, description="A serving run's phases, prefill first (empty "
                                       "for a training job): the breakdown and verdict are those of the phase covered.")


class CodeChange(_Model):
    before: str
    after: str
    language: str = "python"


class PreconditionCheck(_Model):
    """One precondition of a prescription, checked against the profile and --context."""

    requirement: str = Field(description="e.g. 'CANN >=8.0.RC2', 'Atlas A3', 'torch_npu'.")
    status: Literal["met", "unmet", "unknown"]
    detail: str = Field(description="What it was checked against, or what to check when unknown.")


class Prescription(_Model):
    id: str
    title: str
    problem: str
    preconditions: list[PreconditionCheck] = Field(
        default_factory=list, description="Hardware, framework, version and mode requirements and whether this job meets them."
    )
    actions: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    code: CodeChange | None = None
    gain_model: str
    stated_gain: str | None = None
    caveats: list[str] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)


class TraceCheck(_Model):
    test: str = Field(description="The comparison as written in the rule, e.g. 'free_ratio gte 0.1'.")
    actual: Scalar = Field(description="The fact's value (null when unknown).")
    holds: bool


class TraceCondition(_Model):
    """One condition of the rule, evaluated against the fact that satisfied it."""

    alias: str
    family: str
    negated: bool = Field(description="A 'not' condition: holds when no fact of the family matches.")
    fact: str | None = Field(description="Id of the matched fact (for 'not': null).")
    checks: list[TraceCheck]
    sources: list[str] = Field(description="Files (and columns) the fact was computed from.")


class Derivation(_Model):
    """A derived fact the finding depends on, and the rule and facts it was derived from."""

    fact: str
    rule: str
    from_facts: list[str]


class Trace(_Model):
    """Why the finding exists: the rule and pack, each condition with its values, the chain of derived facts."""

    rule: str
    rule_file: str
    pack: str = Field(description="'built-in' or the name of the rule pack the rule came from.")
    facts: list[str] = Field(description="Ids of the facts the rule matched (see 'facts').")
    derived_by: list[str] = Field(default_factory=list, description="Rules that derived matched facts.")
    conditions: list[TraceCondition] = Field(default_factory=list, description="Of the firing shown as evidence.")
    chain: list[Derivation] = Field(default_factory=list, description="Derived facts behind the matched facts, deepest last.")


class Finding(_Model):
    id: str = Field(description="The rule id.")
    key: str | None = Field(None, description="What the finding is about when a rule fires on several subjects.")
    category: str
    severity: Severity
    title: str
    explanation: str
    evidence: dict[str, Scalar]
    ranks: list[int]
    estimated_gain_us: Micros | None = Field(
        description="Per step; mean over the ranks listed. The part of the step the fix recovers, after the time "
                    "other findings ranked before it already claim from the same bucket (see charged_to).")
    estimated_gain_ratio: float | None = Field(ge=0, le=1, description="estimated_gain_us / step time.")
    gain_basis: Literal["measured", "assumed"] | None = Field(
        None, description="measured: time the profile shows would disappear; assumed: a planning factor. "
                          "None when the gain is not estimated.")
    charged_to: str | None = Field(
        None, description="The bucket of the step the gain is charged to, e.g. idle/dataloader, "
                          "communication/wait, compute/operator:MatMulV2.")
    claimed_gain_us: Micros | None = Field(
        None, description="The rule's own estimate before the budget (mean over the ranks listed); larger than "
                          "estimated_gain_us when findings ranked before it claim the same time.")
    instrumented_by: list[str] = Field(
        default_factory=list, description="Capture settings (with_stack, record_shapes) that were on while the host-side "
                                          "idle time of this gain was measured: their per-operator cost is part of it, "
                                          "so the gain is an upper bound (and the finding high only from 10 % of the step, medium from 2 %).")
    operator_table_coverage: float | None = Field(
        None, ge=0, le=1, description="For a finding on operator facts: the share of the step's device compute time "
                                      "(step breakdown) that the operator table records — the lowest over the ranks "
                                      "its rule fired on. Below 0.8 the explanation says so; below 0.5 the finding is "
                                      "low. None for other findings, or when the compute time is unknown.")
    measured_in_warmup: str | None = Field(
        None, description="When a rank the finding is about has no steady state in its capture (facts.capture): what "
                          "warms up there. The finding is then at most low; profiling.not_steady_state says how to "
                          "profile steady-state steps.")
    shares_time_with: list[str] = Field(
        default_factory=list, description="Findings (rule id, with the key in brackets) that were charged part of "
                                          "the same time first.")
    behind_outside_wait_us: Micros | None = Field(
        None, description="When every rank the finding is about waits inside its collectives for members outside the "
                          "capture (their communication facts' outside_wait_us, at least 5 % of the step): that wait, "
                          "µs per step, mean over the ranks. A saving of this rank's own time reaches the step only as "
                          "far as those members get faster too (they do under the same fix if they are slow for the same "
                          "reason); until then the rank waits longer instead. None otherwise, and for findings about "
                          "communication (a transfer every member waits for, or the wait itself).")
    prescriptions: list[Prescription]
    trace: Trace
    ranges: list[TimeRange] = Field(
        default_factory=list, description="Where the gain's time lies in the traces: the longest stretches of the fact "
                                          "fields its rule's gain_us names (at most 6, longest first), "
                                          "each on its trace file's clock; empty where those fields have none. "
                                          "advisor diagnose --annotate writes them as a Chrome trace.")


class WithheldFinding(_Model):
    """A rule that fired but whose every prescription the profile's facts contradict (CUDA-graph advice on a step that
    already replays graphs, AMP for matrix math already in BF16): not a finding, and charged no time."""

    id: str = Field(description="The rule id.")
    key: str | None = None
    title: str
    ranks: list[int]
    claimed_gain_us: Micros | None = Field(None, description="What the rule would have claimed per step (mean over the ranks).")
    because: list[str] = Field(description="Each contradicted presupposition: the prescription, what it takes for "
                                           "granted, and the facts that contradict it.")


class SkippedFile(_Model):
    file: str
    reason: str


class CoverageInfo(_Model):
    read: list[str]
    missing: list[str]
    skipped: list[SkippedFile]
    partly_read: list[SkippedFile] = Field(
        default_factory=list, description="Files read only up to a point (a truncated trace): what was before it was used."
    )
    warnings: list[str]


class Report(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    tool: ToolInfo
    lang: Literal["en", "zh"]
    status: Literal["complete", "partial", "empty"] = Field(
        description="'partial' when input files were skipped or read only in part; 'empty' when no step or operator data could be read."
    )
    input: InputInfo
    summary: Summary
    findings: list[Finding]
    withheld: list[WithheldFinding] = Field(
        default_factory=list, description="Rules that fired but whose prescriptions the facts contradict (see each "
                                          "knowledge entry's presupposes), so no finding is shown for them.")
    facts: list[dict[str, Any]] = Field(description="Every fact, as {'type': family, …fields}.")
    coverage: CoverageInfo

    # Jupyter (render/fragment.py), pandas (frames.py) and matplotlib (render/charts.py). Methods only: the JSON
    # contract is the fields above.

    def __repr__(self) -> str:
        """One line: the profile, the verdict, the step time and the findings, e.g. ``<Report ascend-level1-2ranks:
        communication-bound, step 153.80 ms, 22 findings (1 high)>`` (the fields: ``model_dump()``)."""
        from advisor.frames import findings_count, short_name

        step = f"step {self.summary.step_time_us / 1000:,.2f} ms" if self.summary.step_time_us is not None else "no steps"
        status = "" if self.status == "complete" else f", {self.status}"
        return (f"<{type(self).__name__} {short_name(self.input.path)}: {self.summary.bottleneck}-bound, {step}, "
                f"{findings_count(self.findings)}{status}>")

    __str__ = __repr__

    def _repr_html_(self) -> str:
        """The HTML report's body, its style sheet confined to it (how Jupyter shows a Report)."""
        from advisor.render import render_html
        from advisor.render.fragment import html_fragment

        return html_fragment(render_html(self))

    def _repr_markdown_(self) -> str:
        """The Markdown report."""
        from advisor.render import render_markdown

        return render_markdown(self)

    def findings_df(self) -> pd.DataFrame:
        """One row per finding, ranked as in the report: id, key, category, severity, title, estimated_gain_us,
        estimated_gain_ratio, gain_basis, charged_to, claimed_gain_us, shares_time_with, ranks, prescriptions
        (knowledge ids), explanation."""
        from advisor.frames import findings_frame

        return findings_frame(self.findings)

    def facts_df(self, family: str | None = None) -> pd.DataFrame:
        """The facts the rules saw, one row each (``type`` is the family); only ``family``'s, with its fields as
        the columns, when given (``advisor facts --list`` documents them). InputError for an unknown family."""
        from advisor.frames import facts_frame

        return facts_frame(self.facts, family)

    def steps_df(self) -> pd.DataFrame:
        """The per-rank step table, indexed by rank: steps, step_time_us and its split into compute_us,
        comm_not_overlapped_us and free_us (µs per step), the three ratios and the bottleneck. Per step and
        rank: ``facts_df("step")``."""
        from advisor.frames import steps_frame

        return steps_frame(self)

    def operators_df(self) -> pd.DataFrame:
        """The top operator types (mean over the ranks that run them): count and µs per step, share of compute."""
        from advisor.frames import operators_frame

        return operators_frame(self)

    def figures(self) -> dict[str, Any]:
        """The charts of the HTML report as matplotlib figures, by name: ``step_breakdown``, ``top_operators``,
        ``bandwidth``, ``memory`` — those the profile has data for. Each is drawn anew; Jupyter shows one as a PNG,
        ``savefig`` writes it."""
        from advisor.render.charts import report_figures
        from advisor.render.common import report_labels

        return {key: drawn.figure for key, drawn in report_figures(self, report_labels(self)).items()}

    def figure(self, name: str) -> Any:
        """One chart of ``figures()`` by name; InputError when the report has no such chart."""
        from advisor.errors import InputError
        from advisor.render.charts import REPORT_CHARTS, report_figures
        from advisor.render.common import report_labels

        drawn = report_figures(self, report_labels(self), {name})
        if name not in drawn:
            known = ", ".join(REPORT_CHARTS)
            raise InputError(f"no chart {name!r} in this report; the charts are {known} (those with data: figures())")
        return drawn[name].figure


def report_schema() -> dict[str, Any]:
    """The JSON Schema of a report."""
    schema = Report.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://advisor.invalid/report.schema.v{SCHEMA_VERSION}.json"
    return schema


def write_schema(path: Path = SCHEMA_PATH) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report_schema(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
