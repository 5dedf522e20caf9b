"""The comparison: what ``advisor compare`` returns, writes as JSON and the renderers read (``advisor/compare.py``
builds it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.report import Finding, ToolInfo
from advisor.text import Lang
from advisor.vocabulary import Micros, Platform, Severity


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Side(_Model):
    """What one side of the comparison is."""

    path: str
    format: str
    platform: Platform
    ranks: list[int]
    steps: list[int]
    hardware: str | None
    status: str
    step_time_us: Micros | None = Field(description="Mean step time over ranks (profile breakdown), µs; with a chosen "
                                        "step (chosen_step), that step's time, mean over the ranks that have it.")
    median_step_us: Micros | None = Field(None, description="The median step: each listed step's time (mean over "
                                          "ranks), the median over steps, µs; None with fewer than 3 steps. A rank "
                                          "lists every step up to 200, then the slowest, the fastest and evenly "
                                          "spaced ones, so beyond 200 steps it is an estimate.")
    step_count: int = Field(0, ge=0, description="The steps each rank's mean step is over, the fewest of any rank (0 "
                                                 "without a step breakdown); 1 with a chosen step.")
    profiler_level: str | None = Field(None, description="The Ascend profiler level (profiler_info): Level0, "
                                                         "Level1, Level2; None where the capture records none (a GPU "
                                                         "trace).")
    chosen_step: int | None = Field(None, description=(
        "The one step compared on this side (--base-step / --target-step: N of ProfilerStep#N, the Step of "
        "step_trace_time.csv, the Step Id of kernel_details.csv): the breakdown, operators, shapes, collectives, "
        "framework ops and operator memory are that step's; None: the mean over every profiled step. The memory peak "
        "is the capture's either way."))


class Incomparability(_Model):
    """Why BASE and TARGET cannot be compared: no difference between them is then called a regression."""

    kind: Literal["few_steps", "profiler_levels", "chosen_step"] = Field(
        description="few_steps: a side holds fewer than MIN_STEPS (3) steps; profiler_levels: the sides were captured "
                    "at different Ascend profiler levels; chosen_step: one step was chosen on a side (one step's "
                    "difference cannot be told from step-to-step variation).")
    side: Literal["base", "target"] | None = Field(None, description="The side with too few steps, or with a chosen "
                                                   "step (None: both sides).")
    message: str = Field(description="The reason, in the comparison's language (also among the warnings).")


class Row(_Model):
    """One measure on both sides, per step (mean over ranks)."""

    name: str
    detail: str | None = Field(None, description="For operators matched by class: the types on each side; for "
                               "operator shapes: the input shapes; for framework ops and operator memory: the calls or "
                               "allocations per step on each side.")
    base: float
    target: float
    diff: float
    ratio: float | None


class FindingChange(_Model):
    id: str
    key: str | None
    title: str
    change: Literal["resolved", "new", "persisting"]
    base_gain_us: Micros | None
    target_gain_us: Micros | None
    base_severity: Severity | None = Field(None, description="The finding's severity on BASE (None: it does not fire there).")
    target_severity: Severity | None = Field(None, description="The finding's severity on TARGET (None: it does not fire "
                                                               "there).")


class CameBack(_Model):
    """A finding of TARGET whose gain grew from BASE's (or that BASE did not have)."""

    title: str
    key: str | None = None
    grown_us: Micros = Field(description="TARGET's gain − BASE's (BASE's 0 for a new finding), µs per step.")
    new: bool = Field(description="The finding does not fire on BASE.")


