"""A serving run's iterations, as pure functions over a trace's tables: each engine iteration's window, its phase —
prefill, decode or mixed (a chunked prefill batched with decodes) — and its tokens, and what told them.

An inference engine calls the profiler without a schedule: the unit is one iteration (one forward over the running
batch), marked by vLLM's ``execute_context_<n>(<tokens>)_generation_<m>(<tokens>)`` annotation or its model runner's
``execute_model`` (``kinetosteps.ITERATION``). The phase comes, in order of trust, from the capture itself (SGLang's
per-stage files, a recipe's ``prefill/`` and ``decode/`` directories), from the annotation (context requests are
prefill, generation requests decode), else from the kernels: decode iterations repeat one kernel sequence, so the
iterations whose kernels are the run's most common set are decode and the others prefill. Tokens come from the
annotation, else from the copies of the step's inputs to the device — ``input_ids`` (int32) and ``positions`` (int64),
a pair of copies of 4 and 8 bytes per token. A generation loop that marks no iterations is cut at its read-backs: every
iteration ends by copying its sampled tokens to the host (``readback_markers``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from advisor.ingest.kinetosteps import READBACK_ITERATION
from advisor.names import matching

PHASES = ("prefill", "decode", "mixed")
ITERATION_COLUMNS = ["step", "start", "end", "phase", "phase_from", "tokens", "tokens_from", "context_requests",
                     "decode_requests", "marked_by"]
_CONTEXT = re.compile(r"context_(\d+)\((\d+)\)")
_GENERATION = re.compile(r"generation_(\d+)\((\d+)\)")
# Kernel families a serving iteration's device time splits into (names as CUDA/ROCm kernels and Ascend operators have
# them: inference.md's kernel families); a kernel in none is other compute (GEMMs, norms, activations)
KERNEL_FAMILIES = {
    "attention": re.compile(r"flash|fmha|attention|attn|FusedInferAttentionScore|IncreFlashAttention|"
                            r"PromptFlashAttention", re.IGNORECASE),
    "kv_cache": re.compile(r"reshape_and_cache|concat_and_cache|kv_?cache|ScatterPagedKVCache|ReshapeAndCache",
                           re.IGNORECASE),
    "sampling": re.compile(r"argmax|arg_max|top_?k|top_?p|sampl|multinomial|radix_?sort|\bsort", re.IGNORECASE),
}
SAME_SEQUENCE = 0.8  # Jaccard similarity of two iterations' kernel sets at which they run the same sequence
PREFILL_DEVICE_TIMES = 3.0  # an iteration of decode's kernels with this many times decode's device time is a prefill
MIN_DECODE_REPEATS = 2  # a kernel set seen this often is the decode sequence


def annotated(name: str) -> tuple[int, int, int, int] | None:
    """(context requests, context tokens, generation requests, generation tokens) from a vLLM iteration annotation,
    tolerant of the order and of missing halves (a missing half is 0); None when the name holds neither."""
    context, generation = _CONTEXT.search(name), _GENERATION.search(name)
    if context is None and generation is None:
        return None
    c_requests, c_tokens = (int(context[1]), int(context[2])) if context else (0, 0)
    g_requests, g_tokens = (int(generation[1]), int(generation[2])) if generation else (0, 0)
    return c_requests, c_tokens, g_requests, g_tokens


def phase_of(context_requests: int, decode_requests: int) -> str | None:
    """An iteration's phase from what it runs: only prompts (prefill), only decodes, or both (mixed)."""
    if context_requests and decode_requests:
        return "mixed"
    if context_requests:
        return "prefill"
    return "decode" if decode_requests else None


