"""Small pieces of the reports' rendering, checked on their own."""

from __future__ import annotations


def test_steps_profiled_gives_the_count_and_the_step_ids():
    """A single-step capture read 'Steps profiled: 50' beside a table that says 1 step (expert review)."""
    from advisor.render.common import fmt_steps

    assert fmt_steps([50]) == "1 (#50)"
    assert fmt_steps([3, 4, 5, 6, 7, 8], "ProfilerStep#N markers") == "6 (#3–8; ProfilerStep#N markers)"
    assert fmt_steps([]) == "–"