class GainCheck(_Model):
    """Before/after: did the findings that no longer fire deliver what they estimated?"""

    resolved: int
    estimated_gain_us: Micros = Field(description="Sum of the estimated gains of the findings resolved on TARGET, µs per step.")
    step_reduction_us: Micros = Field(description="BASE step time − TARGET step time, µs.")
    delivered_ratio: float | None = Field(description="step_reduction_us / estimated_gain_us.")
    grown_title: str | None = Field(None, description="The first of came_back: the finding whose gain grew most.")
    grown_us: Micros | None = Field(None, description="How much that finding's gain grew from BASE to TARGET, µs per step.")
    came_back: list[CameBack] = Field(default_factory=list, description=(
        "Where time came back on TARGET, largest first (at most 3): findings with measured gains on both sides whose "
        "gain grew, and findings new on TARGET (their whole gain), each by more than 5 % of the estimate, when the "
        "step fell short of it."))
    median_step_reduction_us: Micros | None = Field(None, description=(
        "BASE median step − TARGET median step, µs: the reduction of a typical step, which a few stalled steps "
        "move less than the mean; None when a side has fewer than 3 steps."))
    median_delivered_ratio: float | None = Field(None, description="median_step_reduction_us / estimated_gain_us.")


class Comparison(_Model):
    """The result of ``advisor compare``: the JSON output and what the renderers show."""

    schema_version: str = "advisor-compare/1"
    tool: ToolInfo
    lang: Lang
    base: Side
    target: Side
    comparable: bool = Field(True, description="False when either side has too few steps or the two were captured at "
                                               "different profiler levels (not_comparable_because says which): then "
                                               "findings is empty and gain_check null, and the headline calls no "
                                               "difference a regression.")
    not_comparable_because: list[Incomparability] = Field(default_factory=list)
    headline: str
    breakdown: list[Row]
    operators: list[Row]
    operators_matched_by: Literal["type", "class"]
    collectives: list[Row]
    apis: list[Row] = Field(default_factory=list, description=(
        "Framework ops (aten::, npu::) whose host time per step changed most either way, inclusive of the ops they "
        "call, mean over ranks, the largest increase first; detail: calls per step on each side. Empty unless both "
        "sides record framework ops."))
    operator_shapes: list[Row] = Field(default_factory=list, description=(
        "Compute operators matched by type AND input shapes (kernel_details.csv's Input Shapes; the DB export's "
        "COMPUTE_TASK_INFO), µs per step, mean over ranks: the MAX_OPERATOR_ROWS (30) whose time changed most either "
        "way, the largest increase first; name: the type, detail: the shapes. Empty when a side records no shapes or "
        "the sides come from different platforms (operator_shapes_note says which)."))
    operator_shapes_note: str | None = Field(None, description=(
        "Why operator_shapes is empty (a side records no input shapes: a GPU trace's kernels carry none, Level0 "
        "writes none; or the two platforms differ), in the comparison's language; None when it is filled."))
    memory: list[Row]
    operator_memory: list[Row] = Field(default_factory=list, description=(
        "Device memory allocated per step by each operator (operator_memory.csv's Name and Size(KB), the DB export's "
        "OP_MEMORY; allocations inside the compared steps' ProfilerStep windows), MB, mean over the ranks that record "
        "it: the MAX_OPERATOR_ROWS (30) that changed most either way, the largest growth first; detail: allocations "
        "per step on each side. Empty unless both sides record operator memory (an Ascend capture with "
        "profile_memory)."))
    serving: list[Row] = Field(default_factory=list, description=(
        "Two serving runs: ttft_proxy_us (the prefill's first iteration), tpot_us (decode's median start-to-start), "
        "decode_tokens_per_s and decode_batch, each where both sides record it (empty otherwise)."))
    findings: list[Finding] = Field(description="The diagnosis of the difference: rules fired on the delta facts.")
    changes: list[FindingChange]
    gain_check: GainCheck | None
    facts: list[dict]
    operator_mix_distance: float | None = Field(
        None, description="How differently the two sides spread their compute time over operator types (same platform) or "
                          "classes (across vendors): half the sum over them of |share on BASE − share on TARGET|; 0 = the "
                          "same mix, 1 = no operator in common. From WORKLOAD_DISTANCE (0.5) on, a warning says the two "
                          "sides seem to run different workloads. None when either side has no operator times.")
    warnings: list[str]