def input_tokens(copy_bytes: list[float]) -> int | None:
    """The tokens of an iteration from its host-to-device copies: the largest size b (a multiple of 4) copied
    alongside a copy of 2b — ``input_ids`` (int32) next to ``positions`` (int64) — is 4 bytes per token; None without
    such a pair."""
    sizes = {int(b) for b in copy_bytes if b == b and b > 0}
    pairs = [b for b in sizes if b % 4 == 0 and 2 * b in sizes]
    return max(pairs) // 4 if pairs else None


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def sequence_phases(kernel_sets: list[frozenset], device_us: list[float] | None = None) -> list[str | None]:
    """Each iteration's phase from its kernels: the most common non-empty kernel set, when seen at least
    MIN_DECODE_REPEATS times, is decode's; an iteration runs decode's sequence when its set is that close
    (SAME_SEQUENCE), its attention kernels are decode's (prefill and decode attention differ even where the other
    kernels do not, as Ascend's operators keep their names at every shape), and its device time is at most
    PREFILL_DEVICE_TIMES the decode median (a prompt's forward does the work of many tokens); the others are prefill.
    All None when no set repeats (the capture cannot tell)."""
    counted = pd.Series([s for s in kernel_sets if s]).value_counts() if any(kernel_sets) else pd.Series(dtype=int)
    if counted.empty or counted.iloc[0] < MIN_DECODE_REPEATS:
        return [None] * len(kernel_sets)
    decode = counted.index[0]
    attention = KERNEL_FAMILIES["attention"]
    decode_attention = {name for name in decode if attention.search(name)}
    same = [bool(s) and jaccard(s, decode) >= SAME_SEQUENCE and {n for n in s if attention.search(n)} == decode_attention
            for s in kernel_sets]
    if device_us is not None:
        typical = np.median([us for us, match in zip(device_us, same) if match])
        same = [match and us <= PREFILL_DEVICE_TIMES * typical for us, match in zip(device_us, same)]
    return [None if not s else "decode" if match else "prefill" for s, match in zip(kernel_sets, same)]


def serving_iterations(windows: pd.DataFrame, markers: pd.Series, kernel_sets: list[frozenset],
                       copies_in: list[list[float]], stages: list[str | None] | None = None,
                       device_us: list[float] | None = None) -> pd.DataFrame:
    """The iteration table (ITERATION_COLUMNS): ``windows`` (step, start, end) in order, the ``markers``' names (the
    annotation or function marking each), each iteration's compute-kernel names, its host-to-device copy sizes and
    its device time; ``stages``, each iteration's phase as its capture says (a per-stage file or directory; None where
    it does not), overrides the rest."""
    rows = []
    for (step, start, end), name, copies in zip(windows[["step", "start", "end"]].itertuples(index=False), markers, copies_in):
        parsed = annotated(str(name))
        tokens = tokens_from = None
        context = decode = None
        phase = phase_from = None
        if parsed is not None:
            context, c_tokens, decode, g_tokens = parsed
            phase, phase_from = phase_of(context, decode), "annotation"
            tokens, tokens_from = c_tokens + g_tokens, "annotation"
        if tokens is None:
            tokens = input_tokens(copies)
            tokens_from = "input copies" if tokens is not None else None
        marked_by = "read-back" if name == READBACK_ITERATION else "iteration"  # kinetosteps.SERVING_SOURCES
        rows.append([step, float(start), float(end), phase, phase_from, tokens, tokens_from, context, decode, marked_by])
    frame = pd.DataFrame(rows, columns=ITERATION_COLUMNS)
    if stages is not None:
        staged = pd.Series(stages, index=frame.index, dtype=object)
        frame.loc[staged.notna(), "phase"] = staged[staged.notna()]
        frame.loc[staged.notna(), "phase_from"] = "capture"
    if frame["phase"].isna().any():
        guessed = sequence_phases(kernel_sets, device_us)
        unknown = frame["phase"].isna()
        frame.loc[unknown, "phase"] = [g for g, u in zip(guessed, unknown) if u]
        frame.loc[unknown & frame["phase"].notna(), "phase_from"] = "kernel sequence"
    return frame


def family_times(names: pd.Series, durations: pd.Series, communication: pd.Series, steps: pd.Series) -> pd.DataFrame:
    """Per step (index), the device µs of each kernel family, of the collectives (``communication``: a boolean per
    kernel) and of every kernel (device_us); ``steps`` gives each kernel's step (None outside the iterations)."""
    frame = pd.DataFrame({"step": steps, "dur": durations.astype(float)})
    for family, pattern in KERNEL_FAMILIES.items():
        hits = matching(names, pattern, search=True) & ~communication
        frame[f"{family}_us"] = frame["dur"].where(hits, 0.0)
    frame["collective_us"] = frame["dur"].where(communication, 0.0)
    frame = frame.rename(columns={"dur": "device_us"}).dropna(subset=["step"])
    return frame.groupby("step").sum()


