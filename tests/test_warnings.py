"""Warnings on standard error: a message repeated by many ranks or pieces is printed once, with its count."""

from __future__ import annotations

from advisor.cli.output import note_coverage
from advisor.ingest.model import Coverage
from advisor.text import collapse_repeats


def test_repeats_are_collapsed_in_first_seen_order():
    assert collapse_repeats(["b", "a", "b", "c", "b", "a"]) == ["b (3 times)", "a (2 times)", "c"]
    assert collapse_repeats([]) == []


def test_a_report_lists_a_repeated_warning_once_with_its_count():
    from conftest import REAL

    from advisor.diagnose import analyse, build_report, default_rulebook

    book = default_rulebook()
    analysis = analyse(REAL, book)
    analysis.facts.warnings.extend(["rank 0: the same problem"] * 3)  # as many pieces or ranks would report it
    warnings = build_report(analysis, book, "en", str(REAL)).coverage.warnings
    assert warnings.count("rank 0: the same problem (3 times)") == 1 and "rank 0: the same problem" not in warnings


def test_coverage_warnings_are_printed_once_each_with_a_count(capsys):
    coverage = Coverage()
    for _ in range(500):
        coverage.warnings.append("TRACE: 3 event(s) with fields of unexpected types were ignored")
    coverage.skip("rank0/kernel_details.csv", "is empty")
    coverage.skip("rank0/kernel_details.csv", "is empty")
    coverage.warnings.append("another warning")
    note_coverage(coverage)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "advisor: warning: skipped rank0/kernel_details.csv: is empty (2 times)",
        "advisor: warning: TRACE: 3 event(s) with fields of unexpected types were ignored (500 times)",
        "advisor: warning: another warning",
    ]
