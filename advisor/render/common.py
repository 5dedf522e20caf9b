"""What every renderer shares: labels in the report's language, number formatting, and what a report shows.

A report is shown at a level of ``detail``: ``full`` (everything) or ``brief`` (the verdict, the top actions
with their gains, the per-rank table — for a big cluster its slowest and fastest ranks and a summary line —
and how to get the full report), and its findings may be filtered (``max_findings``, ``min_severity``): the
``View``. Every renderer takes one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

import yaml

from advisor.resources import data_dir
from advisor.vocabulary import SEVERITIES, SEVERITY_ORDER, Severity

if TYPE_CHECKING:
    from advisor.report import Report

# ANSI CSI and OSC sequences, C0/C1 controls but tab and newline, and the bidirectional overrides and
# isolates that can make displayed text read differently from what it is ("Trojan Source").
_CONTROL = re.compile(
    r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def strip_control(text: str) -> str:
    """Remove ANSI escape sequences, control characters (tabs and newlines stay) and bidi overrides."""
    return _CONTROL.sub("", text)


# Markdown. Text from the input (paths, rank and operator names) is escaped character by character; text from
# rule packs (knowledge) may use `inline code` but can make no link, image or raw HTML. Bare URLs and e-mail
# addresses that GitHub/GitLab would turn into links by themselves get a zero-width joiner after the scheme,
# the "www" or the "@": they read the same and link nowhere.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}|~#!])")
_MD_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_AUTOLINK = re.compile(
    r"(?i)(?<![\w])(https?|ftp|mailto|xmpp)(?=:)"          # scheme://…, mailto:…
    r"|(?i:(?<![\w.])(www)(?=\.))"                         # www.…
    r"|(?<=[A-Za-z0-9.+_-])(@)(?=[A-Za-z0-9_-]+\.[A-Za-z0-9])"  # user@host.tld
)
ZERO_WIDTH_JOINER = "\u200d"


def break_autolinks(text: str) -> str:
    """``text`` with a zero-width joiner where a Markdown renderer would start an automatic link."""
    return _AUTOLINK.sub(lambda m: m.group(0) + ZERO_WIDTH_JOINER, text)


def html_text(text: str) -> str:
    """Only &, < and > matter in Markdown text: with them escaped no raw HTML (nor ``<scheme:…>`` link) gets through."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_text(text: str) -> str:
    """Input-derived text for Markdown: controls removed, HTML and Markdown characters escaped, automatic links
    broken, on one line."""
    text = _MD_SPECIAL.sub(r"\\\1", html_text(break_autolinks(strip_control(text))))
    return " ".join(text.splitlines())


def md_knowledge(text: str) -> str:
    """Knowledge text for Markdown, on one line: `inline code` kept; outside it HTML escaped and brackets escaped,
    so a rule pack can put no link (``[x](javascript:…)``) and no image (``![x](https://tracker/…)``) into a report."""
    parts, position = [], 0
    for match in _MD_INLINE_CODE.finditer(text):
        parts.append(_md_prose(text[position : match.start()]))
        parts.append(match.group(0).replace("\n", " "))
        position = match.end()
    parts.append(_md_prose(text[position:]))
    return " ".join("".join(parts).splitlines())


def _md_prose(text: str) -> str:
    return html_text(strip_control(text)).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


@lru_cache(maxsize=1)
def _all_labels() -> dict[str, dict[str, str]]:
    return yaml.safe_load((data_dir("reports") / "labels.yaml").read_text(encoding="utf-8"))


def labels(lang: str) -> dict[str, str]:
    """The report labels in ``lang`` (English where a label is not translated)."""
    table = _all_labels()
    return {**table["en"], **table.get(lang, {})}


def report_labels(report: Report) -> dict[str, str]:
    """The labels of one report: a capture without step markers speaks of the capture, not of a step."""
    words = labels(report.lang)
    if not report.input.steps:
        words.update(per_step=words["in_capture"], of_step=words["of_capture"])
    elif any(phase.covered_by_breakdown for phase in report.summary.phases):  # a serving run: its steps are iterations
        words.update(per_step=words["per_iteration"], of_step=words["of_iteration"])
    from advisor.ingest.formats import platform_of  # the input formats' registry (pandas): only where a report renders

    words["step_note"] = words[f"step_note_{platform_of(report.input.format)}"]
    if not report.input.format.startswith("ascend"):
        words["collect_hint"] = words["collect_hint_gpu"]
    elif report.input.profiler_level in ("Level1", "Level2"):  # the level is right: what is missing is files
        words["collect_hint"] = words["collect_hint_level1"]
    return words


