"""``advisor compare BASE TARGET``: two profiles side by side, and a diagnosis of the difference.

Each side is read and diagnosed as ``advisor diagnose`` would. Then, per step and averaged over ranks:
the step breakdown, every compute operator (matched by type when both sides come from the same platform,
by a normalised class — matmul, attention, normalization … — across vendors), every collective type and
the memory peak are set side by side. Those differences become facts (``step_delta``, ``operator_delta``,
``collective_delta``, ``memory_delta``) and the rules written against them run, so the result is a ranked
diagnosis of the gap. For before/after use, the findings of both sides are matched: those that no longer
fire on TARGET, with their estimated gains, against the step time actually saved.

Two profiles are not comparable when either holds fewer than MIN_STEPS steps (one step's difference cannot be told
from step-to-step variation) or when they were captured at different Ascend profiler levels (which record different
data at different cost): the tables are still set side by side, but the comparison rules do not run, the gain check
is left out and the headline calls nothing a regression; a warning says why.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pandas as pd

from advisor.comparison import CameBack, Comparison, FindingChange, GainCheck, Incomparability, Row, Side
from advisor.diagnose import Analysis, analyse, build_report, default_rulebook
from advisor.engine.session import RuleEngine
from advisor.engine.spec import NotCondition
from advisor.errors import InputError
from advisor.facts import BreakdownFact, Fact, MemoryFact, StepFact
from advisor.facts.host import api_calls
from advisor.facts.memory import MB_PER_KB
from advisor.facts.models import ApiFact, CollectiveDeltaFact, MemoryDeltaFact, OperatorDeltaFact, StepDeltaFact
from advisor.facts.operators import COMMUNICATION_CORES, compute_kernels, in_steps
from advisor.facts.steps import clean_step_rows, int_or_none, mean_step, step_breakdown, times
from advisor.facts.windows import inside, kernel_step_windows, profiler_step_windows
from advisor.findings import build_findings
from advisor.ingest import Profile
from advisor.ingest.model import RankData, coverage_problems
from advisor.ingest.columns import records
from advisor.render.common import fmt_pct, fmt_us, labels
from advisor.report import Finding, Report, ToolInfo
from advisor.rulebook import RuleBook
from advisor.runoptions import RunOptions
from advisor.text import Lang
from advisor.usercontext import UserContext
from advisor.version import VERSION

DELTA_FAMILIES = frozenset({"step_delta", "operator_delta", "collective_delta", "memory_delta"})
OPERATOR_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in (
    ("attention", r"flash|attention|fmha|sdpa"),
    ("convolution", r"conv|dgrad|wgrad|winograd|scudnn|im2col"),
    ("matmul", r"matmul|gemm|gemv|cublas|cutlass|xmma|wgmma"),
    ("softmax", r"softmax"),
    ("normalization", r"layer_?norm|rms_?norm|group_?norm|batch_?norm|instance_?norm|\bbn_|::bn_|^bn"),
    ("activation", r"gelu|silu|swiglu|swish|relu|sigmoid|tanh"),
    ("optimizer", r"adam|sgd|lamb|multi_tensor_apply|applymomentum|^foreach"),
    ("pooling", r"pool"),
    ("embedding", r"embedding|gather|index|scatter"),
    ("layout", r"cast|transdata|transpose|permute|copy|contiguous|memcpy|memset|fill|concat|slice|split|pad|identity|tensormove"),
    ("reduction", r"reduce|sum|mean|argmax|topk|sort"),
    ("elementwise", r"elementwise|add|mul|sub|div|pow|sqrt|exp|neg|where|mask|dropout"),
))
_COLLECTIVE = re.compile(r"(allreduce|allgather|reducescatter|broadcast|alltoall|batchsendrecv|sendrecv|send|receive|recv|reduce)")
_STEP_COMPONENTS = (("step_time", "step_time_us"), ("compute", "compute_us"), ("communication", "comm_not_overlapped_us"),
                    ("free", "free_us"))
MAX_OPERATOR_ROWS = 30
# Above this operator-mix distance BASE and TARGET are taken to run different workloads (see operator_mix_distance).
WORKLOAD_DISTANCE = 0.5
MAX_STEP_IDS_LISTED = 20  # the step ids an unknown chosen step's error lists
MIN_STEPS = 3  # the fewest steps per side that tell a change from step-to-step variation (as median_step needs)


def operator_class(op_type: str) -> str:
    """The vendor-neutral class of an operator or kernel type (its lower-cased type when none fits)."""
    return next((name for name, pattern in OPERATOR_CLASSES if pattern.search(op_type)), op_type.lower())


def collective_type(name: str) -> str:
    """allreduce, allgather … from an HCCL op or NCCL kernel name ('other' when none fits)."""
    match = _COLLECTIVE.search(re.sub(r"[^a-z]", "", name.lower()))
    return {"receive": "recv", "batchsendrecv": "sendrecv"}.get(match.group(1), match.group(1)) if match else "other"


def _rank_steps(facts: list[Fact], rank: int) -> list[int]:
    return [f.step for f in facts if isinstance(f, StepFact) and f.rank == rank and f.step is not None]


def _step_kernels(kernels: pd.DataFrame, facts: list[Fact], rank: int, step: int | None) -> tuple[pd.DataFrame, int]:
    """The kernel rows of the rank's profiled steps (of the one ``step`` when given: none without a step column), and
    the steps they are over."""
    if step is not None:
        if "step" not in kernels:
            return kernels.iloc[0:0], 1
        return kernels.loc[pd.to_numeric(kernels["step"], errors="coerce") == step], 1
    steps = _rank_steps(facts, rank)
    chosen = in_steps(kernels, steps)
    return chosen, max(len(steps) or chosen["step"].nunique(), 1) if "step" in chosen else 1


def _lacks_step(rank: RankData, step: int | None) -> bool:
    """Whether a step is chosen and the rank's kernels have none of it: the rank stays out of that step's means."""
    if step is None:
        return False
    kernels = rank.kernels.frame if rank.kernels is not None else None
    return kernels is None or "step" not in kernels or not (pd.to_numeric(kernels["step"], errors="coerce") == step).any()


def operator_times(profile: Profile, facts: list[Fact], step: int | None = None) -> pd.DataFrame:
    """Per compute operator type: µs and launches per step, mean over the ranks that have kernels (of the one
    ``step`` when given, over the ranks that have it)."""
    tables = []
    for rank in profile.ranks:
        if rank.kernels is None or _lacks_step(rank, step):
            continue
        kernels, per_step = _step_kernels(compute_kernels(rank.kernels.frame), facts, rank.rank, step)
        grouped = kernels.groupby("type")["duration_us"].agg(["sum", "size"]) / per_step
        tables.append(grouped.rename(columns={"sum": "us", "size": "count"}))
    if not tables:
        return pd.DataFrame(columns=["us", "count"])
    return pd.concat(tables).groupby(level=0).sum() / len(tables)


def _shapes(column: pd.Series) -> pd.Series:
    """Input shapes as read: the quotes torch_npu writes around them stripped, N/A and blanks empty."""
    text = column.astype(object).where(column.notna(), "").astype(str).str.strip().str.strip('"').str.strip()
    return text.where(~text.isin(["N/A", "NULL", "nan", "None"]), "")


def shape_times(profile: Profile, facts: list[Fact], step: int | None = None) -> pd.DataFrame | None:
    """Per compute operator type and input shapes: µs and launches per step, mean over the ranks whose kernels record
    input shapes (Level0 and GPU traces do not); None when none does."""
    tables = []
    for rank in profile.ranks:
        if rank.kernels is None or "input_shapes" not in rank.kernels.frame or _lacks_step(rank, step):
            continue
        kernels, per_step = _step_kernels(compute_kernels(rank.kernels.frame), facts, rank.rank, step)
        shapes = _shapes(kernels["input_shapes"])
        if not shapes.ne("").any():
            continue
        keyed = pd.DataFrame({"type": kernels["type"].astype(str), "shapes": shapes, "duration_us": kernels["duration_us"]})
        grouped = keyed.groupby(["type", "shapes"])["duration_us"].agg(["sum", "size"]) / per_step
        tables.append(grouped.rename(columns={"sum": "us", "size": "count"}))
    if not tables:
        return None
    return pd.concat(tables).groupby(level=[0, 1]).sum() / len(tables)


def shape_rows(base: pd.DataFrame | None, target: pd.DataFrame | None, same_platform: bool,
               words: dict[str, str]) -> tuple[list[Row], str | None]:
    """Operators matched by type and input shapes (msprof-analyze's kernel comparison): the MAX_OPERATOR_ROWS whose
    time per step changed most either way, the largest increase first; or no rows and why."""
    if not same_platform:
        return [], words["shapes_other_platform"]
    if base is None or target is None:
        sides = "base_and_target" if base is None and target is None else "base" if base is None else "target"
        return [], words["shapes_absent"].format(sides=words[sides])
    joined = base.merge(target, how="outer", left_index=True, right_index=True, suffixes=("_base", "_target")).fillna(0.0)
    joined["diff"] = joined["us_target"] - joined["us_base"]
    chosen = joined.loc[joined["diff"].abs().sort_values(ascending=False, kind="stable").index[:MAX_OPERATOR_ROWS]]
    chosen = chosen.reset_index(names=["type", "shapes"]).sort_values(["diff", "type", "shapes"],
                                                                      ascending=[False, True, True])
    return [Row(name=r.type, detail=r.shapes or None, base=r.us_base, target=r.us_target, diff=r.diff,
                ratio=r.us_target / r.us_base if r.us_base > 0 else None) for r in chosen.itertuples()], None


def collective_times(profile: Profile, facts: list[Fact], step: int | None = None) -> pd.Series:
    """Per collective type: device µs per step of the communication kernels, mean over ranks (of the one ``step``
    when given, over the ranks that have it)."""
    tables = []
    for rank in profile.ranks:
        if rank.kernels is None or _lacks_step(rank, step):
            continue
        frame = rank.kernels.frame
        core = frame["accelerator_core"].fillna("").astype(str).str.upper() if "accelerator_core" in frame else ""
        comm = frame.loc[(core.isin(COMMUNICATION_CORES) if "accelerator_core" in frame else False)
                         | frame["name"].fillna("").str.lower().str.startswith(("hcom_", "nccl"))]
        if step is None:
            steps = _rank_steps(facts, rank.rank)
            comm, per_step = in_steps(comm, steps), max(len(steps), 1)
        else:
            comm, per_step = _step_kernels(comm, facts, rank.rank, step)
        tables.append(comm.groupby(comm["name"].fillna("").map(collective_type))["duration_us"].sum() / per_step)
    if not tables:
        return pd.Series(dtype=float)
    return pd.concat(tables).groupby(level=0).sum() / len(tables)


def matched_operators(base: pd.DataFrame, target: pd.DataFrame, by: str) -> pd.DataFrame:
    """Outer join of two operator tables on type (``by`` = 'type') or class, biggest regression first."""
    def keyed(table: pd.DataFrame) -> pd.DataFrame:
        frame = table.reset_index(names="type")
        frame["key"] = frame["type"] if by == "type" else frame["type"].map(operator_class)
        frame = frame.sort_values(["us", "type"], ascending=[False, True])
        return frame.groupby("key", sort=False).agg(us=("us", "sum"), count=("count", "sum"),
                                                     types=("type", lambda t: ", ".join(t)))

    joined = keyed(base).merge(keyed(target), how="outer", left_index=True, right_index=True, suffixes=("_base", "_target"))
    joined[["us_base", "us_target", "count_base", "count_target"]] = joined[
        ["us_base", "us_target", "count_base", "count_target"]].fillna(0.0)
    # an empty side's type names are an all-NaN float column: typed as text before it is filled
    joined[["types_base", "types_target"]] = joined[["types_base", "types_target"]].astype(object).fillna("")
    joined["diff"] = joined["us_target"] - joined["us_base"]
    joined = joined.reset_index(names="key")
    return joined.sort_values(["diff", "key"], ascending=[False, True], ignore_index=True)


def api_times(facts: list[Fact]) -> pd.DataFrame:
    """Per framework op (aten::, npu::): host µs and calls per step, mean over the ranks that record any."""
    rows = [(f.rank, f.name, f.us_per_step, f.calls_per_step) for f in facts if isinstance(f, ApiFact)]
    frame = pd.DataFrame(rows, columns=["rank", "name", "us", "calls"])
    ranks = max(frame["rank"].nunique(), 1)
    return frame.groupby("name")[["us", "calls"]].sum() / ranks


def step_api_times(profile: Profile, step: int) -> pd.DataFrame:
    """api_times of the one ``step``: each rank's framework ops inside its ProfilerStep#``step`` window."""
    tables = []
    for rank in profile.ranks:
        if rank.trace is None:
            continue
        windows = profiler_step_windows(rank.trace.host)
        windows = windows.loc[windows["step"] == step]
        if windows.empty:
            continue
        calls = api_calls(rank.trace.host, windows)
        if not calls.empty:
            tables.append(calls.set_index("name").rename(columns={"us_per_step": "us", "calls_per_step": "calls"}))
    if not tables:
        return pd.DataFrame(columns=["us", "calls"])
    return pd.concat(tables)[["us", "calls"]].groupby(level=0).sum() / len(tables)


def api_rows(before: pd.DataFrame, after: pd.DataFrame, words: dict[str, str]) -> list[Row]:
    """The framework ops (host time per step, inclusive of the ops they call) that changed most either way, at most
    MAX_OPERATOR_ROWS, the largest increase first; the calls per step on each side as the detail. Empty unless both
    sides record framework ops (msprof-analyze's API comparison, --enable_api_compare)."""
    return _changed_rows(before, after, "us", "calls", words["api_calls"])


def _changed_rows(before: pd.DataFrame, after: pd.DataFrame, value: str, count: str, detail: str) -> list[Row]:
    """The names (index) whose ``value`` column changed most either way between the two sides, at most
    MAX_OPERATOR_ROWS, the largest increase first, each side's ``count`` per step as the ``detail`` ({base},
    {target}); a name on one side only counts 0 on the other, a name unchanged is not listed. Empty unless both
    sides have rows."""
    if before.empty or after.empty:
        return []
    joined = before.merge(after, how="outer", left_index=True, right_index=True, suffixes=("_base", "_target")).fillna(0.0)
    joined["diff"] = joined[f"{value}_target"] - joined[f"{value}_base"]
    joined = joined.loc[joined["diff"] != 0]
    chosen = joined.loc[joined["diff"].abs().sort_values(ascending=False, kind="stable").index[:MAX_OPERATOR_ROWS]]
    chosen = chosen.reset_index(names="name").sort_values(["diff", "name"], ascending=[False, True])
    return [Row(name=name, detail=detail.format(base=_calls(base_count), target=_calls(target_count)),
                base=base, target=target, diff=diff, ratio=target / base if base > 0 else None)
            for name, base, target, base_count, target_count, diff in zip(
                chosen["name"], chosen[f"{value}_base"], chosen[f"{value}_target"], chosen[f"{count}_base"],
                chosen[f"{count}_target"], chosen["diff"])]


def _memory_windows(rank: RankData, facts: list[Fact], step: int | None) -> pd.DataFrame | None:
    """The step windows a rank's operator allocations are counted in: its ProfilerStep#N windows (the allocations are
    the host's), else its kernels' step windows, of its profiled steps (of ``step`` when given); None without any."""
    for windows in (profiler_step_windows(rank.trace.host) if rank.trace is not None else None,
                    kernel_step_windows(rank.kernels.frame) if rank.kernels is not None else None):
        if windows is not None and not windows.empty:
            steps = [step] if step is not None else _rank_steps(facts, rank.rank)
            return windows.loc[windows["step"].isin(steps)] if steps else windows
    return None


def operator_memory(profile: Profile, facts: list[Fact], step: int | None = None) -> pd.DataFrame:
    """Per operator (operator_memory.csv's Name): MB allocated and allocations per step inside the profiled steps (the
    one ``step`` when given), mean over the ranks that record operator memory. Positive sizes only: a negative size
    is a free whose allocation was not captured."""
    tables = []
    for rank in profile.ranks:
        if rank.operator_memory is None:
            continue
        frame = rank.operator_memory.frame
        frame = frame.loc[frame["size_kb"] > 0]
        windows = _memory_windows(rank, facts, step)
        if windows is None:
            if step is not None:
                continue  # the step cannot be placed on this rank's clock
            per_step = max(len(_rank_steps(facts, rank.rank)), 1)
        elif windows.empty:
            if step is not None:
                continue  # the rank did not profile the chosen step
            frame, per_step = frame.iloc[0:0], 1
        else:
            frame = inside(frame.loc[frame["allocation_us"].notna()], windows, "allocation_us")
            per_step = len(windows)
        # operator_memory.csv names CANN's operators cann::X, the DB's OP_MEMORY X: one name for both exports
        sizes = frame.groupby(frame["name"].astype(str).str.removeprefix("cann::"))["size_kb"]
        tables.append(pd.DataFrame({"mb": sizes.sum() * MB_PER_KB, "count": sizes.size().astype(float)}) / per_step)
    if not tables:
        return pd.DataFrame(columns=["mb", "count"])
    return pd.concat(tables).groupby(level=0).sum() / len(tables)


def memory_rows(before: pd.DataFrame, after: pd.DataFrame, words: dict[str, str]) -> list[Row]:
    """The operators whose memory allocated per step changed most either way, at most MAX_OPERATOR_ROWS, the largest
    growth first; the allocations per step on each side as the detail. Empty unless both sides record operator
    memory (msprof-analyze's memory comparison, --enable_memory_compare)."""
    return _changed_rows(before, after, "mb", "count", words["memory_allocations"])


def _calls(per_step: float) -> str:
    """Calls per step as read: '53', '12,345', '2.5'."""
    return f"{per_step:,.1f}".removesuffix(".0")


def delta_facts(base: Analysis, target: Analysis, base_step_id: int | None = None,
                target_step_id: int | None = None) -> tuple[list[Fact], str]:
    """The difference as facts, and whether operators were matched by type or class; of one chosen step on a side
    where its id is given (the memory peak is the capture's either way)."""
    base_step = _breakdown(base, base_step_id)
    target_step = _breakdown(target, target_step_id)
    scale = base_step.step_time_us if base_step is not None and base_step.step_time_us > 0 else None
    sources = [f"base: {s}" for s in (base_step.sources if base_step else [])][:4] + \
              [f"target: {s}" for s in (target_step.sources if target_step else [])][:4]
    facts: list[Fact] = []
    if base_step is not None and target_step is not None:
        for component, field in _STEP_COMPONENTS:
            b, t = getattr(base_step, field), getattr(target_step, field)
            facts.append(StepDeltaFact(id=f"step_delta:{component}", sources=sources, component=component,
                                       **_delta(b, t, scale)))
    by = "type" if base.profile.platform == target.profile.platform else "class"
    base_ops = operator_times(base.profile, base.facts.facts, base_step_id)
    target_ops = operator_times(target.profile, target.facts.facts, target_step_id)
    if scale is None:
        scale = float(base_ops["us"].sum()) or None
    kernel_sources = [f"base: {base.profile.shown(r.file('kernels'))}" for r in base.profile.ranks[:2]] + \
                     [f"target: {target.profile.shown(r.file('kernels'))}" for r in target.profile.ranks[:2]]
    classes = matched_operators(base_ops, target_ops, "class").set_index("key")["diff"]
    for position, row in enumerate(records(matched_operators(base_ops, target_ops, by)), 1):
        kind = str(row["key"]) if by == "class" else operator_class(str(row["key"]))
        class_diff = float(classes.get(kind, row["diff"]))
        facts.append(OperatorDeltaFact(
            id=f"operator_delta:{position}", sources=kernel_sources, key=str(row["key"]), matched_by=by,
            base_types=row["types_base"], target_types=row["types_target"], base_count=float(row["count_base"]),
            target_count=float(row["count_target"]), position=position, operator_class=kind, class_diff_us=class_diff,
            class_share_of_base_step=class_diff / scale if scale else 0.0,
            **_delta(row["us_base"], row["us_target"], scale)))
    base_comm = collective_times(base.profile, base.facts.facts, base_step_id)
    target_comm = collective_times(target.profile, target.facts.facts, target_step_id)
    for name in sorted(set(base_comm.index) | set(target_comm.index)):
        facts.append(CollectiveDeltaFact(id=f"collective_delta:{name}", sources=kernel_sources, collective=name,
                                         **_delta(base_comm.get(name, 0.0), target_comm.get(name, 0.0), scale)))
    base_peak, target_peak = _peak(base), _peak(target)
    if base_peak is not None and target_peak is not None:
        facts.append(MemoryDeltaFact(id="memory_delta", sources=[f"base: {base_peak[1]}", f"target: {target_peak[1]}"],
                                     base_peak_mb=base_peak[0], target_peak_mb=target_peak[0], diff_mb=target_peak[0] - base_peak[0],
                                     ratio=target_peak[0] / base_peak[0] if base_peak[0] > 0 else None))
    return facts, by


def _delta(base: float | None, target: float | None, scale: float | None) -> dict[str, float | None]:
    b, t = max(float(base or 0.0), 0.0), max(float(target or 0.0), 0.0)
    return {"base_us": b, "target_us": t, "diff_us": t - b, "ratio": t / b if b > 0 else None,
            "share_of_base_step": (t - b) / scale if scale else 0.0}


def _profile_breakdown(analysis: Analysis) -> BreakdownFact | None:
    return next((f for f in analysis.facts.facts if isinstance(f, BreakdownFact) and f.scope == "profile"), None)


def _breakdown(analysis: Analysis, step: int | None) -> BreakdownFact | None:
    """The profile's mean step, or the one ``step`` (mean over the ranks whose step table has it: every step, also
    beyond the MAX_STEP_FACTS a rank lists as step facts)."""
    if step is None:
        return _profile_breakdown(analysis)
    chosen = [StepFact(id=f"step:r{rank.rank}:s{step}", sources=[analysis.profile.shown(rank.step_trace.path)],
                       rank=rank.rank, step=step, **times(row))
              for rank in analysis.profile.ranks if rank.step_trace is not None
              for row in step_breakdown(clean_step_rows(rank.step_trace.columns)[0]) if int_or_none(row.get("step")) == step]
    if not chosen:
        return None
    mean = mean_step(chosen)
    return BreakdownFact(id=f"breakdown:step{step}", sources=sorted({s for f in chosen for s in f.sources}),
                         scope="profile", steps=1, dominant_overhead=mean["dominant_overhead"], **times(mean))


def profiled_steps(analysis: Analysis) -> list[int]:
    """Every step a side profiled: its step tables' steps, its kernels' Step Ids and its ProfilerStep#N windows."""
    steps: set[int] = set()
    for rank in analysis.profile.ranks:
        if rank.step_trace is not None:
            steps.update(s for row in step_breakdown(clean_step_rows(rank.step_trace.columns)[0])
                         if (s := int_or_none(row.get("step"))) is not None)
        if rank.kernels is not None and "step" in rank.kernels.frame:
            steps.update(int(s) for s in pd.to_numeric(rank.kernels.frame["step"], errors="coerce").dropna().unique())
        if rank.trace is not None:
            steps.update(int(s) for s in profiler_step_windows(rank.trace.host)["step"].dropna())
    return sorted(steps)


def check_step(analysis: Analysis, path: str, step: int | None, name: str, words: dict[str, str]) -> None:
    """InputError (exit 2) when the step chosen on a side is not among its profiled steps, naming those that are."""
    if step is None:
        return
    steps = profiled_steps(analysis)
    if step in steps:
        return
    ids = ", ".join(map(str, steps[:MAX_STEP_IDS_LISTED])) + (", …" if len(steps) > MAX_STEP_IDS_LISTED else "")
    raise InputError(f"{words[name]}: no step {step} in {path}; the steps it profiled: {ids or 'none'} "
                     f"(ProfilerStep#N, the Step of step_trace_time.csv)")


def _peak(analysis: Analysis) -> tuple[float, str] | None:
    memory = [f for f in analysis.facts.facts if isinstance(f, MemoryFact)]
    if not memory:
        return None
    top = max(memory, key=lambda f: f.peak_reserved_mb)
    return top.peak_reserved_mb, top.sources[0]


def comparison_engine(book: RuleBook) -> RuleEngine:
    """The book's rules written only against the delta families."""
    return book.engine(r for r in book.rules.values() if rule_families(r.spec) <= DELTA_FAMILIES)


def rule_families(spec) -> set[str]:
    """Every fact family a rule's conditions name, negated ones included."""
    return {(c.not_ if isinstance(c, NotCondition) else c).fact for group in spec.when.groups() for c in group}


def compare(base_path: str | Path, target_path: str | Path, book: RuleBook | None = None, *, lang: Lang = "en",
            context: UserContext | None = None, options: RunOptions | None = None, base_step: int | None = None,
            target_step: int | None = None) -> Comparison:
    """Compare two profiles (the bundled rules when ``book`` is None), each read with the run's ``options`` (jobs,
    file-size limit, progress; see ``advisor.runoptions``); InputError when either holds no profile.

    ``base_step`` / ``target_step`` choose one step of a side (N of ProfilerStep#N, the Step of step_trace_time.csv):
    its tables are then that step's instead of the mean over every profiled step, and the comparison is not
    comparable (one step's difference is not told from step-to-step variation); InputError when the side did not
    profile that step."""
    book = book or default_rulebook()
    words = labels(lang)
    base = analyse(base_path, book, context, options=options)
    base_report = build_report(base, book, lang, str(base_path))
    check_step(base, base_report.input.path, base_step, "base", words)
    target = analyse(target_path, book, context, options=options)
    target_report = build_report(target, book, lang, str(target_path))
    check_step(target, target_report.input.path, target_step, "target", words)
    facts, by = delta_facts(base, target, base_step, target_step)
    base_side, target_side = _side(base_report, base, base_step), _side(target_report, target, target_step)
    reasons = incomparabilities(base_side, target_side, words)
    findings = [] if reasons else diagnose_difference(facts, book, lang, _breakdown(base, base_step),
                                                      _breakdown(target, target_step))
    shapes, shapes_note = shape_rows(shape_times(base.profile, base.facts.facts, base_step),
                                     shape_times(target.profile, target.facts.facts, target_step),
                                     base.profile.platform == target.profile.platform, words)
    base_apis = api_times(base.all_facts) if base_step is None else step_api_times(base.profile, base_step)
    target_apis = api_times(target.all_facts) if target_step is None else step_api_times(target.profile, target_step)
    rows = {f.family: [x for x in facts if x.family == f.family] for f in facts}
    deltas = [f for f in facts if isinstance(f, OperatorDeltaFact)]
    distance = operator_mix_distance(deltas)
    return Comparison(
        tool=ToolInfo(version=VERSION, packs=base_report.tool.packs), lang=lang, base=base_side, target=target_side,
        comparable=not reasons, not_comparable_because=reasons,
        headline=(_not_comparable_headline(base_side, target_side, words) if reasons
                  else _headline(base_side, target_side, findings, base_report, target_report, words))
        + _serving_headline(serving_rows(base_report, target_report), words),
        breakdown=[_row(f.component, f) for f in rows.get("step_delta", [])],
        operators=[_row(f.key, f, _types(f, by)) for f in _largest_changes(rows.get("operator_delta", []))],
        operators_matched_by=by,
        collectives=[_row(f.collective, f) for f in rows.get("collective_delta", [])],
        operator_shapes=shapes, operator_shapes_note=shapes_note,
        apis=api_rows(base_apis, target_apis, words),
        memory=[Row(name="peak_reserved_mb", base=f.base_peak_mb, target=f.target_peak_mb, diff=f.diff_mb, ratio=f.ratio)
                for f in rows.get("memory_delta", [])],
        operator_memory=memory_rows(operator_memory(base.profile, base.facts.facts, base_step),
                                    operator_memory(target.profile, target.facts.facts, target_step), words),
        serving=serving_rows(base_report, target_report),
        findings=findings,
        changes=_changes(base_report, target_report),
        gain_check=None if reasons else _gain_check(base_report, target_report, base_side, target_side),
        facts=[{"type": f.family, **f.model_dump()} for f in facts],
        operator_mix_distance=distance,
        warnings=[r.message for r in reasons]
                 + [f"base: {w}" for w in coverage_problems(base_report.coverage)]
                 + [f"target: {w}" for w in coverage_problems(target_report.coverage)]
                 + ([workload_warning(deltas, distance, by, words)] if distance is not None and distance >= WORKLOAD_DISTANCE else []),
    )


def diagnose_difference(facts: list[Fact], book: RuleBook, lang: Lang, base_step: BreakdownFact | None,
                        target_step: BreakdownFact | None) -> list[Finding]:
    """The comparison rules' findings on the delta facts. A difference is time TARGET spends: its gain is charged to
    TARGET's step, its share is of BASE's."""
    firings = comparison_engine(book).run(facts)
    return build_findings(firings, facts + ([base_step] if base_step else []), book, lang,
                          budget_facts=[target_step] if target_step else [])


def incomparabilities(base: Side, target: Side, words: dict[str, str]) -> list[Incomparability]:
    """Why the two sides cannot be compared: a side with one chosen step or fewer than MIN_STEPS steps, or two
    different profiler levels (only where both sides record one: a GPU trace records none). Empty when they can."""
    sides = (("base", base), ("target", target))
    chosen = [(name, side.chosen_step) for name, side in sides if side.chosen_step is not None]
    reasons = [Incomparability(kind="chosen_step", side=chosen[0][0] if len(chosen) == 1 else None,
                               message=words["not_comparable_chosen_step"].format(steps=", ".join(
                                   words["chosen_step_of"].format(side=words[name], step=step) for name, step in chosen)))
               ] if chosen else []
    reasons += [Incomparability(kind="few_steps", side=name, message=words["not_comparable_few_steps"].format(
                    side=words[name], count=side.step_count, minimum=MIN_STEPS))
                for name, side in sides if side.chosen_step is None and side.step_count < MIN_STEPS]
    if base.profiler_level and target.profiler_level and base.profiler_level != target.profiler_level:
        reasons.append(Incomparability(kind="profiler_levels", message=words["not_comparable_levels"].format(
            base=base.profiler_level, target=target.profiler_level)))
    return reasons


def step_count(facts: list[Fact]) -> int:
    """The steps a profile's mean step is over: the fewest of any rank's breakdown (0 without one)."""
    return min((f.steps for f in facts if isinstance(f, BreakdownFact) and f.scope == "rank"), default=0)


def operator_mix_distance(deltas: list[OperatorDeltaFact]) -> float | None:
    """Total variation distance between the two sides' operator mixes: each side's compute time per step split into
    shares over the matched keys (types, or classes across vendors); half the sum of the differences of the shares.

    It is the share of compute time that would have to move from some operators to others to make one mix the
    other's: a type or class that only one side runs counts with its whole share, so two runs of one program (a
    faster machine, a fix that removes a stall) stay near 0, a fused kernel replacing a few operators moves it by
    their share, and two different programs come near 1. None when a side has no operator time.
    """
    base_total = sum(f.base_us for f in deltas)
    target_total = sum(f.target_us for f in deltas)
    if base_total <= 0 or target_total <= 0:
        return None
    return 0.5 * sum(abs(f.base_us / base_total - f.target_us / target_total) for f in deltas)


def workload_warning(deltas: list[OperatorDeltaFact], distance: float, by: str, words: dict[str, str]) -> str:
    """The warning that the two sides seem to run different workloads, with the operators that differ most."""
    base_total = sum(f.base_us for f in deltas)
    target_total = sum(f.target_us for f in deltas)
    largest = sorted(deltas, key=lambda f: (-abs(f.base_us / base_total - f.target_us / target_total), f.key))[:3]
    shares = ", ".join(f"{f.key} {f.base_us / base_total:.0%} → {f.target_us / target_total:.0%}" for f in largest)
    only = sum(f.base_us / base_total for f in deltas if f.target_us <= 0) + sum(f.target_us / target_total for f in deltas if f.base_us <= 0)
    return words["workload_warning"].format(distance=distance, by=words["workload_by_" + by], shares=shares,
                                            only=only / 2, threshold=WORKLOAD_DISTANCE)


def _largest_changes(deltas: list[OperatorDeltaFact]) -> list[OperatorDeltaFact]:
    """The operators that changed most either way, regressions first, at most MAX_OPERATOR_ROWS."""
    chosen = sorted(deltas, key=lambda f: -abs(f.diff_us))[:MAX_OPERATOR_ROWS]
    return sorted(chosen, key=lambda f: f.position)


def _types(fact: OperatorDeltaFact, by: str) -> str | None:
    return f"{fact.base_types or '–'} → {fact.target_types or '–'}" if by == "class" else None


def _row(name: str, fact, detail: str | None = None) -> Row:
    return Row(name=name, detail=detail, base=fact.base_us, target=fact.target_us, diff=fact.diff_us, ratio=fact.ratio)


def _side(report: Report, analysis: Analysis, chosen: int | None = None) -> Side:
    step = _breakdown(analysis, chosen)
    return Side(path=report.input.path, format=report.input.format, platform=analysis.profile.platform,
                ranks=report.input.ranks, steps=report.input.steps, hardware=report.input.hardware, status=report.status,
                step_time_us=step.step_time_us if step else None,
                median_step_us=median_step(analysis.facts.facts) if chosen is None else None,
                step_count=step_count(analysis.facts.facts) if chosen is None else 1,
                profiler_level=report.input.profiler_level, chosen_step=chosen)


def median_step(facts: list[Fact]) -> float | None:
    """The median over steps of each step's time (mean over the ranks that have it); None with fewer than 3 steps."""
    times: dict[int, list[float]] = {}
    for fact in facts:
        if isinstance(fact, StepFact) and fact.step is not None and fact.step_time_us is not None:
            times.setdefault(fact.step, []).append(fact.step_time_us)
    if len(times) < 3:
        return None
    return float(statistics.median(statistics.fmean(values) for values in times.values()))


def _headline(base: Side, target: Side, findings: list[Finding], base_report: Report, target_report: Report,
              words: dict[str, str]) -> str:
    """The step times, then: for a step that got shorter, BASE's findings that no longer fire and what is still worse on
    TARGET; otherwise the first finding about the difference."""
    shorter = False
    if base.step_time_us is None or target.step_time_us is None:
        text = words["headline_no_steps"].format(side=words["base"] if base.step_time_us is None else words["target"])
    else:
        diff = target.step_time_us - base.step_time_us
        share = abs(diff) / base.step_time_us if base.step_time_us > 0 else 0.0
        key = "headline_same" if abs(diff) < 0.05 else "headline_longer" if diff > 0 else "headline_shorter"
        shorter = key == "headline_shorter"
        text = words[key].format(
            diff=fmt_us(abs(diff)), share=fmt_pct(share), target=fmt_us(target.step_time_us), base=fmt_us(base.step_time_us))
    resolved = [f for f in _resolved(base_report, target_report) if (f.estimated_gain_us or 0.0) > 0]
    if shorter and resolved and base.platform == target.platform:
        text += " " + words["headline_resolved"].format(findings="; ".join(_titled(f) for f in resolved))
    if findings:
        key = "headline_remaining" if shorter else "headline_first"
        text += " " + words[key].format(finding=_titled(findings[0]))
    return text


SERVING_MEASURES = (("ttft_proxy_us", "prefill", "first_duration_us"), ("tpot_us", "decode", "start_to_start_us"),
                    ("decode_tokens_per_s", "decode", "tokens_per_s"), ("decode_batch", "decode", "tokens_per_iteration"))


def serving_rows(base: Report, target: Report) -> list[Row]:
    """Two serving runs' TTFT proxy, TPOT, decode tokens/s and batch, each where both sides record it."""
    rows = []
    for name, phase, field in SERVING_MEASURES:
        values = [next((getattr(p, field) for p in report.summary.phases if p.phase == phase), None) for report in (base, target)]
        if None not in values:
            before, after = values
            rows.append(Row(name=name, base=before, target=after, diff=after - before, ratio=after / before if before else None))
    return rows


def _serving_headline(rows: list[Row], words: dict[str, str]) -> str:
    """What the comparison of two serving runs adds to the headline: TPOT and the TTFT proxy, before and after."""
    found = {name: row for name in ("tpot_us", "ttft_proxy_us") for row in rows if row.name == name}
    if not found:
        return ""
    parts = [words[f"serving_{name}"].format(base=fmt_us(row.base), target=fmt_us(row.target),
                                             change=f"{(row.ratio - 1) * 100:+.1f} %" if row.ratio is not None else "–")
             for name, row in found.items()]
    return " " + "; ".join(parts) + "."  # TPOT first: it is what most tokens cost


def _not_comparable_headline(base: Side, target: Side, words: dict[str, str]) -> str:
    """The headline of two profiles that cannot be compared: their step times as recorded, no verdict."""
    return words["headline_not_comparable"].format(
        **{name: f"{words[name]} {fmt_us(side.step_time_us) if side.step_time_us is not None else '–'}"
           for name, side in (("base", base), ("target", target))})


def _titled(finding: Finding) -> str:
    return finding.title + (f" ({finding.key})" if finding.key else "")


def _resolved(base: Report, target: Report) -> list[Finding]:
    """BASE's findings that TARGET no longer has."""
    after = {(f.id, f.key) for f in target.findings}
    return [f for f in base.findings if (f.id, f.key) not in after]


def _changes(base: Report, target: Report) -> list[FindingChange]:
    before = {(f.id, f.key): f for f in base.findings}
    after = {(f.id, f.key): f for f in target.findings}
    changes = []
    for key in sorted(before.keys() | after.keys(), key=lambda k: (k[0], k[1] or "")):
        b, t = before.get(key), after.get(key)
        change = "persisting" if b and t else "resolved" if b else "new"
        changes.append(FindingChange(id=key[0], key=key[1], title=(b or t).title, change=change,
                                     base_gain_us=b.estimated_gain_us if b else None,
                                     target_gain_us=t.estimated_gain_us if t else None,
                                     base_severity=b.severity if b else None, target_severity=t.severity if t else None))
    return changes


def _gain_check(base: Report, target: Report, base_side: Side, target_side: Side) -> GainCheck | None:
    """Only for two profiles of the same platform, when a finding of BASE no longer fires on TARGET."""
    if base_side.platform != target_side.platform or base_side.step_time_us is None or target_side.step_time_us is None:
        return None
    resolved = _resolved(base, target)
    if not resolved:
        return None
    estimate = sum(f.estimated_gain_us or 0.0 for f in resolved)
    saved = base_side.step_time_us - target_side.step_time_us
    came_back = _came_back(base, target, estimate) if 0 < estimate and saved < estimate else []
    median_saved = (base_side.median_step_us - target_side.median_step_us
                    if base_side.median_step_us is not None and target_side.median_step_us is not None else None)
    return GainCheck(resolved=len(resolved), estimated_gain_us=estimate, step_reduction_us=saved,
                     delivered_ratio=saved / estimate if estimate > 0 else None,
                     grown_title=came_back[0].title if came_back else None,
                     grown_us=came_back[0].grown_us if came_back else None, came_back=came_back,
                     median_step_reduction_us=median_saved,
                     median_delivered_ratio=median_saved / estimate if median_saved is not None and estimate > 0 else None)


CAME_BACK_SHOWN = 3


def _came_back(base: Report, target: Report, estimate: float) -> list[CameBack]:
    """TARGET's findings with measured gains that grew from BASE's (or are new) by more than 5 % of ``estimate``, the
    CAME_BACK_SHOWN largest. An assumed gain is no time the profile shows, so it never counts as time come back."""
    before = {(f.id, f.key): f.estimated_gain_us for f in base.findings}
    grown = []
    for finding in target.findings:
        if finding.estimated_gain_us is None or finding.gain_basis != "measured":
            continue
        new = (finding.id, finding.key) not in before
        previous = 0.0 if new else before[(finding.id, finding.key)]
        if previous is None:
            continue
        growth = finding.estimated_gain_us - previous
        if growth > 0.05 * estimate:
            grown.append(CameBack(title=_titled(finding), key=finding.key, grown_us=growth, new=new))
    return sorted(grown, key=lambda c: -c.grown_us)[:CAME_BACK_SHOWN]
