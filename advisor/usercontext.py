"""What the user tells advisor that the profile does not record: environment variables and model settings.

The profiler records only nine environment variables (profiler_metadata.json); TASK_QUEUE_ENABLE,
CPU_AFFINITY_CONF, HCCL_BUFFSIZE and the model's shape are not in the profile. They come from
``--env KEY=VALUE`` (repeatable), ``--env-file FILE`` (KEY=VALUE lines, ``export`` and quotes allowed)
and ``--context FILE.yaml`` (model settings), and become ``environment`` and ``model`` facts. The Python
API and the MCP server take the same as dicts (``context_from_dicts``, ``resolve_context``), validated the
same way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.errors import InputError
from advisor.ingest.limits import read_bounded
from advisor.ingest.model import FileProblem

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MAX_FILE_BYTES = 1 << 20


class ModelSettings(BaseModel):
    """Model and parallel settings from ``--context``; every field is optional, and bounded well beyond any real job
    (a batch or a hidden size of 2**20, 2**30 tokens, 10**6 billion parameters) so what follows from them is finite."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    micro_batch_size: int | None = Field(None, ge=1, le=1 << 20, description="Samples per micro-batch per rank.")
    global_batch_size: int | None = Field(None, ge=1, le=1 << 30, description="Samples per optimizer step over all ranks.")
    sequence_length: int | None = Field(None, ge=1, le=1 << 30, description="Tokens per sample.")
    hidden_size: int | None = Field(None, ge=1, le=1 << 20, description="Model hidden size.")
    num_layers: int | None = Field(None, ge=1, le=100_000, description="Transformer layers.")
    dtype: Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"] | None = Field(
        None, description="Precision of the weights (training: fp32, fp16 or bf16; inference may quantise to fp8, int8 "
                          "or int4).")
    tensor_parallel: int | None = Field(None, ge=1, le=1 << 20, description="TP degree.")
    pipeline_parallel: int | None = Field(None, ge=1, le=1 << 20, description="PP degree.")
    data_parallel: int | None = Field(None, ge=1, le=1 << 20, description="DP degree.")
    context_parallel: int | None = Field(None, ge=1, le=1 << 20, description="CP degree.")
    expert_parallel: int | None = Field(None, ge=1, le=1 << 20, description="EP degree.")
    cards_per_node: int | None = Field(None, ge=1, le=1024, description="NPUs per server.")
    device_memory_gb: float | None = Field(None, gt=0, le=1 << 20, allow_inf_nan=False, description="Memory per device, GB.")
    parameters_billion: float | None = Field(None, gt=0, le=1_000_000, allow_inf_nan=False, description="Model parameters, billions.")
    chip: Literal["Atlas A2", "Atlas A3", "Atlas 300I Duo", "Atlas 800I A2", "Atlas 900 A2", "other"] | None = Field(
        None, description="The NPU generation (the profile's PMU columns cannot tell A2 from A3)."
    )
    execution_mode: Literal["eager", "torch-compile", "torchair-reduce-overhead", "torchair-max-autotune", "ge-graph"] | None = (
        Field(None, description="How the model runs: eager, torch.compile, TorchAir modes, or GE graph mode.")
    )


@dataclass
class UserContext:
    """Environment variables (name → (value, where it came from)) and model settings given by the user."""

    env: dict[str, tuple[str, str]] = field(default_factory=dict)
    model: ModelSettings | None = None
    model_source: str = ""


def build_context(env_pairs: list[str], env_files: list[Path], context_file: Path | None) -> UserContext:
    """Parse the command-line inputs; raise InputError naming the bad pair, file or line."""
    context = UserContext()
    for path in env_files:
        for name, value in _read_env_file(path).items():
            context.env[name] = (value, str(path))
    for pair in env_pairs:
        name, value = _split_pair(pair, "--env")
        context.env[name] = (value, "--env")
    if context_file is not None:
        context.model = _read_settings(context_file)
        context.model_source = str(context_file)
    return context