Detail = Literal["brief", "full"]
BRIEF_FINDINGS = 5  # top actions in a brief report, unless max_findings says otherwise
RANK_ROWS = 16  # a per-rank table longer than this shows its slowest and fastest ranks
MOSTLY_BUSY = 0.5  # a host-bound verdict is said as mostly busy when the device computes at least this share
MOSTLY_WAITING = 0.5  # a communication-bound verdict is said as waiting when more than this share of collective time moves no data
SLOWEST_RANKS, FASTEST_RANKS = 8, 4


@dataclass(frozen=True)
class View:
    """How much of a report to show: ``detail`` (terminal and Markdown; HTML and JSON are always full) and which
    findings (at most ``max_findings``, those at ``min_severity`` or above; every format, JSON included)."""

    detail: Detail = "full"
    max_findings: int | None = None
    min_severity: Severity | None = None

    def __post_init__(self) -> None:
        if self.detail not in ("brief", "full"):
            raise ValueError(f"detail is 'brief' or 'full', not {self.detail!r}")
        if self.min_severity is not None and self.min_severity not in SEVERITIES:
            raise ValueError(f"min_severity is one of {', '.join(SEVERITIES)}, not {self.min_severity!r}")
        if self.max_findings is not None and self.max_findings < 0:
            raise ValueError("max_findings cannot be negative")

    @property
    def filtered(self) -> bool:
        return self.max_findings is not None or self.min_severity is not None


FULL = View()


def selected_findings(findings: list, view: View) -> list:
    """The findings ``view`` keeps, in the report's order (severity, then gain)."""
    if view.min_severity is not None:
        limit = SEVERITY_ORDER[view.min_severity]
        findings = [f for f in findings if SEVERITY_ORDER[f.severity] <= limit]
    return list(findings if view.max_findings is None else findings[: view.max_findings])


def filtered_report(report: Report, view: View) -> Report:
    """The report with only the findings ``view`` keeps (the same object when it keeps them all)."""
    if not view.filtered:
        return report
    return report.model_copy(update={"findings": selected_findings(report.findings, view)})


def severity_counts(findings: list, words: dict[str, str]) -> str:
    """'2 high, 4 medium, 11 low' (severities with none left out)."""
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    return ", ".join(f"{n} {words['severity_' + s]}" for s, n in counts.items() if n)


@dataclass(frozen=True)
class BriefSummary:
    """What a brief report shows of the findings, and the sentence that points to the full report."""

    shown: list
    left_out: int
    pointer: str
    command: str


def brief_summary(report: Report, view: View, words: dict[str, str]) -> BriefSummary:
    """The top actions of a brief report, and how to get the rest (the full report's command line)."""
    kept = selected_findings(report.findings, view)
    shown = kept[: view.max_findings if view.max_findings is not None else BRIEF_FINDINGS]
    command = f"advisor diagnose {shlex.quote(strip_control(report.input.path))} --detail full"
    parts = []
    if len(shown) < len(report.findings):
        parts.append(words["brief_shown"].format(shown=len(shown), total=len(report.findings),
                                                 counts=severity_counts(report.findings, words)))
    if report.withheld:
        parts.append(words["brief_withheld"].format(count=len(report.withheld),
                                                    rules=", ".join(w.id for w in report.withheld)))
    parts.append(words["brief_pointer"])
    return BriefSummary(shown=shown, left_out=len(report.findings) - len(shown), pointer=" ".join(parts), command=command)


@dataclass(frozen=True)
class TimeUnit:
    """One unit for a column (or a table) of durations, chosen from its largest value."""

    label: str
    divisor: float
    decimals: int

    def __call__(self, value: float | None) -> str:
        return "–" if value is None else f"{value / self.divisor:,.{self.decimals}f}"


def time_unit(values: list[float | None]) -> TimeUnit:
    """µs below 1 ms, ms below 10 s, else s — for the largest of ``values``."""
    largest = max((v for v in values if v is not None), default=0.0)
    if largest >= 10_000_000:
        return TimeUnit("s", 1_000_000, 2)
    if largest >= 1_000:
        return TimeUnit("ms", 1_000, 2)
    return TimeUnit("µs", 1, 1)


