"""A report's findings, facts, per-rank steps and top operators, and a comparison's rows, as pandas DataFrames.

pandas is imported only when a DataFrame is asked for.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from advisor.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from advisor.comparison import Comparison
    from advisor.report import Finding, Report

FINDING_COLUMNS = (
    "id", "key", "category", "severity", "title", "estimated_gain_us", "estimated_gain_ratio", "gain_basis",
    "charged_to", "claimed_gain_us", "shares_time_with", "ranks", "prescriptions", "explanation",
)
STEP_COLUMNS = (
    "rank", "steps", "step_time_us", "compute_us", "comm_not_overlapped_us", "free_us", "compute_ratio",
    "communication_ratio", "free_ratio", "bottleneck",
)
ROW_COLUMNS = ("name", "detail", "base", "target", "diff", "ratio")
CHANGE_COLUMNS = ("change", "id", "key", "title", "base_severity", "target_severity", "base_gain_us", "target_gain_us")
SIDE_COLUMNS = ("side", "path", "format", "platform", "hardware", "profiler_level", "status", "ranks", "steps",
                "step_count", "step_time_us", "median_step_us", "chosen_step")
_NAME_CHARS = 48


def short_name(path: str, chars: int = _NAME_CHARS) -> str:
    """A profile's path as a one-line repr names it: its last part, at most ``chars`` characters."""
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or path
    name = "".join(c if c.isprintable() else "?" for c in name)
    return name if len(name) <= chars else name[: chars - 1] + "…"


def findings_count(findings: Sequence[Finding]) -> str:
    """``10 findings (2 high)``: how many, and how many of them high."""
    high = sum(f.severity == "high" for f in findings)
    text = f"{len(findings)} finding{'' if len(findings) == 1 else 's'}"
    return f"{text} ({high} high)" if high else text


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """One row per finding, in the report's order (severity, then gain)."""
    import pandas as pd

    rows = [
        {
            "id": f.id, "key": f.key, "category": f.category, "severity": f.severity, "title": f.title,
            "estimated_gain_us": f.estimated_gain_us, "estimated_gain_ratio": f.estimated_gain_ratio,
            "gain_basis": f.gain_basis, "charged_to": f.charged_to, "claimed_gain_us": f.claimed_gain_us,
            "shares_time_with": list(f.shares_time_with), "ranks": list(f.ranks),
            "prescriptions": [p.id for p in f.prescriptions], "explanation": f.explanation,
        }
        for f in findings
    ]
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))


def facts_frame(facts: Sequence[Mapping[str, Any]], family: str | None = None) -> pd.DataFrame:
    """The facts as rows (``type`` = the family, then its fields); one family's fields only when given."""
    import pandas as pd

    from advisor.facts import FACT_FAMILIES

    if family is not None and family not in FACT_FAMILIES:
        raise InputError(f"unknown fact family {family!r}; known: {', '.join(FACT_FAMILIES)}")
    rows = [{k: list(v) if isinstance(v, list) else v for k, v in f.items()} for f in facts if family in (None, f.get("type"))]
    if family is not None:
        columns = ["type", *FACT_FAMILIES[family].model_fields]
    else:
        columns = list(dict.fromkeys(itertools.chain(["type", "id"], *(row.keys() for row in rows))))
    return pd.DataFrame(rows, columns=columns)


def steps_frame(report: Report) -> pd.DataFrame:
    """The per-rank step table of the report: step time and its compute / exposed communication / idle split."""
    import pandas as pd

    rows = [r.model_dump() for r in report.summary.per_rank]
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS)).set_index("rank")


def operators_frame(report: Report) -> pd.DataFrame:
    """The top operator types of the report (mean over the ranks that run them), µs per step."""
    import pandas as pd

    columns = ["op_type", "accelerator_core", "ranks", "count_per_step", "total_us_per_step", "share_of_compute"]
    return pd.DataFrame([o.model_dump() for o in report.summary.top_operators], columns=columns)


def rows_frame(rows: Sequence[Any]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame([r.model_dump() for r in rows], columns=list(ROW_COLUMNS))


def changes_frame(comparison: Comparison) -> pd.DataFrame:
    """One row per finding that fires on either side: resolved (BASE only), new (TARGET only) or persisting, with
    its severity and gain (µs per step) on each side, in the comparison's order."""
    import pandas as pd

    return pd.DataFrame([c.model_dump() for c in comparison.changes], columns=list(CHANGE_COLUMNS))


def sides_frame(comparison: Comparison) -> pd.DataFrame:
    """BASE and TARGET, a row each, indexed by ``side``: what each profile is, its mean and median step (µs), and the
    step chosen on it (None: every step)."""
    import pandas as pd

    rows = [{"side": name, **side.model_dump()} for name, side in (("base", comparison.base), ("target", comparison.target))]
    return pd.DataFrame(rows, columns=list(SIDE_COLUMNS)).set_index("side")
