"""The main job: profile path in, Report out (design §3 data flow)."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from dataclasses import dataclass, replace
from functools import lru_cache
from os import PathLike
from pathlib import Path
from typing import Any

from advisor.cluster import run as run_cluster
from advisor.engine.aggregate import aggregate_facts
from advisor.engine.session import Firing
from advisor.errors import InputError
from advisor.facts import BreakdownFact, ContextFact, Fact, FactSet, OperatorFact, extract_facts
from advisor.facts.capture import STEP_SOURCES
from advisor.facts.models import CaptureFact, PhaseFact, ServiceFact
from advisor.findings import build_findings, summarize, withheld_findings
from advisor.ingest import Profile, load_profile
from advisor.report import (
    CoverageInfo,
    DeepRank,
    InputInfo,
    PackUsed,
    Report,
    SkippedFile,
    ToolInfo,
    TriageInfo,
)
from advisor.rulebook import BUILTIN_PACK, RuleBook, load_rulebook
from advisor.runoptions import RunOptions
from advisor.text import LANGS, Lang, collapse_repeats
from advisor.usercontext import UserContext, resolve_context
from advisor.version import VERSION


@lru_cache(maxsize=1)
def default_rulebook() -> RuleBook:
    """The bundled rules and knowledge plus installed packs (broken ones skipped), loaded once per process."""
    return load_rulebook(skip_broken=True)


@dataclass(frozen=True)
class Analysis:
    """A profile, its facts and what the rules made of them (measured and derived facts together)."""

    profile: Profile
    facts: FactSet
    firings: list[Firing]
    all_facts: list[Fact]


def analyse(path: str | Path, book: RuleBook, context: UserContext | None = None, *, options: RunOptions | None = None,
            tables: bool = True) -> Analysis:
    """Read the profile at ``path``, extract its facts and run ``book``'s rules on them, with the run's ``options``
    (``advisor.runoptions``; None: the defaults).

    With ``tables`` False each rank is read and analysed by one task, then the cross-rank facts are computed here
    (``advisor.cluster``; ``profile.ranks`` are then RankMetas, without tables, and this process's memory stays flat
    in the number and size of ranks): ``options.scheduler`` says where the tasks run (None: ADVISOR_SCHEDULER, else
    the built-in process pool; 'local': a Dask LocalCluster; 'tcp://host:8786': an existing Dask cluster; or a
    distributed.Client), ``options.deep`` whether a cluster of more than 64 ranks is triaged ('auto', the default,
    or ADVISOR_DEEP) or every rank analysed in depth ('all'). With ``tables`` True (the default, for advisor
    compare, which reads the kernel tables) every rank is read on this machine and kept in ``profile.ranks`` (the
    scheduler and triage do not apply); the facts are the same.
    """
    options = options or RunOptions()
    if tables:
        profile = load_profile(Path(path), options)
        facts = extract_facts(profile, context, jobs=options.jobs)
    else:
        profile, facts = run_cluster(Path(path), context, options)
    rules = [r for r in book.rules.values() if profile.platform in r.spec.platforms]
    firings = book.engine(rules).run(facts.facts)
    derived = [fact for firing in firings for fact in firing.derived]
    return Analysis(profile, facts, firings, facts.facts + aggregate_facts(rules, facts.facts) + derived)


def diagnose(
    path: str | Path,
    *,
    lang: Lang = "en",
    rulebook: RuleBook | None = None,
    context: UserContext | Mapping[str, object] | str | PathLike[str] | None = None,
    env: Mapping[str, object] | None = None,
    scheduler: Any = None,
    deep: str | None = None,
    options: RunOptions | None = None,
) -> Report:
    """Diagnose the profile at ``path`` with what the profile does not record: ``env`` and ``context``.

    ``env`` is the job's environment variables as a dict (``{"TASK_QUEUE_ENABLE": "2"}``, numbers allowed);
    ``context`` its model settings as a dict (``{"micro_batch_size": 4, "tensor_parallel": 8}``, the fields
    of a --context file), the path of such a YAML file, or a UserContext (``usercontext.build_context``),
    whose variables ``env`` adds to. ``options`` are the run's settings (``advisor.RunOptions``: jobs, file-size
    limit, progress listener, scheduler, deep; see ``advisor.runoptions``); ``scheduler`` and ``deep``, when given,
    are taken over those of ``options`` (they choose where ranks are analysed and how many in depth, see
    ``analyse``). Raises InputError when ``path`` holds no profile, or naming the bad key
    or value of ``env``/``context``. A profile whose files are partly unusable still gives a report:
    ``status`` is 'partial' (files or rule packs skipped) or 'empty' (no step or operator data), and
    ``coverage`` says what was read, missing and skipped.
    """
    check_lang(lang)
    book = rulebook or default_rulebook()
    options = with_overrides(options, scheduler=scheduler, deep=deep)
    analysis = analyse(path, book, resolve_context(context, env), options=options, tables=False)
    return build_report(analysis, book, lang, str(path))


def with_overrides(options: RunOptions | None, **given: Any) -> RunOptions:
    """``options`` (the defaults when None) with the fields that keyword arguments of before gave (those not None)."""
    chosen = {name: value for name, value in given.items() if value is not None}
    return replace(options or RunOptions(), **chosen)


def check_lang(lang: object) -> None:
    """InputError unless ``lang`` is a report language."""
    if lang not in LANGS:
        raise InputError(f"lang: {lang!r} is not a report language; one of {', '.join(LANGS)}")


def build_report(result: Analysis, book: RuleBook, lang: Lang, path: str) -> Report:
    """The report of an analysis: findings planned from the firings, coverage, facts."""
    profile, facts = result.profile, result.facts
    skipped = [SkippedFile(file=s.file, reason=s.reason) for s in profile.coverage.skipped]
    skipped += [
        SkippedFile(file=pack.root, reason=f"rule pack not loaded: {len(pack.problems)} problem(s), first: {pack.problems[0]}")
        for pack in book.skipped
    ]
    skipped += [
        SkippedFile(file=left.file, reason=f"rule file left out of rule pack {left.pack!r}, whose other files were loaded: "
                                           f"{len(left.problems)} problem(s), first: {left.problems[0]}")
        for left in book.skipped_files
    ]
    return Report(
        tool=ToolInfo(version=VERSION, packs=[_pack_used(p) for p in book.packs]),
        lang=lang,
        status=_status(facts, bool(skipped or profile.coverage.partly_read)),
        input=_input_info(path, profile, facts),
        summary=summarize(facts, result.firings),
        findings=build_findings(result.firings, result.all_facts, book, lang),
        withheld=withheld_findings(result.firings, result.all_facts, book, lang),
        facts=[{"type": f.family, **f.model_dump()} for f in result.all_facts],
        coverage=CoverageInfo(
            read=profile.coverage.read,
            missing=profile.coverage.missing,
            skipped=skipped,
            partly_read=[SkippedFile(file=s.file, reason=s.reason) for s in profile.coverage.partly_read],
            warnings=collapse_repeats(profile.coverage.warnings + facts.warnings
                                      + [f"rule pack {pack.root}: {problem}" for pack in book.skipped for problem in pack.problems]
                                      + [f"rule pack {left.pack}: {problem}" for left in book.skipped_files
                                         for problem in left.problems[1:]]),  # the first is in the skipped line
        ),
    )


def _pack_used(pack) -> PackUsed:
    return PackUsed(
        name=pack.name,
        path=None if pack.name == BUILTIN_PACK else pack.root,
        rules=len(pack.rules),
        knowledge=len(pack.knowledge),
        overrides=pack.overrides,
        disabled=pack.disabled,
        version=pack.version,
    )


def _status(facts: FactSet, skipped: bool) -> str:
    if not facts.of(BreakdownFact) and not facts.of(OperatorFact) and not facts.of(ServiceFact):
        return "empty"
    return "partial" if skipped else "complete"


def _input_info(path: str, profile: Profile, facts: FactSet) -> InputInfo:
    (context,) = facts.of(ContextFact)
    steps = sorted({s.step for s in facts.facts if s.family == "step" and s.step is not None})
    marked_by = next(chain((c.steps_described for c in facts.of(CaptureFact) if c.step_source != "none"),
                           (p.iterations_marked_by for p in facts.of(PhaseFact) if p.covered_by_breakdown)),
                     STEP_SOURCES["ProfilerStep"])
    return InputInfo(
        path=path,
        format=profile.format,
        ranks=[r.rank for r in profile.ranks],
        steps=steps,
        steps_marked_by=marked_by if steps else None,
        profiler_level=context.profiler_level,
        hardware=context.hardware,
        torch_npu_version=context.torch_npu_version,
        cann_version=context.cann_version,
        triage=_triage_info(profile.triage),
    )


def _triage_info(triage) -> TriageInfo | None:
    if triage is None:
        return None
    return TriageInfo(ranks=triage.ranks, threshold=triage.threshold,
                      deep=[DeepRank(rank=rank, reasons=why) for rank, why in triage.reasons.items()])