@dataclass(frozen=True)
class RankTable:
    """The rows of a per-rank table: every rank, or for a big cluster the slowest and fastest with a summary."""

    rows: list
    note: str | None
    unit: TimeUnit


def rank_table(report: Report, words: dict[str, str], detail: Detail = "full") -> RankTable:
    """The per-rank step table; a brief report of more than RANK_ROWS ranks keeps the SLOWEST_RANKS slowest
    and FASTEST_RANKS fastest (slowest first) and says so in a summary line."""
    ranks = report.summary.per_rank
    unit = time_unit([r.step_time_us for r in ranks])
    if detail == "full" or len(ranks) <= RANK_ROWS:
        return RankTable(list(ranks), None, unit)
    by_time = sorted(ranks, key=lambda r: (r.step_time_us, r.rank))
    chosen = {r.rank for r in by_time[-SLOWEST_RANKS:]} | {r.rank for r in by_time[:FASTEST_RANKS]}
    times = sorted(r.step_time_us for r in ranks)
    middle = len(times) // 2
    median = times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2
    verdicts: dict[str, int] = {}
    for r in ranks:
        verdicts[r.bottleneck] = verdicts.get(r.bottleneck, 0) + 1
    note = words["ranks_sampled"].format(
        ranks=len(ranks), slowest=SLOWEST_RANKS, fastest=FASTEST_RANKS,
        fast=fmt_us(by_time[0].step_time_us), fast_rank=by_time[0].rank, median=fmt_us(median),
        slow=fmt_us(by_time[-1].step_time_us), slow_rank=by_time[-1].rank,
        verdicts=", ".join(f"{n} {words['bottleneck_' + kind]}" for kind, n in sorted(verdicts.items(), key=lambda kv: -kv[1])),
    )
    return RankTable(sorted((r for r in ranks if r.rank in chosen), key=lambda r: (-r.step_time_us, r.rank)), note, unit)


def fmt_us(value: float | None) -> str:
    """A duration: µs below 1 ms, ms below 1 s, else s (the units of the tables, ``time_unit``)."""
    if value is None:
        return "–"
    if value >= 1_000_000:
        return f"{value / 1_000_000:,.2f} s"
    if value >= 1_000:
        return f"{value / 1000:,.2f} ms"
    return f"{value:,.1f} µs"


def fmt_ranks(numbers: list[int]) -> str:
    """Rank or step numbers with runs of three or more shortened: '0, 1', '0–7, 12, 14–15'; '–' for none."""
    values = sorted(set(numbers))
    parts, start = [], 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and values[end + 1] == values[end] + 1:
            end += 1
        if end - start >= 2:
            parts.append(f"{values[start]}–{values[end]}")
        else:
            parts.extend(str(v) for v in values[start : end + 1])
        start = end + 1
    return ", ".join(parts) or "–"


def fmt_steps(numbers: list[int], marked_by: str | None = None) -> str:
    """How many steps and which (and what marked them): '1 (#50)', '6 (#3–8; ProfilerStep#N markers)'; '–' for none
    (a step number alone read as a count)."""
    return f"{len(set(numbers))} (#{fmt_ranks(numbers)}{f'; {marked_by}' if marked_by else ''})" if numbers else "–"


def profile_line(report: Report, words: dict[str, str]) -> str:
    """One line on what was profiled: format, ranks, steps, profiler level, hardware and versions, the known ones."""
    info = report.input
    parts = [f"{words['format']}: {info.format}", f"{words['ranks']}: {fmt_ranks(info.ranks)}"]
    if info.steps:
        parts.append(f"{words['step_ids']}: {fmt_steps(info.steps, info.steps_marked_by)}")
    if info.format.startswith("ascend") and info.profiler_level:
        parts.append(f"{words['profiler_level']}: {info.profiler_level}")
    if info.hardware:
        parts.append(f"{words['hardware']}: {info.hardware}")
    versions = version_text(report)
    if versions:
        parts.append(versions)
    return " · ".join(parts)


def version_text(report: Report) -> str:
    """'torch_npu 2.1.0, CANN 8.0.RC1' with the versions the profile records; '' when it records none."""
    known = [f"{name} {value}" for name, value in (("torch_npu", report.input.torch_npu_version),
                                                    ("CANN", report.input.cann_version)) if value]
    return ", ".join(known)


def fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def fmt_value(value: object) -> str:
    """An evidence value: floats shortened, everything else as text."""
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1 else f"{value:,.2f}"
    return str(value)


def gain_text(finding, words: dict[str, str]) -> str:
    if finding.estimated_gain_us is None:
        if finding.claimed_gain_us is not None:  # estimated, but the profile's step holds none of that time
            return words["gain_none_measured"].format(bucket=finding.charged_to or "step")
        return words["gain_capture" if finding.category == "profiling" else "gain_unknown"]
    if finding.estimated_gain_us < 0.05 and finding.shares_time_with and finding.claimed_gain_us:
        return words["gain_all_shared"].format(claimed=fmt_us(finding.claimed_gain_us),
                                               others=", ".join(finding.shares_time_with))
    share = (words["gain_ratio"].format(ratio=fmt_pct(finding.estimated_gain_ratio), of_step=words["of_step"])
             if finding.estimated_gain_ratio is not None else "")
    text = words["gain_amount"].format(time=fmt_us(finding.estimated_gain_us), per_step=words["per_step"], share=share)
    if finding.gain_basis:
        text += words["gain_comma"] + words["gain_" + finding.gain_basis]
    notes = []
    if finding.instrumented_by:
        notes.append(words["gain_instrumented"].format(settings=", ".join(finding.instrumented_by)))
    if finding.behind_outside_wait_us is not None:
        notes.append(words["gain_behind_outside_wait"].format(wait=fmt_us(finding.behind_outside_wait_us)))
    if finding.shares_time_with and finding.claimed_gain_us is not None:
        notes.append(words["gain_shared"].format(claimed=fmt_us(finding.claimed_gain_us),
                                                 others=", ".join(finding.shares_time_with)))
    elif finding.claimed_gain_us is not None and finding.claimed_gain_us > finding.estimated_gain_us * 1.01:
        notes.append(words["gain_capped"].format(claimed=fmt_us(finding.claimed_gain_us),
                                                 bucket=finding.charged_to or "step"))
    return words["gain_semicolon"].join([text, *notes])


def verdict_sentence(report: Report, words: dict[str, str]) -> str:
    """The one-sentence verdict at the top of every report."""
    summary = report.summary
    if summary.step_time_us is None:
        service = next((f for f in report.facts if f["type"] == "service"), None)
        return words["verdict_unknown"] if service is None else service_sentence(service, words)
    covered = next((p for p in summary.phases if p.covered_by_breakdown), None)
    if covered is not None:
        sentence = serving_sentence(summary, covered, words, bottleneck_words(report, words, covered.phase))
    else:
        sentence = words["verdict_sentence" if report.input.steps else "verdict_no_steps"].format(
            bottleneck=bottleneck_words(report, words),
            compute=fmt_pct(summary.compute_ratio),
            communication=fmt_pct(summary.communication_ratio),
            free=fmt_pct(summary.free_ratio),
            step=fmt_us(summary.step_time_us),
        )
    if any(f["type"] == "capture" and not f["steady_state"] for f in report.facts):
        sentence += " " + words["verdict_warmup"]
    return sentence


def service_sentence(service: dict, words: dict[str, str]) -> str:
    """The verdict of service-level data alone (msServiceProfiler): what the requests saw, where the files say it."""
    number = (lambda value, spec=",.1f": None if value is None else format(value, spec))
    parts = [words["service_requests"].format(count=f"{service['request_count']:,}")]
    if service.get("ttft_p50_ms") is not None:
        queued = service.get("queue_share_of_ttft")
        parts.append(words["service_ttft"].format(value=number(service["ttft_p50_ms"]))
                     + ("" if queued is None else " " + words["service_queued"].format(share=fmt_pct(queued))))
    if service.get("tpot_p50_ms") is not None:
        parts.append(words["service_tpot"].format(value=number(service["tpot_p50_ms"]),
                                                  p90=number(service.get("tpot_p90_ms")) or "–"))
    if service.get("decode_batch_mean") is not None:
        limit = service.get("max_batch_size")
        parts.append(words["service_batch"].format(value=number(service["decode_batch_mean"]))
                     + ("" if limit is None else " " + words["service_limit"].format(limit=f"{limit:g}")))
    if service.get("kv_usage_max") is not None:
        parts.append(words["service_kv"].format(share=fmt_pct(service["kv_usage_max"])))
    return words["verdict_service"].format(details="; ".join(parts))


