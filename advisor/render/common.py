"""What every renderer shares: labels in the report's language and number formatting."""

from __future__ import annotations

import re
from functools import lru_cache

import yaml

from advisor.report import Report
from advisor.resources import data_dir

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
    if not report.input.format.startswith("ascend"):
        words["collect_hint"] = words["collect_hint_gpu"]
    elif report.input.profiler_level in ("Level1", "Level2"):  # the level is right: what is missing is files
        words["collect_hint"] = words["collect_hint_level1"]
    return words


def fmt_us(value: float | None) -> str:
    """A duration in µs, switching to ms and s where that reads better."""
    if value is None:
        return "–"
    if value >= 1_000_000:
        return f"{value / 1_000_000:,.2f} s"
    if value >= 10_000:
        return f"{value / 1000:,.2f} ms"
    return f"{value:,.1f} µs"


def fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def fmt_value(value: object) -> str:
    """An evidence value: floats shortened, everything else as text."""
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1 else f"{value:,.2f}"
    return str(value)


def gain_text(finding, words: dict[str, str]) -> str:
    if finding.estimated_gain_us is None:
        return words["gain_unknown"]
    share = f" ({fmt_pct(finding.estimated_gain_ratio)} {words['of_step']})" if finding.estimated_gain_ratio is not None else ""
    text = f"{fmt_us(finding.estimated_gain_us)} {words['per_step']}{share}"
    if finding.gain_basis:
        text += f", {words['gain_' + finding.gain_basis]}"
    if finding.shares_time_with and finding.claimed_gain_us is not None:
        text += f"; {words['gain_shared'].format(claimed=fmt_us(finding.claimed_gain_us), others=', '.join(finding.shares_time_with))}"
    return text


def verdict_sentence(report: Report, words: dict[str, str]) -> str:
    """The one-sentence verdict at the top of every report."""
    summary = report.summary
    if summary.step_time_us is None:
        return words["verdict_unknown"]
    return words["verdict_sentence" if report.input.steps else "verdict_no_steps"].format(
        bottleneck=words[f"bottleneck_{summary.bottleneck}"],
        compute=fmt_pct(summary.compute_ratio),
        communication=fmt_pct(summary.communication_ratio),
        free=fmt_pct(summary.free_ratio),
        step=fmt_us(summary.step_time_us),
    )


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
