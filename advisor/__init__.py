"""advisor: a rule-based expert system that diagnoses AI training and inference profiles.

Python API (docs/python-api.md)::

    import advisor
    report = advisor.diagnose("./prof", env={"TASK_QUEUE_ENABLE": "2"}, context={"micro_batch_size": 4})
    for finding in report.findings:
        print(finding.severity, finding.title, finding.estimated_gain_us)
    report.findings_df()                      # pandas DataFrames: also facts_df(family), steps_df(), operators_df()
    print(advisor.render(report, "markdown"))  # or "terminal", "html", "json"
    report                                    # in Jupyter: the HTML report
    gap = advisor.compare("./gpu_traces", "./prof")   # side by side, and the diagnosis of the difference
"""

from advisor.errors import quiet_interrupt_while_starting as _quiet_interrupt_while_starting

_quiet_interrupt_while_starting()  # before the imports that take a while (see cli.main)

import advisor.render as _render_package  # noqa: E402,F401  (the subpackage first: `advisor.render` is the function)
from advisor.api import ComparisonReport, compare, render  # noqa: E402
from advisor.diagnose import diagnose  # noqa: E402
from advisor.errors import AdvisorError, InputError  # noqa: E402
from advisor.report import Report  # noqa: E402
from advisor.usercontext import UserContext, build_context, context_from_dicts  # noqa: E402
from advisor.version import VERSION as __version__  # noqa: E402

__all__ = [
    "AdvisorError",
    "ComparisonReport",
    "InputError",
    "Report",
    "UserContext",
    "__version__",
    "build_context",
    "compare",
    "context_from_dicts",
    "diagnose",
    "render",
]