def bottleneck_words(report: Report, words: dict[str, str], phase: str | None = None) -> str:
    """The verdict's bottleneck: communication-bound is said as waiting when most of the collectives' time moves no
    data (the ranks arrive at different times: the cause is the rank that arrives last, not the network); host-bound
    with the device computing most of the time as mostly busy; a busy decode as device-bound (at a small batch its
    GEMMs read the weights: memory, not math — the verdict's next sentence says which)."""
    bottleneck = report.summary.bottleneck
    if bottleneck == "compute" and phase == "decode":
        return words["bottleneck_device_decode"]
    if bottleneck == "host" and (report.summary.compute_ratio or 0.0) >= MOSTLY_BUSY:
        return words["bottleneck_host_partly"]
    if bottleneck == "communication":
        collectives = [f for f in report.facts if f["type"] == "communication" and f["kind"] == "collective"]
        elapse = sum(f["elapse_us"] for f in collectives)
        if elapse > 0:
            waiting = sum(f["elapse_us"] * (1.0 - f["transit_share"]) for f in collectives) / elapse
            if waiting > MOSTLY_WAITING:
                return words["bottleneck_waiting"].format(share=fmt_pct(waiting))
    return words[f"bottleneck_{bottleneck}"]


def serving_sentence(summary, covered, words: dict[str, str], bottleneck: str) -> str:
    """The verdict of a serving run: the phase the breakdown covers, with its iterations, TPOT, batch and tokens/s
    (decode), then the prefill's first iteration (a TTFT proxy) when the breakdown is decode's."""
    iterations = sum(p.iterations for p in summary.phases if p.covered_by_breakdown)  # prefill's include the mixed
    steady = max((r.steps for r in summary.per_rank), default=iterations)  # the breakdown leaves warm-up out
    details = [words["serving_iterations"].format(count=iterations) if steady >= iterations else
               words["serving_iterations_steady"].format(count=iterations, steady=steady)]
    if covered.phase == "decode":
        if covered.start_to_start_us is not None:
            details.append(words["serving_tpot"].format(value=fmt_us(covered.start_to_start_us)))
        details.append(words["serving_batch"].format(value=f"{covered.tokens_per_iteration:g}")
                       if covered.tokens_per_iteration is not None else words["serving_batch_unknown"])
        if covered.tokens_per_s is not None:
            details.append(words["serving_tokens_per_s"].format(value=f"{covered.tokens_per_s:,.0f}"))
    details.append(words["serving_graphs"].format(mode=covered.graph_mode))
    sentence = words["verdict_serving"].format(
        phase=words[f"phase_{covered.phase}"], bottleneck=bottleneck,
        compute=fmt_pct(summary.compute_ratio), communication=fmt_pct(summary.communication_ratio),
        free=fmt_pct(summary.free_ratio), step=fmt_us(summary.step_time_us), details="; ".join(details))
    if covered.phase == "decode" and summary.bottleneck == "compute":  # busy decode: the weights' reads, if known
        sentence += " " + (words["verdict_decode_unmeasured"] if covered.weight_read_share_of_peak is None else
                           words["verdict_decode_weights"].format(share=fmt_pct(covered.weight_read_share_of_peak)))
    prefill = next((p for p in summary.phases if p.phase == "prefill"), None)
    if prefill is not None and covered.phase == "decode":
        sentence += " " + words["verdict_prefill"].format(iterations=prefill.iterations,
                                                           first=fmt_us(prefill.first_duration_us))
    return sentence


def condition_rows(finding) -> list[tuple[str, str, str, str]]:
    """(fact, condition, value, source) for each comparison the finding's rule made, 'not' conditions included."""
    rows = []
    for condition in finding.trace.conditions:
        if condition.negated:
            rows.append((f"not {condition.family}", "no fact matches", "–", ""))
            continue
        subject = f"{condition.alias} = {condition.fact}"
        sources = "; ".join(condition.sources)
        for index, check in enumerate(condition.checks):
            value = "unknown" if check.actual is None else fmt_value(check.actual)
            rows.append((subject, check.test, value, sources if index == 0 else ""))
        if not condition.checks:
            rows.append((subject, f"any {condition.family} fact", "–", sources))
    return rows


def chain_lines(finding) -> list[str]:
    """'fact ← rule (from facts)' for each derived fact the finding depends on."""
    return [f"{step.fact} ← {step.rule} ({', '.join(step.from_facts)})" for step in finding.trace.chain]
