"""Knowledge entries (knowledge/<category>/<id>.yaml, design §4.2): the prescriptions, in en and zh."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from advisor.engine.spec import Category, Platform
from advisor.text import BilingualText


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


class CodeChange(_Model):
    before: str
    after: str
    language: str = "python"


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
    problem: BilingualText
    actions: list[BilingualText] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    code: CodeChange | None = None
    gain: Gain
    caveats: list[BilingualText] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