_BACKWARD = re.compile(r"backward|Backward|Grad\b")


def generating(kernel_names: pd.Series, host_names: pd.Series) -> bool:
    """Whether a capture looks like a generation loop: it runs attention and sampling kernels, and no backward pass."""
    names = pd.Series(kernel_names.dropna().unique(), dtype=object)
    runs = {family: matching(names, KERNEL_FAMILIES[family], search=True).any()
            for family in ("attention", "sampling")}
    return all(runs.values()) and not matching(host_names, _BACKWARD, search=True).any()


def readback_markers(op_starts: np.ndarray, sampling_starts: np.ndarray, readback_ends: np.ndarray) -> pd.DataFrame:
    """Iteration markers (name, ts, dur) of a generation loop whose trace marks none: an iteration ends when its
    sampled tokens are back on the host — the first read-back to end after a sampling kernel started — and begins at
    the first framework operator after the previous iteration's end (``op_starts``: the host operators' starts). A
    read-back with no sampling since the last is part of the same iteration. Empty with fewer than two iterations."""
    starts, sampled, rows, previous = np.sort(op_starts), np.sort(sampling_starts), [], -np.inf
    for end in np.sort(readback_ends):
        first = np.searchsorted(starts, previous, side="right")
        if not ((sampled > previous) & (sampled < end)).any() or first >= len(starts) or starts[first] >= end:
            continue
        rows.append((READBACK_ITERATION, float(starts[first]), float(end - starts[first])))
        previous = end
    return pd.DataFrame(rows if len(rows) >= 2 else [], columns=["name", "ts", "dur"])


def breakdown_phase(iterations: pd.DataFrame) -> str | None:
    """The phase the step breakdown covers: decode when its iterations (two or more) take at least as long as the
    prefill and mixed ones together — or whatever they take when the capture recorded each phase on its own (per-stage
    files or directories: how long each phase ran then says nothing of the workload) —, else prefill (with the mixed
    ones); None when no phase is known."""
    durations = iterations["end"] - iterations["start"]
    decode = iterations["phase"] == "decode"
    other = iterations["phase"].isin(["prefill", "mixed"])
    staged = (iterations["phase_from"] == "capture").any()
    if decode.sum() >= 2 and (staged or durations[decode].sum() >= durations[other].sum()):
        return "decode"
    if other.any():
        return "prefill"
    return None


def phase_steps(iterations: pd.DataFrame, phase: str) -> list:
    """The steps of ``phase`` ('prefill' takes the mixed iterations too)."""
    wanted = ["prefill", "mixed"] if phase == "prefill" else [phase]
    return iterations.loc[iterations["phase"].isin(wanted), "step"].tolist()


def start_to_start(iterations: pd.DataFrame, phase: str = "decode") -> np.ndarray:
    """The start-to-start times (µs) of consecutive iterations both of ``phase``: the time per output token of decode."""
    starts = iterations["start"].to_numpy(float)
    same = (iterations["phase"] == phase).to_numpy()
    return np.diff(starts)[same[1:] & same[:-1]]


# The serving engines a trace can name: the top-level package of its with_stack frames
ENGINE_PACKAGES = {"vllm_ascend": "vLLM-Ascend", "vllm": "vLLM", "sglang": "SGLang"}
NO_ENGINE = "none"  # with_stack frames, none an engine's: a generation loop of the user's own (transformers, a script)


def serving_engine(code_roots: frozenset[str], vllm_annotations: bool, stage_files: bool) -> str | None:
    """The engine a serving trace shows: its Python frames' package (vLLM-Ascend before vLLM, which it imports),
    vLLM's execute_context_ annotations, SGLang's per-stage files; NO_ENGINE when with_stack recorded frames and none
    is an engine's; None when nothing tells."""
    for package, engine in ENGINE_PACKAGES.items():
        if package in code_roots:
            return engine
    if vllm_annotations:
        return "vLLM"
    if stage_files:
        return "SGLang"
    return NO_ENGINE if code_roots else None
