"""Knowledge entries (knowledge/<category>/<id>.yaml, design §4.2): the prescriptions, in en and zh."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from advisor.engine.spec import FactCondition
from advisor.text import BilingualText
from advisor.vocabulary import Category, Platform


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AppliesTo(_Model):
    """Where the prescription is valid; empty lists mean 'no restriction known'."""

    hardware: list[str] = Field(default_factory=list, description="e.g. Atlas A2, Atlas A3.")
    compute_capability: str | None = Field(None, description="A GPU's CUDA compute capability range, e.g. '>=8.0' "
                                                             "(BF16 and TF32 tensor cores: Ampere and later).")
    frameworks: list[str] = Field(default_factory=list, description="e.g. torch_npu, MindSpore.")
    versions: dict[str, str] = Field(default_factory=dict, description="component → version range, e.g. torch_npu: '>=2.1'.")
    modes: list[str] = Field(default_factory=list, description="e.g. eager, TorchAir max-autotune.")


class Presupposition(_Model):
    """What a prescription (or one of its actions) takes for granted, and the facts that would contradict it: a fact of
    the finding's rank (or of the whole profile) matching ``contradicted_by`` means the advice does not apply — CUDA
    graphs for a step that already replays graphs, AMP for matrix math already in BF16. Without such a fact the
    presupposition is met, or unknown when the profile holds no fact of that family."""

    requirement: BilingualText = Field(description="What must be true, e.g. 'the step does not replay CUDA graphs yet'.")
    contradicted_by: FactCondition = Field(description="A fact condition (family and where) that contradicts it.")


class Action(BilingualText):
    """One step of a prescription, shown only when none of its presuppositions is contradicted."""

    presupposes: list[Presupposition] = Field(default_factory=list)


class CodeChange(_Model):
    """A before/after code example; left out of a finding whose facts contradict one of its ``presupposes`` (an
    engine's API shown for a loop of the user's own)."""

    before: str
    after: str
    language: str = "python"
    presupposes: list[Presupposition] = Field(default_factory=list)


class Gain(_Model):
    """How the finding's gain is estimated, and what a source states where one does."""

    model: BilingualText
    stated: BilingualText | None = None
    source: str | None = None


class Reference(_Model):
    title: str
    url: str | None = None
    seed: str | None = Field(None, description="File name of the seed document in shared/seeds.")


class KnowledgeEntry(_Model):
    """One prescription."""

    id: str
    title: BilingualText
    category: Category
    platforms: list[Platform] = Field(default_factory=lambda: ["ascend"], min_length=1,
                                      description="Where the advice holds: ascend (NPU profiles), gpu (PyTorch traces), or both.")
    applies_to: AppliesTo = Field(default_factory=AppliesTo)
    presupposes: list[Presupposition] = Field(
        default_factory=list, description="What the whole prescription takes for granted; a finding whose every "
                                          "prescription is contradicted is withheld.")
    problem: BilingualText
    actions: list[Action] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    code: CodeChange | None = None
    gain: Gain
    caveats: list[BilingualText] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)


def public_reference(reference: Reference) -> str:
    """A reference as a reader finds it: its title, the public document it is part of when it cites one of the
    documents the knowledge base was written from (``seed``: a file name of the project's sources, never shown),
    and its address when it has one."""
    documents = {  # seed file -> the public document, with where to find it
        "000_42cb957bbaee5e10.txt": "Affinity Operator Tuning Strategy, in the PyTorch Training Model Migration and "
                                    "Tuning Guide (performance tuning) of the Ascend Extension for PyTorch "
                                    "documentation, hiascend.com",
        "001_af5443d281642cbd.txt": "昇腾CANN, “基于Ascend C的MC²通算融合算子性能优化最佳实践” (best practices for the "
                                    "performance of MC² compute-communication fusion operators with Ascend C), Huawei "
                                    "Cloud developer community blog (bbs.huaweicloud.com), 2025-04-08",
        "002_abb952cf9650c997.txt": "“图内标定SuperKernel范围” (marking SuperKernel scopes in the graph), TorchAir "
                                    "documentation of the Ascend Extension for PyTorch (max-autotune mode), hiascend.com",
        "003_83b691473dcb9c76.txt": "“昇腾大模型性能分析思路” (a performance-analysis approach for large models on "
                                    "Ascend), CSDN blog",
    }
    text = reference.title
    document = documents.get(reference.seed or "")
    if document and document not in text:
        text += f" — {document}"
    return f"{text} <{reference.url}>" if reference.url else text
