"""The main job: profile path in, Report out (design §3 data flow)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from advisor.engine.session import RuleEngine
from advisor.facts import BreakdownFact, FactSet, OperatorFact, extract_facts
from advisor.ingest import Profile, load_profile
from advisor.plan import plan_findings, summarize
from advisor.report import CoverageInfo, InputInfo, Report, SkippedFile, ToolInfo
from advisor.rulebook import RuleBook, load_rulebook
from advisor.text import Lang
from advisor.usercontext import UserContext
from advisor.version import VERSION


@lru_cache(maxsize=1)
def default_rulebook() -> RuleBook:
    """The bundled rules and knowledge, loaded once per process."""
    return load_rulebook()


_ENGINES: dict[int, tuple[RuleBook, RuleEngine]] = {}


def engine_for(book: RuleBook) -> RuleEngine:
    """The compiled engine of a rule book, built once per book."""
    cached = _ENGINES.get(id(book))
    if cached is None or cached[0] is not book:
        cached = (book, RuleEngine(list(book.rules.values())))
        _ENGINES[id(book)] = cached
    return cached[1]


def diagnose(
    path: str | Path, *, lang: Lang = "en", rulebook: RuleBook | None = None, context: UserContext | None = None
) -> Report:
    """Diagnose the profile at ``path`` (with what the user told in ``context``: env vars, model settings).

    Raises InputError when ``path`` holds no profile. A profile whose files are partly unusable still
    gives a report: ``status`` is 'partial' (files skipped) or 'empty' (no step or operator data), and
    ``coverage`` says what was read, missing and skipped.
    """
    book = rulebook or default_rulebook()
    profile = load_profile(Path(path))
    facts = extract_facts(profile, context)
    firings = engine_for(book).run(facts.facts)
    derived = [fact for firing in firings for fact in firing.derived]
    all_facts = facts.facts + derived
    return Report(
        tool=ToolInfo(version=VERSION),
        lang=lang,
        status=_status(profile, facts),
        input=_input_info(str(path), profile, facts),
        summary=summarize(facts, firings),
        findings=plan_findings(firings, all_facts, book, lang),
        facts=[{"type": f.family, **f.model_dump()} for f in all_facts],
        coverage=CoverageInfo(
            read=profile.coverage.read,
            missing=profile.coverage.missing,
            skipped=[SkippedFile(file=s.file, reason=s.reason) for s in profile.coverage.skipped],
            warnings=profile.coverage.warnings + facts.warnings,
        ),
    )


def _status(profile: Profile, facts: FactSet) -> str:
    if not facts.of(BreakdownFact) and not facts.of(OperatorFact):
        return "empty"
    return "partial" if profile.coverage.skipped else "complete"


def _input_info(path: str, profile: Profile, facts: FactSet) -> InputInfo:
    context = facts.facts[0]
    steps = sorted({s.step for s in facts.facts if s.family == "step" and s.step is not None})
    return InputInfo(
        path=path,
        format=profile.format,
        ranks=[r.rank for r in profile.ranks],
        steps=steps,
        profiler_level=context.profiler_level,
        hardware=context.hardware,
        torch_npu_version=context.torch_npu_version,
        cann_version=context.cann_version,
    )