def _split_pair(text: str, where: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise InputError(f"{where}: {text!r} is not KEY=VALUE with a valid variable name")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return name, value


def _read_env_file(path: Path) -> dict[str, str]:
    text = _read_text(path).removeprefix("\ufeff")  # a UTF-8 BOM, as Windows editors write it
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):]
        name, value = _split_pair(line, f"{path}:{number}")
        values[name] = value
    return values


def _read_settings(path: Path) -> ModelSettings:
    text = _read_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"{path}:{mark.line + 1 if mark else 1}: invalid YAML ({getattr(exc, 'problem', exc)})") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of model settings (micro_batch_size: 4, …)")
    try:
        return ModelSettings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(f"{path}: {problems}") from exc


def _read_text(path: Path) -> str:
    """The text of a settings file: a regular file of at most 1 MiB (a FIFO or device is refused, not read)."""
    try:
        data = read_bounded(path, _MAX_FILE_BYTES)
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except FileProblem as exc:
        if str(exc).startswith("is not a regular file"):
            raise InputError(f"{path}: {exc}; not a settings file") from exc
        raise InputError(f"{path}: larger than 1 MiB; not a settings file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: cannot be read ({exc})") from exc


def context_from_dicts(
    env: Mapping[str, object] | None = None,
    model: Mapping[str, object] | None = None,
    *,
    base: UserContext | None = None,
    env_source: str = "env",
    model_source: str = "context",
) -> UserContext:
    """A UserContext from plain dicts (the Python API, the MCP server), validated as --env and --context are.

    ``env`` maps variable names to values (strings, or numbers written as the shell would: ``2``, ``0.5``);
    ``model`` holds the settings a --context file would (``{"micro_batch_size": 4, "tensor_parallel": 8}``).
    Values in ``env`` win over those of ``base``; ``model``, when given, replaces ``base``'s settings.
    ``env_source`` and ``model_source`` are what the facts name as their source. Raises InputError naming
    the bad key or field.
    """
    context = UserContext(env=dict(base.env), model=base.model, model_source=base.model_source) if base else UserContext()
    if env is not None:
        if not isinstance(env, Mapping):
            raise InputError(f"{env_source}: expected a mapping of variable names to values, got {type(env).__name__}")
        for name, value in env.items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise InputError(f"{env_source}: {name!r} is not a valid variable name")
            context.env[name] = (_env_value(name, value, env_source), env_source)
    if model is not None:
        if not isinstance(model, Mapping):
            raise InputError(f"{model_source}: expected a mapping of model settings (micro_batch_size: 4, …)")
        try:
            context.model = ModelSettings.model_validate(dict(model))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise InputError(f"{model_source}: {problems}") from exc
        context.model_source = model_source
    return context


def _env_value(name: str, value: object, where: str) -> str:
    """A variable's value as the job's environment would hold it: text, or a number written out."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    raise InputError(f"{where}: {name}: expected a string or a number as the value, got {type(value).__name__}")


def resolve_context(
    context: UserContext | Mapping[str, object] | str | PathLike[str] | None = None,
    env: Mapping[str, object] | None = None,
) -> UserContext | None:
    """What the Python API accepts as ``context=`` and ``env=``, as one UserContext (None when neither is given).

    ``context`` is a UserContext (from build_context), a dict of model settings, or the path of a --context
    YAML file; ``env`` a dict of environment variables, which win over those already in a UserContext.
    """
    if context is None and env is None:
        return None
    if context is None or isinstance(context, UserContext):
        return context_from_dicts(env, None, base=context)
    if isinstance(context, (str, PathLike)):
        return context_from_dicts(env, None, base=build_context([], [], Path(context)))
    if isinstance(context, Mapping):
        return context_from_dicts(env, context)
    raise InputError(
        f"context: expected a dict of model settings, the path of a settings file or a UserContext, got {type(context).__name__}"
    )
